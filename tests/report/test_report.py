"""The go-live report as an operator sees it (headless Chromium), and reports that survive an interrupted run."""

import json
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from e2e import needs_chroot
from golive_run import golive_run, golive_started

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


# Chromium's own service traffic (updates, clock, accounts), never the page's: everything else the page asked for
BROWSER_HOSTS = re.compile(r"^https?://([a-z0-9-]+\.)*(google\.com|googleapis\.com|gvt1\.com|gstatic\.com)/")


def chromium_dom(html: Path, tmp_path: Path) -> str:
    """The DOM after pytest-html's scripts ran, as headless Chromium renders it; the page made no network request and
    logged nothing to the console (the report opens offline, without errors)."""
    assert CHROMIUM is not None  # its callers skip without it
    net_log = tmp_path / "chromium-net.json"
    result = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'chromium'}",
            "--virtual-time-budget=3000",
            "--enable-logging=stderr",
            "--v=0",
            f"--log-net-log={net_log}",
            "--dump-dom",
            html.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    requested = set(re.findall(r'"url":"([^"]+)"', net_log.read_text()))
    assert {url for url in requested if not BROWSER_HOSTS.match(url)} == set()
    assert [line for line in result.stderr.splitlines() if ":CONSOLE" in line] == []
    return result.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/setup.sh installs it)")
@needs_chroot
def test_failed_run_renders_verdict_fix_list_and_table(tmp_path):
    from golive_testbed.targets import build_station_trees

    build_station_trees()
    run = golive_run(REPO / "fixtures/inventories/hbm-filepages-high.yaml", tmp_path, "-m", "host", "-q")
    assert run.code == 1 and run.results["verdict"] == "fail", run.output  # the tree breaks one check: NO-GO
    dom = chromium_dom(tmp_path / "go-live.html", tmp_path)
    assert 'id="golive-verdict"' in dom and "GO-LIVE: NO-GO" in dom
    body = dom[dom.index("<body>") + len("<body>") :].lstrip()
    assert body.startswith('<div class="golive-summary" id="golive-summary">')  # the verdict is the page's first thing
    assert body.index('id="golive-verdict"') < body.index('id="title"') < body.index('id="environment"')
    assert 'id="golive-provenance"' in dom and "tool-call-parser" in dom
    assert "Fix before go-live (1)" in dom and "holds 150.0 GiB of page cache" in dom
    assert "numactl --membind=0" in dom
    # pytest-html builds the results table with JavaScript: rows exist only if the page really rendered
    assert dom.count('<tbody class="results-table-row failed"') == 1
    rows = ('<tbody class="results-table-row passed"', '<tbody class="results-table-row skipped"')
    assert sum(dom.count(row) for row in rows) == len(run.checks) - 1 >= 18  # every other host check, one row each
    junit = (tmp_path / "junit.xml").read_text()
    assert 'failures="1"' in junit and "holds 150.0 GiB of page cache" in junit


def _silent_server() -> tuple[socket.socket, int, list]:
    """A loopback server that accepts and never answers: a hung station."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held = []

    def accept():
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return server, server.getsockname()[1], held


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_run_still_writes_every_report(tmp_path, signum):
    """Ctrl-C, or SIGTERM (a cancelled CI job, `kill`), while a check waits on a hung station: INCOMPLETE reports."""
    server, port, held = _silent_server()
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        f"profile: reference-cpu\nstations:\n  - {{name: hung, endpoint: 'http://127.0.0.1:{port}/v1'}}\n"
    )
    out = tmp_path / "out"
    proc = golive_started("run", inventory, "-o", out, "-m", "endpoint")
    try:
        deadline = time.monotonic() + 120
        while not held and time.monotonic() < deadline:  # until a check is waiting on the hung station
            time.sleep(0.2)
        time.sleep(1)
        proc.send_signal(signum)
        output, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
        server.close()
    assert proc.returncode == 2, output
    results = json.loads((out / "results.json").read_text())
    assert results["verdict"] == "incomplete" and results["provenance"]["interrupted"] is True
    assert "GO-LIVE: INCOMPLETE" in (out / "go-live.html").read_text()
    assert (out / "junit.xml").exists()
