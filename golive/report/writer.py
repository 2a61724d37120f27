"""The run's reports, written by the plugin whoever started pytest (`golive run` or plain `pytest --golive-inventory`):
go-live.html (pytest-html), junit.xml (pytest's junitxml), results.json and go-live.md, into one folder, one verdict.

Nothing is written, and nothing claimed, when nothing ran: a usage error, `--collect-only`, or a selection that
matched no check. JUnit readers see the verdict too: a not-checked check is an <error> there (a CI dashboard must not
show an INCOMPLETE run green) and the suite carries the verdict as the property `golive_verdict`.

The four are written as one: each to a temporary file beside its own (pytest-html and junitxml are pointed there),
every secret the run knows scrubbed from each file's text (golive.core.secrets: whatever a server echoed too), then
all renamed into place. A write that fails (ENOSPC, EIO, a folder that went away) leaves no temporary file and no
report changed: one line says so, exit 2 (INCOMPLETE: the run's verdict reached no report).
"""

from __future__ import annotations

import contextlib
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from _pytest.junitxml import mangle_test_address, xml_key

from golive.core.secrets import scrub
from golive.core.verdict import EXIT_INCOMPLETE, EXIT_NOTHING_SELECTED, NOT_APPLICABLE, NOT_CHECKED, exit_code
from golive.report.markdown import render_markdown
from golive.report.model import Results
from golive.report.results import Recorder, verdict_word
from golive.site.loader import LoadedInventory

REPORT_FILES = ("go-live.html", "go-live.md", "results.json", "junit.xml")
INTERRUPTED_REASON = "the run was interrupted (Ctrl-C or SIGTERM)"
PENDING = pytest.StashKey[dict[Path, Path]]()  # temporary file → the report it becomes
FAILED_TO_WRITE = pytest.StashKey[str]()  # why the reports could not be written (its one line)
LOADED = pytest.StashKey[LoadedInventory]()  # the inventory of the run: whose secrets every report is scrubbed of


def _secrets(config: pytest.Config) -> list[str]:
    """The run's secrets, from the inventory `configure` was given (none where no inventory loaded)."""
    loaded = config.stash.get(LOADED, None)
    return [] if loaded is None else loaded.secrets()


def temporary(final: Path) -> Path:
    """Where a report is written before it is renamed into place: beside it (the same file system), hidden."""
    return final.with_name(f".{final.name}.{os.getpid()}.tmp")


def output_dir(config: pytest.Config, loaded: LoadedInventory) -> Path:
    """--golive-output, else the inventory's `output` (relative to the inventory), else ./reports."""
    chosen = config.getoption("golive_output")
    if chosen:
        return Path(chosen)
    if loaded.inventory.output:
        return loaded.path.parent / loaded.inventory.output
    return Path("reports")


def configure(config: pytest.Config, loaded: LoadedInventory) -> None:
    """Point pytest-html and junitxml at the output folder (unless the caller named their own files); runs before
    their own pytest_configure reads the options."""
    config.stash[LOADED] = loaded
    if config.getoption("collectonly", False) or hasattr(config, "workerinput"):
        return
    out = output_dir(config, loaded)
    if not config.getoption("htmlpath", None):
        config.option.htmlpath = str(out / "go-live.html")
        config.option.self_contained_html = True
    if not config.option.xmlpath:
        config.option.xmlpath = str(out / "junit.xml")
    if not config.getoption("golive_json"):
        config.option.golive_json = str(out / "results.json")
    pending: dict[Path, Path] = {}
    for option in ("htmlpath", "xmlpath"):  # pytest-html and junitxml write to a temporary file, renamed at the end
        final = Path(getattr(config.option, option)).absolute()
        pending[temporary(final)] = final
        setattr(config.option, option, str(temporary(final)))
    config.stash[PENDING] = pending
    config.pluginmanager.register(_Publisher(config), "golive-publisher")


