"""The load generator's transport: one keep-alive HTTP/1.1 connection per request in flight, timed when bytes arrive.

Why not httpx here: under load httpx spends ~150-250 µs of Python on each streamed event (httpcore, h11, anyio), and
every stream whose bytes wait behind that work is timestamped late (bench/stream_truth.py measured 169 ms of TTFT
error at 256 streams). Here the event loop hands each read to an asyncio Protocol that takes the time first, and
httptools (llhttp, in C) splits the HTTP framing. The body is kept as (arrival time, bytes) pieces; SSE events are
assembled after the response has ended, so parsing one stream never delays another stream's timestamps.
Everything else golive sends (light calls, chat checks) goes through golive.endpoint.client (httpx).

Bounded as every read of golive is (golive.endpoint.bounded): one response keeps at most its budget in bytes (its
token budget, `max_tokens` + `endpoint.stream_token_slack` events, at `EVENT_BYTES` each, never more than
`endpoint.max_body_bytes`), ends after that many events, and ends at its deadline (the lane's timeout, from the
send) even while the server keeps sending: a stream without `[DONE]` costs its budget, not the run.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast
from urllib.parse import urlsplit

import httptools

from golive.endpoint.bounded import DEFAULT_CAPS, Caps, size
from golive.endpoint.tls import trusting

Clock = Callable[[], float]
EVENT_BYTES = 2048  # a stream's byte budget per event it may send (vLLM's chunks: ~200-300 bytes)
PIECE_OVERHEAD = 64  # what one kept piece costs besides its bytes (a server sending 1-byte writes pays it too)


class StreamError(Exception):
    """The connection failed: refused, reset, cut before the response ended, silent too long, or not HTTP."""


@dataclass
class StreamedResponse:
    status: int
    sent: float  # clock time the request's last byte was handed to the socket
    pieces: list[tuple[float, bytes]] = field(default_factory=list)  # (arrival time, body bytes), in order
    end: float | None = None  # arrival of the response's last byte
    kept: int = 0  # bytes kept so far (with PIECE_OVERHEAD a piece): the response's budget counts them
    events: int = 0  # `data:` fields seen so far
    location: str | None = None  # a redirect's Location header (golive follows none: the request's error names it)

    def text(self, limit: int = 200) -> str:
        head, kept = [], 0
        for _, piece in self.pieces:
            if kept >= limit:
                break
            head.append(piece)
            kept += len(piece)
        return " ".join(b"".join(head)[:limit].decode(errors="replace").split())


class _Reader(asyncio.Protocol):
    """Takes the arrival time of every read before anything else, then lets httptools frame it."""

    # Set by connection_made (the loop calls it before create_connection hands the reader over) and by expect()
    # (before the request is written, so before any byte or httptools callback): never read unset.
    transport: asyncio.Transport
    response: StreamedResponse
    budget: Budget
    _parser: httptools.HttpResponseParser

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.open = True
        self.done: asyncio.Future | None = None  # None until the first request is expected
        self.last_read = 0.0
        self._at = 0.0

    def expect(self, response: StreamedResponse, done: asyncio.Future, budget: Budget) -> None:
        self.response, self.done, self.budget = response, done, budget
        self._parser = httptools.HttpResponseParser(self)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # create_connection makes a stream transport; cast, not isinstance: uvloop's TCPTransport (bench/) has
        # asyncio.Transport's methods without subclassing it
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._at = self.last_read = self.clock()
        if self.done is None or self.done.done():  # expect() sets done and the parser together
            return  # bytes nobody asked for (after a complete response): the lane is closed below
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(StreamError(f"the answer is not HTTP/1.1 ({exc}); first bytes: {data[:80]!r}"))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"location":
            self.response.location = value[:300].decode(errors="replace")

    def on_headers_complete(self) -> None:
        self.response.status = self._parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        if self.done is None or self.done.done():
            return  # failed already (a budget passed): nothing more is kept
        response, budget = self.response, self.budget
        response.kept += len(body) + PIECE_OVERHEAD
        response.events += body.count(b"data:")
        if response.kept > budget.bytes:
            self._fail(StreamError(budget.too_large()))
        elif budget.events is not None and response.events > budget.events:
            self._fail(StreamError(budget.too_long(response.events)))
        else:
            response.pieces.append((self._at, body))

    def on_message_complete(self) -> None:
        if self.done is None or self.done.done():
            return
        self.response.end = self._at
        if not self._parser.should_keep_alive():
            self.open = False  # now: the lane's next request must not be written to a closing transport
            self.transport.close()
        assert self.done is not None  # httptools calls back only from data_received, which checked it
        self.done.set_result(self.response)

    def eof_received(self) -> None:
        self.open = False  # the server closed an idle keep-alive connection: the next request reconnects

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        if self.done is None or self.done.done():
            return
        if self.response.status:  # headers came: a body cut short (or ended by close) is the reader's to judge
            self.response.end = self._at
            self.done.set_result(self.response)
        else:
            self._fail(StreamError(CLOSED_BEFORE_RESPONSE + (f" ({type(exc).__name__}: {exc})" if exc else "")))

    def _fail(self, error: StreamError) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(error)
        self.transport.close()


CLOSED_BEFORE_RESPONSE = "the connection closed before an HTTP response"


@dataclass(frozen=True)
class Budget:
    """What one response may bring: `bytes` kept, `events` (None: any number), within `seconds` of its send."""

    bytes: int
    events: int | None
    seconds: float
    max_tokens: int | None = None
    slack: int = 0

    @classmethod
    def of(cls, max_tokens: int | None, caps: Caps, seconds: float) -> Budget:
        """A stream asking for `max_tokens`: that many events plus the slack (and its role, usage and [DONE] events),
        EVENT_BYTES each, never more than the body cap."""
        if max_tokens is None:
            return cls(caps.body_bytes, None, seconds)
        events = max_tokens + caps.stream_slack + 3
        kept = min(caps.body_bytes, events * EVENT_BYTES + 64 * 1024)
        return cls(kept, events, seconds, max_tokens, caps.stream_slack)

    def too_large(self) -> str:
        if self.events is None:
            return f"the answer is larger than golive's cap of {size(self.bytes)} (endpoint.max_body_bytes)"
        return (
            f"the stream passed its budget of {size(self.bytes)} ({self.events} events of max_tokens "
            f"{self.max_tokens} + endpoint.stream_token_slack {self.slack}, {EVENT_BYTES} bytes each)"
        )

    def too_long(self, events: int) -> str:
        return (
            f"the stream sent {events} events, past its max_tokens of {self.max_tokens} and golive's slack of "
            f"{self.slack} (endpoint.stream_token_slack), without ending: the server does not honour max_tokens or "
            f"never ends its stream"
        )


class Lane:
    """One connection for one URL, reused request after request (keep-alive), one request at a time. https trusts
    what every other golive client trusts (golive.endpoint.tls: the station's `tls_ca_file`, else httpx's default)."""

    def __init__(
        self,
        url: str,
        timeout_s: float,
        ca_file: str | None = None,
        clock: Clock = time.perf_counter,
        caps: Caps = DEFAULT_CAPS,
        total_s: float | None = None,
    ) -> None:
        parts = urlsplit(url)
        self.secure = parts.scheme == "https"
        self.host = parts.hostname or "localhost"
        self.port = parts.port or (443 if self.secure else 80)
        self.authority = parts.netloc.rsplit("@", 1)[-1]
        self.path = parts.path or "/"
        self.timeout_s = timeout_s
        self.tls = trusting(ca_file) if self.secure else None  # one context per CA file, shared by every lane
        self.clock = clock
        self.caps = caps
        self.total_s = timeout_s if total_s is None else total_s  # a response's deadline from its send
        self._reader: _Reader | None = None

    async def _connected(self) -> _Reader:
        if self._reader is not None and self._reader.open:
            return self._reader
        loop = asyncio.get_running_loop()
        try:
            _, reader = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Reader(self.clock),
                    self.host,
                    self.port,
                    ssl=self.tls,
                    server_hostname=self.host if self.secure else None,
                ),
                self.timeout_s,
            )
        except TimeoutError as exc:
            raise StreamError(f"no connection to {self.authority} within {self.timeout_s:g} s") from exc
        except (OSError, ssl.SSLError) as exc:
            raise StreamError(f"cannot connect to {self.authority}: {type(exc).__name__}: {exc}") from exc
        self._reader = reader
        return reader

    def request_bytes(self, body: bytes, headers: dict[str, str]) -> bytes:
        head = [
            f"POST {self.path} HTTP/1.1",
            f"Host: {self.authority}",
            "User-Agent: golive",
            "Accept: text/event-stream",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        return ("\r\n".join(head) + "\r\n\r\n").encode() + body

    async def post(self, body: bytes, headers: dict[str, str], max_tokens: int | None = None) -> StreamedResponse:
        """POST `body` to the lane's URL, wait for the whole response; StreamError when the connection fails, falls
        silent for `timeout_s` (a stalled stream), has not ended `timeout_s` after the send, or passes its budget
        (`max_tokens`: the tokens the body asks for; Budget). A reused keep-alive connection that the server closed
        while idle, before the lane noticed (its close and our request crossed: a busy client sees it late), gets the
        request once more on a new connection, as HTTP clients do: no response byte came, so the server never read
        it."""
        budget = Budget.of(max_tokens, self.caps, self.total_s)
        reused = self._reader is not None and self._reader.open
        try:
            return await self._post_once(body, headers, budget)
        except StreamError as exc:
            if not (reused and str(exc).startswith(CLOSED_BEFORE_RESPONSE)):
                raise
            self._reader = None
            return await self._post_once(body, headers, budget)

    async def _post_once(self, body: bytes, headers: dict[str, str], budget: Budget) -> StreamedResponse:
        reader = await self._connected()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[StreamedResponse] = loop.create_future()
        response = StreamedResponse(status=0, sent=0.0)
        reader.expect(response, done, budget)
        data = self.request_bytes(body, headers)
        response.sent = reader.last_read = self.clock()
        ends = response.sent + budget.seconds
        reader.transport.write(data)
        wait = self.timeout_s
        while True:
            try:
                return await asyncio.wait_for(asyncio.shield(done), wait)
            except TimeoutError:
                now = self.clock()
                silent = now - reader.last_read
                wait = max(min(self.timeout_s - silent, ends - now), 0.01)
                if silent >= self.timeout_s:
                    reader._fail(
                        StreamError(
                            f"no byte from {self.authority} for {silent:.0f} s "
                            f"(the stream stalled; timeout {self.timeout_s:g} s)"
                        )
                    )
                    return await done  # raises
                if now >= ends:
                    reader._fail(
                        StreamError(
                            f"the answer from {self.authority} did not end within its deadline of "
                            f"{budget.seconds:g} s (it kept sending)"
                        )
                    )
                    return await done  # raises

    async def aclose(self) -> None:
        if self._reader is not None and self._reader.transport is not None:
            self._reader.transport.close()
        self._reader = None

    async def __aenter__(self) -> Lane:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
