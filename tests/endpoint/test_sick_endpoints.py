"""Sick endpoints, served for real on loopback: golive fails fast with ONE clear failure, never a traceback."""

import json
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from golive_run import golive_run

from golive.endpoint.client import EndpointClient
from golive.endpoint.errors import EndpointError
from golive.endpoint.target import EndpointTarget

REPO = Path(__file__).resolve().parents[2]
MODEL = "glm-5.3-flash"  # the shipped GB300 profile's served name
SECRET = "sk-golive-test-4f1d9c"
PASSWORD = "hunter2-station-pw"

HEALTHY_MODELS = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model", "max_model_len": 1048576}]})


def _answer(kind: str, status: int, content_type: str, body: bytes):
    def handle(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return kind, handle


LOGIN = b"<!DOCTYPE html><html><head><title>Sign in</title></head><body><form>login</form></body></html>"
BEHAVIOURS = dict(
    [
        _answer("not-openai", 404, "text/html", b"<html><body><h1>404 Not Found</h1></body></html>"),
        _answer("bad-gateway", 502, "text/html", b"<html><body>502 Bad Gateway</body></html>"),
        _answer("login-page", 200, "text/html; charset=utf-8", LOGIN),
    ]
)


class _SickServer(ThreadingHTTPServer):
    behaviour: str  # which sickness _Handler plays (a key of BEHAVIOURS)


class _Handler(BaseHTTPRequestHandler):
    server: _SickServer

    behaviour = "healthy"

    def log_message(self, *args) -> None:  # keep the test output clean
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.body = json.loads(self.rfile.read(length) or b"{}")
        self._serve()

    def _serve(self) -> None:
        kind = self.server.behaviour
        if kind in BEHAVIOURS:
            return BEHAVIOURS[kind](self)
        if self.path == "/health":
            return _answer("", 200, "application/json", b"")[1](self)
        if self.path == "/v1/models":
            if kind == "truncated-json":
                return _answer("", 200, "application/json", HEALTHY_MODELS[:40].encode())[1](self)
            return _answer("", 200, "application/json", HEALTHY_MODELS.encode())[1](self)
        if self.path == "/v1/chat/completions" and kind.startswith("sse-"):
            return self._stream(kind)
        if self.path == "/v1/chat/completions" and kind == "text-only":
            return self._text_only()
        return _answer("", 404, "application/json", b'{"detail":"Not Found"}')[1](self)

    def _text_only(self) -> None:
        """A server that answers every chat in plain text: never a tool call, streamed or not."""
        message = {"role": "assistant", "content": "I cannot call tools."}
        if not self.body.get("stream"):
            body = {
                "id": "c1",
                "object": "chat.completion",
                "created": 0,
                "model": MODEL,
                "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
            return _answer("", 200, "application/json", json.dumps(body).encode())[1](self)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunk = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": MODEL,
            "choices": [{"index": 0, "delta": message, "finish_reason": "stop"}],
        }
        self.wfile.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())
        self.close_connection = True

    def _stream(self, kind: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        delta = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": MODEL,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}, "finish_reason": None}],
        }
        self.wfile.write(f"data: {json.dumps(delta)}\n\n".encode())
        if kind == "sse-cut-mid-event":
            self.wfile.write(b'data: {"id": "c1", "object": "chat.completion.chu')
        elif kind == "sse-stall":
            self.wfile.flush()
            time.sleep(5)
        self.wfile.flush()  # sse-no-done: the stream simply ends, no finish_reason, no [DONE]
        self.close_connection = True


