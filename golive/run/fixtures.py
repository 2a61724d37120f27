"""The fixtures a check asks for: its station's profile, host, facts and endpoint, each made once per run; and the
`record_*` fixtures a check uses to leave metrics, provenance and notes for the reports.

The endpoint chain is ordered so one root cause ends in one failure: `endpoint_client` (configured) →
`endpoint_answers` (/health is 200) → `endpoint_reachable` (/v1/models lets golive in) → `endpoint` (serves the
profile's model) → `vllm_server` (golive also sees vLLM's own /metrics, /tokenize and flags, not through a gateway
alone, and knows vLLM's own name for the model: `vllm_names`). A check that needs a later link is not checked,
naming the check that carries the failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pytest

from golive.core.secrets import hide_password, redacted_flags
from golive.core.verdict import cite, clipped, not_applicable
from golive.endpoint.errors import EndpointError
from golive.endpoint.levels import LevelResult
from golive.endpoint.target import EndpointTarget, model_names
from golive.profile.inventory import Station
from golive.profile.schema import Cluster, Profile, Service
from golive.report import keys
from golive.report.results import Metric
from golive.run.scope import layer_scope
from golive.run.session import CONNECTIONS, NO_INVENTORY, inventory, layer_of, station_of
from golive.site.loader import LoadedInventory
from golive.station.cluster import ClusterFacts
from golive.station.connection import Connection, chroot_tree, connect
from golive.station.host import StationFacts

if TYPE_CHECKING:  # the client is imported where an endpoint check first needs it (endpoint_client): see there
    from golive.endpoint.client import EndpointClient, Health
    from golive.endpoint.target import VllmName

T = TypeVar("T")


class RecordMetric(Protocol):
    """What the `record_metric` fixture gives a check: record a measured value; True when it meets its bound."""

    def __call__(
        self,
        name: str,
        value: float,
        unit: str,
        floor: float | None = None,
        ceiling: float | None = None,
        interval: tuple[float, float] | None = None,
        requests: int | None = None,
        passed: bool | None = None,
        rounds: int | None = None,
        unstable: str | None = None,
        detectable: float | None = None,
        judged: bool = True,
    ) -> bool: ...


class RecordProvenance(Protocol):
    """What the `record_provenance` fixture gives a check: record what it learned, by name."""

    def __call__(self, **learned: object) -> None: ...


RecordSweep = Callable[[list[LevelResult]], None]  # the `record_sweep` fixture: the station's concurrency sweep
RecordFinding = Callable[[str], None]  # the `record_finding` fixture: a note on a passed check


def _cached(request: pytest.FixtureRequest, key: tuple[str, str], make: Callable[[], T]) -> T:
    """Session fixtures re-run when pytest switches between stations; connections and gathered facts must not."""
    cache = request.config.stash[CONNECTIONS]
    if key not in cache:
        cache[key] = make()
    made: T = cache[key]  # one key, one kind: ("facts", station) is always what make() gives for it
    return made


@pytest.fixture(scope="session")
def golive_inventory(request: pytest.FixtureRequest) -> LoadedInventory:
    loaded = inventory(request.config)
    if loaded is None:
        pytest.skip(NO_INVENTORY)
    return loaded


@pytest.fixture(scope="session")
def profile(station: Station, golive_inventory: LoadedInventory) -> Profile:
    """The station's profile: its own where the inventory gives one, else the inventory's."""
    return golive_inventory.profile_of(station).profile


# --- host and cluster ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def station_host(request: pytest.FixtureRequest, station: Station, golive_inventory: LoadedInventory) -> Any:
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


def _reached_host(request: pytest.FixtureRequest, station: Station, spec: str, loaded: LoadedInventory) -> Any:
    """The station's testinfra host, once it runs a command; otherwise its checks are not checked, one line each."""
    timeout = loaded.profile_of(station).profile.host.connect_timeout_s
    ssh_config = loaded.ssh_config_of(station)

    def connected() -> Connection:
        connection = connect(spec, ssh_config, timeout, station.name)
        request.config.add_cleanup(connection.close)  # the ssh master ends with the run
        return connection

    reached_as = f"{spec} -F {ssh_config}" if ssh_config else spec  # one connection per spec and ssh_config
    connection: Connection = _cached(request, ("host", reached_as), connected)
    gone = request.config.stash[CONNECTIONS].get(("gone-host", station.name))
    if gone is not None:  # stopped answering earlier in this run: not tried again
        pytest.skip(gone.line())
    problem = None if chroot_tree(spec) else _cached(request, ("reach", reached_as), connection.unreachable)
    if problem:
        pytest.skip(
            f"not checked because golive cannot run commands on station {station.name}'s host "
            f"{hide_password(spec)} ({problem}): check the host is up, sshd answers on that port and the "
            f"station's or inventory's ssh_config lets golive in (connect timeout {timeout:g} s: "
            f"host.connect_timeout_s in the profile)"
        )
    return connection.host


