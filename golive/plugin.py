"""The pytest plugin: options, markers, fixtures (inventory, profile, station, host, facts), result capture."""
from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from golive import config as golive_config
from golive import verdict as rules
from golive.cluster import ClusterFacts
from golive.endpoint import EndpointClient, EndpointError
from golive.facts import FactError
from golive.report import baseline as baseline_mod
from golive.report import keys
from golive.report import results as results_mod
from golive.scope import layer_scope
from golive.station import StationFacts, chroot_tree, connect, unreachable
from golive.urls import password_of, without_password
from golive.verdict import NOT_APPLICABLE, Finding, NotApplicable, cite, not_applicable, printable
from golive.waivers import expired_message as waiver_expired_message
from golive.progress import Watch, mark_unfinished

LAYERS = {
    "host": "host checks: NUMA page cache, prestart, systemd unit, docker flags, image, served flags, checkpoint, GPU",
    "cluster": "cluster checks: rails, MTU, RDMA, NCCL, station parity",
    "endpoint": "endpoint checks through the OpenAI API",
}
INVENTORY = pytest.StashKey[golive_config.LoadedInventory | None]()
RECORDER = pytest.StashKey[results_mod.Recorder]()
BASELINE = pytest.StashKey[dict | None]()  # the last go-live's results.json (--golive-baseline)
CONNECTIONS = pytest.StashKey[dict]()  # per run: testinfra hosts, station facts, endpoint clients
SIGTERM_BEFORE = pytest.StashKey[object]()  # the SIGTERM handler golive replaced, restored at unconfigure
NO_INVENTORY = "no inventory: pass --golive-inventory PATH (or use `golive run`)"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("golive", "go-live acceptance")
    group.addoption("--golive-inventory", metavar="PATH", help="inventory YAML: stations and their profile")
    group.addoption("--golive-profile", metavar="NAME|PATH", help="use this profile instead of the inventory's")
    group.addoption("--golive-json", metavar="PATH", help="write results.json (the stable, versioned results) here")
    group.addoption("--golive-baseline", metavar="PATH", help="the last go-live's results.json: add what changed since "
                    "(post-upgrade gate; an unannounced served flag or parser change fails)")
    group.addoption("--allow-peak-load", action="store_true", default=False,
                    help="run the sweep's peak-load level also on stations marked `production: true`")
    group.addoption("--golive-max-run-time", metavar="SECONDS", type=float, default=None,
                    help="stop the run after this long: the running check is stopped, the reports say INCOMPLETE")
    group.addoption("--golive-progress-s", metavar="SECONDS", type=float, default=15,
                    help="while one check waits longer than this, say so every SECONDS on stderr (0: never)")


def pytest_configure(config: pytest.Config) -> None:
    for name, text in LAYERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    config.addinivalue_line("markers", "slow: long-running golive self-tests (still run in CI)")
    config.addinivalue_line("markers", "perf: throughput floors under load (endpoint layer; -m 'not perf' skips it)")
    config.addinivalue_line("markers", "quality: answer-quality batteries (a site's own questions and floors)")
    inventory_path = config.getoption("golive_inventory")
    loaded = None
    if inventory_path:
        try:
            loaded = golive_config.load_inventory(Path(inventory_path), config.getoption("golive_profile"))
        except golive_config.ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[INVENTORY] = loaded
    config.stash[BASELINE] = None
    if loaded is not None and config.getoption("golive_baseline"):
        try:
            config.stash[BASELINE] = baseline_mod.load_baseline(config.getoption("golive_baseline"),
                                                                loaded.profile.profile.name)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    if loaded is not None:
        _describe_run(config, loaded)
    config.stash[RECORDER] = results_mod.Recorder(loaded)
    config.stash[CONNECTIONS] = {}
    config.pluginmanager.register(_Recording(config), "golive-recording")
    _stop_cleanly_on_sigterm(config)
    if loaded is not None and not hasattr(config, "workerinput"):
        config.pluginmanager.register(Watch(config.getoption("golive_progress_s"),
                                            config.getoption("golive_max_run_time"), lambda: _secrets(config),
                                            lambda item: _budget(item, loaded)), "golive-progress")


