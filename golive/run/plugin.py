"""golive's pytest plugin: options, markers and hook wiring only.

The work lives in modules named for it: golive.run.fixtures (what a check asks for), golive.run.outcomes (how a phase
ends in golive's terms), golive.run.session (what a run keeps), golive.run.progress (long waits, the run's time bound),
golive.report.writer (the reports) and golive.run.scheduling (stations in parallel).
"""

from __future__ import annotations

import re
import signal
import sys
import threading
import time
from html import escape
from pathlib import Path
from types import FrameType, SimpleNamespace
from typing import Any

import pytest

from golive.checklist import LIGHT, MARKER
from golive.core.secrets import scrub, scrub_data
from golive.core.verdict import FAILED, NOT_APPLICABLE, NOT_CHECKED, OUT_OF_SCOPE, WAIVED, exit_code, out_of_scope
from golive.endpoint.bounded import allow_requests
from golive.profile.rules import rule_of
from golive.profile.schema import LAYERS
from golive.report import keys
from golive.report import writer as report_writer
from golive.report.baseline import load_baseline
from golive.report.results import Recorder, verdict_word
from golive.run.estimate import estimate
from golive.run.outcomes import record_outcome
from golive.run.probe import PROBE_TIMEOUT_S, probe_stations
from golive.run.progress import PENDING, Progress, defer_interrupt, raise_interrupt, raise_pending, takes_interrupts
from golive.run.scope import MARKER_HELP, layer_scope, layers_asked, suites_dir
from golive.run.session import (
    BASELINE,
    CONNECTIONS,
    INVENTORY,
    NO_INVENTORY,
    RECORDER,
    collected,
    duplicate_ids,
    id_of,
    inventory,
    layer_of,
    secrets,
    station_of,
)
from golive.site import loader
from golive.station.transport import Gone, now

pytest_plugins = ["golive.run.fixtures"]

SUITES = suites_dir().resolve()  # the checklist, one folder a layer: pytest_ignore_collect leaves out what -m does
SIGNALS_REPLACED = pytest.StashKey[dict[signal.Signals, Any]]()  # SIGTERM/SIGINT handlers golive replaced
SIGNALS_BEFORE = pytest.StashKey[dict[signal.Signals, Any]]()  # the handlers held while the reports are written


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("golive", "go-live acceptance")
    group.addoption("--golive-inventory", metavar="PATH", help="inventory YAML: stations and their profile")
    group.addoption("--golive-profile", metavar="NAME|PATH", help="use this profile instead of the inventory's")
    group.addoption(
        "--golive-output",
        metavar="DIR",
        default=None,
        help="write go-live.html, go-live.md, results.json and junit.xml here (default: the inventory's "
        "`output`, else ./reports)",
    )
    group.addoption("--golive-json", metavar="PATH", help="write results.json here (and go-live.md beside it)")
    group.addoption(
        "--golive-baseline",
        metavar="PATH",
        help="the last go-live's results.json: add what changed since "
        "(post-upgrade gate; an unannounced served flag or parser change fails)",
    )
    group.addoption(
        "--allow-peak-load",
        action="store_true",
        default=False,
        help="run the sweep's peak-load level also on stations marked `production: true`",
    )
    group.addoption(
        "--golive-max-run-time",
        metavar="SECONDS",
        type=float,
        default=None,
        help="stop the run after this long: the running check is stopped, the reports say INCOMPLETE",
    )
    group.addoption(
        "--golive-progress-s",
        metavar="SECONDS",
        type=float,
        default=15,
        help="while one check waits longer than this, say so every SECONDS on stderr (0: never)",
    )


@pytest.hookimpl(tryfirst=True)  # before pytest-html and junitxml read where to write (golive.report.writer)
def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKER_HELP.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    config.addinivalue_line("markers", "slow: long-running golive self-tests (still run in CI)")
    config.addinivalue_line("markers", "perf: throughput floors under load (endpoint layer; -m 'not perf' skips it)")
    config.addinivalue_line("markers", "quality: answer-quality batteries (a site's own questions and floors)")
    config.addinivalue_line(
        "markers", f"{LIGHT}: checks `golive watch` may run every round: a few reads or short requests (declared cost)"
    )
    config.addinivalue_line("markers", f"{MARKER}(declaration): a check's id, cost and gates (golive.checklist.check)")
    loaded = _load_inventory(config)
    config.stash[INVENTORY] = loaded
    config.stash[BASELINE] = None
    if loaded is not None and config.getoption("golive_baseline"):
        try:
            config.stash[BASELINE] = load_baseline(config.getoption("golive_baseline"), loaded.profile.profile.name)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[RECORDER] = Recorder(loaded)
    config.stash[CONNECTIONS] = {}
    if loaded is None:
        return
    report_writer.configure(config, loaded)
    config.pluginmanager.register(_Recording(config), "golive-recording")
    if not hasattr(config, "workerinput"):
        if not PENDING:  # a run in a process that ran one before (pytest in-process) starts with requests allowed
            allow_requests()
        _stop_cleanly_on_signals(config)
        config.pluginmanager.register(
            Progress(
                config.getoption("golive_progress_s"),
                config.getoption("golive_max_run_time"),
                lambda: secrets(config),
                lambda item: _budget(item, loaded),
            ),
            "golive-progress",
        )


