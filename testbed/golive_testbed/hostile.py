"""Hostile targets: loopback OpenAI servers that misbehave on purpose, hostile input files, and golive run against
them with its wall time and peak RSS read from the process (tests/hostile and bench/hostile.py use this).

    with HostileStation("gzip-bomb-models", key="sk-…") as station:     # http://127.0.0.1:PORT/v1
        run = measured(golive_command("run", inventory, "-o", out), env={KEY_ENV: key}, timeout=120)
        run.code, run.wall_s, run.peak_rss_mib                           # os.wait4's ru_maxrss: the kernel's count

A station answers as a healthy vLLM does (/health, /v1/models, /version, /metrics, /tokenize, chat streamed or not,
the key required where one is given) except in the one way its behaviour names (`BEHAVIOURS`). Every hostile body is
generated as it is sent, never held: a 100 MB line or an endless gzip stream costs the server nothing.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType

MODEL = "glm-5.3-flash"  # the shipped GB300 profile's served name
KEY_ENV = "GOLIVE_HOSTILE_KEY"
MiB = 1 << 20

# behaviour → what the station does wrong (everything else it answers as a healthy vLLM)
BEHAVIOURS = {
    "healthy": "nothing",
    "gzip-bomb-models": "GET /v1/models: gzip that inflates without end (chunked, generated as it is sent)",
    "huge-models": "GET /v1/models: a 50 MB JSON model list",
    "models-2mb": "GET /v1/models: a 2 MB JSON list of other models (under golive's cap: not copied into reports)",
    "deep-json": "GET /v1/models and every chat answer: JSON nested 100,000 levels deep",
    "sse-huge-line": "a streamed chat: one 100 MB line that never ends",
    "sse-endless": "a streamed chat: a token every 10 ms, never a finish_reason or [DONE]",
    "sse-keepalive": "a streamed chat: a comment line every second, forever (no token: only a deadline ends it)",
    "trickle": "a chat answer: its headers, then one byte every 0.5 s, forever",
    "echo-auth": "every chat and /tokenize answer is HTTP 400 whose body quotes the request's Authorization header",
    "chat-404": "every chat answer is HTTP 404",
    "chat-429": "every chat answer is HTTP 429",
    "chat-500": "every chat answer is HTTP 500",
    "redirect-chat": "every chat answer is HTTP 307 to another origin (a second server, which records what reaches it)",
}


def _models(ids: list[str]) -> bytes:
    return json.dumps(
        {
            "object": "list",
            "data": [{"id": i, "object": "model", "owned_by": "vllm", "max_model_len": 1048576} for i in ids],
        }
    ).encode()


class _Recorded(ThreadingHTTPServer):
    daemon_threads = True
    behaviour: str
    key: str | None
    basic: str | None
    other: str | None  # the other origin a redirect names
    seen: list[tuple[str, str, str | None]]  # (method, path, Authorization header) of every request
    stop: threading.Event


class _Handler(BaseHTTPRequestHandler):
    server: _Recorded
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    # --- plumbing -------------------------------------------------------------------------------------------------

    def _send(self, status: int, body: bytes, kind: str = "application/json", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def _chunked(self, status: int, kind: str, pieces: Iterator[bytes], **headers: str) -> None:
        """A body sent chunk by chunk as `pieces` yields it (never held whole); the connection closes after it."""
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.close_connection = True
        with contextlib.suppress(OSError):
            for piece in pieces:
                if self.server.stop.is_set():
                    return
                if piece:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

    def _authorized(self) -> bool:
        if not self.server.key and not self.server.basic:
            return True
        given = self.headers.get("Authorization")
        return given in (f"Bearer {self.server.key}", f"Basic {self.server.basic}")

    # --- requests -------------------------------------------------------------------------------------------------

    def do_GET(self) -> None:
        self.server.seen.append(("GET", self.path, self.headers.get("Authorization")))
        kind = self.server.behaviour
        if self.path == "/health":
            return self._send(200, b"")
        if self.path.startswith("/v1/") and not self._authorized():
            return self._send(401, b'{"error": {"message": "Unauthorized", "code": 401}}')
        if self.path == "/v1/models":
            if kind == "gzip-bomb-models":
                return self._chunked(200, "application/json", _gzip_bomb(), Content_Encoding="gzip")
            if kind == "huge-models":
                return self._chunked(200, "application/json", _huge_models(50 * MiB))
            if kind == "models-2mb":
                return self._send(200, _models([f"other-model-{i:06d}-" + "x" * 40 for i in range(2 * MiB // 110)]))
            if kind == "deep-json":
                return self._send(200, b"[" * 100_000 + b"]" * 100_000)
            return self._send(200, _models([MODEL]))
        if self.path == "/version":
            return self._send(200, b'{"version": "0.32.0"}')
        if self.path == "/metrics":
            return self._send(200, b"vllm:num_requests_running 0.0\nvllm:num_requests_waiting 0.0\n", "text/plain")
        return self._send(404, b'{"detail": "Not Found"}')

    def do_POST(self) -> None:
        self.server.seen.append(("POST", self.path, self.headers.get("Authorization")))
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = {}
        kind = self.server.behaviour
        if not self._authorized():
            return self._send(401, b'{"error": {"message": "Unauthorized", "code": 401}}')
        if kind == "echo-auth" and self.path in ("/v1/chat/completions", "/tokenize"):
            said = f"request refused: Authorization: {self.headers.get('Authorization')} is not allowed here"
            return self._send(400, json.dumps({"error": {"message": said, "type": "BadRequestError"}}).encode())
        if self.path == "/tokenize":
            text = json.dumps(body.get("messages") or body.get("prompt") or "")
            return self._send(200, json.dumps({"count": max(1, len(text) // 4)}).encode())
        if self.path != "/v1/chat/completions":
            return self._send(404, b'{"detail": "Not Found"}')
        statuses = {"chat-404": 404, "chat-429": 429, "chat-500": 500}
        if kind in statuses:
            error = {"error": {"message": f"the chat failed ({kind})", "type": "Error", "code": statuses[kind]}}
            return self._send(statuses[kind], json.dumps(error).encode())
        if kind == "redirect-chat":
            return self._send(307, b"", Location=f"{self.server.other}/v1/chat/completions")
        if kind == "deep-json":
            return self._send(200, b"[" * 100_000 + b"]" * 100_000)
        tokens = body.get("max_tokens") if isinstance(body.get("max_tokens"), int) else 16
        if not body.get("stream"):
            if kind == "trickle":
                return self._chunked(200, "application/json", _trickle(self.server.stop))
            return self._send(200, _completion(tokens))
        streams: dict[str, Callable[[], Iterator[bytes]]] = {
            "sse-huge-line": lambda: _huge_line(100 * MiB),
            "sse-endless": lambda: _endless(self.server.stop),
            "sse-keepalive": lambda: _keepalive(self.server.stop),
        }
        pieces = streams[kind]() if kind in streams else _stream(tokens)
        return self._chunked(200, "text/event-stream", pieces)


def _completion(asked: int) -> bytes:
    """One token ("391": the answer several checks ask for), finish_reason stop; `length` where one was all it had."""
    tokens = 1
    finish = "length" if asked <= tokens else "stop"
    return json.dumps(
        {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": MODEL,
            "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": "391"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": 5 + tokens},
        }
    ).encode()


def _chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> bytes:
    event = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if usage is None else [],
    }
    if usage is not None:
        event["usage"] = usage
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def _stream(tokens: int) -> Iterator[bytes]:
    yield _chunk({"role": "assistant", "content": ""})
    for n in range(tokens):
        yield _chunk({"content": "ok "}, "length" if n == tokens - 1 else None)
    yield _chunk({}, usage={"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": 5 + tokens})
    yield b"data: [DONE]\n\n"


def _gzip_bomb() -> Iterator[bytes]:
    """gzip of zeros, forever: ~1,000× (each MiB of it inflates to ~1 GiB)."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    zeros = bytes(MiB)
    while True:
        yield squeeze.compress(zeros)


