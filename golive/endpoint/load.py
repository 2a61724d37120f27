"""The load generator: streamed chat requests at fixed concurrency levels, timed when bytes arrive.

Metric definitions are docs/metrics.md; this module follows them exactly. Each request is salted (a unique prefix) so
the prefix cache cannot fake prefill, asks for exactly `output_tokens` (`max_tokens` + vLLM's `ignore_eos`), and asks
for the server's token counts (`stream_options.include_usage`). Warm-up requests run first and are never measured.

SSE is parsed here, not by an SSE library: the timestamp of an event is when its last byte arrived, which a
line-iterator built on top of the transport cannot tell us.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import asdict, dataclass, field

import httpx

from golive.endpoint.longctx import filler
from golive.endpoint.tls import trusting

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
        events = []
        self._buffer += chunk
        while True:
            cut = self._buffer.find(b"\n")
            if cut < 0:
                return events
            line, self._buffer = self._buffer[:cut].rstrip(b"\r"), self._buffer[cut + 1:]
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
        return [b - a for a, b in zip(self.token_times, self.token_times[1:])]

    @property
    def tpot(self) -> float | None:
        if self.ttft is None or self.end is None or not self.completion_tokens or self.completion_tokens < 2:
            return None
        return (self.token_times[-1] - self.ttft) / (self.completion_tokens - 1)


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


def _object(value, what: str) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"the stream's {what} is not a JSON object: {str(value)[:80]!r}")
    return value


def _count(value) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise ValueError(f"a token count that is not a number: {str(value)[:80]!r}")
    return value


async def timed_events(chunks: AsyncIterator[bytes], clock: Clock) -> AsyncIterator[tuple[str, float]]:
    parser = SseParser()
    async for chunk in chunks:
        for event in parser.feed(chunk, clock()):
            yield event


SAMPLE_SENTENCES = 20


def prompt(sentences: int, salt: str) -> str:
    """A unique prefix first (no cached block can match it), then filler sentences."""
    return f"[{salt}] Continue the notes. " + " ".join(filler(max(1, sentences), seed=7))


async def sentences_for(client: httpx.AsyncClient, root: str, workload: Workload, headers: dict) -> int:
    """How many filler sentences make `prompt_tokens` on this server's tokenizer: one /tokenize call (vLLM's); where
    the server has none, ~10 tokens a sentence. usage.prompt_tokens reports the real count either way."""
    try:
        response = await client.post(root + "/tokenize", headers=headers, json={
            "model": workload.model, "prompt": prompt(SAMPLE_SENTENCES, "0" * 12), "add_special_tokens": False})
        per_sentence = int(response.json()["count"]) / SAMPLE_SENTENCES
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        per_sentence = 10
    return max(1, round(workload.prompt_tokens / per_sentence))


@dataclass
class Workload:
    model: str
    prompt_tokens: int
    output_tokens: int
    reasoning_effort: str | None = None
    timeout_s: float = 120
    ca_file: str | None = None  # the station's site CA for https (golive.endpoint.tls)


async def one_request(client: httpx.AsyncClient, url: str, workload: Workload, headers: dict,
                      clock: Clock = time.perf_counter, sentences: int = 4) -> RequestTiming:
    salt = uuid.uuid4().hex[:12]
    body = {"model": workload.model, "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": prompt(sentences, salt)}],
            "max_tokens": workload.output_tokens, "ignore_eos": True, "temperature": 0}
    if workload.reasoning_effort:
        body["reasoning_effort"] = workload.reasoning_effort
    timing = RequestTiming(sent=clock(), salt=salt)
    done = False
    try:
        async with client.stream("POST", url, json=body, headers=headers) as response:
            if response.status_code != 200:
                await response.aread()
                timing.error = f"HTTP {response.status_code}: {response.text[:200]}"
                return timing
            async for data, at in timed_events(response.aiter_raw(), clock):
                done = read_event(timing, data, at - timing.sent) or done
        timing.end = clock() - timing.sent
    except (httpx.HTTPError, ValueError) as exc:  # ValueError: an event that is not JSON or not an OpenAI chunk
        timing.error = f"{type(exc).__name__}: {exc}"[:300]
        return timing
    if timing.error is None and not done:
        timing.error = "the stream ended without [DONE]"
    elif timing.error is None and timing.completion_tokens != workload.output_tokens:
        timing.error = f"usage says {timing.completion_tokens} completion tokens, asked for {workload.output_tokens}"
    return timing


def _percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    # method "inclusive" is numpy's default (linear) percentile
    return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1] if p != 50 else statistics.median(values)


@dataclass
class LevelResult:
    """One concurrency level of the sweep: the [002]-style table row, as data."""

    concurrency: int
    requests: int
    failures: int
    duration_s: float
    output_tokens: int
    aggregate_tok_s: float
    per_user_tok_s_p50: float | None
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    ttft_mean_s: float | None
    ttfo_p50_s: float | None
    itl_p50_s: float | None
    itl_mean_s: float | None
    tpot_p50_s: float | None
    e2e_p50_s: float | None
    e2e_mean_s: float | None
    prompt_tokens_p50: float | None
    client_usage_mismatches: int  # requests whose client count differs from usage (cross-check, not a failure)
    warmup_failures: int = 0  # not measured, still a failure of the station
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def summarize(concurrency: int, timings: list[RequestTiming], started: float, ended: float) -> LevelResult:
    ok = [t for t in timings if t.error is None]
    tokens = sum(t.completion_tokens or 0 for t in ok)
    duration = max(ended - started, 1e-9)
    ttfts = [t.ttft for t in ok if t.ttft is not None]
    tpots = [t.tpot for t in ok if t.tpot]
    itls = [gap for t in ok for gap in t.itls]
    e2es = [t.end for t in ok if t.end is not None]
    mean = lambda xs: statistics.fmean(xs) if xs else None  # noqa: E731
    return LevelResult(
        concurrency=concurrency, requests=len(timings), failures=len(timings) - len(ok), duration_s=duration,
        output_tokens=tokens, aggregate_tok_s=tokens / duration,
        per_user_tok_s_p50=_percentile([1 / x for x in tpots], 50),
        ttft_p50_s=_percentile(ttfts, 50), ttft_p99_s=_percentile(ttfts, 99), ttft_mean_s=mean(ttfts),
        ttfo_p50_s=_percentile([t.first_content for t in ok if t.first_content is not None], 50),
        itl_p50_s=_percentile(itls, 50), itl_mean_s=mean(itls), tpot_p50_s=_percentile(tpots, 50),
        e2e_p50_s=_percentile(e2es, 50), e2e_mean_s=mean(e2es),
        prompt_tokens_p50=_percentile([t.prompt_tokens for t in ok if t.prompt_tokens is not None], 50),
        client_usage_mismatches=sum(t.client_tokens != t.completion_tokens for t in ok),
        errors=sorted({t.error for t in timings if t.error})[:5])


def lanes(count: int, timeout_s: float, ca_file: str | None = None) -> list[httpx.AsyncClient]:
    """One client per request in flight, each with one connection. One shared pool of C connections would cost
    O(C²) per request start and end (httpcore 1.0's pool bookkeeping: ~20 ms at 256 connections, the event loop
    blocked), which delays every other stream's timestamps; bench/stream_truth.py measures the difference."""
    one = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    tls = trusting(ca_file)  # one for all: loading the CA bundle takes ~50 ms a client
    return [httpx.AsyncClient(timeout=timeout_s, limits=one, verify=tls) for _ in range(count)]


