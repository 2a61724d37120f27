"""Long waits, on loopback: a station that answers /health and /v1/models but never finishes a generation. While a
check waits, golive says so on the terminal every few seconds (never a secret); `--max-run-time` stops the whole run:
the running check is stopped, the reports are written, INCOMPLETE, everything measured so far kept."""

import json
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from golive_run import golive_run

MODEL = "glm-5.3-flash"  # the shipped GB300 profile's served name
SECRET = "sk-golive-slow-7c2e11"
MODELS = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model", "max_model_len": 1048576}]}).encode()


class _Slow(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        body = MODELS if self.path == "/v1/models" else b""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        """17 * 23 is answered at once; every other generation never finishes (until the test ends)."""
        request = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if b"17 * 23" not in request:
            self.server.stop.wait(60)
            self.close_connection = True
            return
        body = json.dumps(
            {
                "id": "c1",
                "object": "chat.completion",
                "created": 0,
                "model": MODEL,
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "391"}}],
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def slow_station():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    server.daemon_threads = True
    server.stop = threading.Event()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.stop.set()
    server.shutdown()
    server.server_close()


def _run(tmp_path: Path, url: str, request_timeout_s: float, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    (tmp_path / "site.yaml").write_text(
        f"extends: glm-5.3-flash-gb300\nendpoint:\n  light_timeout_s: 2\n"
        f"  connect_timeout_s: 2\n  request_timeout_s: {request_timeout_s}\n"
    )
    (tmp_path / "inventory.yaml").write_text(
        f"profile: site.yaml\nstations:\n  - name: slow\n    endpoint: {url}\n    api_key_env: GOLIVE_SLOW_KEY\n"
    )
    started = time.monotonic()
    run = golive_run(
        tmp_path / "inventory.yaml",
        tmp_path / "out",
        "-m",
        "endpoint",
        "-p",
        "no:cacheprovider",
        *args,
        cwd=tmp_path,
        timeout=120,
        env={"GOLIVE_SLOW_KEY": SECRET},
    )
    return run.proc, time.monotonic() - started


def test_a_long_wait_shows_progress(tmp_path, slow_station):
    """A generation that takes long: a line every interval names the check, the URL and the time so far."""
    result, _ = _run(
        tmp_path,
        slow_station,
        4,
        "--golive-progress-s",
        "1",
        "-k",
        "test_chat_answers_and_stops or test_sales_question or test_models_lists_served_name",
    )
    output = result.stdout + result.stderr
    lines = [line for line in output.splitlines() if line.startswith("golive: still waiting:")]
    assert len(lines) >= 2, output[-3000:]
    # which check of how many, and the run's time left: the estimate's, at the pace of the check finished before it
    # the long check's first line (on a loaded machine the quick check before it may have had a line of its own)
    long_wait = next((line for line in lines if "(check 2 of 3)" in line), None)
    assert long_wait is not None, lines
    head, estimate = long_wait.split(" left in the run after this check ")
    assert head.startswith(
        f"golive: still waiting: test_sales_question_gets_trend_and_increase[slow] (check 2 of 3) "
        f"on {slow_station}, 1 s so far; one request may take 4 s (endpoint.request_timeout_s); "
    ), lines
    assert estimate.startswith("(1 more, estimated ") and " the 1 finished took " in estimate, lines
    assert result.returncode == 1 and "no answer within the timeout" in output, output[-3000:]  # the wait still ends
    assert SECRET not in output


def test_max_run_time_stops_the_run_and_keeps_what_was_measured(tmp_path, slow_station):
    """--max-run-time 5 against a generation that never ends: stopped at 5 s, exit 2, every report written, INCOMPLETE;
    the check that ran and the ones not reached are not checked, saying why; the check that passed before is kept."""
    result, took = _run(
        tmp_path,
        slow_station,
        60,
        "--max-run-time",
        "5",
        "--golive-progress-s",
        "0",
        "-k",
        "test_chat_answers_and_stops or test_sales_question or test_models_lists_served_name",
    )
    output = result.stdout + result.stderr
    assert result.returncode == 2, output[-3000:]
    assert took < 5 + 15, f"took {took:.0f} s"  # the bound, plus golive's start and writing the reports
    out = tmp_path / "out"
    results = json.loads((out / "results.json").read_text())
    assert results["verdict"] == "incomplete" and results["provenance"]["interrupted"] is True
    outcomes = {c["nodeid"].split("::")[-1].split("[")[0]: c for c in results["checks"]}
    assert outcomes["test_chat_answers_and_stops"]["outcome"] == "passed", outcomes
    bound = "not checked because the run's time bound (5 s, --max-run-time) was reached"
    stopped = outcomes["test_sales_question_gets_trend_and_increase"]
    unreached = outcomes["test_models_lists_served_name"]
    assert stopped["outcome"] == "not_checked" and stopped["message"] == bound + " while this check ran", stopped
    assert unreached["outcome"] == "not_checked" and unreached["message"] == bound, unreached
    assert "GO-LIVE: INCOMPLETE" in (out / "go-live.html").read_text() and (out / "junit.xml").exists()
    assert "golive: the run's time bound (5 s, --max-run-time) was reached" in output
    # Ctrl-C's ending is one golive line: no pytest banner, no library frame the interrupt landed in
    assert "KeyboardInterrupt" not in output and "site-packages" not in output, output[-3000:]
    assert "reports written, verdict INCOMPLETE (exit 2)" in output
    assert SECRET not in output


@pytest.mark.parametrize("value", ["0", "soon"])
def test_max_run_time_must_be_seconds_above_zero(tmp_path, value):
    result, _ = _run(tmp_path, "http://127.0.0.1:1/v1", 60, "--max-run-time", value)
    assert result.returncode == 4 and result.stderr.strip().count("\n") == 0, result.stdout[-2000:] + result.stderr
    assert "--max-run-time takes a number of seconds above 0" in result.stderr