@pytest.fixture(autouse=True)
def station_not_gone(request: pytest.FixtureRequest) -> None:
    """A station whose host (host and cluster checks) or endpoint (endpoint checks) stopped answering earlier in this
    run: its later checks are not checked with the line of the first failure, without trying the connection again
    (golive.run.outcomes.lost_way records it)."""
    station = station_of(request.node)
    layer = layer_of(request.node)
    if station is None or layer is None or CONNECTIONS not in request.config.stash:
        return
    way = "gone-endpoint" if layer == "endpoint" else "gone-host"
    gone = request.config.stash[CONNECTIONS].get((way, station.name))
    if gone is not None:
        pytest.skip(gone.line())


@pytest.fixture(scope="session")
def facts(request: pytest.FixtureRequest, station: Station, station_host: Any, profile: Profile) -> StationFacts:
    return _cached(request, ("facts", station.name), lambda: StationFacts(station_host, station, profile))


@pytest.fixture(scope="session")
def cluster(profile: Profile) -> Cluster:
    """The profile's cluster section (rails, NCCL, what both stations share)."""
    if profile.cluster is None:
        not_applicable(f"profile {profile.name} has no cluster section")
    return profile.cluster


@pytest.fixture(scope="session")
def cluster_facts(
    request: pytest.FixtureRequest, station: Station, facts: StationFacts, cluster: Cluster
) -> ClusterFacts:
    return _cached(request, ("cluster", station.name), lambda: ClusterFacts(facts, cluster))


@pytest.fixture(scope="session")
def peer(
    request: pytest.FixtureRequest, station: Station, cluster: Cluster, golive_inventory: LoadedInventory
) -> ClusterFacts:
    """The role b station's cluster facts, for checks that compare or join both stations (they run on role a)."""
    others = [s for s in golive_inventory.inventory.stations if s.role == "b"]
    if not others:
        not_applicable(f"the inventory names no role b station beside {station.name}: one host, nothing to compare")
    other = others[0]
    other_profile = golive_inventory.profile_of(other).profile
    if layer_scope("cluster", other, other_profile, "") is not None:
        pytest.skip(f"station {other.name} has no `host:` in the inventory: add a testinfra host spec")
    spec = golive_inventory.host_spec(other)
    assert spec is not None
    host = _reached_host(request, other, spec, golive_inventory)
    return _cached(
        request,
        ("cluster", other.name),
        lambda: ClusterFacts(
            _cached(request, ("facts", other.name), lambda: StationFacts(host, other, other_profile)), cluster
        ),
    )


@pytest.fixture(scope="session")
def service(profile: Profile) -> Service:
    """The profile's systemd service; checks of a unit skip where the recipe has none (a launch script)."""
    if profile.service is None:
        not_applicable("the profile declares no systemd unit (service: null): the recipe launches vLLM by script")
    return profile.service


# --- endpoint --------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def endpoint_client(
    request: pytest.FixtureRequest, station: Station, profile: Profile, golive_inventory: LoadedInventory
) -> EndpointClient:
    """The station's endpoint as configured, before anyone checked that it lets us in (the auth check uses this)."""
    if not station.endpoint:
        pytest.skip(f"station {station.name} has no endpoint URL")
    # imported here, not at the top: it brings openai (~0.6 s), which a run of host and cluster checks never uses
    from golive.endpoint.client import EndpointClient

    return _cached(
        request,
        ("endpoint", station.name),
        lambda: EndpointClient(EndpointTarget.of(station, profile.endpoint, golive_inventory.tls_ca_file(station))),
    )


