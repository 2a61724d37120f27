"""The pytest plugin: options, markers, fixtures (inventory, profile, station, host, facts), result capture."""
from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from golive import config as golive_config
from golive import verdict as rules
from golive.endpoint import EndpointClient
from golive.facts import FactError
from golive.report import keys
from golive.report import results as results_mod
from golive.scope import layer_scope
from golive.station import StationFacts, chroot_tree, connect
from golive.verdict import NOT_APPLICABLE, Finding, NotApplicable, cite, not_applicable

LAYERS = {
    "host": "host checks: NUMA page cache, prestart, systemd unit, docker flags, image, served flags, checkpoint, GPU",
    "cluster": "cluster checks: rails, MTU, RDMA, NCCL, station parity",
    "endpoint": "endpoint checks through the OpenAI API",
}
INVENTORY = pytest.StashKey[golive_config.LoadedInventory | None]()
RECORDER = pytest.StashKey[results_mod.Recorder]()
CONNECTIONS = pytest.StashKey[dict]()  # per run: testinfra hosts, station facts, endpoint clients
NO_INVENTORY = "no inventory: pass --golive-inventory PATH (or use `golive run`)"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("golive", "go-live acceptance")
    group.addoption("--golive-inventory", metavar="PATH", help="inventory YAML: stations and their profile")
    group.addoption("--golive-profile", metavar="NAME|PATH", help="use this profile instead of the inventory's")
    group.addoption("--golive-json", metavar="PATH", help="write results.json (the stable, versioned results) here")


def pytest_configure(config: pytest.Config) -> None:
    for name, text in LAYERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    config.addinivalue_line("markers", "slow: long-running golive self-tests (still run in CI)")
    config.addinivalue_line("markers", "quality: answer-quality batteries (a site's own questions and floors)")
    inventory_path = config.getoption("golive_inventory")
    loaded = None
    if inventory_path:
        try:
            loaded = golive_config.load_inventory(Path(inventory_path), config.getoption("golive_profile"))
        except golive_config.ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[INVENTORY] = loaded
    if loaded is not None:
        _describe_run(config, loaded)
    config.stash[RECORDER] = results_mod.Recorder(loaded)
    config.stash[CONNECTIONS] = {}
    config.pluginmanager.register(_Recording(config), "golive-recording")


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
    metafunc.parametrize("station", stations, ids=[s.name for s in stations], scope="session")


@pytest.fixture(autouse=True)
def _golive_scope(request):
    """Before anything connects: does this check's layer apply to this station (profile + inventory decide)?"""
    layer = _layer(request.node)
    station = getattr(request.node, "callspec", None) and request.node.callspec.params.get("station")
    loaded = request.config.stash[INVENTORY]
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
    return _cached(request, ("host", spec), lambda: connect(spec))


@pytest.fixture(scope="session")
def facts(request, station, station_host, profile) -> StationFacts:
    return _cached(request, ("facts", station.name), lambda: StationFacts(station_host, station, profile))


@pytest.fixture(scope="session")
def service(profile):
    """The profile's systemd service; checks of a unit skip where the recipe has none (a launch script)."""
    if profile.service is None:
        not_applicable("the profile declares no systemd unit (service: null): the recipe launches vLLM by script")
    return profile.service


@pytest.fixture(scope="session")
def endpoint_client(request, station, profile) -> EndpointClient:
    """The station's endpoint as configured, before anyone checked that it lets us in (the auth check uses this)."""
    if not station.endpoint:
        pytest.skip(f"station {station.name} has no endpoint URL")
    key = os.environ.get(station.api_key_env) if station.api_key_env else None
    return _cached(request, ("endpoint", station.name),
                   lambda: EndpointClient(station.endpoint, key, timeout=profile.endpoint.request_timeout_s))


@pytest.fixture(scope="session")
def endpoint_reachable(endpoint_client, station) -> EndpointClient:
    """The endpoint, once it answers and accepts our credentials. Otherwise dependent checks skip and the liveness
    or auth check carries the one failure, with its reason."""
    try:
        response = endpoint_client.get("/v1/models")
    except httpx.HTTPError as exc:
        pytest.skip(f"endpoint {station.endpoint} unreachable ({type(exc).__name__}): see the /health check")
    if response.status_code == 401:
        pytest.skip("the endpoint refused golive's credentials (HTTP 401): see the auth check")
    return endpoint_client


@pytest.fixture(scope="session")
def endpoint(endpoint_reachable, profile) -> EndpointClient:
    """The endpoint, once it serves the profile's model name (else: see the served-name check)."""
    ids = [m.get("id") for m in endpoint_reachable.models()]
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


@pytest.fixture
def record_finding(request):
    """A passed check that the operator must still read (e.g. an endpoint open to anyone)."""
    return lambda text: request.node.user_properties.append((keys.NOTE, cite(text)))


def _secrets(config: pytest.Config) -> list[str]:
    loaded = config.stash[INVENTORY]
    if loaded is None:
        return []
    names = {s.api_key_env for s in loaded.inventory.stations if s.api_key_env}
    return [os.environ[n] for n in names if os.environ.get(n)]


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
    _redact(report, _secrets(item.config))
    classified = _classify(report, call)
    if classified is not None:
        report.user_properties.append((keys.OUTCOME, classified))
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
        return (rules.NOT_APPLICABLE if isinstance(exc, NotApplicable) else rules.NOT_CHECKED), reason
    if isinstance(exc, Finding):
        report.user_properties.append((keys.FINDING, exc.as_dict()))
        return rules.FAILED, str(exc.msg)
    if isinstance(exc, FactError):
        # a station that cannot give a fact the recipe needs is a finding about the station, not a golive crash
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
    detail = f"{type(exc).__name__}: {exc}" if exc is not None else report.longreprtext.strip().splitlines()[-1:]
    return rules.NOT_CHECKED, f"the check {what}: {str(detail)[:500]}"


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
    if report.longrepr is not None and any(secret in str(report.longrepr) for secret in secrets):
        report.longrepr = scrub(str(report.longrepr))
    report.sections = [(title, scrub(body)) for title, body in report.sections]


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
        path = self.config.getoption("golive_json")
        if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED or (not recorder.checks and not interrupted):
            session.exitstatus = rules.EXIT_NOTHING_SELECTED
            return
        if exitstatus in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERNAL_ERROR):
            return
        if path:
            recorder.write(Path(path), interrupted=interrupted)
        session.exitstatus = rules.exit_code(recorder.verdict(interrupted))


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

