"""Hostile inputs that are not an endpoint: YAML bombs, files past golive's size and depth caps, a profile that is a
FIFO, a report folder on a 64 KiB file system, an sshd frozen mid-run. Each ends in one line with the exit code its
kind earns, bounded in time and memory as measured from golive's process."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile_judge import LEAKS, PEAK_RSS_MIB, checks_of, judge

from golive_testbed.hostile import KEY_ENV, HostileStation, Measured, golive_command, hostile_files, measured
from golive_testbed.sshd import Sshd, available, loopback_sshd

REPO = Path(__file__).resolve().parents[2]
FILE_PEAK_RSS_MIB = 150  # golive's own start is ~40 MiB: a refused file costs a few more, never its expansion
FILE_EXTRA_S = 1.0  # what refusing a hostile file may add to golive's start (a missing file's run, measured beside)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    return hostile_files(tmp_path_factory.mktemp("hostile-files"))


def _quicker(command: list[str], cwd: Path) -> Measured:
    """The quicker of two runs of `command` (a shared machine's noise comes on top of a run, never off it)."""
    runs = [measured(command, cwd=cwd, timeout=60) for _ in range(2)]
    assert runs[0].code == runs[1].code, [r.output for r in runs]
    return min(runs, key=lambda r: r.wall_s)


@pytest.mark.parametrize(
    "name, says",
    [
        ("billion-laughs-yaml", "laughs.yaml:6: expands to 597,871 values, more than golive reads (100,000"),
        ("deep-flow-yaml", "deep.yaml:1: nested deeper than golive reads (64 levels"),
        ("deep-block-yaml", "deep-block.yaml:65: nested deeper than golive reads (64 levels"),
        ("50mb-yaml", "big.yaml: 52,"),
        ("fifo-profile", "profile-fifo.yaml: not a regular file"),
    ],
)
def test_a_hostile_file_is_one_line_exit_4_at_once(tmp_path, files, name, says):
    """A YAML bomb (7 levels of aliases in 500 bytes), 100,000 levels of flow nesting, 200 of block nesting, a
    50 MB inventory, a profile that is a FIFO (a read would never end): one line, exit 4, no report, within a second
    of golive's own start (a missing inventory's run, measured beside it), a few MiB of memory."""
    start = _quicker(golive_command("run", tmp_path / "absent.yaml", "-o", tmp_path / "out"), tmp_path)
    assert start.code == 4, start.output
    start_cost = start.wall_s
    run = _quicker(golive_command("run", files[name], "-o", tmp_path / "out"), files[name].parent)
    assert run.killed_for is None and run.code == 4, run.output
    assert run.output.count("\n") == 1 and run.output.startswith("golive: ") and says in run.output, run.output
    assert not any(leak in run.output for leak in LEAKS), run.output
    assert run.wall_s <= start_cost + FILE_EXTRA_S, f"{run.wall_s:.2f} s, golive's start {start_cost:.2f} s"
    assert run.peak_rss_mib <= FILE_PEAK_RSS_MIB, f"{run.peak_rss_mib:.0f} MiB"
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@contextlib.contextmanager
def _tiny_file_system(where: Path, size: str = "64k") -> Iterator[Path]:
    """A tmpfs of `size` mounted at `where` (root only), unmounted and removed after."""
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
        where.rmdir()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a 64 KiB tmpfs needs root")
def test_a_full_disk_is_one_line_exit_2_and_leaves_nothing(tmp_path):
    """`-o` on a 64 KiB file system, 40 KiB of it taken (results.json fits, go-live.html does not): one line naming
    the folder and ENOSPC, exit 2, no report and no temporary file left there, no traceback; nothing claimed."""
    with HostileStation("healthy", key="sk-disk-1") as station, _tiny_file_system(tmp_path / "full") as full:
        (full / "ballast").write_bytes(bytes(40 * 1024))
        inventory = tmp_path / "inventory.yaml"
        inventory.write_text(
            f"profile: glm-5.3-flash-gb300\nstations:\n  - {{name: a, endpoint: '{station.url}', "
            f"api_key_env: {KEY_ENV}}}\n"
        )
        run = measured(
            golive_command("run", inventory, "-o", full, "-m", "endpoint", "-k", "test_health_endpoint_is_ok"),
            env={KEY_ENV: "sk-disk-1"},
            cwd=tmp_path,
            timeout=120,
        )
        left = sorted(os.listdir(full))
    assert run.killed_for is None and run.code == 2, run.output[-3000:]
    [line] = [line for line in run.output.splitlines() if "could not be written" in line]
    assert line.startswith(f"golive: the reports could not be written to {full}: No space left on device (ENOSPC)")
    assert "verdict INCOMPLETE (exit 2)" in line, line
    assert left == ["ballast"], left
    assert "golive: wrote" not in run.output and not any(leak in run.output for leak in LEAKS), run.output[-3000:]
    assert run.peak_rss_mib <= PEAK_RSS_MIB


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _commands_served(sshd: Sshd) -> int:
    """Commands sshd started so far (one session each over golive's ssh master: sshd logs each at INFO)."""
    text = sshd.log.read_text() if sshd.log.exists() else ""
    return text.count("Starting session:")


def _freeze_once_serving(sshd: Sshd, frozen: threading.Event, give_up: float, after: int = 30) -> None:
    """SIGSTOP the sshd (listener and every session) once it has served `after` of golive's commands: mid-run, over
    an established ssh master (the issue froze it after golive's 10th command; here a few checks in)."""
    while time.monotonic() < give_up and _commands_served(sshd) < after:
        time.sleep(0.02)
    from golive_testbed.sshd import descendants

    for pid in [sshd.pid, *descendants(sshd.pid)]:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGSTOP)
    frozen.set()


