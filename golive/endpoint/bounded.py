"""Every byte golive reads from a station's endpoint, bounded: size after decompression, one stream line, JSON depth,
one total deadline per request, and the run's stop (--max-run-time, SIGINT, SIGTERM) reaching requests in any thread.

    caps = Caps.of(profile.endpoint)                    # endpoint.max_body_bytes, max_event_bytes, max_json_depth
    http = guarded_client(tls, timeout)                 # httpx, its reads sliced so a deadline and the stop hold
    with deadline(30):                                  # this thread's requests end by then, whatever the server does
        body = read_body(http.send(request, stream=True), caps.body_bytes)   # BoundError past the cap
    loads(body, caps.json_depth)                        # TooDeep past the depth

A station golive checks is by definition not known to be healthy: a `/v1/models` that inflates without end, one
100 MB stream line, a stream that never sends `[DONE]`, a server that trickles a byte every few seconds. golive asks
for gzip or deflate only and inflates them itself, at most one byte past the cap (zlib's `max_length`), so a
compressed bomb costs the cap, not its inflated size. The deadline and the stop are kept below httpx: every read of
the socket waits at most `SLICE_S` before golive looks at the clock and at the stop again (a read that times out has
consumed nothing, so it is simply read again), so neither needs a thread of its own, and a request in a worker thread
ends within `SLICE_S` of the run's stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import ssl
import threading
import time
import zlib
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import httpcore
import httpx

from golive.profile.schema import Endpoint

MiB = 1 << 20
SLICE_S = 0.25  # the longest one socket read waits before the deadline and the stop are looked at again
ERROR_BODY_BYTES = 64 * 1024  # what golive reads of an answer that is not 2xx: enough for its message, no more
EXCERPT_BYTES = 120  # what a one-line error quotes of an answer
ACCEPTED_ENCODINGS = "gzip, deflate"  # what golive asks for, and inflates itself (bounded)


@dataclass(frozen=True)
class Caps:
    """What golive reads of one answer at most (the profile's `endpoint:` caps; defaults no healthy station meets)."""

    body_bytes: int = 16 * MiB  # one answer after decompression: JSON, /metrics, a whole stream
    event_bytes: int = MiB  # one line of a stream (an SSE event)
    json_depth: int = 64  # nesting of any JSON answer (a chat answer is ~6 deep)
    stream_slack: int = 64  # events carrying tokens a stream may send past its max_tokens before golive ends it

    @classmethod
    def of(cls, endpoint: Endpoint) -> Caps:
        return cls(
            endpoint.max_body_bytes, endpoint.max_event_bytes, endpoint.max_json_depth, endpoint.stream_token_slack
        )


DEFAULT_CAPS = Caps()


class BoundError(Exception):
    """A bound golive keeps ended a read: a cap, the request's deadline, or the run stopping. str() is one line."""

    def __init__(self, what: str, hint: str, *, timed_out: bool = False):
        self.what, self.hint, self.timed_out = what, hint, timed_out
        super().__init__(what)


class Stopped(BoundError):
    """The run is stopping (--max-run-time, SIGINT, SIGTERM): every request in flight is abandoned."""

    def __init__(self) -> None:
        super().__init__(
            "abandoned: the run is stopping (--max-run-time, SIGINT or SIGTERM)", "re-run the check", timed_out=True
        )


class TooDeep(ValueError):
    """JSON nested deeper than the cap: refused before Python's parser would recurse that deep."""


def seconds(value: float) -> str:
    """A time as an operator reads it: 8 s, 3.9 s."""
    return f"{value:.0f} s" if value >= 10 or value == int(value) else f"{value:.1f} s"


def size(count: int) -> str:
    """A byte count as an operator reads it: 16 MiB, 512 KiB, 900 bytes."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1024)):
        if count >= factor:
            return f"{count / factor:.3g} {unit}"
    return f"{count} bytes"


# --- the run's stop, and each thread's deadline -----------------------------------------------------------------------

_STOP = threading.Event()


def stop_requests() -> None:
    """Abandon every request in flight and refuse new ones, in every thread (the run is stopping)."""
    _STOP.set()


def allow_requests() -> None:
    """A new run: requests may be made again."""
    _STOP.clear()


def stopping() -> bool:
    return _STOP.is_set()


class _Deadline(threading.local):
    at: float | None = None  # time.monotonic() by which this thread's request must end; None: only its timeouts
    seconds: float = 0.0
    answered = False  # a byte of this request's answer came (else its deadline reads as the read timeout's line)


_deadline = _Deadline()


@contextlib.contextmanager
def deadline(limit: float) -> Iterator[None]:
    """The requests this thread makes inside end within `limit`, whatever the server does (an inner deadline may
    only be shorter)."""
    before = (_deadline.at, _deadline.seconds, _deadline.answered)
    at = time.monotonic() + limit
    if _deadline.at is None or at < _deadline.at:
        _deadline.at, _deadline.seconds = at, limit
    _deadline.answered = False
    try:
        yield
    finally:
        _deadline.at, _deadline.seconds, _deadline.answered = before


@contextlib.asynccontextmanager
async def deadline_async(limit: float) -> AsyncIterator[None]:
    """`deadline` for a coroutine's requests (asyncio cancels what is in flight): BoundError once it passed."""
    try:
        async with asyncio.timeout(limit):
            yield
    except TimeoutError:
        raise BoundError(
            f"the answer did not end within its deadline of {seconds(limit)}",
            "the server answers too slowly or never ends its answer: check its log",
            timed_out=True,
        ) from None


def _past_deadline() -> BoundError:
    return BoundError(
        f"the answer did not end within its deadline of {seconds(_deadline.seconds)}",
        "the server answers too slowly or never ends its answer: check its log (the deadline is the profile's "
        "endpoint.request_timeout_s for a generation, light_timeout_s for anything else)",
        timed_out=True,
    )


def _left(until: float | None, timeout: type[Exception]) -> float | None:
    """Seconds left before this socket operation must give up (its own timeout, or the thread's deadline); `timeout`
    raised once its own has passed, BoundError once the run stops or the deadline has passed. A deadline that passes
    before any byte of the answer came is the operation's own timeout (the server never answered: httpx's line)."""
    if _STOP.is_set():
        raise Stopped()
    now = time.monotonic()
    if until is not None and now >= until:
        raise timeout("timed out")
    if _deadline.at is not None and now >= _deadline.at:
        if not _deadline.answered:
            raise timeout("timed out")
        raise _past_deadline()
    ends = [t for t in (until, _deadline.at) if t is not None]
    return None if not ends else min(ends) - now


class _GuardedStream(httpcore.NetworkStream):
    """A socket whose every read waits at most SLICE_S, then looks at the stop and the thread's deadline again (a
    read that timed out has consumed nothing: it is simply made again)."""

    def __init__(self, inner: httpcore.NetworkStream):
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        until = None if timeout is None else time.monotonic() + timeout
        while True:
            left = _left(until, httpcore.ReadTimeout)
            try:
                data = self._inner.read(max_bytes, SLICE_S if left is None else min(left, SLICE_S))
            except httpcore.ReadTimeout:
                continue  # _left decides whether a timeout or the deadline has passed
            _deadline.answered = True
            return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        # a write is not sliced (a timed-out send may have sent part of it): it waits at most its own timeout
        left = _left(None if timeout is None else time.monotonic() + timeout, httpcore.WriteTimeout)
        self._inner.write(buffer, left)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        left = _left(None if timeout is None else time.monotonic() + timeout, httpcore.ConnectTimeout)
        return _GuardedStream(self._inner.start_tls(ssl_context, server_hostname, left))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _GuardedBackend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        left = _left(None if timeout is None else time.monotonic() + timeout, httpcore.ConnectTimeout)
        return _GuardedStream(self._inner.connect_tcp(host, port, left, local_address, socket_options))

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class GuardedTransport(httpx.HTTPTransport):
    """httpx's own transport over golive's guarded sockets (httpcore's public network-backend hook)."""

    def __init__(self, verify: ssl.SSLContext) -> None:
        super().__init__(verify=verify, trust_env=False)
        self._pool = httpcore.ConnectionPool(ssl_context=verify, network_backend=_GuardedBackend())


def guarded_client(verify: ssl.SSLContext, timeout: httpx.Timeout) -> httpx.Client:
    """The one synchronous HTTP client golive makes for an endpoint: guarded sockets, no redirect followed (a redirect
    is the station's answer, named as such: another origin's answer is never judged as the station's, and credentials
    never leave their origin), only gzip and deflate accepted (golive inflates them itself, bounded), no proxy from
    the environment (golive's load generator reaches the station directly too)."""
    return httpx.Client(
        transport=GuardedTransport(verify),
        timeout=timeout,
        follow_redirects=False,
        trust_env=False,
        headers={"Accept-Encoding": ACCEPTED_ENCODINGS},
    )


# --- bodies, inflated at most to their cap ----------------------------------------------------------------------------


class Inflater:
    """A body's content encoding undone at most `room` bytes at a time (zlib's max_length): a compressed bomb costs
    the cap. gzip and deflate (zlib-wrapped or raw) only: golive asks for nothing else."""

    def __init__(self, encoding: str):
        codings = [c.strip().lower() for c in encoding.split(",") if c.strip().lower() not in ("", "identity")]
        self.encoding = ", ".join(codings)
        self._raw_deflate_tried = False
        if not codings:
            self._zlib: Any = None
        elif codings in (["gzip"], ["x-gzip"]):
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif codings == ["deflate"]:
            self._zlib = zlib.decompressobj()
        else:
            raise BoundError(
                f"the answer is sent with content encoding {encoding!r}, which golive did not ask for "
                f"(it asks for {ACCEPTED_ENCODINGS})",
                "check the server or proxy in front: it must honour Accept-Encoding",
            )

    def inflate(self, data: bytes, room: int) -> bytes:
        """`data` decoded, at most `room` + 1 bytes (one more than fits: the caller sees the cap passed)."""
        if self._zlib is None:
            return data
        try:
            out = self._zlib.decompress(data, room + 1)
        except zlib.error:
            if self._raw_deflate_tried or self.encoding != "deflate":
                raise BoundError(
                    f"the answer's {self.encoding} data is broken (it does not inflate)",
                    "check the server or proxy in front: it compresses its answers wrongly",
                ) from None
            self._raw_deflate_tried = True  # some servers send deflate without its zlib header
            self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
            return self.inflate(data, room)
        self._raw_deflate_tried = True
        return bytes(out)


def _too_large(cap: int, response: httpx.Response, field: str, what: str = "the answer") -> BoundError:
    encoding = response.headers.get("content-encoding")
    sent = f", sent {encoding}-compressed" if encoding else ""
    declared = response.headers.get("content-length")
    told = f" (Content-Length says {size(int(declared))})" if declared and declared.isdigit() else ""
    return BoundError(
        f"{what} is larger than golive's cap of {size(cap)} (endpoint.{field}) after decompression: golive stopped "
        f"reading there{sent}{told}; content type {response.headers.get('content-type') or 'none'}",
        f"no healthy vLLM answer is that large: check what answers at this URL (a proxy, another service); if the "
        f"station's answers are really that large, raise endpoint.{field} in the site profile",
    )


def chunks(response: httpx.Response, cap: int, field: str = "max_body_bytes") -> Iterator[bytes]:
    """The body of a response opened with `stream=True`, inflated, at most `cap` bytes in all (BoundError past it)."""
    inflater = Inflater(response.headers.get("content-encoding", ""))
    read = 0
    for raw in response.iter_raw():
        data = inflater.inflate(raw, cap - read)
        read += len(data)
        if read > cap:
            raise _too_large(cap, response, field)
        if data:
            yield data


def read_body(response: httpx.Response, cap: int) -> tuple[bytes, bool]:
    """(body, cut): a 2xx answer whole up to `cap` (BoundError past it); any other status only its first
    ERROR_BODY_BYTES (cut: True where there was more), enough for its message. Closes the response."""
    keep = cap if response.is_success else min(cap, ERROR_BODY_BYTES)
    parts: list[bytes] = []
    read, cut = 0, False
    try:
        inflater = Inflater(response.headers.get("content-encoding", ""))
        for raw in response.iter_raw():
            data = inflater.inflate(raw, keep - read)
            if read + len(data) > keep:
                if response.is_success:
                    raise _too_large(cap, response, "max_body_bytes")
                parts.append(data[: keep - read])
                cut = True
                break
            read += len(data)
            parts.append(data)
    finally:
        response.close()
    return b"".join(parts), cut


async def aread_body(response: httpx.Response, cap: int) -> bytes:
    """`read_body` for an async response: a 2xx body up to `cap` (BoundError past it), another one's first
    ERROR_BODY_BYTES."""
    keep = cap if response.is_success else min(cap, ERROR_BODY_BYTES)
    parts: list[bytes] = []
    read = 0
    inflater = Inflater(response.headers.get("content-encoding", ""))
    raw: AsyncIterator[bytes] = response.aiter_raw()
    async for piece in raw:
        data = inflater.inflate(piece, keep - read)
        if read + len(data) > keep:
            if response.is_success:
                raise _too_large(cap, response, "max_body_bytes")
            parts.append(data[: keep - read])
            break
        read += len(data)
        parts.append(data)
    return b"".join(parts)


async def aget(
    client: httpx.AsyncClient, url: str, headers: dict[str, str], seconds: float, cap: int
) -> tuple[int, bytes]:
    """(status, body) of a GET, read whole within `seconds` and `cap` (BoundError past either; a body that is not 2xx
    only its first ERROR_BODY_BYTES); httpx errors as httpx raises them."""
    async with deadline_async(seconds):
        response = await client.send(client.build_request("GET", url, headers=headers), stream=True)
        try:
            return response.status_code, await aread_body(response, cap)
        finally:
            await response.aclose()


def answered(response: httpx.Response, body: bytes) -> httpx.Response:
    """The response as the checks read it: status and headers as sent, `body` as its content (already inflated)."""
    headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in ("content-encoding",)]
    return httpx.Response(
        response.status_code, headers=headers, content=body, request=response.request, extensions=response.extensions
    )


