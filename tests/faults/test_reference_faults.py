"""Endpoint faults against the real reference vLLM station (golive_testbed.reference), at seeded random points: its
engine killed at the run's n-th request, or the n-th answer cut part-way by a proxy in front of it
(tests/faults/proxy.py). Never GO, never a failure the fault-free run does not have, always within the run's budget,
every report written, and one line naming the station and the time where the station went away.

What vLLM does when its engine dies (vllm/entrypoints/serve/exception_handling/handlers/vllm_error.py,
serve/instrumentator/health.py, launchers/launcher.py `terminate_if_errored`): a request in flight gets HTTP 500 or,
streamed, an error event after its 200; GET /health answers 503; the server stops within its 5 s watchdog; then
connections are refused. A station whose engine was killed stops for good, so each engine-killed point ends a
station's life: every reference station the session starts (each variant, healthy and broken, tests/conftest.py)
has its engine killed in its last test, after a fault-free run of the same checks on it (`ends_station` orders that
test last); fresh healthy stations make up the rest of the points, the next one booting while the current one serves.
The stream-cut points share the session's healthy station. GOLIVE_FAULT_POINTS sets the points per fault (default 20).
"""

from __future__ import annotations

import random
import re
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from golive_run import golive

from faults.proxy import FaultProxy
from faults.test_fault_campaign import FAULT_SEED, LEAKS, POINTS, _free_port, _judge, _outcomes, _reports
from golive_testbed.reference.launcher import VARIANTS, ReferenceStation

# the endpoint checks that take seconds on the CPU station; the load sweep and the long context take minutes
CHECKS = "health or models or chat or canary or reasoning or tool_call_is or tool_choice or smoke or auth"
BUDGET_S = 180
STATION = "reference"
KEY_ENV = "GOLIVE_TEST_REFERENCE_KEY"
FRESH_POINTS = max(0, POINTS - len(VARIANTS))  # the session's stations give one point each

pytestmark = pytest.mark.slow


def _golive(out: Path, proxy: FaultProxy, key: str | None = None) -> tuple[int, str, float]:
    out.mkdir(parents=True, exist_ok=True)
    key_line = f", api_key_env: {KEY_ENV}" if key else ""
    (out / "inventory.yaml").write_text(
        f"profile: reference-cpu\nstations:\n  - {{name: {STATION}, endpoint: '{proxy.base_url}'{key_line}}}\n"
    )
    started = time.monotonic()
    proc = golive(
        "run",
        out / "inventory.yaml",
        "-o",
        out / "reports",
        "-m",
        "endpoint",
        "-k",
        CHECKS,
        "-q",
        "-p",
        "no:cacheprovider",
        "--max-run-time",
        str(BUDGET_S),
        cwd=out,
        env={KEY_ENV: key} if key else None,
        timeout=BUDGET_S + 60,
    )
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - started


def kill_engine(station: ReferenceStation) -> None:
    """SIGKILL the station's engine core (the API server's child process that runs the model)."""
    assert station.pid is not None
    engines = [
        p
        for p in psutil.Process(station.pid).children(recursive=True)
        if "EngineCore" in " ".join(p.cmdline()) + p.name()
    ]
    assert engines, f"no EngineCore process under the station's server {station.pid}"
    for engine in engines:
        engine.send_signal(signal.SIGKILL)


class FreshStations:
    """Healthy reference stations for the engine-killed points beyond the session's own, `count` in all: the next one
    boots while the current one serves."""

    def __init__(self, logs: Path, count: int):
        self.logs, self.left = logs, count
        self.ready: ReferenceStation | None = None
        self.booting = self._launch()

    def _launch(self) -> ReferenceStation | None:
        if self.left == 0:
            return None
        self.left -= 1
        port = _free_port()
        return ReferenceStation(port=port, log_path=self.logs / f"fresh-{port}.log").launch()

    def take(self) -> ReferenceStation:
        if self.ready is None:
            assert self.booting is not None, "more fresh stations taken than there are points"
            self.ready, self.booting = self.booting.wait(timeout=300), self._launch()
        station, self.ready = self.ready, None
        return station

    def peek(self) -> ReferenceStation:
        """The next station, up and not taken (the baseline runs on the first point's station)."""
        self.ready = self.take()
        return self.ready

    def close(self) -> None:
        for station in (self.ready, self.booting):
            if station is not None:
                station.stop()


def _baseline(station: ReferenceStation, out: Path) -> tuple[dict, int]:
    """The fault-free run through a proxy that injects nothing: its outcomes and how many requests it sent."""
    with FaultProxy(station.port) as proxy:
        code, output, _ = _golive(out, proxy, station.api_key)
    assert not any(leak in output for leak in LEAKS), output[-3000:]
    outcomes = _outcomes(_reports(out))
    assert "not_checked" not in outcomes.values() or "failed" in outcomes.values(), output[-3000:]
    if station.variant == "healthy":
        assert code == 0 and set(outcomes.values()) == {"passed"}, output[-3000:]
    assert proxy.requests, output[-3000:]
    return outcomes, proxy.requests