@pytest.fixture
def serve():
    servers = []

    def start(behaviour: str) -> str:
        server = _SickServer(("127.0.0.1", 0), _Handler)
        server.behaviour = behaviour
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def silent_listener():
    """Accepts TCP connections (the kernel does) and never answers a byte."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_golive(
    tmp_path: Path, endpoint: str, *extra: str, host: str | None = None
) -> tuple[subprocess.CompletedProcess, dict, float]:
    (tmp_path / "site.yaml").write_text(
        "extends: glm-5.3-flash-gb300\nendpoint:\n  light_timeout_s: 1\n  connect_timeout_s: 1\n"
    )
    station = f"  - name: sick\n    endpoint: {endpoint}\n    api_key_env: GOLIVE_SICK_KEY\n"
    if host:
        station += f"    host: {host}\n"
    (tmp_path / "inventory.yaml").write_text(f"profile: site.yaml\nstations:\n{station}")
    started = time.monotonic()
    run = golive_run(
        tmp_path / "inventory.yaml",
        tmp_path / "out",
        "-m",
        "endpoint",
        "-p",
        "no:cacheprovider",
        *extra,
        cwd=tmp_path,
        env={"GOLIVE_SICK_KEY": SECRET},
    )
    return run.proc, run.results, time.monotonic() - started


def _failed(results: dict) -> list[dict]:
    return [c for c in results["checks"] if c["outcome"] == "failed"]


@pytest.mark.parametrize(
    "target,check,expected",
    [
        ("refused", "test_health_endpoint_is_ok", "connection failed"),
        pytest.param("dns", "test_health_endpoint_is_ok", "does not resolve", marks=pytest.mark.slow),
        ("silent", "test_health_endpoint_is_ok", "no answer within the timeout"),
        pytest.param(
            "not-openai",
            "test_health_endpoint_is_ok",
            "HTTP 404, content type text/html, body starts '<html>",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            "bad-gateway", "test_health_endpoint_is_ok", "HTTP 502, content type text/html", marks=pytest.mark.slow
        ),
        ("login-page", "test_auth_matches_profile", "an HTML page answered"),
        pytest.param(
            "truncated-json", "test_models_lists_served_name", "the answer is not JSON", marks=pytest.mark.slow
        ),
    ],
)
def test_sick_endpoint_is_one_clear_failure(tmp_path, serve, silent_listener, target, check, expected):
    """One failure names the URL and what came back; every dependent check is not checked; no traceback; fast."""
    url = {
        "refused": f"http://127.0.0.1:{_closed_port()}",
        "dns": "http://golive-no-such-station.invalid:8000",
        "silent": silent_listener,
    }.get(target) or serve(target)
    result, results, took = run_golive(tmp_path, url)
    output = result.stdout + result.stderr
    # never reached (refused, DNS): the health check is not checked and the run INCOMPLETE; reached but sick: NO-GO
    unreachable = target in ("refused", "dns")
    assert result.returncode == (2 if unreachable else 1), output[-3000:]
    [one] = [
        c
        for c in results["checks"]
        if c["outcome"] == ("not_checked" if unreachable else "failed")
        and c["nodeid"].split("::")[-1].split("[")[0] == check
    ]
    message = one["message"]
    assert url.removesuffix("/v1") in message and expected in message and message.count("Do: ") == 1, message
    assert unreachable or one["finding"]["fix"], one
    assert len(message) < 800, message
    others = [c for c in results["checks"] if c["outcome"] not in ("failed", "passed") and c is not one]
    assert others and all(c["outcome"] in ("not_checked", "not_applicable") for c in others)
    assert all(
        "not checked because" in c["message"] or "see the" in c["message"]
        for c in others
        if c["outcome"] == "not_checked"
    ), others
    failed_checks = [c["nodeid"].split("::")[-1].split("[")[0] for c in _failed(results)]
    assert failed_checks == ([] if unreachable else [check]), failed_checks
    for text in (output, json.dumps(results), (tmp_path / "out" / "junit.xml").read_text()):
        assert "Traceback" not in text and "httpx." not in text and SECRET not in text
    assert took < 60, f"a sick endpoint took {took:.0f}s"  # silent: light checks bounded by light_timeout_s=1


def test_silent_listener_fails_light_call_within_its_timeout(silent_listener):
    client = EndpointClient(
        EndpointTarget(silent_listener, api_key="k", request_timeout_s=120, connect_timeout_s=1, light_timeout_s=1)
    )
    started = time.monotonic()
    with pytest.raises(EndpointError, match="no answer within the timeout"):
        client.models()
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    "behaviour,expected",
    [
        ("sse-no-done", "the stream ended before the answer did"),
        ("sse-cut-mid-event", "the stream ended before the answer did"),
        ("sse-stall", "no answer within the timeout"),
    ],
)
def test_broken_stream_is_one_clear_error(serve, behaviour, expected):
    """A stream without [DONE], cut mid-event, or stalled mid-answer: one EndpointError naming the URL."""
    url = serve(behaviour) + "/v1"
    client = EndpointClient(
        EndpointTarget(
            url, api_key=SECRET, request_timeout_s=120, connect_timeout_s=1, light_timeout_s=1, stream_stall_timeout_s=1
        )
    )
    started = time.monotonic()
    with pytest.raises(EndpointError) as caught:
        client.chat(MODEL, [{"role": "user", "content": "Hi"}], stream=True)
    text = str(caught.value)
    assert expected in text and url in text and "Do: " in text and SECRET not in text, text
    assert time.monotonic() - started < 4


def test_unknown_option_is_usage_error_and_claims_no_report(tmp_path, serve):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "results.json").write_text("{}")  # left over from an earlier run
    result, _, _ = run_golive(tmp_path, serve("healthy"), "--json", "x.json")
    assert result.returncode == 4 and "wrote" not in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_no_secret_in_any_output(tmp_path, serve):
    """The API key (env) and an ssh password in a host spec appear in no terminal output, results.json or JUnit."""
    url = serve("not-openai")
    result, results, _ = run_golive(tmp_path, url, host=f"ssh://admin:{PASSWORD}@127.0.0.1:1")
    assert result.returncode == 1
    assert results["stations"][0]["host"] == "ssh://admin:***@127.0.0.1:1"
    for text in (
        result.stdout + result.stderr,
        json.dumps(results),
        (tmp_path / "out" / "junit.xml").read_text(),
        (tmp_path / "out" / "go-live.html").read_text(),
    ):
        assert SECRET not in text and PASSWORD not in text


@pytest.mark.slow
def test_same_calls_check_fails_when_no_call_was_made(tmp_path, serve):
    """Streaming and non-streaming both made zero calls: that is no evidence of equal calls, so the check fails."""
    result, results, _ = run_golive(tmp_path, serve("text-only"), "-k", "streaming")
    failed = _failed(results)
    assert result.returncode == 1 and len(failed) == 1, result.stdout[-3000:]
    assert "neither mode made a single tool call in 34 cases" in failed[0]["message"]