@pytest.hookimpl(tryfirst=True)  # before xdist starts its workers: a typo is one line, with or without -n
def pytest_sessionstart(session: pytest.Session) -> None:
    """An `-m` naming a marker no check carries (a typo that would select nothing) is a usage error, said before
    anything is collected or run, and no report is written or claimed."""
    config = session.config
    if inventory(config) is None or hasattr(config, "workerinput"):
        return
    unknown = _unknown_markers(config)
    if unknown:
        report_writer.write_nothing(config)
        raise pytest.UsageError(
            f"-m {config.option.markexpr!r}: no check carries the {'marker' if len(unknown) == 1 else 'markers'} "
            f"{', '.join(unknown)}; "
            f"golive's markers: {', '.join([*MARKER_HELP, 'perf', 'quality', LIGHT])}"
        )


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    """Under -n, xdist's controller collects nothing (its workers do, then it schedules their nodeids): golive collects
    the checks here too, so that the estimate and its probe happen once, on the controller, before any worker runs a
    check, and the reports carry them as a run without -n does. xdist's own pytest_collection follows."""
    config = session.config
    if inventory(config) is not None and config.pluginmanager.hasplugin("dsession"):
        session.perform_collect()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Before any check runs: a run that selected nothing writes and claims no report; otherwise how long the
    selected checks should take (golive.run.estimate: each station's endpoint probed for a few seconds, at most a
    tenth of --max-run-time), said once and handed to the progress lines."""
    config = session.config
    loaded = inventory(config)
    if loaded is None or hasattr(config, "workerinput"):
        return
    for sig in config.stash.get(SIGNALS_REPLACED, {}):  # from here on pytest's interrupt path writes the reports
        signal.signal(sig, raise_interrupt)
    if not session.items:
        report_writer.write_nothing(config)
    if not session.items or config.getoption("collectonly", False) or duplicate_ids(session.items):
        return  # (two checks of one id: the usage error pytest_collection_modifyitems raised ends the run)
    raise_pending()  # a signal while golive started: every check collected is not checked, the reports say so
    bound = config.getoption("golive_max_run_time")
    probes = probe_stations(
        session.items, loaded, PROBE_TIMEOUT_S if bound is None else min(PROBE_TIMEOUT_S, bound / 10)
    )
    for name, probe in probes.items():  # answered, then went down: every check of it says so, none fails
        if probe.went_away is not None:
            gone = Gone(name, "HTTP", now(), probe.went_away, first_seen_by="the estimate's probe")
            config.stash[CONNECTIONS].setdefault(("gone-endpoint", name), gone)
    recorder = config.stash[RECORDER]
    spent = time.monotonic() - recorder.started_at  # start, collection, the probes: known already
    guess = estimate(session.items, lambda station: loaded.profile_of(station).profile, probes, spent)
    known = secrets(config)  # a probe's problem quotes the station's answer: what it echoed is scrubbed
    recorder.estimate = scrub_data(guess.as_dict(), known)
    progress = config.pluginmanager.get_plugin("golive-progress")
    if progress is not None:
        progress.expect(guess.per_check)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(scrub(guess.line(len(session.items)), known))
        for warning in recorder.warnings:
            reporter.write_line(scrub(f"golive: warning: {warning}", known))


def _unknown_markers(config: pytest.Config) -> list[str]:
    if not config.option.markexpr:
        return []
    known = {line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")}
    return sorted(set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", config.option.markexpr)) - {"and", "or", "not"} - known)


def _load_inventory(config: pytest.Config) -> loader.LoadedInventory | None:
    path = config.getoption("golive_inventory")
    if not path:
        return None
    try:
        return loader.load_inventory(Path(path), config.getoption("golive_profile"))
    except loader.ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


def _budget(item: pytest.Item, loaded: loader.LoadedInventory) -> str:
    station = station_of(item)
    if layer_of(item) != "endpoint" or station is None:
        return ""
    limits = loaded.profile_of(station).profile.endpoint
    return f"; one request may take {limits.request_timeout_s:g} s (endpoint.request_timeout_s)"


def _stop_cleanly_on_signals(config: pytest.Config) -> None:
    """SIGTERM (a CI job cancelled, `kill`, systemd stopping a timer) and Ctrl-C end the run alike: every request in
    flight abandoned in whichever thread waits on it (golive.run.progress.raise_interrupt), pytest finishes the
    session, and the reports are written with everything measured so far. SIGINT only where Python turns it into
    Ctrl-C: a shell without job control starts background jobs with SIGINT ignored, and that stays so. Until the
    checks are collected a signal is deferred (golive.run.progress.defer_interrupt: pytest writes no report for an
    interrupt while it configures), then raised (`pytest_collection_finish`)."""
    if threading.current_thread() is not threading.main_thread():
        return
    replaced = {signal.SIGTERM: signal.signal(signal.SIGTERM, defer_interrupt)}
    if takes_interrupts(signal.getsignal(signal.SIGINT)):
        replaced[signal.SIGINT] = signal.signal(signal.SIGINT, defer_interrupt)
    config.stash[SIGNALS_REPLACED] = replaced


def _hold_signals_while_writing(config: pytest.Config) -> None:
    """The checks are over and the reports are being written: a SIGTERM or Ctrl-C now would cut them half-written
    (pytest-html and junitxml write from hooks that do not expect an interrupt). It is noted instead, and the run ends
    as soon as they are written (the fault campaign found a SIGTERM landing here)."""
    if threading.current_thread() is not threading.main_thread():
        return
    previous = {sig: signal.signal(sig, _noted) for sig in (signal.SIGTERM, signal.SIGINT)}
    config.stash.setdefault(SIGNALS_BEFORE, previous)


def _noted(signum: int, frame: FrameType | None) -> None:
    sys.stderr.write(f"golive: {signal.Signals(signum).name} while writing the reports: they are finished first\n")


def pytest_unconfigure(config: pytest.Config) -> None:
    before: dict[signal.Signals, Any] = {}
    for key in (SIGNALS_BEFORE, SIGNALS_REPLACED):  # the handlers from before golive's own are restored last
        if key in config.stash:
            handlers: dict[signal.Signals, Any] = config.stash[key]
            before.update(handlers)
    for sig, handler in before.items():
        signal.signal(sig, handler)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A layer's suite that `-m` leaves out is not even imported: the endpoint suite brings openai, ~0.6 s of the
    start of a run of host or cluster checks. Any other -m expression: every suite, and pytest deselects."""
    if collection_path.name not in LAYERS or collection_path.parent.resolve() != SUITES:
        return None
    asked = layers_asked(config.option.markexpr)
    return None if asked is None else collection_path.name not in asked


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each check of a layer runs once per station of the inventory; the scope decides whether it applies."""
    if "station" not in metafunc.fixturenames or layer_of(metafunc.definition) is None:
        return  # only checks of a layer run per station; other tests keep their own `station`
    loaded = inventory(metafunc.config)
    if loaded is None:
        metafunc.parametrize(
            "station", [pytest.param(None, id="no-inventory", marks=pytest.mark.skip(reason=NO_INVENTORY))]
        )
        return
    stations = loaded.inventory.stations
    if "peer" in metafunc.fixturenames:  # a check of both stations at once runs once, from the role a station
        stations = [s for s in stations if s.role == "a"]
    metafunc.parametrize("station", stations, ids=[s.name for s in stations], scope="session")


@pytest.hookimpl(tryfirst=True)  # before -m/-k deselect: waivers and the baseline are matched against every check
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each check carries its id, layer, station and rule (rendered from the station's profile) for every report. Two
    checks that declare one id are a usage error; a waiver or a baseline check that matches no id is a warning."""
    loaded = inventory(config)
    duplicates = duplicate_ids(items)
    if duplicates:
        if loaded is not None:
            report_writer.write_nothing(config)
        raise pytest.UsageError(f"two checks declare one id: {'; '.join(duplicates)} (golive.checklist.check)")
    rules: dict[str, str] = {}
    for item in items:
        station = station_of(item)
        profile = loaded.profile_of(station).profile if loaded is not None and station is not None else None
        rules[item.nodeid] = rule_of(item, profile)
        item.user_properties.extend(
            [
                (keys.ID, id_of(item)),
                (keys.LAYER, layer_of(item) or ""),
                (keys.STATION, station.name if station is not None else ""),
                (keys.RULE, rules[item.nodeid]),
            ]
        )
        item.extra_keyword_matches.add(id_of(item))  # `-k host.vllm.served_flags_match_profile` selects it
    if loaded is not None and not hasattr(config, "workerinput"):
        layers = frozenset(layer for item in items if (layer := layer_of(item)))
        config.stash[RECORDER].match(collected(items, rules, layers), config.stash[BASELINE])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before any fixture connects: does this check's layer apply to this station (profile + inventory decide)?"""
    layer, station, loaded = layer_of(item), station_of(item), inventory(item.config)
    if layer is None or station is None or loaded is None:
        return
    profile = loaded.profile_of(station).profile
    decided = layer_scope(layer, station, profile, profile.name)
    if decided is None:
        return
    outcome, reason = decided
    if outcome == NOT_APPLICABLE:
        out_of_scope(reason)
    pytest.skip(reason)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if inventory(item.config) is not None or layer_of(item) is not None:
        record_outcome(item, report, call, secrets(item.config))
    return report


