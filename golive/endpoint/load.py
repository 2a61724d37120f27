"""The load generator: streamed chat requests at fixed concurrency levels, timed when bytes arrive.

Metric definitions are docs/metrics.md; this module follows them exactly. Each request is salted (a unique prefix) so
the prefix cache cannot fake prefill, asks for exactly `output_tokens` (`max_tokens` + vLLM's `ignore_eos`), and asks
for the server's token counts (`stream_options.include_usage`). Warm-up requests run first and are never measured.

SSE is parsed here, not by an SSE library: the timestamp of an event is when its last byte arrived, which a
line-iterator built on top of the transport cannot tell us. The transport is golive.endpoint.timed_http (why not httpx:
there).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import json
import statistics
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from golive.endpoint.client import parse_metrics
from golive.endpoint.levels import LevelResult
from golive.endpoint.longctx import filler
from golive.endpoint.target import EndpointTarget
from golive.endpoint.timed_http import Lane, StreamedResponse, StreamError
from golive.endpoint.timeline import LEVEL, PRIMING, ROUND, WARMUP, Batch, PathProbe, Stream
from golive.endpoint.timeline import batch_of as batch_record
from golive.endpoint.tls import trusting
from golive.endpoint.uncertainty import aggregate_interval, median_interval, share_interval

Clock = Callable[[], float]


class SseParser:
    """Feed raw bytes with their arrival time; get back (data, time) for each complete `data:` event.

    >>> p = SseParser(); p.feed(b'data: {"a"', 1.0); p.feed(b': 1}\\n\\n', 2.0)
    [('{"a": 1}', 2.0)]
    """

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[str] = []

    def feed(self, chunk: bytes, at: float) -> list[tuple[str, float]]:
        events: list[tuple[str, float]] = []
        self._buffer += chunk
        while True:
            cut = self._buffer.find(b"\n")
            if cut < 0:
                return events
            line, self._buffer = self._buffer[:cut].rstrip(b"\r"), self._buffer[cut + 1 :]
            if not line:  # a blank line ends the event
                if self._data:
                    events.append(("\n".join(self._data), at))
                    self._data = []
            elif line.startswith(b"data:"):
                self._data.append(line[5:].removeprefix(b" ").decode(errors="replace"))  # bad bytes: the JSON says
            # comments (":") and other fields (event:, id:, retry:) carry nothing we time


@dataclass
class RequestTiming:
    """One request's timeline, in seconds since it was sent (docs/metrics.md)."""

    sent: float  # absolute clock time the request was sent
    token_times: list[float] = field(default_factory=list)  # arrival of each event that carried generated text
    first_content: float | None = None  # first event with content or a tool call (what the user sees)
    end: float | None = None  # arrival of the last byte (after [DONE])
    prompt_tokens: int | None = None
    completion_tokens: int | None = None  # the server's count (usage)
    error: str | None = None
    salt: str | None = None  # the prompt's unique prefix: finds the request in the server's log

    @property
    def ttft(self) -> float | None:
        return self.token_times[0] if self.token_times else None

    @property
    def client_tokens(self) -> int:
        """The client's own count: events that carried generated text (a cross-check on usage)."""
        return len(self.token_times)

    @property
    def itls(self) -> list[float]:
        return [b - a for a, b in itertools.pairwise(self.token_times)]

    @property
    def tpot(self) -> float | None:
        """(E2E − TTFT) ÷ (tokens − 1), as vLLM's client and AIPerf define it: the end of the stream, not the last
        token event, since a lagging server merges tokens into fewer events (the last can come with the first)."""
        if self.ttft is None or self.end is None or not self.completion_tokens or self.completion_tokens < 2:
            return None
        decode = self.end - self.ttft
        return decode / (self.completion_tokens - 1) if decode > 0 else None


