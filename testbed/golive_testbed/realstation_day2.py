"""Day 2 on a real station (golive_testbed.realstation): what its tests do to it after go-live and how they watch it.

Real restarts: a runtime drop-in that shortens RestartSec for a test (in /run, so a reboot drops it too; `restore`
removes it), the serving container killed through the station's Docker engine (`docker kill`: it exits 137, systemd
restarts it), systemd's own NRestarts and ActiveState read with `systemctl show`. `restore` brings the station back to
healthy and serving: the drop-in gone, `systemctl reset-failed` (it also clears the start-limit counter and NRestarts),
the unit started, /health 200. `Watch` runs `golive watch` against the station, `Prometheus` a real Prometheus (the
distribution's binary, loopback only, its own temp dir) scraping it with golive's alert rules. Test machinery: none of
this is in golive.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

from golive_testbed.realstation_files import CONTAINER, UNIT
from golive_testbed.realstation_host import Record, StationError, docker, free_port, http_status, serving_now, ssh

T = TypeVar("T")
TEST_DROPIN = f"/run/systemd/system/{UNIT}.d/zz-golive-test-restart-sec.conf"


def unit_show(record: Record, *props: str) -> dict[str, str]:
    """`systemctl show UNIT -p …` in the station: {property: value}."""
    text = ssh(record, f"systemctl show {UNIT} " + " ".join(f"-p {p}" for p in props)).stdout
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def restarts(record: Record) -> int:
    return int(unit_show(record, "NRestarts")["NRestarts"])


def shorten_restart_sec(record: Record, seconds: int) -> None:
    """A runtime drop-in (TEST_DROPIN) with RestartSec=`seconds`, systemd reloaded: the recipe's 60 s would make a
    test wait a minute per restart. `restore` removes it."""
    ssh(
        record,
        f"mkdir -p {Path(TEST_DROPIN).parent} && printf '# golive self-test: restarts without the 60 s wait; "
        f"removed after the test\\n[Service]\\nRestartSec={seconds}\\n' > {TEST_DROPIN} && systemctl daemon-reload",
    )


def remove_test_dropin(record: Record) -> None:
    ssh(record, f"rm -f {TEST_DROPIN} && systemctl daemon-reload")


def wait(what: str, ready: Callable[[], T | None], timeout: float, every: float = 0.5) -> T:
    """`ready()` until it returns something true (a non-empty list, True, …); after `timeout` a StationError naming
    `what`."""
    deadline = time.monotonic() + timeout
    while True:
        got = ready()
        if got:  # an empty answer (a query with no series yet) is not ready
            return got
        if time.monotonic() > deadline:
            raise StationError(f"{what}: not within {timeout:.0f} s")
        time.sleep(every)


def container_running(record: Record) -> bool:
    done = docker(record, "inspect", "--format", "{{.State.Running}}", CONTAINER, check=False, timeout=30)
    return done.stdout.strip() == "true"


def kill_container(record: Record, timeout: float = 120) -> dict[str, str]:
    """Wait until systemd's container runs, `docker kill` it through the station's engine, and wait until systemd
    has acted on it: the unit `failed` (the start limit), or NRestarts one higher and the restart job past its
    start-limit test. Returns NRestarts, ActiveState, SubState and Result after."""
    try:
        wait(f"container {CONTAINER} running", lambda: container_running(record), timeout)
    except StationError as gone:  # say what systemd did instead: a failed prestart, the start limit, …
        shown = unit_show(record, "NRestarts", "ActiveState", "SubState", "Result")
        journal = ssh(record, f"journalctl -u {UNIT} --no-pager -n 25", check=False).stdout
        raise StationError(f"{gone}; {UNIT}: {shown}; its journal:\n{journal}") from gone
    before = restarts(record)
    docker(record, "kill", CONTAINER)

    def acted() -> dict[str, str] | None:
        shown = unit_show(record, "NRestarts", "ActiveState", "SubState", "Result")
        if shown["ActiveState"] == "failed":
            return shown
        # systemd counts NRestarts when it queues the restart job and stays in `auto-restart` (252; 254 adds
        # `auto-restart-queued`) until the job runs: only then does the start limit let it start or fail the unit
        # (service_enter_restart, service_start in src/core/service.c)
        settled = not shown["SubState"].startswith("auto-restart")
        return shown if int(shown["NRestarts"]) > before and settled else None

    return wait(f"systemd acting on the killed {CONTAINER}", acted, timeout)


def restore(record: Record, timeout: float = 600) -> float:
    """Back to healthy and serving: the test drop-in removed, reset-failed, the unit started, /health 200; returns
    the seconds it took."""
    started = time.monotonic()
    ssh(
        record,
        f"rm -f {TEST_DROPIN}; systemctl daemon-reload && systemctl reset-failed {UNIT}; "
        f"systemctl is-active --quiet {UNIT} || systemctl start {UNIT}",
        timeout=120,
    )
    wait(f"{UNIT} serving again", lambda: serving_now(record), timeout, every=1)
    return time.monotonic() - started


def host_inventory(record: Record, path: Path) -> Path:
    """An inventory of the station's host only (its profile and ssh_config): what `golive watch` reads over ssh."""
    path.write_text(
        f"profile: {record.dir / 'site-profile.yaml'}\nssh_config: {record.ssh_config}\nstations:\n"
        f"  - {{name: {record.name}, role: a, host: '{record.host}', phase: serving}}\n"
    )
    return path


def _stop(proc: subprocess.Popen[bytes], log: IO[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    log.close()


class Watch:
    """`golive watch INVENTORY --every N --listen 127.0.0.1:PORT` in the background, its output in `log`."""

    def __init__(self, inventory: Path, every_s: float, log: Path):
        self.port = free_port()
        self.log = log
        self._out = open(log, "wb")  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "golive.cli", "watch", str(inventory), "--every", f"{every_s:g}"]
            + ["--listen", f"127.0.0.1:{self.port}"],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        _stop(self.proc, self._out)

    def text(self) -> str:
        return self.log.read_text(errors="replace")


class Prometheus:
    """Debian's `prometheus` on a free loopback port, its config and storage in `folder`: scraping `targets` every
    `interval_s`, evaluating `rule_files` (as given: unmodified) as often."""

    def __init__(self, folder: Path, targets: list[str], rule_files: list[Path], interval_s: float = 1):
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        config = folder / "prometheus.yml"
        config.write_text(
            f"global: {{scrape_interval: {interval_s:g}s, evaluation_interval: {interval_s:g}s}}\n"
            f"rule_files: {json.dumps([str(p) for p in rule_files])}\n"
            "scrape_configs:\n"
            f"  - job_name: golive\n    static_configs: [{{targets: {json.dumps(targets)}}}]\n"
        )
        check = subprocess.run(["promtool", "check", "config", str(config)], capture_output=True, text=True)
        if check.returncode != 0:
            raise StationError(f"promtool check config: {(check.stdout + check.stderr).strip()[-500:]}")
        self._out = open(folder / "prometheus.log", "wb")  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={folder / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        wait("prometheus ready", lambda: http_status(f"http://127.0.0.1:{self.port}/-/ready") == 200, 60)

    def api(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 - a loopback URL built here
            body = json.loads(answer.read())
        if body.get("status") != "success":
            raise StationError(f"prometheus {path}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.api("query", query=expr)["result"]
        return result

    def alerts(self, name: str, state: str = "firing") -> list[dict[str, Any]]:
        return [a for a in self.api("alerts")["alerts"] if a["labels"]["alertname"] == name and a["state"] == state]

    def stop(self) -> None:
        _stop(self.proc, self._out)