def _huge_models(size: int) -> Iterator[bytes]:
    yield b'{"object": "list", "data": ['
    entry = b'{"id": "model-%08d", "object": "model", "owned_by": "vllm", "max_model_len": 1048576}'
    sent, n = 0, 0
    while sent < size:
        piece = b",".join(entry % (n + i) for i in range(1000)) + b","
        n += 1000
        sent += len(piece)
        yield piece
    yield entry % n + b"]}"


def _huge_line(size: int) -> Iterator[bytes]:
    yield _chunk({"role": "assistant", "content": ""})
    yield b'data: {"choices": [{"delta": {"content": "'
    block = b"x" * MiB
    for _ in range(size // MiB):
        yield block
    yield b'"}}]}\n\n'


def _endless(stop: threading.Event) -> Iterator[bytes]:
    yield _chunk({"role": "assistant", "content": ""})
    while not stop.wait(0.01):
        yield _chunk({"content": "ok "})


def _keepalive(stop: threading.Event) -> Iterator[bytes]:
    yield _chunk({"role": "assistant", "content": ""})
    while not stop.wait(1.0):
        yield b": keep-alive\n\n"


def _trickle(stop: threading.Event) -> Iterator[bytes]:
    while not stop.wait(0.5):
        yield b" "


class HostileStation:
    """A loopback OpenAI server with one behaviour of BEHAVIOURS; `key` (HTTP Bearer) or `basic` (`user:password`,
    HTTP Basic) required on /v1 where given. `seen` lists every request (method, path, Authorization header);
    `other_seen` what reached the other origin a redirect names."""

    def __init__(self, behaviour: str = "healthy", key: str | None = None, basic: str | None = None):
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {behaviour!r}: one of {', '.join(BEHAVIOURS)}")
        self.behaviour = behaviour
        self.server = self._serve(behaviour, key, basic)
        self.other = self._serve("healthy", None, None)  # the other origin of a redirect
        self.server.other = f"http://127.0.0.1:{self.other.server_address[1]}"

    @staticmethod
    def _serve(behaviour: str, key: str | None, basic: str | None) -> _Recorded:
        server = _Recorded(("127.0.0.1", 0), _Handler)
        server.behaviour, server.key, server.other, server.seen = behaviour, key, None, []
        server.basic = base64.b64encode(basic.encode()).decode() if basic else None
        server.stop = threading.Event()
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @property
    def seen(self) -> list[tuple[str, str, str | None]]:
        return list(self.server.seen)

    @property
    def other_seen(self) -> list[tuple[str, str, str | None]]:
        return list(self.other.seen)

    def close(self) -> None:
        for server in (self.server, self.other):
            server.stop.set()
            server.shutdown()
            server.server_close()

    def __enter__(self) -> HostileStation:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


# --- hostile files -------------------------------------------------------------------------------------------------

BILLION_LAUGHS = """\
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
profile: glm-5.3-flash-gb300
stations: [{name: a, endpoint: "http://127.0.0.1:1/v1"}]
"""


def hostile_files(folder: Path) -> dict[str, Path]:
    """name → an inventory golive must refuse in one line (exit 4), bounded: written into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "billion-laughs-yaml": folder / "laughs.yaml",
        "deep-flow-yaml": folder / "deep.yaml",
        "deep-block-yaml": folder / "deep-block.yaml",
        "50mb-yaml": folder / "big.yaml",
        "fifo-profile": folder / "fifo-inventory.yaml",
    }
    files["billion-laughs-yaml"].write_text(BILLION_LAUGHS)
    files["deep-flow-yaml"].write_text("profile: " + "[" * 100_000 + "]" * 100_000 + "\nstations: []\n")
    files["deep-block-yaml"].write_text("profile:\n" + "".join("  " * i + "k:\n" for i in range(1, 200)))
    with open(files["50mb-yaml"], "w") as out:
        out.write("profile: glm-5.3-flash-gb300\nstations:\n")
        line = "  - {name: s%07d, endpoint: 'http://127.0.0.1:1/v1'}\n"
        for n in range(0, 50 * MiB // len(line % 0)):
            out.write(line % n)
    fifo = folder / "profile-fifo.yaml"
    if not fifo.exists():
        os.mkfifo(fifo)
    files["fifo-profile"].write_text(f"profile: {fifo}\nstations: [{{name: a, endpoint: 'http://127.0.0.1:1/v1'}}]\n")
    return files


# --- golive, measured -------------------------------------------------------------------------------------------


@dataclass
class Measured:
    """One golive process: its exit code, output (stdout and stderr), wall time and peak RSS (the kernel's
    ru_maxrss of the process, from os.wait4)."""

    code: int
    output: str
    wall_s: float
    peak_rss_mib: float
    killed_for: str | None = None  # why the harness killed it (too much memory, past its timeout), if it did
    signals: list[tuple[float, str]] = field(default_factory=list)  # (seconds after start, signal) sent


def golive_command(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "golive.cli", *map(str, args)]


def measured(
    command: list[str],
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 300,
    rss_limit_mib: float = 2048,
    signal_at: tuple[float, signal.Signals] | None = None,
    signal_on: tuple[str, signal.Signals] | None = None,
) -> Measured:
    """Run `command` to its end, reading its output as it comes; its peak RSS from os.wait4. A process past
    `rss_limit_mib` (read from /proc every 50 ms) or `timeout` is killed (`killed_for` says which): a bound that
    does not hold fails its test instead of the machine. `signal_at`: (seconds, signal) sent once that long after
    the start; `signal_on`: (text, signal) sent once the output shows that text."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")} | (env or {})
    started = time.monotonic()
    report_r, report_w = os.pipe()
    # golive starts from a small launcher, not from this process: the kernel's ru_maxrss of a process that forked
    # from a large one (a pytest worker with vLLM imported: 500 MiB) counts the parent's pages it held until exec
    proc = subprocess.Popen(
        [sys.executable, "-S", "-c", _LAUNCHER, str(report_w), *command],
        cwd=cwd,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        pass_fds=(report_w,),
    )
    os.close(report_w)
    report = os.fdopen(report_r, "r")
    golive = int(report.readline() or 0)  # the pid of golive itself, forked from the launcher
    chunks: list[bytes] = []
    stdout = proc.stdout
    assert isinstance(stdout, io.BufferedReader)
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: stdout.read1(65536), b"")), daemon=True)
    reader.start()
    killed_for: str | None = None
    sent: list[tuple[float, str]] = []
    while golive and proc.poll() is None:
        took = time.monotonic() - started
        if signal_at is not None and not sent and took >= signal_at[0]:
            _signal(golive, signal_at[1])
            sent.append((round(took, 2), signal_at[1].name))
        if signal_on is not None and not sent and signal_on[0].encode() in b"".join(chunks):
            _signal(golive, signal_on[1])
            sent.append((round(took, 2), signal_on[1].name))
        if killed_for is None and (rss := _rss_mib(golive)) > rss_limit_mib:
            killed_for = f"RSS {rss:.0f} MiB past the harness's limit of {rss_limit_mib:g} MiB"
            _signal(golive, signal.SIGKILL)
        elif killed_for is None and took > timeout:
            killed_for = f"still running after {timeout:g} s"
            _signal(golive, signal.SIGKILL)
        time.sleep(0.01 if signal_on else 0.05)
    proc.wait()
    wall = time.monotonic() - started
    code, maxrss_kib = (int(word) for word in (report.readline().split() or ["-1", "0"]))
    report.close()
    reader.join(10)
    output = b"".join(chunks).decode("utf-8", errors="replace")
    return Measured(code, output, wall, maxrss_kib / 1024, killed_for, sent)


# Forks golive, tells its pid, waits for it, tells its exit code and its own ru_maxrss (KiB): the launcher is a fresh
# small process (python -S), so what golive inherits before its exec is a few MiB, not the harness's size. SIGINT as
# from a terminal (Python's default while it starts).
_LAUNCHER = """
import os, signal, sys
report = int(sys.argv[1])
pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.close(report)
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
os.write(report, b"%d\\n" % pid)
for sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(sig, signal.SIG_IGN)
_, status, usage = os.wait4(pid, 0)
os.write(report, b"%d %d\\n" % (os.waitstatus_to_exitcode(status), usage.ru_maxrss))
"""


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:  # it ended on its own just now
        pass


def _rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0
