"""Test-session machinery: one reference station per variant per session; the root-only end-to-end guard (tests/e2e.py).

A test that needs the real vLLM reference station asks for the `reference` fixture; a variant other than healthy is
asked for with `@pytest.mark.parametrize("reference", [variant, ...], indirect=True)`. The session starts each variant
once: tests are ordered so each variant's tests run together (stations last, healthy after every broken variant), the
next variant boots in the background while the current one is in use (vLLM start-up is ~1 core for a minute; a test
drives mostly one core), and a variant stops right after its last test, so at most two stations are up at once.

Under pytest-xdist (`-n 2 --dist loadgroup`, the default in pytest.ini) every test that uses a reference station is in
one group that one worker runs, first: the station order above holds in that worker, and the other worker runs the
tests that need no station beside it. Any other test is grouped with its module (its module fixtures are made once),
and the network-namespace pairs' users with each other (one pair per variant per session). tests/xdist_schedule.py
says how.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path

import pytest
import xdist_schedule
from e2e import e2e_chroot  # noqa: F401  (the fixture behind e2e.needs_chroot)
from golive_run import Run, golive_endpoint

from golive_testbed.reference.launcher import ReferenceStation

# Unset: the next variant boots while the current one serves tests. "0": one station at a time (a busy machine).
OVERLAP = os.environ.get("GOLIVE_TEST_OVERLAP", "1") != "0"
HEALTHY = "healthy"
NETNS_FIXTURES = {"station_pairs", "healthy_pair", "netns_available"}
# an xdist worker does not know, when its loop starts, whether it will get the stations: it boots the first on use
XDIST_WORKER = "PYTEST_XDIST_WORKER" in os.environ


# --- reference stations -----------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StationPool:
    """The reference stations of one session: started on first use (or ahead, by `prelaunch`), stopped by `release`."""

    def __init__(self, order: list[str]):
        self.order = order  # variants in the order the session's tests use them
        self.logs: Path | None = None  # made on the first start: a session without stations leaves nothing behind
        self.stations: dict[str, ReferenceStation] = {}
        self.released: set[str] = set()
        self.ready: set[str] = set()
        self.failed: dict[str, Exception] = {}

    def prelaunch(self, variant: str) -> None:
        if variant in self.stations or variant in self.released:
            return
        if self.logs is None:
            self.logs = Path(tempfile.mkdtemp(prefix="golive-reference-logs-"))
        station = ReferenceStation(port=_free_port(), variant=variant, log_path=self.logs / f"{variant}.log")
        self.stations[variant] = station.launch()

    def get(self, variant: str) -> ReferenceStation:
        if variant in self.released:
            raise RuntimeError(f"reference station {variant} was stopped: the test order put a user after its last one")
        self.prelaunch(variant)
        station = self.stations[variant]
        if variant in self.failed:  # one start per variant: later tests get the same error at once
            raise self.failed[variant]
        if variant not in self.ready:
            try:
                station.wait(timeout=300)
            except Exception as error:
                self.failed[variant] = error
                raise
            self.ready.add(variant)
        if OVERLAP:  # the next variant boots while this one serves
            later = self.order[self.order.index(variant) + 1 :] if variant in self.order else []
            if later:
                self.prelaunch(later[0])
        return station

    def release(self, variant: str) -> None:
        self.released.add(variant)
        station = self.stations.pop(variant, None)
        if station is not None:
            station.stop()

    def close(self) -> None:
        for variant in list(self.stations):
            self.release(variant)


POOL = pytest.StashKey[StationPool]()
GROUPS = pytest.StashKey[Path]()  # the controller's: where its xdist workers write the test → group map
LAST_USE = pytest.StashKey[dict[str, str]]()  # variant → nodeid of its last test


def variant_of(item: pytest.Item) -> str | None:
    """The reference-station variant a test uses, or None if it uses none."""
    names = getattr(item, "fixturenames", ())
    if "reference" in names:
        callspec = getattr(item, "callspec", None)
        return callspec.params.get("reference", HEALTHY) if callspec else HEALTHY
    return HEALTHY if "healthy_endpoint_run" in names else None


def xdist_group_of(item: pytest.Item) -> str:
    """The xdist group of a test (tests/xdist_schedule.py): the stations', the namespace pairs', its module's, or its
    own (a fuzz property)."""
    if variant_of(item) is not None:
        return xdist_schedule.STATIONS
    if NETNS_FIXTURES & set(getattr(item, "fixturenames", ())):
        return "netns-pairs"
    if item.nodeid.startswith("tests/real_station/"):  # one real station for the session (its conftest)
        return "real-station"
    if item.get_closest_marker("fuzz"):  # no shared fixture, minutes at depth: each fills whichever worker is free
        return item.nodeid
    return item.nodeid.split("::")[0]


@pytest.hookimpl(trylast=True)  # after -m/-k deselection: order and plan only what runs
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    variants: list[str] = []
    for item in items:
        variant = variant_of(item)
        if variant is not None and variant not in variants:
            variants.append(variant)
    if HEALTHY in variants:  # healthy last: its timing checks run with no station booting beside them
        variants.remove(HEALTHY)
        variants.append(HEALTHY)
    rank = {v: i + 1 for i, v in enumerate(variants)}
    # stable: no station first, then each variant's tests, a test that may end its station (ends_station) last
    items.sort(key=lambda item: (rank.get(variant_of(item) or "", 0), bool(item.get_closest_marker("ends_station"))))
    config.stash[LAST_USE] = {variant_of(item) or "": item.nodeid for item in items if variant_of(item)}
    config.stash[POOL] = StationPool(variants)
    groups = getattr(config, "workerinput", {}).get(xdist_schedule.GROUPS_KEY)
    if groups:  # an xdist worker: the map the controller's scheduler reads
        xdist_schedule.write_groups(groups, {item.nodeid: xdist_group_of(item) for item in items})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtestloop(session: pytest.Session):
    pool = session.config.stash.get(POOL, None)
    if pool is not None and pool.order and OVERLAP and not XDIST_WORKER and not session.config.option.collectonly:
        pool.prelaunch(pool.order[0])  # boots while the tests that need no station run
    try:
        yield
    finally:
        if pool is not None:
            pool.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    yield
    variant = variant_of(item)
    if variant and item.config.stash[LAST_USE].get(variant) == item.nodeid:
        item.config.stash[POOL].release(variant)


def _groups_path(config: pytest.Config) -> Path:
    """The controller's file for the test → group map its workers write, made once per session."""
    if GROUPS not in config.stash:
        config.stash[GROUPS] = xdist_schedule.groups_file()
    return config.stash[GROUPS]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """The controller names the file its workers write the test → group map to."""
    node.workerinput[xdist_schedule.GROUPS_KEY] = str(_groups_path(node.config))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    return xdist_schedule.StationsFirst(config, log, _groups_path(config))


def pytest_unconfigure(config: pytest.Config) -> None:
    groups = config.stash.get(GROUPS, None)
    if groups is not None:
        shutil.rmtree(groups.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def healthy_endpoint_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The whole endpoint layer, run once on the healthy station: every test that asks what the healthy station does
    under the shipped reference profile (all checks pass, the sweep, the batteries, probes under load) reads this run
    instead of running those checks again."""
    station = request.config.stash[POOL].get(HEALTHY)
    return golive_endpoint(station, tmp_path_factory.mktemp("healthy-endpoint-run"))


@pytest.fixture
def reference(request: pytest.FixtureRequest) -> ReferenceStation:
    """The session's running reference station of the variant the test is parametrized with (healthy by default)."""
    return request.config.stash[POOL].get(getattr(request, "param", HEALTHY))
