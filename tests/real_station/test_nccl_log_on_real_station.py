"""The running engine's NCCL log on the real station (issue 40, item 4): the serving container started by systemd 252
with `-e NCCL_DEBUG_FILE=/var/log/glm53/nccl.%h.%p.log` and that folder bound from the station
(realstation_variants.serve_with_nccl_debug_file), and golive's cluster layer, run on the station as role a of a
one-host cluster (`rails: []`), finds the log through what the real Docker engine reports: NCCL_DEBUG_FILE from
`docker inspect` Config.Env, `%h` as the container's host name (Config.Hostname; `--network host`: the station's), the
folder through the bind's source, each file held to State.StartedAt by its mtime on the station.

vLLM's CPU build writes no NCCL log, so the files NCCL would have written are put there (the GB300 pair's, from
fixtures/cluster-stations, with this host's name and pids): the running engine's (written after its start) beside
last month's (mtime 30 days back), and another host's file in the same folder. Both ways: the socket fallback in the
running log fails naming the stale one beside it; a socket fallback only in the stale log passes; only stale logs:
every NCCL check is not checked, naming the file and the engine's start. Cost: one restart of the unit without waiting
for vLLM (~10 s), three `golive run -m cluster -k test_nccl` (~3 s each), and the healthy station serving again after.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from golive_run import Run, golive_run

from golive_testbed import realstation
from golive_testbed.realstation_files import CONTAINER
from golive_testbed.realstation_host import docker, ssh
from golive_testbed.realstation_variants import NCCL_LOG_DIR, revert_variant, serve_with_nccl_debug_file

from .common import TIMINGS

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
LOGS = REPO / "fixtures/cluster-stations/variants/a-stale-nccl-log-beside-running/var/log/glm53"
HEALTHY, SOCKET = LOGS / "nccl.gb300-a.3131.log", LOGS / "nccl.gb300-a.4107.log"  # GDRDMA; NET/Socket on channel 00
NCCL_CHECKS = (
    "test_nccl_version_matches_profile",
    "test_nccl_log_matches_declared_topology",
    "test_nccl_uses_gpu_direct_rdma",
    "test_nccl_never_falls_back_to_sockets",
    "test_nccl_log_has_no_warnings",
)
MONTH = 30 * 86400


@dataclass(frozen=True)
class Engine:
    """The station serving with NCCL_DEBUG_FILE, and what its container is as Docker reports it."""

    station: realstation.Record
    hostname: str  # Config.Hostname: NCCL's %h
    started: float  # State.StartedAt, seconds since the epoch
    folder: str  # the bind's source: where golive reads the files on the station

    def log(self, pid: int, text: str, age_s: float, host: str = "") -> str:
        """A file NCCL wrote as process `pid` of host `host` (this one by default), last written `age_s` before the
        engine's start (negative: after it)."""
        host = host or self.hostname.split(".")[0]
        path = f"{NCCL_LOG_DIR}/nccl.{host}.{pid}.log"
        for said in ("gb300-a:3131:3131", "gb300-a:4107:4107"):
            text = text.replace(said, f"{host}:{pid}:{pid}")
        when = int(self.started - age_s)
        ssh(self.station, f"cat > {path} && touch -d @{when} {path}", stdin=text)
        return f"{self.folder}/nccl.{host}.{pid}.log"

    def clear(self) -> None:
        ssh(self.station, f"rm -f {NCCL_LOG_DIR}/*")


@pytest.fixture(scope="module")
def engine(station: realstation.Record) -> Iterator[Engine]:
    started = time.monotonic()
    serve_with_nccl_debug_file(station)
    TIMINGS["nccl_debug_file_restart_s"] = time.monotonic() - started
    try:
        yield engine_of(station)
    finally:
        started = time.monotonic()
        revert_variant(station)
        TIMINGS["nccl_debug_file_serving_again_s"] = time.monotonic() - started