def station_health(request: pytest.FixtureRequest, client: EndpointClient, station: Station) -> Health | EndpointError:
    """The station's health probe once per station (EndpointClient.probe_health: vLLM's /health, or a gateway's own
    probe), or the EndpointError of no answer. Also kept as golive.run.outcomes reads it: ("health", station) is None
    when healthy, else why not; a gateway that answers no probe is not "healthy" there, so a failure through it stays
    a failure instead of reading as the station going down."""

    def probe() -> Health | EndpointError:
        try:
            return client.probe_health()
        except EndpointError as exc:
            return exc

    health = _cached(request, ("health-probe", station.name), probe)
    if isinstance(health, EndpointError):
        problem: str | None = health.what
    elif health.status is None:
        problem = f"{health.gateway} answers no health probe golive knows ({'; '.join(health.tried)})"
    else:
        problem = None if health.status == 200 else f"it answered HTTP {health.status}"
    _cached(request, ("health", station.name), lambda: problem)
    return health


@pytest.fixture(scope="session")
def endpoint_health(
    request: pytest.FixtureRequest, endpoint_client: EndpointClient, station: Station
) -> Health | EndpointError:
    """What the station's health probe answered (station_health), for the health check to judge."""
    return station_health(request, endpoint_client, station)


@pytest.fixture(scope="session")
def endpoint_answers(
    request: pytest.FixtureRequest, endpoint_client: EndpointClient, station: Station
) -> EndpointClient:
    """The endpoint, once its health probe answers 200 (vLLM's /health, or a gateway's own probe; a declared gateway
    with no probe passes on: the checks through it show whether it works); otherwise dependent checks are not
    checked and the health check carries the one failure."""
    health = station_health(request, endpoint_client, station)
    if isinstance(health, EndpointError) or not health.ok:
        problem = health.what if isinstance(health, EndpointError) else f"it answered HTTP {health.status}"
        pytest.skip(
            f"not checked because {endpoint_client.url_of('/health')} does not answer 200 ({problem}): see the "
            f"/health check"
        )
    return endpoint_client


@pytest.fixture(scope="session")
def endpoint_reachable(endpoint_answers: EndpointClient, station: Station) -> EndpointClient:
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
        pytest.skip(
            f"not checked because GET /v1/models answered HTTP {status} "
            f"({response.headers.get('content-type') or 'no content type'}): see the auth check"
        )
    return endpoint_answers


@pytest.fixture(scope="session")
def vllm_names(
    request: pytest.FixtureRequest, endpoint_reachable: EndpointClient, station: Station, profile: Profile
) -> VllmName | None:
    """vLLM's own name for the model clients ask for (golive.endpoint.target.VllmName), read once per station from
    vLLM's own /v1/models where golive sees vLLM's server (a plain endpoint, or a gateway's `vllm_endpoint`); None
    where it does not, or that list did not answer (the checks that read vLLM's own server say why)."""
    from golive.endpoint.target import VllmName

    client = endpoint_reachable

    def read() -> VllmName | None:
        if not client.sees_vllm:
            return None
        try:
            served = [str(m.get("id")) for m in client.vllm_models()]
        except EndpointError:
            return None
        where = (client.target.vllm_url or client.target.url) + "/models"
        return VllmName.among(profile.vllm.served_model_name, client.target.vllm_model, served, where)

    return _cached(request, ("vllm-name", station.name), read)


@pytest.fixture(scope="session")
def endpoint(endpoint_reachable: EndpointClient, profile: Profile, vllm_names: VllmName | None) -> EndpointClient:
    """The endpoint, once it serves the profile's model name (else: see the served-name check); its target knows
    vLLM's own name for that model where a gateway renames it (vllm_names), for what golive asks vLLM's own server."""
    try:
        ids = [m.get("id") for m in endpoint_reachable.models()]
    except EndpointError as exc:
        pytest.skip(f"not checked because /v1/models lists no models ({exc.what}): see the served-name check")
    if profile.vllm.served_model_name not in ids:
        pytest.skip(
            f"not checked because the endpoint does not list `{profile.vllm.served_model_name}` (it lists "
            f"{model_names([str(i) for i in ids])}): see the served-name check"
        )
    named = vllm_names.name if vllm_names is not None else None
    if named is not None and named != endpoint_reachable.target.vllm_model:
        # learned once, then every client of the station (the sweep's lanes, /tokenize, /metrics) asks by it
        endpoint_reachable.target = replace(endpoint_reachable.target, vllm_model=named)
    return endpoint_reachable