def finish(
    config: pytest.Config,
    session: pytest.Session,
    exitstatus: int,
    recorder: Recorder,
    loaded: LoadedInventory,
    previous: Results | None,
) -> int:
    """At the end of the session (before pytest-html and junitxml write): the recorder completed (with the post-upgrade
    diff against `previous`, the last go-live's results), results.json and go-live.md written, the verdict's exit
    code returned (README: exit codes)."""
    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
    recorder.stop_clock()  # estimate vs actual: one actual time in every report
    progress = config.pluginmanager.get_plugin("golive-progress")
    if interrupted and progress is not None:
        recorder.mark_unfinished(
            session.items,
            progress.running,
            progress.reason if progress.bound_reached else INTERRUPTED_REASON,
            "time_bound" if progress.bound_reached else "interrupted",
        )
    if config.getoption("collectonly", False):
        write_nothing(config)
        return exitstatus
    if exitstatus in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERNAL_ERROR):
        write_nothing(config)
        return exitstatus
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED or (not recorder.checks and not interrupted):
        write_nothing(config)
        return EXIT_NOTHING_SELECTED
    if previous is not None and not interrupted:
        recorder.compare_with(previous, loaded.profile.profile.endpoint.baseline_tolerance_pct)
    path = config.getoption("golive_json")
    if path:
        results = recorder.results(interrupted)
        final = Path(path).absolute()
        written = [(final, results.as_json()), (final.with_name("go-live.md"), render_markdown(results))]
        try:
            for report, text in written:
                config.stash[PENDING][temporary(report)] = report
                report.parent.mkdir(parents=True, exist_ok=True)
                temporary(report).write_text(scrub(text, _secrets(config)), encoding="utf-8")
        except OSError as exc:
            config.stash[FAILED_TO_WRITE] = _failure(report.parent, exc)
    verdict = recorder.verdict(interrupted)
    junit = config.stash.get(xml_key, None)
    if junit is not None:
        junit.add_global_property("golive_verdict", verdict_word(verdict))
        # JUnit has one word, skipped, for all of them: how many are out of a station's scope (results.json's
        # `scoped_out`), the number the terminal and the reports say
        junit.add_global_property("golive_out_of_scope", str(sum(r.scoped_out for r in recorder.checks.values())))
    if nothing_applies(recorder, interrupted):
        return EXIT_NOTHING_SELECTED
    return exit_code(verdict)


def nothing_applies(recorder: Recorder, interrupted: bool) -> bool:
    return not interrupted and {r.outcome for r in recorder.checks.values()} == {NOT_APPLICABLE}


def write_nothing(config: pytest.Config) -> None:
    """No report for a run that checked nothing: pytest-html's and junitxml's writers are unregistered (before the
    session ends: pluggy fixes a hook's callers when the hook is called)."""
    config.option.golive_json = None
    _discard(config)
    _unregister_writers(config)


def _unregister_writers(config: pytest.Config) -> None:
    junit = config.stash.get(xml_key, None)
    if junit is not None:
        del config.stash[xml_key]
        config.pluginmanager.unregister(junit)
    html = _html_plugin(config)
    if html is not None:
        config.pluginmanager.unregister(html)


def mark_junit(config: pytest.Config, recorder: Recorder) -> None:
    """After junitxml wrote its file: each not-checked check becomes an <error> with golive's reason (JUnit has no
    "did not run, and that matters"; a <skipped> reads green), and the counts follow."""
    path = config.option.xmlpath
    if not path or not Path(path).is_file():
        return
    not_checked = {tuple(_junit_address(r.nodeid)): r.message for r in recorder.of(NOT_CHECKED)}
    if not not_checked:
        return
    tree = ET.parse(path)
    for suite in tree.iter("testsuite"):
        changed = 0
        for case in suite.iter("testcase"):
            reason = not_checked.get((case.get("classname", ""), case.get("name", "")))
            skipped = case.find("skipped")
            if reason is None or skipped is None:
                continue
            case.remove(skipped)
            error = ET.SubElement(
                case, "error", {"type": "golive.not_checked", "message": f"not checked: {reason.splitlines()[0][:500]}"}
            )
            error.text = reason
            changed += 1
        if changed:
            suite.set("skipped", str(int(suite.get("skipped", "0")) - changed))
            suite.set("errors", str(int(suite.get("errors", "0")) + changed))
    tree.write(path, encoding="utf-8", xml_declaration=True)


def _junit_address(nodeid: str) -> tuple[str, str]:
    """(classname, name) as junitxml writes a test case (its own mangle_test_address)."""
    names = mangle_test_address(nodeid)
    return ".".join(names[:-1]), names[-1]