class _Recording:
    """Feeds every report to the run's recorder (on the xdist controller too, where reports arrive) and writes the
    reports when the session ends."""

    def __init__(self, config: pytest.Config):
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.config.stash[RECORDER].add(report)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if hasattr(self.config, "workerinput"):
            return
        _hold_signals_while_writing(self.config)
        loaded = inventory(self.config)
        assert loaded is not None  # registered only for a run with an inventory
        session.exitstatus = report_writer.finish(
            self.config, session, exitstatus, self.config.stash[RECORDER], loaded, self.config.stash[BASELINE]
        )

    @pytest.hookimpl(trylast=True)
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """Ctrl-C or SIGTERM ends with one golive line, not pytest's banner and the library frame it landed in."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        progress = self.config.pluginmanager.get_plugin("golive-progress")
        why = progress.reason if progress is not None and progress.bound_reached else report_writer.INTERRUPTED_REASON
        verdict = self.config.stash[RECORDER].verdict(interrupted=True)  # the reports' own: a failure stays NO-GO
        if reporter is not None and hasattr(reporter, "_keyboardinterrupt_memo"):  # what pytest prints at the end
            reporter._keyboardinterrupt_memo = SimpleNamespace(
                reprcrash=SimpleNamespace(
                    message=f"golive: {why}: reports written, verdict {verdict_word(verdict)} "
                    f"(exit {exit_code(verdict)})"
                )
            )


@pytest.hookimpl(trylast=True)  # after junitxml wrote junit.xml
def pytest_sessionfinish(session: pytest.Session) -> None:
    if inventory(session.config) is not None and not hasattr(session.config, "workerinput"):
        report_writer.mark_junit(session.config, session.config.stash[RECORDER])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`-n N`: stations in parallel, each station's checks on one worker (golive.run.scheduling)."""
    from golive.run.scheduling import station_scheduling  # xdist is only there when -n is used

    loaded = inventory(config)
    return station_scheduling(config, log, [s.name for s in loaded.inventory.stations]) if loaded else None


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
    """The terminal counts in golive's words: "not applicable" / "not checked" / "waived", never a bare "skipped",
    and a check golive failed is "failed" whichever phase failed it (a fixture included), never pytest's "error"."""
    if inventory(config) is None or report.when not in ("setup", "call") or report.passed:
        return None
    props = keys.props(report)
    outcome = props.get(keys.OUTCOME)
    if not outcome:
        return None
    return _TERMINAL_WORDS.get(OUT_OF_SCOPE if props.get(keys.SCOPED_OUT) else outcome[0])