async def run_level(clients: list[httpx.AsyncClient], url: str, workload: Workload, headers: dict, concurrency: int,
                    requests: int, deadline: float, sentences: int,
                    clock: Clock = time.perf_counter) -> tuple[list[RequestTiming], float, float]:
    """`requests` requests with at most `concurrency` in flight (each on its own lane of `clients`); none is
    started after `deadline`."""
    free: asyncio.Queue[httpx.AsyncClient] = asyncio.Queue()
    for client in clients[:concurrency]:
        free.put_nowait(client)

    async def gated() -> RequestTiming | None:
        client = await free.get()
        try:
            if clock() > deadline:
                return None
            return await one_request(client, url, workload, headers, clock, sentences)
        finally:
            free.put_nowait(client)

    started = clock()
    done = await asyncio.gather(*(gated() for _ in range(requests)))
    return [t for t in done if t is not None], started, clock()


@dataclass
class Sweep:
    levels: list[LevelResult]
    not_run: list[int]  # levels the duration bound left out
    refused: list[int] = field(default_factory=list)  # peak levels a production station does not get without consent

    def at(self, concurrency: int) -> LevelResult | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)

    def as_dict(self) -> dict:
        return {"levels": [lv.as_dict() for lv in self.levels], "not_run": self.not_run, "refused": self.refused}


PEAK_REFUSED = ("not checked because the station is marked `production: true` in the inventory: the peak-load level "
                "({levels} in flight) runs only with consent; to run it, add --allow-peak-load "
                "(`golive run INVENTORY --allow-peak-load`)")


def levels_to_run(levels: Iterable[int], production: bool, allow_peak_load: bool) -> tuple[list[int], list[int]]:
    """(levels to run, levels refused): a production station is spared the sweep's top level unless allowed."""
    levels = sorted(set(levels))
    if not production or allow_peak_load:
        return levels, []
    return levels[:-1], levels[-1:]


async def sweep_async(base_url: str, api_key: str | None, workload: Workload, levels: Iterable[int], repeats: int,
                      warmup: int, max_duration_s: float, progress: Callable[[str], None] = lambda line: None) -> Sweep:
    """Each level: `warmup` × C requests (not measured), then `repeats` × C requests measured, C in flight."""
    levels = sorted(set(levels))
    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    deadline = time.perf_counter() + max_duration_s
    results, not_run = [], []
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(c) for c in lanes(max(levels), workload.timeout_s, workload.ca_file)]
        sentences = await sentences_for(clients[0], base_url.rstrip("/").removesuffix("/v1"), workload, headers)
        for concurrency in levels:
            if time.perf_counter() > deadline:
                not_run.append(concurrency)
                continue
            warm = []
            if warmup:
                warm, _, _ = await run_level(clients, url, workload, headers, concurrency, warmup * concurrency,
                                             deadline, sentences)
            timings, started, ended = await run_level(clients, url, workload, headers, concurrency,
                                                      repeats * concurrency, deadline, sentences)
            level = summarize(concurrency, timings, started, ended)
            level.warmup_failures = sum(t.error is not None for t in warm)
            level.errors = sorted({*level.errors, *(t.error for t in warm if t.error)})[:5]
            results.append(level)
            progress(f"load: {concurrency:>4} in flight: {level.requests} requests, {level.failures} failed, "
                     f"{level.aggregate_tok_s:,.1f} tok/s aggregate, "
                     f"{_fmt(level.per_user_tok_s_p50, '.1f')} tok/s per user (p50), "
                     f"TTFT p50 {_fmt(level.ttft_p50_s, '.3f')} s")
    return Sweep(results, not_run)


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def sweep(*args, **kwargs) -> Sweep:
    return asyncio.run(sweep_async(*args, **kwargs))