def _budget(item: pytest.Item, loaded: golive_config.LoadedInventory) -> str:
    station = getattr(item, "callspec", None) and item.callspec.params.get("station")
    if _layer(item) != "endpoint" or station is None:
        return ""
    limits = loaded.profile_of(station).profile.endpoint
    return f"; one request may take {limits.request_timeout_s:g} s (endpoint.request_timeout_s)"


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def _stop_cleanly_on_sigterm(config: pytest.Config) -> None:
    """SIGTERM (a CI job cancelled, `kill`, systemd stopping a timer) ends the run like Ctrl-C: pytest finishes the
    session, and the reports are written, marked INCOMPLETE with everything measured so far."""
    if threading.current_thread() is threading.main_thread() and not hasattr(config, "workerinput"):
        config.stash[SIGTERM_BEFORE] = signal.signal(signal.SIGTERM, _interrupt)


def pytest_unconfigure(config: pytest.Config) -> None:
    before = config.stash.get(SIGTERM_BEFORE, None)
    if before is not None:
        signal.signal(signal.SIGTERM, before)


def _describe_run(config: pytest.Config, loaded: golive_config.LoadedInventory) -> None:
    """What was checked against what, in the report's Environment table (pytest-metadata)."""
    try:
        from pytest_metadata.plugin import metadata_key
    except ImportError:
        return
    from golive import __version__

    meta = config.stash.get(metadata_key, None)
    if meta is None:
        return
    meta["golive"] = __version__
    meta["Inventory"] = str(loaded.path)
    profiles = {p.sha256: p for p in [loaded.profile, *loaded.station_profiles.values()]}
    meta["Profiles"] = ", ".join(f"{p.profile.name} (sha256:{p.sha256[:12]})" for p in profiles.values())
    meta["Stations"] = ", ".join(f"{s.name} [{s.phase}]" for s in loaded.inventory.stations)