_TERMINAL_WORDS = {
    FAILED: ("failed", "F", "FAILED"),
    NOT_APPLICABLE: ("not applicable", "n", "NOT APPLICABLE"),
    OUT_OF_SCOPE: ("out of scope", "o", "OUT OF SCOPE"),
    NOT_CHECKED: ("not checked", "s", "NOT CHECKED"),
    WAIVED: ("waived", "w", "WAIVED"),
}


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if inventory(config) is None:
        return
    for line in report_writer.summary_lines(config, exitstatus, config.stash[RECORDER]):
        terminalreporter.write_line(line)


def pytest_html_report_title(report: Any) -> None:
    report.title = "golive go-live report"


def pytest_html_results_summary(
    prefix: list[str], summary: list[str], postfix: list[str], session: pytest.Session
) -> None:
    prefix.extend(report_writer.html_summary(session, session.config.stash[RECORDER]))


def pytest_html_results_table_header(cells: list[str]) -> None:
    cells.insert(1, "<th>Station</th>")
    cells.insert(2, "<th>Rule</th>")


def pytest_html_results_table_row(report: pytest.TestReport, cells: list[str]) -> None:
    """A row per check, with its station and rule; none for a check whose layer is out of its station's scope (the
    summary says those once per station and layer)."""
    props = keys.props(report)
    if props.get(keys.SCOPED_OUT):
        cells.clear()  # pytest-html leaves out a row without cells, and its counts with it
        return
    cells.insert(1, f"<td>{escape(str(props.get(keys.STATION, '')))}</td>")
    cells.insert(2, f"<td>{escape(str(props.get(keys.RULE, '')))}</td>")