def read_event(timing: RequestTiming, data: str, at: float) -> bool:
    """Apply one SSE event (at `at` seconds since send) to the timeline; True at [DONE]. An event that is not an
    OpenAI chunk raises ValueError (the request's error)."""
    if data.strip() == "[DONE]":
        return True
    chunk = _object(json.loads(data), "event")
    if chunk.get("error"):
        error = chunk["error"]
        timing.error = str(error.get("message", error) if isinstance(error, dict) else error)[:300]
    if chunk.get("usage"):
        usage = _object(chunk["usage"], "usage")
        timing.prompt_tokens = _count(usage.get("prompt_tokens"))
        timing.completion_tokens = _count(usage.get("completion_tokens"))
    choices = chunk.get("choices") or []
    if not isinstance(choices, list):
        raise ValueError(f"`choices` is not a list: {str(choices)[:80]!r}")
    for choice in choices:
        delta = _object(_object(choice, "choice").get("delta") or {}, "delta")
        # vLLM 0.32 says `reasoning`; older builds said `reasoning_content`: both are generated text (TTFT counts them)
        shown = delta.get("content") or delta.get("tool_calls")
        if shown or delta.get("reasoning") or delta.get("reasoning_content"):
            timing.token_times.append(at)
        if shown and timing.first_content is None:
            timing.first_content = at
    return False


def _object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"the stream's {what} is not a JSON object: {str(value)[:80]!r}")
    return value


def _count(value: object) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise ValueError(f"a token count that is not a number: {str(value)[:80]!r}")
    return value


SAMPLE_SENTENCES = 20


def prompt(sentences: int, salt: str) -> str:
    """A unique prefix first (no cached block can match it), then filler sentences."""
    return " ".join([f"[{salt}] Continue the notes.", *filler(sentences, seed=7)])


async def sentences_for(client: httpx.AsyncClient, root: str, workload: Workload, headers: dict) -> int:
    """How many filler sentences make the request `prompt_tokens` long as the server counts it (usage.prompt_tokens,
    chat template included): two /tokenize calls on the chat messages (vLLM's), the prefix alone and with
    SAMPLE_SENTENCES. Where the server has no /tokenize, ~10 tokens a sentence; usage reports the real count anyway."""

    async def count(sentences: int) -> int:
        response = await client.post(
            root + "/tokenize",
            headers=headers,
            json={
                "model": workload.model,
                "add_generation_prompt": True,
                "messages": [{"role": "user", "content": prompt(sentences, uuid.uuid4().hex[:12])}],
            },
        )
        return int(response.json()["count"])

    try:
        overhead = await count(0)
        per_sentence = max((await count(SAMPLE_SENTENCES) - overhead) / SAMPLE_SENTENCES, 1)
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        overhead, per_sentence = 0, 10
    return max(0, round((workload.prompt_tokens - overhead) / per_sentence))


@dataclass
class Workload:
    model: str
    prompt_tokens: int
    output_tokens: int
    reasoning_effort: str | None = None


@dataclass
class Attempt:
    """A request as sent and its response as it arrived, not parsed yet (read_timeline does that, later)."""

    salt: str
    sent: float
    response: StreamedResponse | None = None
    error: str | None = None  # the connection failed


def request_body(workload: Workload, sentences: int) -> tuple[str, bytes]:
    """(salt, JSON body) of one load request."""
    salt = uuid.uuid4().hex[:12]
    body = {
        "model": workload.model,
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": prompt(sentences, salt)}],
        "max_tokens": workload.output_tokens,
        "ignore_eos": True,
        "temperature": 0,
    }
    if workload.reasoning_effort:
        body["reasoning_effort"] = workload.reasoning_effort
    return salt, json.dumps(body).encode()


async def send(lane: Lane, prepared: tuple[str, bytes], headers: dict) -> Attempt:
    """Send one streamed chat request (`request_body`'s salt and body) and wait for its whole response, parsing
    nothing: parsing it here would delay the timestamps of every other stream whose bytes arrive meanwhile."""
    salt, body = prepared
    attempt = Attempt(salt=salt, sent=lane.clock())
    try:
        attempt.response = await lane.post(body, headers)
        attempt.sent = attempt.response.sent
    except StreamError as exc:
        attempt.error = f"StreamError: {exc}"[:300]
    return attempt


def read_timeline(attempt: Attempt, workload: Workload) -> RequestTiming:
    """The request's timeline (docs/metrics.md) from its response's pieces and their arrival times."""
    timing = RequestTiming(sent=attempt.sent, salt=attempt.salt, error=attempt.error)
    response = attempt.response
    if response is None:
        return timing
    if response.status != 200:
        timing.error = f"HTTP {response.status}: {response.text()}"
        return timing
    done = False
    parser = SseParser()
    try:
        for arrived, piece in response.pieces:
            for data, at in parser.feed(piece, arrived):
                done = read_event(timing, data, at - timing.sent) or done
    except ValueError as exc:  # an event that is not JSON or not an OpenAI chunk
        timing.error = f"{type(exc).__name__}: {exc}"[:300]
        return timing
    timing.end = None if response.end is None else response.end - timing.sent
    if timing.error is None and not done:
        timing.error = "the stream ended without [DONE]"
    elif timing.error is None and timing.completion_tokens != workload.output_tokens:
        timing.error = f"usage says {timing.completion_tokens} completion tokens, asked for {workload.output_tokens}"
    return timing


