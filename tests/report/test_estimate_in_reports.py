"""Estimate vs actual in every report: the terminal, go-live.md, go-live.html and results.json say the same probe,
the same estimate and the same actual time. The station is a scripted OpenAI endpoint on loopback (a first token after
20 ms, then a token every 5 ms), so the probe measures something known and the run takes a few seconds."""

import html
import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from golive_run import golive_run

from golive.report.markdown import cell
from golive.report.model import EstimateRecord

MODEL = "golive-reference"  # reference-cpu's served name
TTFT_S, GAP_S = 0.02, 0.005


class _Scripted(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": MODEL, "max_model_len": 16384}]}).encode()
        self._send(200, "application/json", body if self.path == "/v1/models" else b"")

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        tokens = int(request.get("max_tokens") or 1)
        prompt = len(str(request["messages"][-1]["content"]).split())
        usage = {"prompt_tokens": prompt, "completion_tokens": tokens, "total_tokens": prompt + tokens}
        if not request.get("stream"):
            message = {"role": "assistant", "content": "OK"}
            body = {"id": "c", "object": "chat.completion", "created": 0, "model": MODEL, "usage": usage}
            body["choices"] = [{"index": 0, "finish_reason": "length", "message": message}]
            self._send(200, "application/json", json.dumps(body).encode())
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        time.sleep(TTFT_S)
        for n in range(tokens):
            if n:
                time.sleep(GAP_S)
            last = n == tokens - 1
            choice = {"index": 0, "delta": {"content": "x "}, "finish_reason": "length" if last else None}
            self._chunk({"id": "c", "object": "chat.completion.chunk", "model": MODEL, "choices": [choice]})
        self._chunk({"id": "c", "object": "chat.completion.chunk", "model": MODEL, "choices": [], "usage": usage})
        self._write(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, event: dict) -> None:
        self._write(f"data: {json.dumps(event)}\n\n".encode())

    def _write(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def scripted_station():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_every_report_shows_the_same_estimate_and_actual(tmp_path, scripted_station):
    (tmp_path / "inventory.yaml").write_text(
        f"profile: reference-cpu\nstations:\n  - {{name: scripted, endpoint: '{scripted_station}'}}\n"
    )
    run = golive_run(
        tmp_path / "inventory.yaml",
        tmp_path / "out",
        "-m",
        "endpoint",
        "-k",
        # a check whose time is a long prompt's prefill (its declared cost): the station is probed, long prompts too
        "test_health_endpoint_is_ok or test_models_lists_served_name or test_prefill_speed_at_long_prompts",
        "-p",
        "no:cacheprovider",
    )
    output = run.proc.stdout + run.proc.stderr
    assert run.results, output[-3000:]
    estimate = EstimateRecord.model_validate(run.results["estimate"])

    # the probe measured the script: first token ~20 ms, then a token every 5 ms (≤ 200 tok/s, less the loopback)
    (probe,) = estimate.probes
    assert probe.station == "scripted" and probe.problem is None, probe
    assert probe.ttft_s is not None and TTFT_S <= probe.ttft_s < 0.5, probe
    assert probe.decode_tok_s is not None and 20 < probe.decode_tok_s <= 1 / GAP_S * 1.05, probe
    assert probe.prefill_tok_s is not None and probe.prefill_tok_s > 0, probe
    assert 0 < estimate.expected_s <= estimate.upper_s <= 2.5 * estimate.expected_s + 0.1  # rounded to 0.1 s
    assert estimate.limit_s is not None and estimate.limit_s > estimate.upper_s
    assert estimate.actual_s is not None and 0 < estimate.actual_s < 120

    # said before the first check, from the same numbers results.json keeps
    before = next(line for line in output.splitlines() if "checks should take about" in line)
    assert output.index(before) < output.index("golive verdict"), output[-3000:]
    assert f"; measured: {probe.said()}; " in before

    # after the run, one sentence, the same in the terminal, go-live.md and go-live.html
    said = estimate.summary()
    assert re.match(r"took \d+ s; estimated \d+ s, at most \d+ s \(actual ÷ expected \d+\.\d\d\); measured: ", said)
    assert f"golive: {said}" in output.splitlines(), output[-3000:]
    markdown = (run.out / "go-live.md").read_text()
    assert f"| time | {said} |" in markdown, markdown[:1500]
    page = html.unescape((run.out / "go-live.html").read_text())
    assert f"Time: {said}</p>" in page


def test_quick_checks_alone_send_no_probe(tmp_path, scripted_station):
    """Only checks whose time is not the station's speed: no request is sent for the estimate, and its line says the
    numbers are the profile's."""
    (tmp_path / "inventory.yaml").write_text(
        f"profile: reference-cpu\nstations:\n  - {{name: scripted, endpoint: '{scripted_station}'}}\n"
    )
    run = golive_run(
        tmp_path / "inventory.yaml", tmp_path / "out", "-m", "endpoint", "-k", "test_health_endpoint_is_ok"
    )
    output = run.proc.stdout + run.proc.stderr
    assert run.results, output[-3000:]
    assert not EstimateRecord.model_validate(run.results["estimate"]).probes, run.results["estimate"]
    before = next(line for line in output.splitlines() if "should take about" in line)
    assert before.startswith("golive: 1 check should take about "), before  # one check, not "1 checks"
    assert "from the profile's floors (nothing probed)" in before, before


def test_a_failed_probe_says_no_time_in_every_report(tmp_path):
    """The endpoint refuses connections: the probe fails, so the first line promises no time for its checks (never
    hours at the profile's floors, for a run that ends in seconds), and every report says the same, once."""
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "inventory.yaml").write_text(
        f"profile: reference-cpu\nstations:\n  - {{name: down, endpoint: 'http://127.0.0.1:{port}/v1'}}\n"
    )
    run = golive_run(
        tmp_path / "inventory.yaml",
        tmp_path / "out",
        "-m",
        "endpoint",
        "-k",
        "endpoint.liveness.health_ok or endpoint.throughput or endpoint.context",
        "-p",
        "no:cacheprovider",
    )
    output = run.proc.stdout + run.proc.stderr
    assert run.results, output[-3000:]
    estimate = EstimateRecord.model_validate(run.results["estimate"])
    (probe,) = estimate.probes
    assert probe.failed and probe.problem is not None and probe.problem.startswith("probe failed ("), probe
    checks = len(run.results["checks"])
    assert (estimate.checks, estimate.not_estimated) == (checks, checks), estimate
    before = next(line for line in output.splitlines() if line.startswith(f"golive: {checks} checks"))
    assert before == f"golive: {checks} checks; no check estimated: down: {probe.problem}", before
    assert estimate.actual_s is not None and estimate.actual_s < 60
    said = estimate.summary()
    assert said.startswith("took ") and f"; no check estimated (down: {probe.problem})" in said, said
    assert " h " not in before + said and "estimated 1" not in said
    assert f"golive: {said}" in output.splitlines(), output[-3000:]
    assert f"| time | {cell(said)} |" in (run.out / "go-live.md").read_text()
    assert f"Time: {said}</p>" in html.unescape((run.out / "go-live.html").read_text())
