"""The load generator's transport: one keep-alive HTTP/1.1 connection per request in flight, timed when bytes arrive.

Why not httpx here: under load httpx spends ~150-250 µs of Python on each streamed event (httpcore, h11, anyio), and
every stream whose bytes wait behind that work is timestamped late (bench/stream_truth.py measured 169 ms of TTFT
error at 256 streams). Here the event loop hands each read to an asyncio Protocol that takes the time first, and
httptools (llhttp, in C) splits the HTTP framing. The body is kept as (arrival time, bytes) pieces; SSE events are
assembled after the response has ended, so parsing one stream never delays another stream's timestamps.
Everything else golive sends (light calls, chat checks) stays on httpx and the OpenAI client.
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

from golive.endpoint.tls import trusting

Clock = Callable[[], float]


class StreamError(Exception):
    """The connection failed: refused, reset, cut before the response ended, silent too long, or not HTTP."""


@dataclass
class StreamedResponse:
    status: int
    sent: float  # clock time the request's last byte was handed to the socket
    pieces: list[tuple[float, bytes]] = field(default_factory=list)  # (arrival time, body bytes), in order
    end: float | None = None  # arrival of the response's last byte

    def text(self, limit: int = 200) -> str:
        return b"".join(piece for _, piece in self.pieces)[:limit].decode(errors="replace")


class _Reader(asyncio.Protocol):
    """Takes the arrival time of every read before anything else, then lets httptools frame it."""

    # Set by connection_made (the loop calls it before create_connection hands the reader over) and by expect()
    # (before the request is written, so before any byte or httptools callback): never read unset.
    transport: asyncio.Transport
    response: StreamedResponse
    _parser: httptools.HttpResponseParser

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.open = True
        self.done: asyncio.Future | None = None  # None until the first request is expected
        self.last_read = 0.0
        self._at = 0.0

    def expect(self, response: StreamedResponse, done: asyncio.Future) -> None:
        self.response, self.done = response, done
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
    def on_headers_complete(self) -> None:
        self.response.status = self._parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        self.response.pieces.append((self._at, body))

    def on_message_complete(self) -> None:
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


class Lane:
    """One connection for one URL, reused request after request (keep-alive), one request at a time. https trusts
    what every other golive client trusts (golive.endpoint.tls: the station's `tls_ca_file`, else httpx's default)."""

    def __init__(
        self, url: str, timeout_s: float, ca_file: str | None = None, clock: Clock = time.perf_counter
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

    async def post(self, body: bytes, headers: dict[str, str]) -> StreamedResponse:
        """POST `body` to the lane's URL, wait for the whole response; StreamError when the connection fails or falls
        silent for `timeout_s` (a stalled stream). A reused keep-alive connection that the server closed while idle,
        before the lane noticed (its close and our request crossed: a busy client sees it late), gets the request
        once more on a new connection, as HTTP clients do: no response byte came, so the server never read it."""
        reused = self._reader is not None and self._reader.open
        try:
            return await self._post_once(body, headers)
        except StreamError as exc:
            if not (reused and str(exc).startswith(CLOSED_BEFORE_RESPONSE)):
                raise
            self._reader = None
            return await self._post_once(body, headers)

    async def _post_once(self, body: bytes, headers: dict[str, str]) -> StreamedResponse:
        reader = await self._connected()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[StreamedResponse] = loop.create_future()
        response = StreamedResponse(status=0, sent=0.0)
        reader.expect(response, done)
        data = self.request_bytes(body, headers)
        response.sent = reader.last_read = self.clock()
        reader.transport.write(data)
        wait = self.timeout_s
        while True:
            try:
                return await asyncio.wait_for(asyncio.shield(done), wait)
            except TimeoutError:
                silent = self.clock() - reader.last_read
                wait = max(self.timeout_s - silent, 0.01)
                if silent >= self.timeout_s:
                    reader._fail(
                        StreamError(
                            f"no byte from {self.authority} for {silent:.0f} s "
                            f"(the stream stalled; timeout {self.timeout_s:g} s)"
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
