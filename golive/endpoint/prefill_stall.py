"""Prefill that stalls decoding: do running streams keep decoding while one long prompt is prefilled?

Why streams can freeze (vLLM 0.32, V1 engine): each scheduler step has a token budget, `--max-num-batched-tokens`.
The running requests are scheduled first (a decode costs one token each), then the waiting ones with what is left
(vllm/v1/core/sched/scheduler.py, `schedule()`). With chunked prefill on, a long prompt takes what is left, one chunk
a step (`num_new_tokens = min(num_new_tokens, request_token_budget)`), so every running stream still gets a token each
step. With it off, a prompt that does not fit what is left waits (`if not enable_chunked_prefill and num_new_tokens >
request_token_budget: break`), and vLLM raises the budget to at least `max_model_len` when chunked prefill is off
(vllm/engine/arg_utils.py, `_set_default_max_num_seqs_and_batched_tokens_args`): the whole prompt is prefilled in one
step, and no running stream gets a token until it ends. A budget as large as the prompt does the same with chunked
prefill on (one chunk is the whole prompt).

The probe (`probe`): `streams` salted requests decode (`ignore_eos`, each on its own lane, golive.endpoint.timed_http);
once each has come `WARM_READS` reads, one long salted prompt (`prompt_tokens` by the server's /tokenize, one output
token) is sent beside them; once its token is in and each stream has come `AFTER_READS` reads more, the streams are
cut (vLLM aborts a request whose client left). A second round runs only when the first froze: a freeze must show
twice to fail (one pause of a busy machine is not the station's).

The rule (`judge`): the *prefill* is the long prompt's time to first token; the *freeze* is the longest time a running
stream got no token within it (from its last token, or the long prompt's send if later, to its next token). Frozen:
a freeze of at least `FREEZE_SHARE` of the prefill. Measured on the reference station (vLLM 0.32 CPU build, 2 cores,
12,460-token prompt, 3 streams): chunked prefill on, the prefill took 2.60-2.68 s and the streams froze at most
0.67-0.69 s (26 %: one 2,048-token chunk, the last and costliest); `--no-enable-chunked-prefill`, 2.63-3.95 s and
2.61-3.92 s (99 %). Not judged where the prefill is under `MIN_STEPS` decode steps (a freeze could not be told from a
step), or no stream decoded through it; nor where each stream arrived whole (at most 2 reads: the probe waits for 8 of
each, which vLLM gives even where its API process lags and merges tokens): a path that holds the stream explains
their silences, and the check points at the stream-buffering finding.
docs/metrics.md ("Prefill that stalls decoding").
"""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from golive.core.verdict import counted
from golive.endpoint.load_request import (
    Attempt,
    RequestTiming,
    SseParser,
    Workload,
    read_event,
    read_timeline,
    request_body,
    send,
)
from golive.endpoint.target import EndpointTarget
from golive.endpoint.timed_http import Lane
from golive.endpoint.timeline import BURST_READS, MIN_TOKENS, READ_GAP_S

FREEZE_SHARE = 0.6  # healthy 26 % (one chunk of six), frozen 99 %; a 4-chunk prompt's last chunk is ~40 %
MIN_STEPS = 10  # the prefill must last this many decode steps of the running streams to be judged
MIN_GAPS = 5  # decode steps seen before the long prompt, to know a step's time
WARM_READS = 8  # reads of each stream before the long prompt is sent: it is decoding, not queued
AFTER_READS = 3  # reads of each stream after the long prompt's token: its gap through the prefill has closed
STREAM_TOKENS = 4096  # each stream's answer, at most: cut once the probe has what it needs
ROUNDS = 2  # a freeze must show in every round (the second runs only when the first froze)
POLL_S = 0.005


@dataclass(frozen=True)
class Round:
    """One probe round as it arrived; times in seconds since the round began."""

    streams: tuple[tuple[float, ...], ...]  # each running stream's token events
    sent: float  # the long prompt sent
    first: float | None  # its first token: the prefill's end (None: no token came)
    prompt_tokens: int | None = None  # the long prompt, by the server's usage
    started_at: float = 0.0  # wall clock (time.time()) when the round began
    error: str | None = None  # a request failed: the round judges nothing