async def one_request(lane: Lane, workload: Workload, headers: dict, sentences: int = 4) -> RequestTiming:
    return read_timeline(await send(lane, request_body(workload, sentences), headers), workload)


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
) -> LevelResult:
    """The level's row; `earlier_s`: the duration of its earlier batches (timings holds every batch's requests)."""
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
        ),
        per_user_tok_s_p50_ci=_listed(median_interval([1 / x for x in tpots])),
        ttft_p50_s_ci=_listed(median_interval(ttfts)),
        good_requests=good,
        goodput_req_s=None if good is None else good / duration,
        goodput_share=None if good is None or not ok else good / len(ok),
        goodput_share_ci=None if good is None else _listed(share_interval(good, len(ok))),
    )


def lanes(
    url: str, count: int, timeout_s: float, ca_file: str | None = None, clock: Clock = time.perf_counter
) -> list[Lane]:
    """One lane (one keep-alive connection) per request in flight. One shared pool of C connections would cost
    O(C²) per request start and end (httpcore 1.0's pool bookkeeping: ~20 ms at 256 connections, the event loop
    blocked), which delays every other stream's timestamps; bench/stream_truth.py measures the difference."""
    return [Lane(url, timeout_s, ca_file, clock) for _ in range(count)]


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


@dataclass
class Sweep:
    levels: list[LevelResult]
    not_run: list[int]  # levels the duration bound left out
    refused: list[int] = field(default_factory=list)  # peak levels a production station does not get without consent
    # every batch sent (priming, warm-up, measured, rounds) in order, for the stream-shape and stall rules
    # (golive.endpoint.timeline); times in seconds since `started_at` (epoch), when the sweep's first batch began
    batches: list[Batch] = field(default_factory=list)
    started_at: float = 0.0
    path: PathProbe | None = None  # client vs vLLM TTFT at 1 user (SweepPlan.probe_path)

    def at(self, concurrency: int) -> LevelResult | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)

    def as_dict(self) -> dict:
        return {"levels": [lv.as_dict() for lv in self.levels], "not_run": self.not_run, "refused": self.refused}


PEAK_REFUSED = (
    "not checked because the station is marked `production: true` in the inventory: the peak-load level "
    "({levels} in flight) runs only with consent; to run it, add --allow-peak-load "
    "(`golive run INVENTORY --allow-peak-load`)"
)


def levels_to_run(levels: Iterable[int], production: bool, allow_peak_load: bool) -> tuple[list[int], list[int]]:
    """(levels to run, levels refused): a production station is spared the sweep's top level unless allowed."""
    levels = sorted(set(levels))
    if not production or allow_peak_load:
        return levels, []
    return levels[:-1], levels[-1:]


# (the level just measured, the levels before it) → where more requests could decide a floor whose interval
# straddles it: "ratio" (the level or the 1-user level), "level" (this level), None (every floor decided)
Undecided = Callable[[LevelResult, list[LevelResult]], str | None]


@dataclass(frozen=True)
class SweepPlan:
    """What a sweep may send: the levels (users in flight), the batches per level and the profile's bounds."""

    levels: tuple[int, ...]
    repeats: int  # measured requests per level: repeats × users (at least min_requests)
    warmup: int  # unmeasured requests per level before it: warmup × users
    max_duration_s: float  # the whole sweep, warm-up and rounds included
    slo: Slo | None = None  # goodput counts the requests within it
    undecided: Undecided | None = None  # another batch while a floor cannot be judged yet
    max_requests: int | None = None  # every request sent, warm-up included
    min_requests: int = 1
    paired: int | None = None  # the gate level whose ratio to 1 user is read in rounds
    rounds: int = 0
    probe_path: bool = False  # time GET /health, and read vLLM's own TTFT around each 1-user measured batch


