"""A fault-injection campaign: targets that go away *during* a run never end in GO, never in a failure the same
target does not have without the fault, always within the run's budget, always with every report written.

Each point is seeded (`FAULT_SEED` + fault + index): the same seed injects the same fault into the same target once
the run has sent the same number of commands (GOLIVE_COMMAND_LOG counts them), whatever the machine's speed.
Faults: the station's sshd stopped (no listener, sessions cut), the established ssh connection cut (the multiplexed
master's session killed, sshd still listening), SIGTERM to golive. Targets, each healthy and broken in exactly one
rule (so "no false blame" compares against a fault-free run that does fail something):
- host layer: station trees served by a real sshd on loopback (golive_testbed.sshd);
- cluster layer: two stations in network namespaces joined by a veth rail, each with its own sshd
  (tests/cluster/netns.py, the same sshd harness); the faults hit one of the two, drawn by the seed.
GOLIVE_FAULT_POINTS sets the points per fault (default 20: the campaign's counts in docs/guarantees.md); a busy
machine may ask for fewer while developing. The endpoint layer's faults: test_endpoint_faults.py and
test_reference_faults.py.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from cluster import netns
from cluster.test_cluster_layer_netns import BROKEN as BROKEN_PAIRS
from cluster.test_cluster_layer_netns import RAIL_CHECKS

from golive_testbed.sshd import Sshd, available, loopback_sshd

REPO = Path(__file__).resolve().parents[2]
FAULT_SEED = 20261201
POINTS = int(os.environ.get("GOLIVE_FAULT_POINTS", "20"))
FAULTS = ("sshd-stopped", "connection-cut", "sigterm")
# target → the checks its fault-free run fails, as (check, station role); a tree is one station, role "a"
EXPECTED_FAILURES: dict[str, set[tuple[str, str]]] = {
    "gb300-healthy": set(),
    "unit-disabled": {("test_unit_is_enabled_and_active", "a")},
    "pair-healthy": set(),
    "pair-mtu-b-1500": set(BROKEN_PAIRS["mtu-b-1500"]),
}
TARGETS = tuple(EXPECTED_FAILURES)
BUDGET_S = 240  # --max-run-time of every run: a run past it (plus Python's start and the reports) has hung
LEAKS = ("Traceback", "CommandResult(", " object at 0x")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(available() is not None, reason=str(available())),
    pytest.mark.skipif(netns.available() is not None, reason=str(netns.available())),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Target:
    """One campaign target as a run meets it: its inventory, the layer it checks and the sshd the faults hit."""

    name: str
    inventory: str
    layer: tuple[str, ...]  # golive run's selection
    roles: dict[str, str]  # station name → role, so a pair's outcomes compare across pairs with other names
    faulted: str  # the station whose sshd the faults stop or cut
    sshd: Sshd  # that sshd

    def stop(self) -> None:
        self.sshd.stop()

    def cut(self) -> int:
        return self.sshd.cut()


@contextmanager
def _target(name: str, trees: dict[str, Path], rng: random.Random | None = None) -> Iterator[Target]:
    """The target up (a tree behind a loopback sshd, or a fresh pair of namespaces); the faulted station of a pair
    drawn by `rng` (A when None)."""
    if not name.startswith("pair-"):
        profile = REPO / "fixtures" / "profiles" / "gb300-site.yaml"
        with loopback_sshd(_free_port(), tree=trees[name]) as sshd:
            yield Target(
                name,
                f"profile: {profile}\nssh_config: {sshd.ssh_config}\nstations:\n"
                f'  - {{name: {name}, role: a, host: "{sshd.spec}", phase: serving}}\n',
                ("-m", "host"),
                {name: "a"},
                name,
                sshd,
            )
        return
    with netns.station_pair(name.removeprefix("pair-")) as pair:
        station = rng.choice((pair.a, pair.b)) if rng else pair.a
        yield Target(
            name,
            f"profile: {REPO}/fixtures/profiles/netns-rail-site.yaml\nssh_config: {pair.ssh_config}\n"
            f"stations:\n  - {{name: {pair.a.name}, role: a, host: '{pair.a.spec}'}}\n"
            f"  - {{name: {pair.b.name}, role: b, host: '{pair.b.spec}'}}\n",
            ("-m", "cluster", "-k", RAIL_CHECKS),
            {pair.a.name: "a", pair.b.name: "b"},
            station.name,
            pair.sshds[station.name],
        )


def _start(target: Target, out: Path) -> subprocess.Popen:
    out.mkdir(parents=True, exist_ok=True)
    (out / "inventory.yaml").write_text(target.inventory)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["GOLIVE_COMMAND_LOG"] = str(out / "commands.log")  # every command sent, one a line (golive.station.readonly)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "golive.cli",
            "run",
            str(out / "inventory.yaml"),
            "-o",
            str(out / "reports"),
            *target.layer,
            "-q",
            "-p",
            "no:cacheprovider",
            "--max-run-time",
            str(BUDGET_S),
        ],
        cwd=out,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(process: subprocess.Popen, started: float) -> tuple[int, str, float]:
    output, _ = process.communicate(timeout=BUDGET_S + 60)
    return process.returncode, output, time.monotonic() - started


def _sent(log: Path) -> int:
    """How many commands the run has sent so far (GOLIVE_COMMAND_LOG: one a line, written before each is sent)."""
    try:
        return log.read_text().count("\n")
    except OSError:
        return 0


def _reports(out: Path) -> dict:
    """Every report written and readable; results.json's checks by name."""
    reports = out / "reports"
    results = json.loads((reports / "results.json").read_text())
    ElementTree.parse(reports / "junit.xml")
    html, md = (reports / "go-live.html").read_text(), (reports / "go-live.md").read_text()
    assert "GO-LIVE:" in html and md.strip(), "a report is empty"
    for text in (html, md, (reports / "results.json").read_text(), (reports / "junit.xml").read_text()):
        assert not any(leak in text for leak in LEAKS), [leak for leak in LEAKS if leak in text]
    return results