@dataclass(frozen=True)
class Freeze:
    """The longest time the running streams got no token while the long prompt was prefilled."""

    seconds: float
    at: float  # when it began, seconds since the round began
    prefill_s: float  # the long prompt's time to first token
    step_s: float  # the running streams' median decode step before the long prompt
    streams: int  # running streams that decoded through the prefill
    prompt_tokens: int | None = None
    started_at: float = 0.0

    @property
    def share(self) -> float:
        return self.seconds / self.prefill_s

    @property
    def frozen(self) -> bool:
        return self.share >= FREEZE_SHARE

    def clock(self) -> str:
        """When the freeze began (UTC), to find in the server's log."""
        return time.strftime("%H:%M:%S UTC", time.gmtime(self.started_at + self.at))

    def said(self) -> str:
        """`while 3 streams decoded (a token every 3.8 ms), a 12,460-token prompt took 2.63 s to its first token and
        the streams got no token for 2.61 s of it (99 %), from 0.74 s into the probe (23:40:01 UTC)`"""
        prompt = f"a {self.prompt_tokens:,}-token prompt" if self.prompt_tokens else "the long prompt"
        return (
            f"while {self.streams} stream{'s' * (self.streams != 1)} decoded (a token every "
            f"{self.step_s * 1000:.1f} ms, median), {prompt} took {self.prefill_s:.2f} s to its first token and the "
            f"running streams got no token for {self.seconds:.2f} s of it ({self.share:.0%}), from {self.at:.2f} s "
            f"into the probe ({self.clock()})"
        )


def reads(token_times: tuple[float, ...] | list[float]) -> list[float]:
    """A stream's token events merged into reads (events within READ_GAP_S arrived together): one per decode step.

    >>> reads([0.010, 0.0101, 0.014, 0.018])
    [0.0101, 0.014, 0.018]
    """
    merged: list[float] = []
    for at in token_times:
        if merged and at - merged[-1] <= READ_GAP_S:
            merged[-1] = at
        else:
            merged.append(at)
    return merged


@dataclass(frozen=True)
class Unjudged:
    """Why a round judges nothing (a sentence); `buffered`: because its streams arrived in bursts, which a finding
    of the path explains (the stream-buffering check's), not the station's prefill."""

    reason: str
    buffered: bool = False

    def __str__(self) -> str:
        return self.reason


def judge(probe: Round) -> Freeze | Unjudged:
    """The round's freeze, or why it cannot be judged."""
    if probe.error:
        return Unjudged(f"a request of the probe failed: {probe.error}")
    if probe.first is None:
        return Unjudged("the long prompt got no token (see the chat checks)")
    prefill = probe.first - probe.sent
    # each stream whole, in at most BURST_READS reads: something held it (the probe waits for WARM_READS reads of each
    # before the long prompt, which a stream that vLLM streams gives, even one whose API process lags and merges tokens)
    long = [s for s in probe.streams if len(s) >= MIN_TOKENS]
    if long and all(len(reads(s)) <= BURST_READS for s in long):
        events, count = sum(map(len, long)), sum(len(reads(s)) for s in long)
        return Unjudged(
            f"the probe's {counted(len(long), 'stream')} arrived whole ({events:,} token events in "
            f"{counted(count, 'read')} of the socket): something between golive and vLLM holds the stream, so when a "
            f"stream got its tokens says nothing of when vLLM decoded them",
            buffered=True,
        )
    merged = [reads(s) for s in probe.streams]
    through = [r for r in merged if r and r[0] <= probe.sent and r[-1] >= probe.first]
    if not through:
        ended = sum(1 for r in merged if r and r[0] <= probe.sent and r[-1] < probe.first)
        late = len(merged) - ended
        return Unjudged(
            f"no running stream decoded through the long prompt's prefill ({prefill:.2f} s): of "
            f"{counted(len(merged), 'stream')}, {ended} ended before the long prompt's first token and {late} had "
            f"none yet when it was sent"
        )
    steps = [b - a for r in through for a, b in itertools.pairwise(r) if b <= probe.sent]
    if len(steps) < MIN_GAPS:
        return Unjudged(
            f"the streams decoded {counted(len(steps), 'step')} before the long prompt, fewer than {MIN_GAPS}"
        )
    step = statistics.median(steps)
    if prefill < MIN_STEPS * step:
        return Unjudged(
            f"the long prompt was prefilled in {prefill:.3f} s, within {MIN_STEPS} decode steps ({step * 1000:.1f} ms "
            f"each): too short to tell a freeze from a step; a longer load.prefill_stall.prompt_tokens"
        )
    gaps = [
        (b - max(a, probe.sent), max(a, probe.sent))
        for r in through
        for a, b in itertools.pairwise(r)
        if b > probe.sent and a < probe.first
    ]
    seconds, at = max(gaps)
    return Freeze(seconds, at, prefill, step, len(through), probe.prompt_tokens, probe.started_at)


def settle(judged: list[Freeze | Unjudged]) -> Freeze | Unjudged:
    """The rounds' verdict: the first round that did not freeze (passes), else the smallest freeze (every round froze:
    fails), else why none could be judged."""
    freezes = [j for j in judged if isinstance(j, Freeze)]
    if not freezes:
        return judged[0] if judged else Unjudged("no round ran")
    return next((f for f in freezes if not f.frozen), min(freezes, key=lambda f: f.share))