@dataclass
class _Measured:
    """One level's requests so far (every batch), and its row."""

    timings: list[RequestTiming]
    warm: list[RequestTiming]
    spent_s: float  # the wall time of its measured batches
    batches: int
    level: LevelResult
    rounds: list[tuple[LevelResult, LevelResult]] = field(default_factory=list)  # (1 user, this level) per round
    engine_samples: list[list[float]] = field(default_factory=list)

    def row(self, concurrency: int, slo: Slo | None) -> LevelResult:
        level = _row(concurrency, self.timings, self.warm, self.spent_s, self.batches, slo)
        level.engine_samples = self.engine_samples or None
        if self.rounds:
            level.scaling_rounds = [
                top.aggregate_tok_s / one.aggregate_tok_s if one.aggregate_tok_s > 0 else 0.0
                for one, top in self.rounds
            ]
            level.per_user_rounds = [
                None
                if not one.per_user_tok_s_p50 or top.per_user_tok_s_p50 is None
                else top.per_user_tok_s_p50 / one.per_user_tok_s_p50
                for one, top in self.rounds
            ]
        return level


RUNNING, WAITING = "vllm:num_requests_running", "vllm:num_requests_waiting"


async def engine_counts(
    client: httpx.AsyncClient,
    root: str,
    headers: dict,
    model: str,
    done: asyncio.Event,
    every_s: float = 0.1,
    timeout_s: float = 10,
) -> list[list[float]]:
    """[running, waiting] from vLLM's /metrics gauges (the served model's series summed over engines), polled every
    `every_s` until `done`; polls that did not give both are left out. Read only: a GET, like Prometheus' scrape."""
    samples: list[list[float]] = []
    while not done.is_set():
        with contextlib.suppress(httpx.HTTPError, ValueError):
            response = await client.get(f"{root}/metrics", headers=headers, timeout=timeout_s)
            if response.status_code == 200:
                # only the two gauges' lines go to the parser: the whole page is ~100 kB, polled ten times a second
                lines = "\n".join(line for line in response.text.splitlines() if line.startswith((RUNNING, WAITING)))
                found = parse_metrics(lines + "\n")
                served = [
                    [value for labels, value in found.get(name, []) if labels.get("model_name", model) == model]
                    for name in (RUNNING, WAITING)
                ]
                if all(served):
                    samples.append([sum(values) for values in served])
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), every_s)
    return samples


TTFT_SUM, TTFT_COUNT = "vllm:time_to_first_token_seconds_sum", "vllm:time_to_first_token_seconds_count"