@pytest.fixture(scope="session")
def vllm_server(
    request: pytest.FixtureRequest, endpoint: EndpointClient, station: Station, vllm_names: VllmName | None
) -> EndpointClient:
    """The endpoint, where golive also sees vLLM's own server (/metrics, /tokenize, /version, its flags) and knows
    vLLM's own name for the model: a plain vLLM endpoint, or a gateway whose `vllm_endpoint` the inventory names.
    Behind a gateway without one, every check that needs it is not checked with one reason, the same line, naming
    the gateway; where no name vLLM serves fits, with the served-name check's finding."""
    if not endpoint.sees_vllm:
        health = station_health(request, endpoint, station)
        assert not isinstance(health, EndpointError)  # `endpoint` comes after a health probe that answered
        pytest.skip(health.vllm_unseen)
    if vllm_names is not None and vllm_names.problem is not None:
        pytest.skip(f"not checked because {vllm_names.problem}: see the served-name check")
    return endpoint


# --- what a check leaves for the reports (golive.report.keys) --------------------------------------------------------


@pytest.fixture
def record_metric(request: pytest.FixtureRequest) -> RecordMetric:
    """Record a measured value for results.json and the report: record_metric(name, value, unit, floor=…,
    interval=(low, high), requests=n)."""

    def record(
        name: str,
        value: float,
        unit: str,
        floor: float | None = None,
        ceiling: float | None = None,
        interval: tuple[float, float] | None = None,
        requests: int | None = None,
        passed: bool | None = None,
        rounds: int | None = None,
        unstable: str | None = None,
        detectable: float | None = None,
        judged: bool = True,
    ) -> bool:
        """`passed` given: the check's own judgement (an interval against its bound); else value against bound.
        `judged` False: a smoke floor met (load.smoke), shown as measured, not judged."""
        if passed is None:
            passed = (floor is None or value >= floor) and (ceiling is None or value <= ceiling)
        metric = Metric(
            name=name,
            value=value,
            unit=unit,
            floor=floor,
            ceiling=ceiling,
            passed=passed,
            interval=None if interval is None else list(interval),
            requests=requests,
            rounds=rounds,
            unstable=unstable,
            detectable=detectable,
            judged=judged,
        )
        # plain data on the report: it crosses pytest-xdist; the Recorder makes it a Metric again
        request.node.user_properties.append((keys.METRIC, metric.as_dict()))
        return passed

    return record


@pytest.fixture
def record_sweep(request: pytest.FixtureRequest) -> RecordSweep:
    """Record the station's concurrency sweep (the load generator's level results) for results.json `sweep`, the
    tables and the plot."""
    return lambda levels: request.node.user_properties.append((keys.SWEEP, [level.as_dict() for level in levels]))


@pytest.fixture
def record_provenance(request: pytest.FixtureRequest) -> RecordProvenance:
    """Record what a check learned about the station (served args, parsers, image, vLLM version) for results.json,
    the report and the --golive-baseline diff. Values of secret-looking flags (--api-key …) never travel."""

    def record(**learned: Any) -> None:
        if isinstance(learned.get("served_args"), dict):
            learned["served_args"] = redacted_flags(learned["served_args"])
        request.node.user_properties.append((keys.PROVENANCE, {k: _bounded(v) for k, v in learned.items()}))

    return record


PROVENANCE_ITEMS = 64  # of one list a station gave (its served model names …): what a report keeps, the count after


def _bounded(value: Any) -> Any:
    """What a station told golive, as the reports keep it: text cut at golive.core.verdict.TEXT_LIMIT, a list at
    PROVENANCE_ITEMS items and a last one saying how many more there were (a gateway listing 100,000 models must not
    copy them into every report)."""
    if isinstance(value, str):
        return clipped(value)
    if isinstance(value, (list, tuple)):
        kept = [_bounded(v) for v in value[:PROVENANCE_ITEMS]]
        return kept + ([f"… and {len(value) - PROVENANCE_ITEMS:,} more"] if len(value) > PROVENANCE_ITEMS else [])
    if isinstance(value, dict):
        return {k: _bounded(v) for k, v in list(value.items())[: PROVENANCE_ITEMS * 16]}
    return value


@pytest.fixture
def record_finding(request: pytest.FixtureRequest) -> RecordFinding:
    """A passed check that the operator must still read (e.g. an endpoint open to anyone)."""
    return lambda text: request.node.user_properties.append((keys.NOTE, cite(text)))