@pytest.mark.slow
@pytest.mark.skipif(available() is not None, reason=str(available()))
def test_a_frozen_sshd_ends_at_its_timeout_and_the_rest_goes_on(tmp_path):
    """Two stations over real sshds; one sshd frozen (SIGSTOP: listener and sessions) once golive is connected: that
    station's checks end within about its connect timeout (ssh's keepalives go unanswered), not checked with ssh's
    own line; the other station is checked to the end; exit 2 (INCOMPLETE), banner and reports agree, within the
    run's announced limit."""
    from golive_testbed.targets import build_station_trees

    tree = build_station_trees()["gb300-healthy"]
    (tmp_path / "site.yaml").write_text(
        f"extends: {REPO / 'fixtures' / 'profiles' / 'gb300-site.yaml'}\nhost:\n  connect_timeout_s: 3\n"
    )
    out = tmp_path / "out"
    with (
        loopback_sshd(_free_port(), tree=tree, alias="frozen") as frozen_sshd,
        loopback_sshd(_free_port(), tree=tree, alias="alive", client_key=None) as alive_sshd,
    ):
        (tmp_path / "ssh_config").write_text(frozen_sshd.host_block + alive_sshd.host_block)
        (tmp_path / "inventory.yaml").write_text(
            f"profile: site.yaml\nssh_config: ssh_config\nstations:\n"
            f"  - {{name: frozen, role: a, host: '{frozen_sshd.spec}', phase: serving}}\n"
            f"  - {{name: alive, role: a, host: '{alive_sshd.spec}', phase: serving}}\n"
        )
        frozen = threading.Event()
        freezer = threading.Thread(
            target=_freeze_once_serving, args=(frozen_sshd, frozen, time.monotonic() + 60), daemon=True
        )
        freezer.start()
        run = measured(
            golive_command("run", tmp_path / "inventory.yaml", "-o", out, "-m", "host", "--max-run-time", "120"),
            cwd=tmp_path,
            timeout=200,
        )
        freezer.join(5)
        with contextlib.suppress(OSError):  # let it go, so that it can be stopped
            for pid in [frozen_sshd.pid]:
                os.kill(pid, signal.SIGCONT)
    assert frozen.is_set(), "golive never connected to the station to freeze"
    results = judge(run, out, code=2, wall_s=120 + 10)
    checked = checks_of(results, "frozen").values()
    stopped = [c for c in checked if c["outcome"] == "not_checked"]
    assert any(c["outcome"] == "passed" for c in checked), "the station was frozen before any check ran"
    assert stopped and all("stopped answering over ssh" in c["message"] for c in stopped), stopped
    alive = checks_of(results, "alive")
    assert alive and all(c["outcome"] != "not_checked" for c in alive.values()), alive


@pytest.mark.parametrize(
    "name, write, says",
    [
        ("deep", lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "JSON nested deeper than golive's cap of 64"),
        ("device", None, "/dev/zero: not a regular file"),
    ],
)
def test_a_hostile_baseline_is_one_line_exit_4(tmp_path, name, write, says):
    """`--baseline` is an input like the inventory: a results.json nested 100,000 levels deep, or /dev/zero (a read
    that never ends): one line, exit 4, at once."""
    baseline = Path("/dev/zero") if write is None else tmp_path / "results.json"
    if write is not None:
        write(baseline)
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("profile: glm-5.3-flash-gb300\nstations: [{name: a, endpoint: 'http://127.0.0.1:1/v1'}]\n")
    run = measured(golive_command("run", inventory, "--baseline", baseline, "-o", tmp_path / "out"), timeout=60)
    assert run.killed_for is None and run.code == 4, run.output
    assert run.output.count("\n") == 1 and says in run.output and run.output.startswith("golive: --baseline")
    assert run.peak_rss_mib <= FILE_PEAK_RSS_MIB, run.peak_rss_mib