async def vllm_ttft(
    client: httpx.AsyncClient, root: str, headers: dict, model: str, timeout_s: float = 10
) -> tuple[float, float] | str:
    """(sum, count) of vLLM's `vllm:time_to_first_token_seconds` histogram for the served model (summed over
    engines), or why it could not be read."""
    try:
        response = await client.get(f"{root}/metrics", headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return f"GET /metrics did not answer ({type(exc).__name__})"
    if response.status_code != 200:
        return f"GET /metrics answered HTTP {response.status_code}"
    lines = "\n".join(line for line in response.text.splitlines() if line.startswith((TTFT_SUM, TTFT_COUNT)))
    try:
        found = parse_metrics(lines + "\n")
    except ValueError:
        return "GET /metrics is not Prometheus text"
    served = [
        [value for labels, value in found.get(name, []) if labels.get("model_name", model) == model]
        for name in (TTFT_SUM, TTFT_COUNT)
    ]
    if not all(served):
        return "GET /metrics has no vllm:time_to_first_token_seconds histogram for the served model"
    return sum(served[0]), sum(served[1])


async def round_trip(client: httpx.AsyncClient, root: str, times: int = 5) -> float | None:
    """The median time of GET /health, a request that generates nothing; None where it never answered 200. Sent
    without the key: vLLM asks none there, and a gateway's keyed /health may call every model (LiteLLM's does)."""
    taken = []
    for _ in range(times):
        with contextlib.suppress(httpx.HTTPError):
            begun = time.perf_counter()
            response = await client.get(f"{root}/health")
            if response.status_code == 200:
                taken.append(time.perf_counter() - begun)
    return statistics.median(taken) if taken else None


async def sweep_async(
    target: EndpointTarget, workload: Workload, plan: SweepPlan, progress: Callable[[str], None] = lambda line: None
) -> Sweep:
    """Each level: `warmup` × C requests (not measured), then `repeats` × C requests (at least `min_requests`)
    measured, C in flight; while `undecided` says a floor of that level cannot be judged yet, another batch of it.

    Then the ratio rounds, when `paired` (the gate level) and 1 user were both measured: `rounds` rounds (more while
    a ratio is undecided), each a 1-user batch and a `paired` batch back to back (the order alternating), each giving
    one ratio. A ratio reads the median of its rounds with the bootstrap interval of that median: two batches a few
    seconds apart meet the same machine, so other work starting or stopping moves both sides of a round instead of
    one side of the ratio, and a round that met a change anyway is one outlier among the rounds (measured on this
    2-core machine with two CPU hogs: the 1-user aggregate swung 20–711 tok/s between batches, 8 users collapsed to
    62 tok/s for ~10 s; 25 rounds gave a median of 4.2× with 3 outliers). Round batches count in their levels' rows
    too. All within `max_requests` (every request sent, warm-up included) and `max_duration_s`."""
    levels = sorted(set(plan.levels))
    repeats, warmup, slo, undecided = plan.repeats, plan.warmup, plan.slo, plan.undecided
    max_requests, min_requests, paired, rounds = plan.max_requests, plan.min_requests, plan.paired, plan.rounds
    sent = 0
    headers = target.headers()
    deadline = time.perf_counter() + plan.max_duration_s
    measured: dict[int, _Measured] = {}
    not_run: list[int] = []

    def batch_of(concurrency: int) -> int:
        return max(repeats * concurrency, min_requests)

    def room(*concurrencies: int) -> bool:
        needed = sum(batch_of(c) for c in concurrencies)
        return time.perf_counter() < deadline and (max_requests is None or sent + needed <= max_requests)

    def earlier(concurrency: int) -> list[LevelResult]:
        return [m.level for c, m in sorted(measured.items()) if c < concurrency]

    def pending(concurrency: int) -> str | None:
        return None if undecided is None else undecided(measured[concurrency].level, earlier(concurrency))

    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(c)
            for c in lanes(target.chat_url, max(levels), target.request_timeout_s, target.ca_file)
        ]
        light = await stack.enter_async_context(
            httpx.AsyncClient(timeout=target.request_timeout_s, verify=trusting(target.ca_file))
        )
        sentences = await sentences_for(light, target.root, workload, headers)
        path = None
        if plan.probe_path:
            path = PathProbe(round_trip_s=await round_trip(light, target.root))
        batches: list[Batch] = []
        origin, started_at = time.perf_counter(), time.time()

        async def timed(
            kind: str, concurrency: int, count: int, round_: int | None = None
        ) -> tuple[list[RequestTiming], float, float]:
            """One batch (run_level), recorded for the stream-shape and stall rules; around a 1-user measured batch,
            vLLM's own TTFT histogram is read too (plan.probe_path)."""
            probing = path is not None and path.problem is None and concurrency == 1 and kind in (LEVEL, ROUND)
            before = (
                await vllm_ttft(light, target.root, headers, workload.model, target.light_timeout_s)
                if probing
                else None
            )
            timings, started, ended = await run_level(
                clients, workload, headers, concurrency, count, deadline, sentences
            )
            if path is not None and before is not None:
                after = await vllm_ttft(light, target.root, headers, workload.model, target.light_timeout_s)
                if isinstance(before, str) or isinstance(after, str):
                    path.problem = before if isinstance(before, str) else str(after)
                else:
                    path.add([t.ttft for t in timings if t.ttft is not None], before, after)
            streams = [
                Stream(t.sent - origin, t.token_times, t.end, t.completion_tokens, t.error is None) for t in timings
            ]
            record = batch_record(kind, concurrency, streams, started - origin, ended - origin)
            batches.append(replace(record, round=round_) if round_ is not None else record)
            return timings, started, ended

        async def extend(concurrency: int, kind: str = LEVEL, round_: int | None = None) -> LevelResult:
            """One more batch of this level; returns that batch's own row."""
            nonlocal sent
            m = measured[concurrency]
            more, started, ended = await timed(kind, concurrency, batch_of(concurrency), round_)
            sent += len(more)
            m.timings += more
            m.spent_s += ended - started
            m.batches += 1
            m.level = m.row(concurrency, slo)
            return summarize(concurrency, more, started, ended, slo)

        pairing = paired is not None and paired != 1 and rounds > 0

        async def extend_watched(concurrency: int, round_: int) -> LevelResult:
            """A batch with vLLM's running and waiting counts polled beside it (the batch check reads them)."""
            done = asyncio.Event()
            poll = asyncio.ensure_future(
                engine_counts(light, target.root, headers, workload.model, done, timeout_s=target.light_timeout_s)
            )
            try:
                return await extend(concurrency, ROUND, round_)
            finally:
                done.set()
                measured[concurrency].engine_samples += await poll

        async def ratio_round() -> None:
            assert paired is not None
            m = measured[paired]
            order = (1, paired) if len(m.rounds) % 2 == 0 else (paired, 1)
            number = len(m.rounds) + 1
            batch = {c: await (extend_watched(c, number) if c == paired else extend(c, ROUND, number)) for c in order}
            m.rounds.append((batch[1], batch[paired]))
            m.level = m.row(paired, slo)
            ratio = m.level.scaling_rounds[-1] if m.level.scaling_rounds else None
            progress(
                f"load: round {len(m.rounds)}: 1 user {batch[1].aggregate_tok_s:,.1f} tok/s, {paired} users "
                f"{batch[paired].aggregate_tok_s:,.1f} tok/s: {_fmt(ratio, '.2f')}×"
            )

        async def settle(concurrency: int) -> None:
            """More requests while a floor read at this level is undecided: a batch of the level, or (a ratio) a
            round, once the rounds have begun."""
            while kind := pending(concurrency):
                if kind == "ratio":
                    if not (pairing and concurrency == paired and measured[concurrency].rounds and room(1, paired)):
                        return
                    await ratio_round()
                elif room(concurrency):
                    await extend(concurrency)
                else:
                    return

        if warmup:
            # the station warmed once at the top level first: measured right after start, a fresh server's first
            # requests (allocation, first batch shapes) made the first 1-user batch 10× slower than the same level
            # measured after the others; not counted in any level, every request still sent within max_requests
            top = levels[-1]
            primed, _, _ = await timed(PRIMING, top, warmup * top)
            sent += len(primed)
        for concurrency in levels:
            if time.perf_counter() > deadline:
                not_run.append(concurrency)
                continue
            warm: list[RequestTiming] = []
            if warmup:
                warm, _, _ = await timed(WARMUP, concurrency, warmup * concurrency)
            timings, started, ended = await timed(LEVEL, concurrency, batch_of(concurrency))
            sent += len(warm) + len(timings)
            measured[concurrency] = _Measured(
                timings, warm, ended - started, 1, _row(concurrency, timings, warm, ended - started, 1, slo)
            )
            await settle(concurrency)
            _progress_line(progress, measured[concurrency].level)
        if pairing and 1 in measured and paired in measured:
            while len(measured[paired].rounds) < rounds and room(1, paired):
                await ratio_round()
            for concurrency in sorted(measured)[1:]:
                await settle(concurrency)
    return Sweep(
        [m.level for _, m in sorted(measured.items())], not_run, batches=batches, started_at=started_at, path=path
    )


def _row(
    concurrency: int,
    timings: list[RequestTiming],
    warm: list[RequestTiming],
    spent_s: float,
    batches: int,
    slo: Slo | None,
) -> LevelResult:
    level = summarize(concurrency, timings, 0.0, spent_s, slo)
    level.batches = batches
    level.warmup_failures = sum(t.error is not None for t in warm)
    level.errors = sorted({*level.errors, *(t.error for t in warm if t.error)})[:5]
    return level


def _progress_line(progress: Callable[[str], None], level: LevelResult, note: str = "") -> None:
    progress(
        f"load: {level.concurrency:>4} in flight: {level.requests} requests, {level.failures} failed, "
        f"{level.aggregate_tok_s:,.1f} tok/s aggregate, "
        f"{_fmt(level.per_user_tok_s_p50, '.1f')} tok/s per user (p50), "
        f"TTFT p50 {_fmt(level.ttft_p50_s, '.3f')} s{note}"
    )


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def sweep(
    target: EndpointTarget, workload: Workload, plan: SweepPlan, progress: Callable[[str], None] = lambda line: None
) -> Sweep:
    """`sweep_async` from synchronous code (a check)."""
    return asyncio.run(sweep_async(target, workload, plan, progress))
