"""The load generator's former transport (golive 0.2.0): httpx, one client per request in flight. Kept only so
bench/stream_truth.py can measure it against golive.endpoint.timed_http in the same run (`--transports`)."""

from __future__ import annotations

import time

import httpx

from golive.endpoint.load_request import RequestTiming, SseParser, read_event


class HttpxLane:
    """Quacks like golive.endpoint.timed_http.Lane for `one_request`'s callers in the bench."""

    def __init__(self, url: str, timeout_s: float, clock=time.perf_counter) -> None:
        self.url = url
        one = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        self.client = httpx.AsyncClient(timeout=timeout_s, limits=one)
        self.clock = clock

    async def aclose(self) -> None:
        await self.client.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()


async def httpx_send(lane: HttpxLane, prepared: tuple[str, bytes], headers: dict) -> RequestTiming:
    """`golive.endpoint.load_request.send`'s part, the way golive 0.2.0 did it: parsed while reading, so a timeline
    comes back."""
    salt, body = prepared
    timing = RequestTiming(sent=lane.clock(), salt=salt)
    try:
        async with lane.client.stream(
            "POST", lane.url, content=body, headers={**headers, "Content-Type": "application/json"}
        ) as response:
            parser = SseParser()
            async for chunk in response.aiter_raw():
                for data, at in parser.feed(chunk, lane.clock()):
                    read_event(timing, data, at - timing.sent)
        timing.end = lane.clock() - timing.sent
    except (httpx.HTTPError, ValueError) as exc:
        timing.error = f"{type(exc).__name__}: {exc}"[:300]
    return timing
