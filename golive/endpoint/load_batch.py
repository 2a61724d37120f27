"""One batch of the load generator: requests at concurrency C, each on its own lane, and the level's row summarised
from their timelines (docs/metrics.md), goodput against the SLO included."""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from golive.endpoint.bounded import DEFAULT_CAPS, Caps
from golive.endpoint.levels import LevelResult
from golive.endpoint.load_request import Attempt, RequestTiming, Workload, read_timeline, request_body, send
from golive.endpoint.timed_http import Lane
from golive.endpoint.uncertainty import aggregate_interval, median_interval, share_interval

Clock = Callable[[], float]


def _percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    # method "inclusive" is numpy's default (linear) percentile
    return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1] if p != 50 else statistics.median(values)


@dataclass(frozen=True)
class Slo:
    """Per-request objectives for goodput, as `vllm bench serve --goodput ttft:MS tpot:MS e2el:MS` (seconds here)."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2el_s: float | None = None

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.ttft_s, self.tpot_s, self.e2el_s))


def meets_slo(timing: RequestTiming, slo: Slo) -> bool:
    """A successful request is good when every objective set holds, exactly as vLLM's client counts it:
    vllm/benchmarks/serve.py `calculate_metrics` (vLLM 0.32): TPOT = (latency − TTFT) ÷ (output tokens − 1), taken as
    0 for a one-token answer; `s >= r` (a value equal to its objective is good); latency and TTFT from the send.
    Failed requests are never good."""
    if timing.error is not None or timing.ttft is None or timing.end is None:
        return False
    tokens = timing.completion_tokens or 0
    tpot = (timing.end - timing.ttft) / (tokens - 1) if tokens > 1 else 0.0
    return all(
        objective >= value
        for objective, value in ((slo.ttft_s, timing.ttft), (slo.tpot_s, tpot), (slo.e2el_s, timing.end))
        if objective is not None
    )


def _listed(interval: tuple[float, float] | None) -> list[float] | None:
    return None if interval is None else list(interval)


def summarize(
    concurrency: int,
    timings: list[RequestTiming],
    started: float,
    ended: float,
    slo: Slo | None = None,
    earlier_s: float = 0.0,
    intervals: bool = True,
) -> LevelResult:
    """The level's row; `earlier_s`: the duration of its earlier batches (timings holds every batch's requests).
    `intervals`: the per-request bootstrap intervals (a batch that is one round of its level needs none: its level's
    interval is its rounds')."""
    ok = [t for t in timings if t.error is None]
    tokens = sum(t.completion_tokens or 0 for t in ok)
    duration = max(ended - started + earlier_s, 1e-9)
    ttfts = [t.ttft for t in ok if t.ttft is not None]
    tpots = [t.tpot for t in ok if t.tpot]
    itls = [gap for t in ok for gap in t.itls]
    e2es = [t.end for t in ok if t.end is not None]
    mean = lambda xs: statistics.fmean(xs) if xs else None  # noqa: E731
    timed = [t for t in ok if t.end is not None]
    good = sum(meets_slo(t, slo) for t in ok) if slo else None
    return LevelResult(
        concurrency=concurrency,
        requests=len(timings),
        failures=len(timings) - len(ok),
        duration_s=duration,
        output_tokens=tokens,
        aggregate_tok_s=tokens / duration,
        per_user_tok_s_p50=_percentile([1 / x for x in tpots], 50),
        ttft_p50_s=_percentile(ttfts, 50),
        ttft_p99_s=_percentile(ttfts, 99),
        ttft_mean_s=mean(ttfts),
        ttfo_p50_s=_percentile([t.first_content for t in ok if t.first_content is not None], 50),
        itl_p50_s=_percentile(itls, 50),
        itl_mean_s=mean(itls),
        tpot_p50_s=_percentile(tpots, 50),
        e2e_p50_s=_percentile(e2es, 50),
        e2e_mean_s=mean(e2es),
        prompt_tokens_p50=_percentile([t.prompt_tokens for t in ok if t.prompt_tokens is not None], 50),
        client_usage_mismatches=sum(t.client_tokens != t.completion_tokens for t in ok),
        errors=sorted({t.error for t in timings if t.error})[:5],
        aggregate_tok_s_ci=_listed(
            aggregate_interval(
                tokens / duration, [t.completion_tokens or 0 for t in timed], [t.end or 0.0 for t in timed]
            )
        )
        if intervals
        else None,
        per_user_tok_s_p50_ci=_listed(median_interval([1 / x for x in tpots])) if intervals else None,
        ttft_p50_s_ci=_listed(median_interval(ttfts)) if intervals else None,
        good_requests=good,
        goodput_req_s=None if good is None else good / duration,
        goodput_share=None if good is None or not ok else good / len(ok),
        goodput_share_ci=None if good is None or not intervals else _listed(share_interval(good, len(ok))),
    )


def lanes(
    url: str,
    count: int,
    timeout_s: float,
    ca_file: str | None = None,
    clock: Clock = time.perf_counter,
    caps: Caps = DEFAULT_CAPS,
) -> list[Lane]:
    """One lane (one keep-alive connection) per request in flight. One shared pool of C connections would cost
    O(C²) per request start and end (httpcore 1.0's pool bookkeeping: ~20 ms at 256 connections, the event loop
    blocked), which delays every other stream's timestamps; bench/stream_truth.py measures the difference."""
    return [Lane(url, timeout_s, ca_file, clock, caps) for _ in range(count)]


async def run_level(
    clients: list[Lane],
    workload: Workload,
    headers: dict,
    concurrency: int,
    requests: int,
    deadline: float,
    sentences: int,
    clock: Clock = time.perf_counter,
) -> tuple[list[RequestTiming], float, float]:
    """`requests` requests with at most `concurrency` in flight (each on its own lane of `clients`); none is
    started after `deadline`."""
    free: asyncio.Queue[Lane] = asyncio.Queue()
    for client in clients[:concurrency]:
        free.put_nowait(client)

    # bodies built before the clock starts: building 256 while the first answers arrive delays those (~40 µs each)
    bodies = [request_body(workload, sentences) for _ in range(requests)]

    async def gated(prepared: tuple[str, bytes]) -> Attempt | None:
        client = await free.get()
        try:
            if clock() > deadline:
                return None
            return await send(client, prepared, headers)
        finally:
            free.put_nowait(client)

    collecting = gc.isenabled()
    gc.collect()
    gc.disable()  # a full collection mid-level stalls every stream for tens of ms (timeit turns it off for this too)
    try:
        started = clock()
        done = await asyncio.gather(*(gated(body) for body in bodies))
        ended = clock()
    finally:
        if collecting:
            gc.enable()
    return [read_timeline(a, workload) for a in done if a is not None], started, ended