# --- the probe ----------------------------------------------------------------------------------------------------


class _Counted:
    """A lane's clock that counts its calls: the lane reads its clock at every arrival of bytes, so the count says how
    far its stream has come while it runs (the lane hands its response over only when it ends)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> float:
        self.calls += 1
        return time.perf_counter()


@dataclass
class Plan:
    """What one probe sends: `streams` decoding answers, and one `text` long prompt (salted each round)."""

    model: str
    text: str  # the long prompt, without its salt
    streams: int = 3
    stream_tokens: int = STREAM_TOKENS
    rounds: int = ROUNDS
    judged: list[Freeze | Unjudged] = field(default_factory=list)


def _timing(attempt: Attempt, start: float) -> RequestTiming:
    """A stream's events read (token times in seconds since the round began); what came before it was cut counts."""
    timing, parser = RequestTiming(sent=attempt.sent), SseParser()
    if attempt.response is None:
        return timing
    for arrived, piece in attempt.response.pieces:
        for data, at in parser.feed(piece, arrived):
            try:
                read_event(timing, data, at - start)
            except ValueError as exc:  # not an OpenAI chunk: the stream's error
                timing.error = timing.error or str(exc)[:300]
    return timing


def _failed(attempt: Attempt, timing: RequestTiming | None = None) -> str | None:
    """Why a request of the probe failed: no answer, an HTTP error, or an error event in its stream (a gateway that
    ends a stream it judges broken: LiteLLM's "The model is repeating the same chunk")."""
    if attempt.error:
        return attempt.error
    if attempt.response is not None and attempt.response.status != 200:
        return f"HTTP {attempt.response.status}: {attempt.response.text()}"
    if timing is not None and timing.error:
        return f"its stream ended with an error event: {timing.error}"
    return None


async def _wait(ready: Callable[[], bool], until: float) -> None:
    while not ready() and time.perf_counter() < until:
        await asyncio.sleep(POLL_S)


async def _round(target: EndpointTarget, plan: Plan) -> Round:
    headers = target.headers()
    clocks = [_Counted() for _ in range(plan.streams)]
    stall, total = target.stream_stall_timeout_s, target.request_timeout_s
    lanes = [Lane(target.chat_url, stall, target.ca_file, clock, target.caps, total) for clock in clocks]
    long_lane = Lane(target.chat_url, target.request_timeout_s, target.ca_file, caps=target.caps)
    workload = Workload(plan.model, prompt_tokens=40, output_tokens=plan.stream_tokens)
    salt = uuid.uuid4().hex[:12]  # first: no cached block of an earlier round or check can match the long prompt
    long_body = {
        "model": plan.model,
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": f"[{salt}] {plan.text}"}],
        "max_tokens": 1,
        "temperature": 0,
    }
    started_at, start = time.time(), time.perf_counter()
    tasks = [asyncio.create_task(send(lane, request_body(workload, 4), headers)) for lane in lanes]
    try:
        until = start + target.request_timeout_s
        # the lane reads its clock once when it sends, then once a read
        await _wait(lambda: all(c.calls > WARM_READS for c in clocks) or any(t.done() for t in tasks), until)
        long = await send(long_lane, (salt, json.dumps(long_body).encode()), headers)
        seen = [c.calls for c in clocks]
        await _wait(
            lambda: all(c.calls >= s + AFTER_READS or t.done() for c, s, t in zip(clocks, seen, tasks, strict=True)),
            time.perf_counter() + target.request_timeout_s,
        )
    finally:
        for lane in (*lanes, long_lane):
            await lane.aclose()  # vLLM aborts a request whose client left
        attempts = await asyncio.gather(*tasks)
    timings = [_timing(a, start) for a in attempts]
    error = next((e for e in map(_failed, [*attempts, long], [*timings, None]) if e), None)
    timing = read_timeline(long, Workload(plan.model, prompt_tokens=0, output_tokens=1))
    first = timing.ttft if timing.ttft is not None else timing.end  # a token the parsers swallow still ends it
    return Round(
        streams=tuple(tuple(t.token_times) for t in timings),
        sent=long.sent - start,
        first=None if first is None else long.sent - start + first,
        prompt_tokens=timing.prompt_tokens,
        started_at=started_at,
        error=error or (timing.error if timing.error and not timing.error.startswith("usage says") else None),
    )


def probe(target: EndpointTarget, plan: Plan) -> Freeze | Unjudged:
    """Run the rounds (a second only when the first froze); their verdict (`settle`), each round's in plan.judged."""
    for _ in range(plan.rounds):
        plan.judged.append(judge(asyncio.run(_round(target, plan))))
        last = plan.judged[-1]
        if not isinstance(last, Freeze) or not last.frozen:
            break
    return settle(plan.judged)
