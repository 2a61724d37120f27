"""A station marked `production: true` is spared the peak-load level of the sweep unless --allow-peak-load is given.

Served for real on loopback: a small OpenAI streaming server that counts the requests in flight at once.
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from golive_run import golive_run

from golive.endpoint.load import levels_to_run
from golive.site.loader import load_profile

REPO = Path(__file__).resolve().parents[2]
MODEL = "golive-reference"  # the reference-cpu profile's served name


def test_production_station_drops_the_top_level_unless_allowed():
    assert levels_to_run([8, 1, 4], production=True, allow_peak_load=False) == ([1, 4], [8])
    assert levels_to_run([8, 1, 4], production=True, allow_peak_load=True) == ([1, 4, 8], [])
    assert levels_to_run([8, 1, 4], production=False, allow_peak_load=False) == ([1, 4, 8], [])
    assert levels_to_run([1], production=True, allow_peak_load=False) == ([], [1])


class _Streaming(BaseHTTPRequestHandler):
    """/health, /v1/models and streamed chat answers of exactly max_tokens tokens, with usage and [DONE]."""

    def log_message(self, *args) -> None:
        pass

    def _json(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            return self._json({"object": "list", "data": [{"id": MODEL, "object": "model", "max_model_len": 4096}]})
        return self._json({})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if self.path != "/v1/chat/completions":
            self.send_response(404)
            self.send_header("Content-Length", "0")
            return self.end_headers()
        server = self.server
        with server.lock:
            server.in_flight += 1
            server.most = max(server.most, server.in_flight)
            server.chats += 1
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            n = body["max_tokens"]
            for i in range(n):
                chunk = {"choices": [{"index": 0, "delta": {"content": f"t{i} "}, "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
                time.sleep(0.01)  # requests overlap, as on a real server: the level sets how many are in flight
            usage = {"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": n, "total_tokens": 40 + n}}
            self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
            self.wfile.flush()
        finally:
            with server.lock:
                server.in_flight -= 1
        self.close_connection = True


@pytest.fixture
def streaming_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Streaming)
    server.daemon_threads = True
    server.lock, server.in_flight, server.most, server.chats = threading.Lock(), 0, 0, 0
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    "allow", [pytest.param(False, id="refused"), pytest.param(True, id="allowed", marks=pytest.mark.slow)]
)
def test_production_station_gets_peak_load_only_when_allowed(tmp_path, streaming_server, allow):
    port = streaming_server.server_address[1]
    (tmp_path / "inventory.yaml").write_text(
        f"profile: reference-cpu\nstations:\n  - name: live\n    endpoint: http://127.0.0.1:{port}/v1\n"
        f"    production: true\n"
    )
    out = tmp_path / "out"
    run = golive_run(
        tmp_path / "inventory.yaml",
        out,
        "-m",
        "perf",
        "-p",
        "no:cacheprovider",
        # the fake answers load, not questions, and has no /metrics: probes, prefill and the batch check
        # (vLLM's running count) and the path comparison (vLLM's own TTFT) are proven on the reference station
        "-k",
        "not correctness_under_load and not prefill and not held_back and not latency_is_vllms_own",
        *(["--allow-peak-load"] if allow else []),
        cwd=tmp_path,
        timeout=180,
    )
    result, results = run.proc, run.results
    checks = {c["nodeid"].split("::")[1].split("[")[0]: c for c in results["checks"]}
    peak = checks["test_peak_throughput_meets_floor"]
    # reference-cpu sweeps [1, 2, 4, 8] (batches added while a floor is undecided): never past the profile's bounds
    load = load_profile("reference-cpu").profile.load
    assert load is not None and 0 < streaming_server.chats <= load.max_requests
    if allow:
        assert result.returncode == 0, result.stdout[-3000:]
        assert peak["outcome"] == "not_applicable" and "measured, not judged" in peak["message"]  # a smoke floor
        # the peak level ran: more in flight than the refused run's cap (8 when the threads line up exactly)
        assert 4 < streaming_server.most <= 8
    else:
        assert result.returncode == 2, result.stdout[-3000:]  # INCOMPLETE: the peak is not checked
        assert peak["outcome"] == "not_checked"
        assert "production: true" in peak["message"] and "--allow-peak-load" in peak["message"]
        assert streaming_server.most <= 4  # the peak level (8 in flight) never ran
        # the reference profile gates at its top level: every check that reads it is not checked for the same reason
        for name, check in checks.items():
            assert check["outcome"] in ("passed", "not_applicable") or (
                check["outcome"] == "not_checked" and "--allow-peak-load" in check["message"]
            ), (name, check)
        assert checks["test_single_user_decode_meets_floor"]["outcome"] == "not_applicable"  # met, a smoke floor
