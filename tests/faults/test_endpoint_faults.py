"""Endpoint faults mid-run: an OpenAI-shaped loopback station that dies (its listener closed: refused from then on)
or cuts one streamed answer mid-way (a Content-Length it never fills) at a seeded random point. Never GO, never a
failure the same station does not have without the fault, every report written, one line naming the station and the
time where the station went away: "station S stopped answering over HTTP at HH:MM:SS (first seen by CHECK): …".

The point is the station's n-th request, drawn from the fault-free run's count. The reference vLLM station takes
minutes to start on CI's CPU, too long to restart at each point; this station
answers like a server without tool parsers (plain text), so the fault-free run has failures of its own to compare.
GOLIVE_FAULT_POINTS sets the points per fault (default 20).
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import cast

import pytest

from faults.test_fault_campaign import FAULT_SEED, LEAKS, POINTS, _outcomes, _reports

MODEL = "glm-5.3-flash"
CHECKS = "health or models or chat or canary or limits or reasoning or auth or smoke"
FAULTS = ("endpoint-dies", "stream-cut")
BUDGET_S = 120

pytestmark = pytest.mark.slow


class _Server(ThreadingHTTPServer):
    """The station's process: counts requests and injects its one fault at the seeded one."""

    daemon_threads = True

    def __init__(self, fault: str | None, fault_at: int):
        super().__init__(("127.0.0.1", 0), _Station)
        self.fault, self.fault_at = fault, fault_at
        self.cut_next, self.dead = False, False
        self.cuts = self.requests = 0
        self.lock = threading.Lock()


class _Station(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # a Content-Length the client holds the server to

    @property
    def station(self) -> _Server:
        return cast(_Server, self.server)

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        if self._fault():
            return None
        if self.path == "/health":
            return self._send(200, "application/json", b"")
        if self.path == "/v1/models":
            return self._send(
                200,
                "application/json",
                json.dumps(
                    {"object": "list", "data": [{"id": MODEL, "object": "model", "max_model_len": 1048576}]}
                ).encode(),
            )
        return self._send(404, "application/json", b'{"detail":"Not Found"}')

    def do_POST(self) -> None:
        if self._fault():
            return None
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if self.path != "/v1/chat/completions":
            return self._send(404, "application/json", b'{"detail":"Not Found"}')
        message = {"role": "assistant", "content": "Paris."}
        if body.get("stream"):
            chunk = {
                "id": "c1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": MODEL,
                "choices": [{"index": 0, "delta": message, "finish_reason": "stop"}],
            }
            kind, answer = "text/event-stream", f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
        else:
            kind, answer = (
                "application/json",
                json.dumps(
                    {
                        "id": "c1",
                        "object": "chat.completion",
                        "created": 0,
                        "model": MODEL,
                        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
                        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                    }
                ).encode(),
            )
        if self.station.cut_next:  # the answer stops half-way; the connection closes under it
            self.station.cut_next = False
            self.station.cuts += 1
            self._send(200, kind, answer[: len(answer) // 2], length=len(answer))
            self.close_connection = True
            return None
        return self._send(200, kind, answer)

    def _fault(self) -> bool:
        """Count this request; at the seeded one, inject the fault. True: this request gets no answer at all."""
        server = self.station
        with server.lock:
            server.requests += 1
            due = server.requests == server.fault_at
        if due and server.fault == "stream-cut":
            server.cut_next = True  # this answer (or the next chat's, for /health and /v1/models) is cut
        if due and server.fault == "endpoint-dies":
            server.dead = True
            threading.Thread(target=_die, args=(server,), daemon=True).start()
        if server.dead:  # the process is gone: every connection it held closes without an answer
            self.close_connection = True
            return True
        return False

    def _send(self, status: int, kind: str, body: bytes, length: int | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()


def _die(server: _Server) -> None:
    """The listener goes: connections are refused from now on."""
    server.shutdown()
    server.server_close()


def _serve(fault: str | None = None, fault_at: int = 0) -> _Server:
    server = _Server(fault, fault_at)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _run(out: Path, server: _Server) -> subprocess.Popen:
    out.mkdir(parents=True, exist_ok=True)
    (out / "site.yaml").write_text(
        "extends: glm-5.3-flash-gb300\nendpoint:\n  light_timeout_s: 2\n"
        "  connect_timeout_s: 1\n  request_timeout_s: 10\n  stream_stall_timeout_s: 10\n"
    )
    (out / "inventory.yaml").write_text(
        f"profile: site.yaml\nstations:\n  - name: text-only\n    endpoint: "
        f"http://127.0.0.1:{server.server_address[1]}/v1\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "golive.cli",
            "run",
            str(out / "inventory.yaml"),
            "-o",
            str(out / "reports"),
            "-m",
            "endpoint",
            "-k",
            CHECKS,
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


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    out = tmp_path_factory.mktemp("endpoint-baseline")
    server = _serve()
    try:
        output, _ = _run(out, server).communicate(timeout=BUDGET_S + 60)
    finally:
        server.shutdown()
        server.server_close()
    results = _reports(out)
    outcomes = _outcomes(results)
    assert "failed" in outcomes.values() and "passed" in outcomes.values(), output[-3000:]
    assert "not_checked" not in outcomes.values(), output[-3000:]
    assert server.requests, output[-3000:]
    return outcomes, server.requests


@pytest.mark.parametrize(("fault", "index"), [(f, i) for f in FAULTS for i in range(POINTS)], ids=str)
def test_endpoint_fault_mid_run_never_blames_the_station(baseline, tmp_path, fault, index):
    outcomes, requests = baseline
    rng = random.Random(f"{FAULT_SEED}-{fault}-{index}")
    fault_at = rng.randint(1, requests)  # the point: the station's n-th request of the run
    server = _serve(fault, fault_at)
    started = time.monotonic()
    try:
        output, _ = _run(tmp_path, server).communicate(timeout=BUDGET_S + 60)
    finally:
        server.shutdown()
        server.server_close()
    injected = server.requests >= fault_at
    took = time.monotonic() - started
    where = f"{fault} at request {fault_at} of {requests} (seed {FAULT_SEED}-{fault}-{index})"
    assert took < BUDGET_S + 60, where
    assert not any(leak in output for leak in LEAKS), f"{where}\n{output[-3000:]}"
    results = _reports(tmp_path)
    got = _outcomes(results)
    blamed = {n for n, o in got.items() if o == "failed" and outcomes.get(n) != "failed"}
    assert not blamed, f"{where}: blamed the station for {blamed}\n{output[-3000:]}"
    assert results["verdict"] != "pass", where  # the fault-free run fails already: never GO
    lost = {c["message"] for c in results["checks"] if "stopped answering" in c.get("message", "")}
    for line in lost:
        assert line.startswith("station text-only stopped answering over HTTP at ")
        assert re.search(r"\(first seen by (test_\w+|the estimate's probe)\)", line), line
        assert "\n" not in line, line
    if fault == "endpoint-dies" and injected and len(lost) > 0:
        assert len(lost) == 1, lost  # one line on every check after the first that met it
    print(
        f"campaign-result: {fault} text-only n={fault_at}/{requests} injected={injected} cut={server.cuts} "
        f"verdict={results['verdict']} lost={sum(o == 'not_checked' for o in got.values())} took={took:.1f}"
    )
