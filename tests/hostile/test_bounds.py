"""golive's bounds one by one, against real sockets and processes: the inflater stops one byte past its cap whatever
the compression ratio; a line or event past its cap is refused without holding it; JSON depth is read without
recursion and agrees with Python's parser; one request's deadline and the run's stop end a read in any thread within
a fraction of a second; an ssh-style command ends at its deadline with its process group, and its output is read no
further than its cap."""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import threading
import time
import zlib
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golive.endpoint.bounded import (
    SLICE_S,
    BoundError,
    Events,
    Inflater,
    LineTooLong,
    TooDeep,
    allow_requests,
    deadline,
    depth_of,
    guarded_client,
    loads,
    stop_requests,
)
from golive.endpoint.client import EndpointClient
from golive.endpoint.errors import EndpointError
from golive.endpoint.load_request import max_tokens_of
from golive.endpoint.target import EndpointTarget
from golive.endpoint.tls import trusting
from golive.station.connection import CommandOutputTooLarge, CommandTimeout, run_bounded


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_the_inflater_stops_one_byte_past_its_cap(encoding):
    """32 MiB of zeros compressed to ~32 KiB: asked for at most 1 MiB, it gives 1 MiB + 1 byte and keeps the rest."""
    zeros = bytes(32 << 20)
    packed = gzip.compress(zeros) if encoding == "gzip" else zlib.compress(zeros)
    out = Inflater(encoding).inflate(packed, 1 << 20)
    assert len(out) == (1 << 20) + 1 and len(packed) < 64 * 1024


def test_raw_deflate_and_identity_inflate_and_other_encodings_are_one_line():
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    packed = raw.compress(b"hello") + raw.flush()
    assert Inflater("deflate").inflate(packed, 100) == b"hello"
    assert Inflater("identity").inflate(b"x", 100) == b"x" and Inflater("").inflate(b"x", 100) == b"x"
    with pytest.raises(BoundError, match="content encoding 'br', which golive did not ask for"):
        Inflater("br")
    with pytest.raises(BoundError, match="gzip data is broken"):
        Inflater("gzip").inflate(b"not gzip at all", 100)


def test_a_line_past_its_cap_is_refused_without_being_held():
    events = Events(cap=1024)
    assert events.feed(b'data: {"a": 1}\n\ndata: [DONE]\n\n') == [b'{"a": 1}', b"[DONE]"]
    with pytest.raises(LineTooLong, match="one line of the stream passed golive's cap of 1 KiB"):
        for _ in range(10):
            events.feed(b"x" * 200)  # no line break: the line grows until it passes the cap
    assert Events(cap=1024).feed(b"data: a\r\n\r\n") == [b"a"]  # CRLF lines


@given(
    st.recursive(
        st.none() | st.integers() | st.text(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
        max_leaves=30,
    )
)
@settings(max_examples=200, derandomize=True, deadline=None)
def test_depth_is_what_pythons_parser_nests(value):
    """depth_of agrees with the nesting json.dumps wrote, brackets inside strings included."""

    def nesting(v: object) -> int:
        if isinstance(v, list):
            return 1 + max((nesting(x) for x in v), default=0)
        if isinstance(v, dict):
            return 1 + max((nesting(x) for x in v.values()), default=0)
        return 0

    assert depth_of(json.dumps(value)) == nesting(value)


def test_json_past_its_depth_is_refused_before_python_recurses():
    started = time.monotonic()
    with pytest.raises(TooDeep, match="JSON nested deeper than golive's cap of 64 levels"):
        loads("[" * 100_000 + "]" * 100_000, 64)
    assert time.monotonic() - started < 1
    assert loads('{"a": "[[[[[[[[[[[[[[[[[["}', 4) == {"a": "[[[[[[[[[[[[[[[[[["}


def test_max_tokens_is_found_without_parsing_a_long_body():
    body = json.dumps({"messages": [{"content": 'say "max_tokens": 999'}], "max_tokens": 7}).encode()
    assert max_tokens_of(body) == 7 and max_tokens_of(b'{"stream": true}') is None


@pytest.fixture
def silent_server():
    """Accepts a connection, reads the request and answers with headers only, then nothing (a hung generation)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
            held.append(conn)

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()
    for conn in held:
        conn.close()


def test_a_deadline_ends_a_read_inside_its_read_timeout(silent_server):
    """A read timeout of 60 s, a deadline of 1 s: the request ends at 1 s, saying so."""
    client = guarded_client(trusting(None), httpx.Timeout(60))
    started = time.monotonic()
    with pytest.raises(BoundError, match="did not end within its deadline of 1 s"), deadline(1):
        client.get(silent_server).read()
    assert time.monotonic() - started < 1 + 4 * SLICE_S


def test_the_runs_stop_ends_a_request_in_another_thread(silent_server):
    """A request waiting in a worker thread (read timeout 60 s, no deadline) ends within a slice of the stop, as
    one line (EndpointError), and the thread is free at once."""
    target = EndpointTarget(silent_server + "/v1", light_timeout_s=60, request_timeout_s=60)
    failures: list[BaseException] = []

    def ask() -> None:
        try:
            EndpointClient(target).models()
        except BaseException as exc:  # noqa: BLE001 - what the thread ended with is the test's subject
            failures.append(exc)

    worker = threading.Thread(target=ask)
    worker.start()
    time.sleep(0.5)
    try:
        stopped = time.monotonic()
        stop_requests()
        worker.join(5)
    finally:
        allow_requests()
    assert not worker.is_alive() and time.monotonic() - stopped < 2 * SLICE_S + 0.2
    [failure] = failures
    assert isinstance(failure, EndpointError) and "the run is stopping" in str(failure), failure


def test_a_command_ends_at_its_deadline_with_its_process_group():
    """`sh -c` starting a child in the background: the shell and its child end at the deadline (CommandTimeout)."""

    def sleepers() -> list[str]:
        found = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            with contextlib.suppress(OSError):
                if cmdline.read_bytes() == b"sleep\x0031.7\x00":
                    found.append(cmdline.parent.name)
        return found

    started = time.monotonic()
    with pytest.raises(CommandTimeout, match="did not end within 1 s"):
        run_bounded("sleep 31.7 & sleep 31.7", 1, 1 << 20)
    assert time.monotonic() - started < 5
    # SIGKILL is delivered asynchronously: on a busy machine a killed process may still be listed for a moment
    gone_by = time.monotonic() + 3
    while sleepers() and time.monotonic() < gone_by:
        time.sleep(0.05)
    assert not sleepers(), "a process of the command outlived its deadline"


def test_a_command_is_read_no_further_than_its_cap():
    started = time.monotonic()
    with pytest.raises(CommandOutputTooLarge, match="printed more than golive reads of one command"):
        run_bounded("cat /dev/zero", 30, 1 << 20)
    assert time.monotonic() - started < 5
    assert run_bounded("echo out; echo err >&2; exit 3", 5, 1 << 20) == (3, b"out\n", b"err\n")
