"""An HTTP/1.1 proxy in front of a real station that injects one fault at its n-th request: the answer cut part-way
(the connection closes under the client), or an action run just before the request goes on (the engine killed);
or one on every request: each answer held until it ends and sent at once (`hold`: nginx's `proxy_buffering on` for
an event stream), each request held `delay_s` before it goes on (a distant gateway).

    with FaultProxy(upstream_port, fault_at=7, cut_at=0.4) as proxy:   # the 7th answer stops at 40 % of its bytes
        proxy.base_url                 # http://127.0.0.1:PORT/v1
        proxy.requests, proxy.cuts     # what it saw and did
    with FaultProxy(upstream_port, hold=True) as proxy: ...            # every answer arrives whole
    with FaultProxy(upstream_port, delay_s=0.3) as proxy: ...          # 300 ms more for every request

Each request is sent upstream on its own connection with `Connection: close`, so an answer (chunked, streamed or
not) ends where the upstream closes; the client gets the upstream's bytes as they come and reconnects for the next
request. Only what a station's clients send is understood: a request line, headers, a Content-Length body.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable

HEAD_END = b"\r\n\r\n"


class FaultProxy:
    def __init__(
        self,
        upstream_port: int,
        fault_at: int = 0,
        cut_at: float | None = None,
        before: Callable[[], None] | None = None,
        hold: bool = False,
        delay_s: float = 0.0,
        counting: bytes = b"",
    ):
        self.upstream_port = upstream_port
        self.fault_at = fault_at  # the request (1-based) the fault meets; 0: none
        self.cut_at = cut_at  # that answer stops after this share of its bytes (None: not cut)
        self.before = before  # run just before that request goes upstream
        self.hold = hold  # every answer read whole from upstream, then written at once
        self.delay_s = delay_s  # every request waits this long before it goes upstream
        self.counting = counting  # fault_at counts only requests whose head holds this (b"/chat/completions")
        self.counted = 0
        self.requests = self.cuts = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the fault proxy did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            self._loop.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            head = await reader.readuntil(HEAD_END)
            body = await reader.readexactly(_content_length(head))
            self.requests += 1
            self.counted += self.counting in head
            due = self.counting in head and self.counted == self.fault_at
            if due and self.before is not None:
                await asyncio.get_running_loop().run_in_executor(None, self.before)
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            except OSError:  # the upstream is gone: the client sees its connection closed unanswered
                writer.transport.abort()
                return
            up_writer.write(_closing(head) + body)
            if self.hold and not (due and self.cut_at is not None):
                writer.write(await up_reader.read())  # all of it, when the upstream closes, in one write
                await writer.drain()
                up_writer.close()
                with contextlib.suppress(ConnectionError):
                    writer.close()
                return
            if due and self.cut_at is not None:
                answer = await up_reader.read()  # all of it, then only the first part goes on
                writer.write(answer[: max(1, int(len(answer) * self.cut_at))])
                await writer.drain()
                self.cuts += 1
                writer.transport.abort()
                return
            while chunk := await up_reader.read(65536):
                writer.write(chunk)
                await writer.drain()
            up_writer.close()
        with contextlib.suppress(ConnectionError):
            writer.close()


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


def _closing(head: bytes) -> bytes:
    """The request's head with `Connection: close` in place of whatever it asked for."""
    lines = [
        line
        for line in head[: -len(HEAD_END)].split(b"\r\n")
        if line.partition(b":")[0].strip().lower() != b"connection"
    ]
    return b"\r\n".join([*lines, b"Connection: close"]) + HEAD_END