def engine_of(station: realstation.Record) -> Engine:
    [found] = json.loads(docker(station, "inspect", CONTAINER).stdout)
    env = dict(e.split("=", 1) for e in found["Config"]["Env"])
    assert env["NCCL_DEBUG_FILE"] == f"{NCCL_LOG_DIR}/nccl.%h.%p.log", env  # `%%h` in the unit: systemd's own `%h`
    [bind] = [m for m in found["Mounts"] if m["Destination"] == NCCL_LOG_DIR]
    stamp = found["State"]["StartedAt"]  # 2026-12-05T16:40:01.123456789Z
    started = datetime.fromisoformat(stamp[:19]).replace(tzinfo=UTC).timestamp()
    return Engine(station, found["Config"]["Hostname"], started, bind["Source"])


def nccl_run(station: realstation.Record, tmp_path: Path) -> Run:
    """`golive run -m cluster -k test_nccl` on the station as role a of a one-host cluster."""
    inventory = station.inventory
    profile = tmp_path / "cluster-profile.yaml"
    profile.write_text(
        f"extends: {inventory.parent / 'site-profile.yaml'}\n"
        "layers: [host, cluster, endpoint]\n"
        "vllm:\n"
        "  tensor_parallel_size: 2\n"  # the GB300 pair's log: nRanks 2
        "cluster:\n"
        "  rails: []\n"
        "  nccl_version: 2.30.7\n"
        "  gdrdma_required: true\n"
        "  env_file: null\n"
        "  image_ref: null\n"
        "  nccl_log: /var/log/glm53/nccl.log\n"
    )
    text = inventory.read_text()
    text = text.replace("profile: site-profile.yaml", f"profile: {profile}")
    text = text.replace("ssh_config: ssh_config", f"ssh_config: {inventory.parent / 'ssh_config'}")
    (tmp_path / "inventory.yaml").write_text(text)
    return golive_run(tmp_path / "inventory.yaml", tmp_path / "out", "-m", "cluster", "-k", "test_nccl", timeout=300)


def test_socket_fallback_in_the_running_log_fails_naming_the_stale_one(engine: Engine, tmp_path: Path) -> None:
    engine.clear()
    stale = engine.log(3131, HEALTHY.read_text(), MONTH)
    running = engine.log(4107, SOCKET.read_text(), -5)
    engine.log(977, SOCKET.read_text(), -5, host="gb300-b")  # another host's file in the folder: not this engine's
    run = nccl_run(engine.station, tmp_path)
    assert run.failed() == {"test_nccl_never_falls_back_to_sockets"}, run.output[-4000:]
    found = run.check("test_nccl_never_falls_back_to_sockets")["finding"]["found"]
    assert f"{running} (the running engine's; stale beside it, not read: {stale})" in found, found
    assert "via NET/Socket/0`" in found and "gb300-b" not in found, found
    assert run.check("test_nccl_version_matches_profile")["outcome"] == "passed"


def test_socket_fallback_only_in_the_stale_log_passes(engine: Engine, tmp_path: Path) -> None:
    engine.clear()
    engine.log(3131, SOCKET.read_text(), MONTH)
    engine.log(4107, HEALTHY.read_text(), -5)
    run = nccl_run(engine.station, tmp_path)
    outcomes = {name: run.check(name)["outcome"] for name in NCCL_CHECKS}
    assert outcomes["test_nccl_never_falls_back_to_sockets"] == "passed", run.output[-4000:]
    assert not run.failed(), run.output[-4000:]


def test_only_stale_logs_are_not_checked_naming_them(engine: Engine, tmp_path: Path) -> None:
    engine.clear()
    stale = engine.log(3131, HEALTHY.read_text(), MONTH)
    run = nccl_run(engine.station, tmp_path)
    for name in NCCL_CHECKS:
        check = run.check(name)
        assert check["outcome"] == "not_checked", (name, check)
        assert "only stale files there, written before the engine started at" in check["message"], check
        assert f"{stale} (last written " in check["message"] and "another run's log" in check["message"], check
