"""Probes under load: known-answer requests sent while the load generator keeps the gate level in flight.

Batching bugs (a kernel that is wrong only at some batch sizes, a scheduler that mixes sequences, a KV cache block
reused too early) leave a single request right and break answers under load. The load side reuses golive's load
generator (`one_request`): C requests in flight, one after another, until every probe has answered, never more than
`max_load_requests`, none started after `deadline`. The probes are plain chat requests sent from threads.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from golive.endpoint.client import ChatResult
from golive.endpoint.load_batch import lanes
from golive.endpoint.load_request import RequestTiming, Workload, one_request, sentences_for
from golive.endpoint.target import EndpointTarget
from golive.endpoint.timed_http import Lane
from golive.endpoint.tls import trusting
from golive.endpoint.toolcalls import GET_WEATHER, WEATHER_QUESTION


@dataclass(frozen=True)
class Probe:
    name: str
    question: str
    tools: list[dict] | None
    expect: str  # what a right answer is, in words

    def judge(self, result: ChatResult) -> str | None:
        """None when `result` (a ChatResult) is right; else what came back."""
        if self.tools:
            calls = [(name, _args(arguments)) for name, arguments in result.tool_calls]
            ok = (
                len(calls) == 1
                and calls[0][0] == "get_weather"
                and str(calls[0][1].get("city", "")).strip().lower() == "paris"
            )
            return (
                None
                if ok
                else (
                    f"tool calls {result.tool_calls}, content {result.content[:120]!r}, "
                    f"finish_reason {result.finish_reason}"
                )
            )
        number = self.expect
        ok = re.search(rf"(?<![\d.]){re.escape(number)}(?![\d])", result.content or "") is not None
        return None if ok else f"content {(result.content or '')[:160]!r}, finish_reason {result.finish_reason}"


def _args(arguments: str) -> dict:
    try:
        value = json.loads(arguments)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


# the smoke test's tool call, and small sums whose answers differ: a batch that swaps answers is caught too
PROBES = (
    Probe(
        "tool call get_weather(Paris)",
        WEATHER_QUESTION,
        [GET_WEATHER],
        "one get_weather call with city Paris",
    ),
    Probe("arithmetic 17 * 23", "What is 17 * 23?", None, "391"),
    Probe("arithmetic 48 + 19", "What is 48 + 19?", None, "67"),
    Probe(
        "tool call get_weather(Paris), again",
        WEATHER_QUESTION,
        [GET_WEATHER],
        "one get_weather call with city Paris",
    ),
    Probe("arithmetic 96 - 58", "What is 96 - 58?", None, "38"),
    Probe("arithmetic 12 * 12", "What is 12 * 12?", None, "144"),
)


@dataclass
class ProbeOutcome:
    probe: Probe
    wrong: str | None  # None: right
    load_in_flight: int  # load requests in flight when the probe was sent


@dataclass
class UnderLoad:
    outcomes: list[ProbeOutcome]
    load: list[RequestTiming] = field(default_factory=list)

    @property
    def load_failures(self) -> int:
        return sum(t.error is not None for t in self.load)


async def probes_under_load(
    target: EndpointTarget,
    workload: Workload,
    concurrency: int,
    probes: list[Probe],
    ask: Callable[[Probe], ChatResult],
    max_load_requests: int,
    deadline: float,
    probes_in_flight: int,
) -> UnderLoad:
    """Keep `concurrency` load requests in flight; once they are all going, send the probes (`ask` answers one, in a
    thread; at most `probes_in_flight` at a time); stop the load when the last probe has answered."""
    headers = target.headers()
    load: list[RequestTiming] = []
    in_flight = 0
    started = asyncio.Event()
    probing_done = asyncio.Event()
    budget = [max_load_requests]

    async with httpx.AsyncClient(timeout=target.request_timeout_s, verify=trusting(target.ca_file)) as client:
        sentences = await sentences_for(client, target.root, workload, headers, target.caps, target.request_timeout_s)

        async def worker(lane: Lane) -> None:
            nonlocal in_flight
            while not probing_done.is_set() and budget[0] > 0 and time.perf_counter() < deadline:
                budget[0] -= 1
                in_flight += 1
                if in_flight == concurrency:
                    started.set()
                try:
                    load.append(await one_request(lane, workload, headers, sentences=sentences))
                finally:
                    in_flight -= 1
            started.set()  # the budget or the deadline ran out before the load was up: probe anyway

        gate = asyncio.Semaphore(probes_in_flight)

        async def probe(p: Probe) -> ProbeOutcome:
            async with gate:
                seen = in_flight
                try:
                    result = await asyncio.to_thread(ask, p)
                except Exception as exc:  # noqa: BLE001 - an HTTP error is a wrong answer, named as such
                    return ProbeOutcome(p, f"{type(exc).__name__}: {str(exc)[:200]}", seen)
                return ProbeOutcome(p, p.judge(result), seen)

        own_lanes = lanes(target.chat_url, concurrency, target.request_timeout_s, target.ca_file, caps=target.caps)
        workers = [asyncio.create_task(worker(lane)) for lane in own_lanes]
        try:
            await started.wait()
            outcomes = await asyncio.gather(*(probe(p) for p in probes))
        finally:
            probing_done.set()
            await asyncio.gather(*workers)
            for lane in own_lanes:
                await lane.aclose()
    return UnderLoad(list(outcomes), load)