def excerpt(body: bytes, limit: int = EXCERPT_BYTES) -> str:
    return body[:limit].decode("utf-8", errors="replace")


# --- JSON, no deeper than the cap -----------------------------------------------------------------------------------

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')  # a JSON string: brackets inside it do not nest
_NOT_BRACKET = re.compile(r"[^()]+")
_BRACKETS = str.maketrans({"[": "(", "{": "(", "]": ")", "}": ")"})
_STEP = {"(": 1, ")": -1}


def depth_of(text: str) -> int:
    """How deep the JSON text nests (its deepest array or object), read without recursion: strings taken out, the
    brackets left, their running sum's maximum (all in C: a 16 MiB body takes a fraction of a second)."""
    bare = _STRING.sub("", text) if '"' in text else text
    marks = _NOT_BRACKET.sub("", bare.translate(_BRACKETS))
    return max(accumulate(map(_STEP.__getitem__, marks)), default=0)


def loads(data: bytes | str, max_depth: int, setting: str | None = "endpoint.max_json_depth") -> Any:
    """json.loads, refusing nesting past `max_depth` first (TooDeep, a ValueError) — where Python's parser would
    recurse until RecursionError. `setting`: the profile key that sets the cap, named in the refusal."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    if text.count("[") + text.count("{") > max_depth:  # only then can it be too deep: one pass of counting
        found = depth_of(text)
        if found > max_depth:
            named = f" ({setting})" if setting else ""
            raise TooDeep(f"JSON nested deeper than golive's cap of {max_depth} levels{named}")
    return json.loads(text)


# --- streams: lines and events, each bounded --------------------------------------------------------------------


class LineTooLong(BoundError):
    pass


class Lines:
    """Bytes in, complete lines out (without their line break), no line longer than `cap` (LineTooLong): a pending line
    is kept as pieces, and only each new piece is searched for its line break, so a 100 MB line costs its cap."""

    def __init__(self, cap: int):
        self.cap = cap
        self._pending: list[bytes] = []
        self._pending_len = 0

    def feed(self, data: bytes) -> list[bytes]:
        lines: list[bytes] = []
        start = 0
        while True:
            cut = data.find(b"\n", start)
            if cut < 0:
                rest = data[start:]
                if rest:
                    self._pending_len += len(rest)
                    if self._pending_len > self.cap:
                        raise LineTooLong(
                            f"one line of the stream passed golive's cap of {size(self.cap)} "
                            f"(endpoint.max_event_bytes) without ending",
                            "no healthy vLLM stream sends a line that long: check the server or proxy in front; if "
                            "its events are really that large, raise endpoint.max_event_bytes in the site profile",
                        )
                    self._pending.append(rest)
                return lines
            piece = data[start:cut]
            if self._pending:
                if self._pending_len + len(piece) > self.cap:
                    raise LineTooLong(
                        f"one line of the stream passed golive's cap of {size(self.cap)} (endpoint.max_event_bytes)",
                        "no healthy vLLM stream sends a line that long: check the server or proxy in front",
                    )
                piece = b"".join([*self._pending, piece])
                self._pending, self._pending_len = [], 0
            elif len(piece) > self.cap:
                raise LineTooLong(
                    f"one line of the stream passed golive's cap of {size(self.cap)} (endpoint.max_event_bytes)",
                    "no healthy vLLM stream sends a line that long: check the server or proxy in front",
                )
            lines.append(piece.removesuffix(b"\r"))
            start = cut + 1


class Events:
    """SSE: lines in, the `data:` of each complete event out (a blank line ends an event), no event past `cap`."""

    def __init__(self, cap: int):
        self.lines = Lines(cap)
        self.cap = cap
        self._data: list[bytes] = []
        self._size = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        events: list[bytes] = []
        for line in self.lines.feed(chunk):
            if not line:
                if self._data:
                    events.append(b"\n".join(self._data))
                    self._data, self._size = [], 0
            elif line.startswith(b"data:"):
                value = line[5:].removeprefix(b" ")
                self._size += len(value) + 1
                if self._size > self.cap:
                    raise LineTooLong(
                        f"one event of the stream passed golive's cap of {size(self.cap)} (endpoint.max_event_bytes)",
                        "no healthy vLLM stream sends an event that large: check the server or proxy in front",
                    )
                self._data.append(value)
            # comments (":") and other fields (event:, id:, retry:) carry nothing golive reads
        return events