def _kill_mid_run(station: ReferenceStation, baseline: tuple[dict, int], out: Path, seed: str) -> None:
    """Kill the station's engine before the seeded request of a run of the baseline's checks; judge that run."""
    outcomes, requests = baseline
    fault_at = random.Random(seed).randint(1, requests)
    with FaultProxy(station.port, fault_at=fault_at, before=lambda: kill_engine(station)) as proxy:
        code, output, took = _golive(out, proxy, station.api_key)
    where = f"engine of {station.variant} killed before request {fault_at} of {requests} (seed {seed})"
    results, got = _judge_http(where, code, output, took, out, outcomes)
    lost = {c["message"] for c in results["checks"] if "stopped answering" in c.get("message", "")}
    # the one line, on every check after the death; none only where no later request needed the engine (vLLM answers
    # /v1/models without it): then the run is exactly the fault-free one
    assert len(lost) == 1 or got == outcomes, f"{where}: {lost}\n{output[-3000:]}"
    print(
        f"campaign-result: engine-killed reference n={fault_at}/{requests} variant={station.variant} "
        f"verdict={results['verdict']} lost={sum(o == 'not_checked' for o in got.values())} "
        f"lines={len(lost)} took={took:.1f}"
    )


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Iterator[tuple[FreshStations, tuple[dict, int]]]:
    stations = FreshStations(Path(tempfile.mkdtemp(prefix="golive-fresh-stations-")), FRESH_POINTS)
    try:
        yield stations, _baseline(stations.peek(), tmp_path_factory.mktemp("engine-baseline"))
    finally:
        stations.close()


_SHARED: dict[str, tuple[dict, int]] = {}


@pytest.fixture
def shared_baseline(reference, tmp_path_factory) -> tuple[dict, int]:
    """The fault-free run on the session's healthy station, once (`reference` is per test: the session pool's)."""
    if "healthy" not in _SHARED:
        _SHARED["healthy"] = _baseline(reference, tmp_path_factory.mktemp("stream-baseline"))
    return _SHARED["healthy"]


FIRST_SEEN = re.compile(r"\(first seen by (test_\w+|the estimate's probe)\)")


def _judge_http(
    where: str, code: int, output: str, took: float, out: Path, baseline: dict
) -> tuple[dict, dict[tuple[str, str], str]]:
    """The campaign's rules (test_fault_campaign._judge), and a lost station said in its one HTTP line."""
    results, outcomes = _judge(where, code, output, took, out, baseline, BUDGET_S)
    for check in results["checks"]:
        message = check.get("message", "")
        if "stopped answering" in message:
            assert message.startswith(f"station {STATION} stopped answering over HTTP at "), message
            # the check that met it first, or the estimate's probe where the engine died before the first check
            assert FIRST_SEEN.search(message) and "\n" not in message, message
    return results, outcomes


@pytest.mark.ends_station
@pytest.mark.parametrize("reference", list(VARIANTS), indirect=True)
def test_engine_killed_at_the_end_of_a_stations_life_never_blames_it(reference, tmp_path):
    baseline = _baseline(reference, tmp_path / "baseline")
    _kill_mid_run(reference, baseline, tmp_path / "faulted", f"{FAULT_SEED}-engine-killed-{reference.variant}")


@pytest.mark.parametrize("index", range(FRESH_POINTS))
def test_engine_killed_mid_run_never_blames_the_station(fresh, tmp_path, index):
    stations, baseline = fresh
    station = stations.take()
    try:
        _kill_mid_run(station, baseline, tmp_path, f"{FAULT_SEED}-engine-killed-{index}")
    finally:
        station.stop()


@pytest.mark.parametrize("index", range(POINTS))
def test_stream_cut_mid_answer_never_blames_the_station(reference, shared_baseline, tmp_path, index):
    baseline, requests = shared_baseline
    rng = random.Random(f"{FAULT_SEED}-stream-cut-real-{index}")
    fault_at, cut_at = rng.randint(1, requests), rng.uniform(0.05, 0.95)
    with FaultProxy(reference.port, fault_at=fault_at, cut_at=cut_at) as proxy:
        code, output, took = _golive(tmp_path, proxy)
    where = (
        f"answer {fault_at} of {requests} cut at {cut_at:.0%} of its bytes (seed {FAULT_SEED}-stream-cut-real-{index})"
    )
    results, got = _judge_http(where, code, output, took, tmp_path, baseline)
    assert proxy.cuts == 1, where  # GO stays possible: a client that asked again got every answer (_judge)
    print(
        f"campaign-result: stream-cut reference n={fault_at}/{requests} verdict={results['verdict']} "
        f"lost={sum(o == 'not_checked' for o in got.values())} took={took:.1f}"
    )