def summary_lines(config: pytest.Config, exitstatus: int, recorder: Recorder) -> list[str]:
    """The terminal's golive section: the verdict, counts per layer and station, reasons grouped; where the reports
    could not be written, only the one line that says so."""
    if config.getoption("collectonly", False) or exitstatus == pytest.ExitCode.USAGE_ERROR:
        return []
    if FAILED_TO_WRITE in config.stash:
        return [config.stash[FAILED_TO_WRITE]]
    if not recorder.checks:
        return [
            f"golive: no check selected (exit {EXIT_NOTHING_SELECTED}): the -m/-k selection or the "
            f"inventory left nothing to run; no report written"
        ]
    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
    lines = ["", "=" * 30 + " golive verdict " + "=" * 30, *recorder.summary_lines(interrupted=interrupted)]
    if nothing_applies(recorder, interrupted):
        lines.append(
            f"golive: no selected check applies to these stations (exit {EXIT_NOTHING_SELECTED}): "
            f"every one is not applicable, reasons above"
        )
    estimate = recorder.results(interrupted).estimate
    if estimate is not None:
        lines.append(f"golive: {estimate.summary()}")
    return lines


def html_summary(session: pytest.Session, recorder: Recorder) -> list[str]:
    from golive.report.html import summary_html  # matplotlib loads only when an HTML report is written

    return summary_html(recorder, interrupted=session.shouldstop is not False and bool(session.shouldstop))


class _Publisher:
    """Around every writer of the session's end (results.json and go-live.md by `finish`, go-live.html by
    pytest-html, junit.xml by junitxml, `mark_junit`): once all have written their temporary files, each is scrubbed
    and all are renamed into place; a write that failed on the way leaves none (`_abandon`)."""

    def __init__(self, config: pytest.Config):
        self.config = config

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Any:
        try:
            result = yield
            if FAILED_TO_WRITE not in self.config.stash:
                _publish(self.config)
        except OSError as exc:
            folders = {final.parent for final in self.config.stash.get(PENDING, {}).values()}
            where = Path(exc.filename).parent if exc.filename else min(folders, default=Path("."))
            self.config.stash[FAILED_TO_WRITE] = _failure(where, exc)
            result = None
        if FAILED_TO_WRITE in self.config.stash:
            _discard(self.config)
            _unregister_writers(self.config)
            session.exitstatus = EXIT_INCOMPLETE
        return result


def _failure(folder: Path, exc: OSError) -> str:
    name = os.strerror(exc.errno) if exc.errno else str(exc)
    code = f" ({errno_name(exc.errno)})" if exc.errno else ""
    return (
        f"golive: the reports could not be written to {folder}: {name}{code}; none was written (the temporary "
        f"files were removed), verdict INCOMPLETE (exit {EXIT_INCOMPLETE}): free space there or choose another "
        f"folder (-o DIR), then run again"
    )


def errno_name(number: int) -> str:
    import errno

    return errno.errorcode.get(number, str(number))


def _publish(config: pytest.Config) -> None:
    """Every temporary report scrubbed of the run's secrets (pytest-html's and junitxml's text too), then renamed
    into place, the four together."""
    pending = {tmp: final for tmp, final in config.stash.get(PENDING, {}).items() if tmp.exists()}
    known = _secrets(config)
    for tmp in pending:
        text = tmp.read_text(encoding="utf-8", errors="surrogateescape")
        scrubbed = scrub(text, known)
        if scrubbed != text:
            tmp.write_text(scrubbed, encoding="utf-8", errors="surrogateescape")
    for tmp, final in pending.items():
        os.replace(tmp, final)
    config.stash[PENDING] = {}
    html = _html_plugin(config)
    if html is not None:  # its terminal line names the report, not the temporary file
        html._report_path = pending.get(html._report_path, html._report_path)
    junit = config.stash.get(xml_key, None)
    if junit is not None:
        junit.logfile = str(pending.get(Path(junit.logfile).absolute(), junit.logfile))


def _discard(config: pytest.Config) -> None:
    """Every temporary report removed (a run that writes none, or could not write them)."""
    for tmp in config.stash.get(PENDING, {}):
        with contextlib.suppress(OSError):
            tmp.unlink()
    config.stash[PENDING] = {}


def _html_plugin(config: pytest.Config) -> Any:
    return config.pluginmanager.getplugin("html-report") or next(
        (
            p
            for p in config.pluginmanager.get_plugins()
            if type(p).__module__.startswith("pytest_html") and hasattr(p, "_report_path")
        ),
        None,
    )
