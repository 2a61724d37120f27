"""Day 2 against the real vLLM reference station: `golive profile capture` of the running station goes live on its
endpoint layer, and `golive watch` is scraped by a real Prometheus (Debian's package) that sees every series with
its labels, then sees the checks turn to 0 within one interval of the station being killed."""

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from golive.day2.light_checks import light_args
from golive_testbed.reference.launcher import ReferenceStation

REPO = Path(__file__).resolve().parents[2]
PORT = int(os.environ.get("GOLIVE_TEST_PORT", "8779"))
WATCH_PORT, PROMETHEUS_PORT = PORT + 1, PORT + 2  # the task's extra ports beside the station's
EVERY = 60
# the cheap endpoint subset: the watcher's light checks (those that declare a light cost: no sweep, batteries, needle,
# over-long prompt, tool_choice set or long prompt beside streams). The whole endpoint layer took 50 s on a quiet 2-core
# machine and over 20 min at load 20.
ENDPOINT_SUBSET = light_args({"endpoint"})


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    with ReferenceStation(port=PORT, log_path=tmp_path_factory.mktemp("logs") / "reference.log") as running:
        yield running


@pytest.fixture
def inventory(reference, tmp_path):
    path = tmp_path / "inventory.yaml"
    path.write_text(f"profile: reference-cpu\nstations:\n  - {{name: reference, endpoint: '{reference.base_url}'}}\n")
    return path


def golive(*args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "golive.cli", *args], capture_output=True, text=True, cwd=REPO, timeout=timeout
    )


@pytest.mark.slow  # the station's start and the endpoint subset: 1.5 min on a quiet machine, far more under load
def test_captured_reference_goes_live_on_its_endpoint(inventory, tmp_path):
    site = tmp_path / "site.yaml"
    captured = golive("profile", "capture", str(inventory), "-o", str(site))
    assert captured.returncode == 0, captured.stderr
    assert "extends reference-cpu: the station serves golive-reference" in captured.stdout
    text = site.read_text()
    assert text.count("\nextends: reference-cpu\n") == 1 and "Read from: station reference; endpoint http" in text
    out = tmp_path / "run"
    run = golive("run", str(inventory), "--profile", str(site), "-o", str(out), "-q", *ENDPOINT_SUBSET)
    results = json.loads((out / "results.json").read_text())
    assert run.returncode == 0 and results["verdict"] == "pass", run.stdout[-3000:]
    assert sum(c["outcome"] == "passed" for c in results["checks"]) >= 12


def query(expr: str) -> list[dict]:
    url = f"http://127.0.0.1:{PROMETHEUS_PORT}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return body["data"]["result"]


def wait_for(expr: str, seconds: float, what: str) -> list[dict]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            found = query(expr)
        except OSError:
            found = []
        if found:
            return found
        time.sleep(1)
    raise AssertionError(f"{what}: `{expr}` found nothing within {seconds:.0f} s")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("prometheus") is None,
    reason="prometheus not installed: `bash scripts/setup.sh` installs Debian's prometheus package",
)
def test_prometheus_scrapes_the_watcher_and_sees_a_killed_station(reference, inventory, tmp_path):
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 2s, evaluation_interval: 2s}\nscrape_configs:\n"
        f"  - job_name: golive\n    static_configs: [{{targets: ['127.0.0.1:{WATCH_PORT}']}}]\n"
    )
    watch_log, prometheus_log = open(tmp_path / "watch.log", "w"), open(tmp_path / "prometheus.log", "w")
    watcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "golive.cli",
            "watch",
            str(inventory),
            "--every",
            str(EVERY),
            "--listen",
            f"127.0.0.1:{WATCH_PORT}",
        ],
        stdout=watch_log,
        stderr=subprocess.STDOUT,
        cwd=REPO,
    )
    prometheus = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{PROMETHEUS_PORT}",
        ],
        stdout=prometheus_log,
        stderr=subprocess.STDOUT,
    )
    try:
        healthy = wait_for('golive_check_passed{job="golive",station="reference"}', EVERY + 90, "the first round")
        checks = {r["metric"]["check"]: r for r in healthy}
        assert "endpoint.liveness.one_token_canary_answers" in checks and "endpoint.liveness.health_ok" in checks
        assert all(r["metric"]["layer"] == "endpoint" and r["value"][1] == "1" for r in healthy), healthy
        for series in (
            "golive_canary_up",
            "golive_probe_ttft_seconds",
            "golive_probe_decode_tokens_per_second",
            "golive_station_kv_cache_usage_ratio",
            "golive_station_requests_running",
            "golive_station_requests_waiting",
            "golive_last_success_timestamp_seconds",
        ):
            [found] = query(f'{series}{{station="reference"}}')
            assert found["metric"]["instance"] == f"127.0.0.1:{WATCH_PORT}", found
        assert query('golive_canary_up{station="reference"}')[0]["value"][1] == "1"
        assert float(query('golive_probe_decode_tokens_per_second{station="reference"}')[0]["value"][1]) > 0

        reference.stop()
        killed = time.monotonic()
        down = wait_for('golive_canary_up{station="reference"} == 0', EVERY + 20, "the canary after the kill")
        assert down
        wait_for(
            'count(golive_check_passed{station="reference"} == 0) == count(golive_check_passed{station="reference"})',
            15,
            "every check at 0 after the kill",
        )
        took = time.monotonic() - killed
        assert took <= EVERY + 20, f"the kill showed after {took:.0f} s; one interval is {EVERY} s"
        assert (
            query('golive_check_passed{station="reference",check="endpoint.liveness.health_ok"}')[0]["value"][1] == "0"
        )
    finally:
        stop(watcher)
        stop(prometheus)
        watch_log.close()
        prometheus_log.close()
    assert "reference: " in (tmp_path / "watch.log").read_text()