def _layer(node) -> str | None:
    marks = {m.name for m in node.iter_markers()}
    return next((name for name in LAYERS if name in marks), None)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each check of a layer runs once per station of the inventory; the scope fixture decides whether it applies."""
    if "station" not in metafunc.fixturenames or _layer(metafunc.definition) is None:
        return  # only checks of a layer run per station; other tests keep their own `station`
    loaded = metafunc.config.stash[INVENTORY]
    if loaded is None:
        metafunc.parametrize("station", [pytest.param(None, id="no-inventory", marks=pytest.mark.skip(
            reason=NO_INVENTORY))])
        return
    stations = loaded.inventory.stations
    if "peer" in metafunc.fixturenames:  # a check of both stations at once runs once, from the role a station
        stations = [s for s in stations if s.role == "a"]
    metafunc.parametrize("station", stations, ids=[s.name for s in stations], scope="session")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before any fixture connects: does this check's layer apply to this station (profile + inventory decide)?"""
    layer = _layer(item)
    station = getattr(item, "callspec", None) and item.callspec.params.get("station")
    loaded = item.config.stash[INVENTORY]
    if layer is None or station is None or loaded is None:
        return
    decided = layer_scope(layer, station, loaded.profile_of(station).profile, loaded.profile_of(station).profile.name)
    if decided is None:
        return
    outcome, reason = decided
    if outcome == NOT_APPLICABLE:
        not_applicable(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def golive_inventory(request) -> golive_config.LoadedInventory:
    loaded = request.config.stash[INVENTORY]
    if loaded is None:
        pytest.skip(NO_INVENTORY)
    return loaded


@pytest.fixture(scope="session")
def profile(station, golive_inventory):
    """The station's profile: its own where the inventory gives one, else the inventory's."""
    return golive_inventory.profile_of(station).profile


def _cached(request, key: tuple, make):
    """Session fixtures re-run when pytest switches between stations; connections and gathered facts must not."""
    cache = request.config.stash[CONNECTIONS]
    if key not in cache:
        cache[key] = make()
    return cache[key]


@pytest.fixture(scope="session")
def station_host(request, station, golive_inventory):
    """The station's testinfra host (any testinfra spec: local, ssh://, docker://, ansible://, chroot://).

    Not named `host`: testinfra's own plugin owns that name and parametrizes it over --hosts.
    """
    spec = golive_inventory.host_spec(station)
    if not spec:
        pytest.skip(f"station {station.name} has no host spec")
    tree = chroot_tree(spec)
    if tree and not Path(tree).is_dir():
        pytest.skip(f"station {station.name}: station tree {tree} does not exist")
    return _reached_host(request, station, spec, golive_inventory)


def _reached_host(request, station, spec: str, loaded: golive_config.LoadedInventory):
    """The station's testinfra host, once it runs a command; otherwise its checks are not checked, one line each."""
    timeout = loaded.profile_of(station).profile.host.connect_timeout_s
    host = _cached(request, ("host", spec), lambda: connect(spec, loaded.ssh_config, timeout))
    problem = None if chroot_tree(spec) else _cached(request, ("reach", spec), lambda: unreachable(host))
    if problem:
        pytest.skip(f"not checked because golive cannot run commands on station {station.name}'s host "
                    f"{without_password(spec)} ({problem}): check the host is up, sshd answers on that port and the "
                    f"inventory's ssh_config lets golive in (connect timeout {timeout:g} s: host.connect_timeout_s in "
                    f"the profile)")
    return host


@pytest.fixture(scope="session")
def facts(request, station, station_host, profile) -> StationFacts:
    return _cached(request, ("facts", station.name), lambda: StationFacts(station_host, station, profile))


@pytest.fixture(scope="session")
def cluster(profile):
    """The profile's cluster section (rails, NCCL, what both stations share)."""
    if profile.cluster is None:
        not_applicable(f"profile {profile.name} has no cluster section")
    return profile.cluster


@pytest.fixture(scope="session")
def cluster_facts(request, station, facts, cluster) -> ClusterFacts:
    return _cached(request, ("cluster", station.name), lambda: ClusterFacts(facts, cluster))


@pytest.fixture(scope="session")
def peer(request, station, cluster, golive_inventory) -> ClusterFacts:
    """The role b station's cluster facts, for checks that compare or join both stations (they run on role a)."""
    others = [s for s in golive_inventory.inventory.stations if s.role == "b"]
    if not others:
        not_applicable(f"the inventory names no role b station beside {station.name}: one host, nothing to compare")
    other = others[0]
    if layer_scope("cluster", other, golive_inventory.profile_of(other).profile, "") is not None:
        pytest.skip(f"station {other.name} has no `host:` in the inventory: add a testinfra host spec")
    spec = golive_inventory.host_spec(other)
    other_profile = golive_inventory.profile_of(other).profile
    host = _reached_host(request, other, spec, golive_inventory)
    return _cached(request, ("cluster", other.name), lambda: ClusterFacts(
        _cached(request, ("facts", other.name), lambda: StationFacts(host, other, other_profile)), cluster))


@pytest.fixture(scope="session")
def service(profile):
    """The profile's systemd service; checks of a unit skip where the recipe has none (a launch script)."""
    if profile.service is None:
        not_applicable("the profile declares no systemd unit (service: null): the recipe launches vLLM by script")
    return profile.service


@pytest.fixture(scope="session")
def endpoint_client(request, station, profile, golive_inventory) -> EndpointClient:
    """The station's endpoint as configured, before anyone checked that it lets us in (the auth check uses this)."""
    if not station.endpoint:
        pytest.skip(f"station {station.name} has no endpoint URL")
    key = os.environ.get(station.api_key_env) if station.api_key_env else None
    limits = profile.endpoint
    return _cached(request, ("endpoint", station.name),
                   lambda: EndpointClient(station.endpoint, key, timeout=limits.request_timeout_s,
                                          connect_timeout=limits.connect_timeout_s,
                                          light_timeout=limits.light_timeout_s,
                                          stall_timeout=limits.stream_stall_timeout_s,
                                          ca_file=golive_inventory.tls_ca_file(station)))


def _health(request, client: EndpointClient, station) -> str | None:
    """GET /health once per station: None when it answers 200, else why not (the health check reports it)."""
    def probe() -> str | None:
        try:
            status = client.get("/health", with_key=False).status_code
        except EndpointError as exc:
            return exc.what
        return None if status == 200 else f"it answered HTTP {status}"
    return _cached(request, ("health", station.name), probe)


@pytest.fixture(scope="session")
def endpoint_answers(request, endpoint_client, station) -> EndpointClient:
    """The endpoint, once GET /health answers; otherwise dependent checks are not checked and the health check
    carries the one failure."""
    problem = _health(request, endpoint_client, station)
    if problem:
        pytest.skip(f"not checked because {endpoint_client.root}/health does not answer 200 ({problem}): see the "
                    f"/health check")
    return endpoint_client


@pytest.fixture(scope="session")
def endpoint_reachable(endpoint_answers, station) -> EndpointClient:
    """The endpoint, once it answers and accepts our credentials. Otherwise dependent checks skip and the liveness
    or auth check carries the one failure, with its reason."""
    try:
        response = endpoint_answers.get("/v1/models")
        status = response.status_code
    except EndpointError as exc:
        pytest.skip(f"not checked because GET /v1/models failed ({exc.what}): see the auth check")
    if status == 401:
        pytest.skip("not checked because the endpoint refused golive's credentials (HTTP 401): see the auth check")
    if status != 200 or "json" not in response.headers.get("content-type", ""):
        pytest.skip(f"not checked because GET /v1/models answered HTTP {status} "
                    f"({response.headers.get('content-type') or 'no content type'}): see the auth check")
    return endpoint_answers


@pytest.fixture(scope="session")
def endpoint(endpoint_reachable, profile) -> EndpointClient:
    """The endpoint, once it serves the profile's model name (else: see the served-name check)."""
    try:
        ids = [m.get("id") for m in endpoint_reachable.models()]
    except EndpointError as exc:
        pytest.skip(f"not checked because /v1/models lists no models ({exc.what}): see the served-name check")
    if profile.vllm.served_model_name not in ids:
        pytest.skip(f"the endpoint does not serve `{profile.vllm.served_model_name}` (it serves {ids}): see the "
                    f"served-name check")
    return endpoint_reachable


@pytest.fixture
def record_metric(request):
    """Record a measured value for results.json and the report: record_metric(name, value, unit, floor=…)."""

    def record(name: str, value: float, unit: str, floor: float | None = None, ceiling: float | None = None):
        passed = (floor is None or value >= floor) and (ceiling is None or value <= ceiling)
        request.node.user_properties.append((keys.METRIC, {"name": name, "value": value, "unit": unit,
                                                           "floor": floor, "ceiling": ceiling, "passed": passed}))
        return passed

    return record


_SECRET_FLAG_WORDS = ("key", "token", "secret", "password")


@pytest.fixture
def record_provenance(request):
    """Record what a check learned about the station (served args, parsers, image, vLLM version) for results.json,
    the report and the --golive-baseline diff. Values of secret-looking flags (--api-key …) never travel."""

    def record(**facts):
        if isinstance(facts.get("served_args"), dict):
            facts["served_args"] = redacted_flags(facts["served_args"])
        request.node.user_properties.append((keys.PROVENANCE, facts))

    return record


def redacted_flags(served: dict) -> dict:
    """Served flags with the values of secret-looking ones (--api-key, --hf-token …) replaced."""
    return {flag: "[REDACTED]" if any(word in flag.lower() for word in _SECRET_FLAG_WORDS) else value
            for flag, value in served.items()}


@pytest.fixture
def record_finding(request):
    """A passed check that the operator must still read (e.g. an endpoint open to anyone)."""
    return lambda text: request.node.user_properties.append((keys.NOTE, cite(text)))


def _secrets(config: pytest.Config) -> list[str]:
    loaded = config.stash[INVENTORY]
    if loaded is None:
        return []
    names = {s.api_key_env for s in loaded.inventory.stations if s.api_key_env}
    secrets = [os.environ[n] for n in names if os.environ.get(n)]
    for station in loaded.inventory.stations:  # ssh://user:password@host: the password, as written and decoded
        secrets.extend(password_of(station.host))
    return sorted({s for s in secrets if s}, key=len, reverse=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        station = getattr(item, "callspec", None) and item.callspec.params.get("station")
        doc = (getattr(item.function, "__doc__", None) or "").strip().splitlines()
        item.user_properties.extend([
            (keys.LAYER, _layer(item) or ""),
            (keys.STATION, getattr(station, "name", "") or ""),
            (keys.RULE, cite(doc[0]) if doc else item.name),
        ])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    classified = _classify(report, call)
    if classified is not None and classified[0] == rules.FAILED:
        classified = _apply_waiver(item, report, classified)
    if classified is not None:
        report.user_properties.append((keys.OUTCOME, classified))
    _redact(report, _secrets(item.config))  # after classifying: outcome reasons quote exception text too
    return report


def _classify(report: pytest.TestReport, call) -> tuple[str, str] | None:
    """The golive outcome of one phase (verdict rules in golive.verdict); None for a setup/teardown that passed."""
    exc = call.excinfo.value if call.excinfo is not None else None
    if report.passed:
        return (rules.PASSED, "") if report.when == "call" else None
    if report.skipped:
        if isinstance(exc, pytest.skip.Exception):
            reason = str(exc.msg)
            if isinstance(exc, NotApplicable) and isinstance(report.longrepr, tuple):
                report.longrepr = (*report.longrepr[:2], f"Not applicable: {reason}")
        else:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            reason = reason.removeprefix("Skipped: ")
        # reasons quote exception text and server output: escaped like findings, in the terminal's SKIPPED line too
        reason = printable(reason)
        if isinstance(report.longrepr, tuple) and printable(report.longrepr[2]) != report.longrepr[2]:
            report.longrepr = (*report.longrepr[:2], printable(report.longrepr[2]))
        return (rules.NOT_APPLICABLE if isinstance(exc, NotApplicable) else rules.NOT_CHECKED), reason
    if isinstance(exc, Finding):
        report.user_properties.append((keys.FINDING, exc.as_dict()))
        return rules.FAILED, str(exc.msg)
    if isinstance(exc, EndpointError) and report.when != "call":
        # a fixture met a sick endpoint: this check is not checked; the check of that call carries the failure
        reason = f"not checked because {exc.found}"
        report.outcome, report.longrepr = "skipped", (str(report.location[0]), report.location[1] or 0, reason)
        return rules.NOT_CHECKED, reason
    if isinstance(exc, (FactError, EndpointError)):
        # a station that cannot give a fact the recipe needs is a finding about the station, not a golive crash;
        # so is an endpoint that answers what no vLLM server would
        if isinstance(exc, EndpointError):
            finding = Finding(found=exc.found, recipe=report_rule(report), fix=exc.hint)
        else:
            finding = Finding(found=f"could not read what this check needs: {exc}", recipe=report_rule(report),
                              fix=exc.fix or "make that command or file work on the station (golive only reads), "
                                             "then re-run")
        report.longrepr = str(finding.msg)
        report.user_properties.append((keys.FINDING, finding.as_dict()))
        report.outcome = "failed"
        return rules.FAILED, str(finding.msg)
    if report.when == "call" and isinstance(exc, (AssertionError, pytest.fail.Exception)):
        return rules.FAILED, report.longreprtext.strip()
    # anything else did not decide the check: setup errors, crashes inside a check, unreachable targets
    what = "could not be set up" if report.when == "setup" else "did not finish"
    lines = str(exc).strip().splitlines() if exc is not None else report.longreprtext.strip().splitlines()[-1:]
    detail = f"{type(exc).__name__}: " * (exc is not None) + (lines[0] if lines else "")
    if printable(report.longreprtext) != report.longreprtext:  # the traceback stays (a golive bug), escaped
        report.longrepr = printable(report.longreprtext)
    return rules.NOT_CHECKED, printable(f"the check {what}: {detail[:500]}")


def _apply_waiver(item, report: pytest.TestReport, classified: tuple[str, str]) -> tuple[str, str]:
    """A failure a waiver in force covers ends waived (the finding stays in results.json); an expired one stands."""
    loaded = item.config.stash[INVENTORY]
    if loaded is None or loaded.waivers is None:
        return classified
    props = dict(report.user_properties)
    waiver = loaded.waivers.find(report.nodeid, props.get(keys.RULE, ""), props.get(keys.STATION, ""))
    if waiver is None:
        return classified
    report.user_properties.append((keys.WAIVER, waiver.as_dict()))
    if waiver.expired():
        message = f"{waiver_expired_message(waiver)}\n{classified[1]}"
        report.longrepr = message
        return rules.FAILED, message
    reason = f"Waived by '{waiver.name}' (owner {waiver.owner}, until {waiver.expires}): {waiver.justification}"
    report.outcome = "skipped"  # JUnit and the HTML table show it as not failing, with the waiver as the reason
    report.longrepr = (str(item.path), item.location[1] or 0, reason)
    return rules.WAIVED, f"{reason}\n{classified[1]}"


def report_rule(report: pytest.TestReport) -> str:
    return dict(report.user_properties).get(keys.RULE, report.nodeid)


def _redact(report: pytest.TestReport, secrets: list[str]) -> None:
    """Keys never reach a report, a log or JUnit: scrub the failure text and every captured section."""
    if not secrets:
        return
    def scrub(text: str) -> str:
        for secret in secrets:
            text = text.replace(secret, "[REDACTED]")
        return text
    def scrub_data(value):
        if isinstance(value, str):
            return scrub(value)
        if isinstance(value, (list, tuple)):
            return type(value)(scrub_data(v) for v in value)
        if isinstance(value, dict):
            return {k: scrub_data(v) for k, v in value.items()}
        return value
    if report.longrepr is not None and any(secret in str(report.longrepr) for secret in secrets):
        report.longrepr = scrub(str(report.longrepr))
    report.sections = [(title, scrub(body)) for title, body in report.sections]
    report.user_properties = [scrub_data(prop) for prop in report.user_properties]


class _Recording:
    """Feeds every report to the session's recorder; on the xdist controller too, where reports arrive."""

    def __init__(self, config: pytest.Config):
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.config.stash[RECORDER].add(report)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if hasattr(self.config, "workerinput") or self.config.stash[INVENTORY] is None:
            return
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        recorder = self.config.stash[RECORDER]
        watch = self.config.pluginmanager.get_plugin("golive-progress")
        if interrupted and watch is not None:
            mark_unfinished(recorder, session.items, watch.running, watch.reason if watch.bound_reached else
                            "the run was interrupted (Ctrl-C or SIGTERM)")
        path = self.config.getoption("golive_json")
        if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED or (not recorder.checks and not interrupted):
            session.exitstatus = rules.EXIT_NOTHING_SELECTED
            return
        if exitstatus in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERNAL_ERROR):
            return
        previous = self.config.stash[BASELINE]
        if previous is not None and not interrupted:
            tolerance = self.config.stash[INVENTORY].profile.profile.endpoint.baseline_tolerance_pct
            recorder.compare_with(previous, tolerance)
        if path:
            from golive.report.markdown import write_markdown

            write_markdown(recorder.write(Path(path), interrupted=interrupted), Path(path).with_name("go-live.md"))
        nothing_applies = not interrupted and set(r.outcome for r in recorder.checks.values()) == {rules.NOT_APPLICABLE}
        session.exitstatus = rules.EXIT_NOTHING_SELECTED if nothing_applies else rules.exit_code(
            recorder.verdict(interrupted))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`-n N`: stations in parallel, each station's checks on one worker (golive.fleet)."""
    from golive.fleet import station_scheduling

    loaded = config.stash[INVENTORY]
    return station_scheduling(config, log, [s.name for s in loaded.inventory.stations]) if loaded else None


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    recorder = config.stash[RECORDER]
    if config.stash[INVENTORY] is None:
        return
    if not recorder.checks:
        terminalreporter.write_line(f"golive: no check selected (exit {rules.EXIT_NOTHING_SELECTED}): the -m/-k "
                                    f"selection or the inventory left nothing to run")
        return
    terminalreporter.section("golive verdict")
    for line in recorder.summary_lines(interrupted=exitstatus == pytest.ExitCode.INTERRUPTED):
        terminalreporter.write_line(line)
    if {r.outcome for r in recorder.checks.values()} == {rules.NOT_APPLICABLE}:
        terminalreporter.write_line(f"golive: no selected check applies to these stations (exit "
                                    f"{rules.EXIT_NOTHING_SELECTED}): every one is not applicable, reasons above")


def pytest_html_report_title(report) -> None:
    report.title = "golive go-live report"


def pytest_html_results_summary(prefix, summary, postfix, session) -> None:
    from golive.report.html import summary_html

    recorder = session.config.stash[RECORDER]
    prefix.extend(summary_html(recorder, interrupted=session.shouldstop is not False and bool(session.shouldstop)))


def pytest_html_results_table_header(cells) -> None:
    cells.insert(1, "<th>Station</th>")
    cells.insert(2, "<th>Rule</th>")


def pytest_html_results_table_row(report, cells) -> None:
    props = dict(report.user_properties)
    from html import escape

    cells.insert(1, f"<td>{escape(props.get('golive_station', ''))}</td>")
    cells.insert(2, f"<td>{escape(props.get('golive_rule', ''))}</td>")