def _outcomes(results: dict, roles: dict[str, str] | None = None) -> dict[tuple[str, str], str]:
    """(check, station's role) → outcome; a station not in `roles` keeps its name."""
    roles = roles or {}
    return {
        (c["nodeid"].split("::")[-1].split("[")[0], roles.get(c["station"], c["station"])): c["outcome"]
        for c in results["checks"]
    }


def _failed(outcomes: dict[tuple[str, str], str]) -> set[tuple[str, str]]:
    return {key for key, outcome in outcomes.items() if outcome == "failed"}


def _judge(
    where: str,
    code: int,
    output: str,
    took: float,
    out: Path,
    baseline: dict,
    budget_s: float,
    roles: dict[str, str] | None = None,
) -> tuple[dict, dict[tuple[str, str], str]]:
    """What every faulted run is held to: within its budget, no traceback or internal repr in its output or reports,
    every report written, exit code and verdict the same, GO only with exactly the fault-free run's outcomes (the
    fault met nothing it needed), no check failed that the fault-free run does not fail. results.json and the
    outcomes by (check, role)."""
    assert took < budget_s + 60, f"{where}: the run took {took:.0f} s"
    assert not any(leak in output for leak in LEAKS), f"{where}\n{output[-3000:]}"
    results = _reports(out)
    outcomes = _outcomes(results, roles)
    assert (code == 0) == (results["verdict"] == "pass"), f"{where}: exit {code}, verdict {results['verdict']}"
    if results["verdict"] == "pass":
        assert outcomes == baseline, f"{where}: GO without the fault-free run's checks\n{output[-3000:]}"
    blamed = _failed(outcomes) - _failed(baseline)
    assert not blamed, f"{where}: blamed the station for {blamed}\n{output[-3000:]}"
    return results, outcomes


@pytest.fixture(scope="module")
def trees():
    from golive_testbed.targets import build_station_trees

    return build_station_trees()


@pytest.fixture(scope="module")
def baselines(trees, tmp_path_factory):
    """The fault-free run of each target: its outcomes and how many commands it sent (the faults land among them)."""
    found = {}
    for name in TARGETS:
        out = tmp_path_factory.mktemp(f"baseline-{name}")
        with _target(name, trees) as target:
            started = time.monotonic()
            code, output, took = _finish(_start(target, out), started)
        outcomes = _outcomes(_reports(out), target.roles)
        assert not any(leak in output for leak in LEAKS), output[-3000:]
        assert _failed(outcomes) == EXPECTED_FAILURES[name], output[-3000:]
        assert "not_checked" not in outcomes.values(), output[-3000:]
        assert code == (1 if EXPECTED_FAILURES[name] else 0), output[-3000:]
        found[name] = (outcomes, _sent(out / "commands.log"))
    return found


def _points() -> list[tuple[str, int]]:
    return [(fault, index) for fault in FAULTS for index in range(POINTS)]


def _inject(fault: str, target: Target, process: subprocess.Popen) -> bool:
    """Inject the fault; False when it met nothing (the run ended first)."""
    if fault == "sshd-stopped":
        target.stop()
    elif fault == "sigterm":
        process.send_signal(signal.SIGTERM)
    else:  # an established connection to cut: golive's multiplexed ssh master, open once golive has connected
        while not target.cut():
            if process.poll() is not None:
                return False
            time.sleep(0.05)
    return True


@pytest.mark.parametrize(("fault", "index"), _points(), ids=lambda v: str(v))
def test_fault_mid_run_never_blames_the_station(trees, baselines, tmp_path, fault, index):
    rng = random.Random(f"{FAULT_SEED}-{fault}-{index}")
    name = rng.choice(TARGETS)
    baseline, commands = baselines[name]
    # the point: once the run has sent its k-th command (k=0: before the first), then a few milliseconds more; before
    # its last command, so that the fault lands mid-run. A SIGTERM lands once the first command is out: before golive's
    # Python has set its handler (its first ~second) the default action ends it unreported, with nothing checked
    # (docs/guarantees.md)
    k, extra_s = rng.randint(1 if fault == "sigterm" else 0, commands - 1), rng.uniform(0, 0.05)
    with _target(name, trees, rng) as target:
        started = time.monotonic()
        process = _start(target, tmp_path)
        while _sent(tmp_path / "commands.log") < k and process.poll() is None:
            time.sleep(0.005)
        time.sleep(extra_s)
        # the run ended before the fault: a fault-free run, held to the same rules
        injected = process.poll() is None and _inject(fault, target, process)
        code, output, took = _finish(process, started)
    where = (
        f"{fault} on {target.faulted} after command {k} of {commands} into {name} (seed {FAULT_SEED}-{fault}-{index})"
    )
    print(f"campaign: {where}: exit {code} in {took:.1f} s")
    results, outcomes = _judge(where, code, output, took, tmp_path, baseline, BUDGET_S, target.roles)
    print(
        f"campaign-result: {fault} {name} k={k}/{commands} injected={injected} verdict={results['verdict']} "
        f"lost={sum(o == 'not_checked' for o in outcomes.values())}"
    )
    lost = [c["message"] for c in results["checks"] if "stopped answering" in c.get("message", "")]
    if lost:  # one line per lost station, the same on every check it ended, naming the station the fault hit
        assert len(set(lost)) == 1 and f"station {target.faulted} stopped answering over ssh at " in lost[0], lost
        assert "first seen by test_" in lost[0] and "\n" not in lost[0], lost
