"""The load generator: streamed chat requests at fixed concurrency levels, timed when bytes arrive; the sweep over
the levels, with its ratio rounds, within the profile's bounds.

Metric definitions are docs/metrics.md; this module follows them exactly. Warm-up requests run first and are never
measured. One request (its body, send and timeline) is golive.endpoint.load_request; one batch and its row,
golive.endpoint.load_batch; what vLLM's /metrics says meanwhile, golive.endpoint.engine_metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property

import httpx

from golive.endpoint import gates
from golive.endpoint.engine_metrics import engine_counts, round_trip, vllm_ttft
from golive.endpoint.levels import ROUNDED, LevelResult
from golive.endpoint.load_batch import Slo, lanes, run_level, summarize
from golive.endpoint.load_request import RequestTiming, Workload, sentences_for
from golive.endpoint.target import EndpointTarget
from golive.endpoint.timed_http import Lane
from golive.endpoint.timeline import LEVEL, PRIMING, ROUND, WARMUP, Batch, Buffering, PathProbe, Stream, buffering
from golive.endpoint.timeline import batch_of as batch_record
from golive.endpoint.tls import trusting
from golive.endpoint.uncertainty import Rounds
from golive.profile.rules import number
from golive.profile.schema import Load


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

    @cached_property
    def buffered(self) -> Buffering | None:
        """Whether the streams arrived buffered (golive.endpoint.timeline.buffering), decided once for every check
        that reads it, after the sweep."""
        return buffering(self.batches)

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

    @classmethod
    def of(cls, load: Load, levels: Iterable[int], probe_path: bool = False) -> SweepPlan:
        """The go-live sweep a profile's `load` asks for (the checks' and the operating characteristic's alike):
        its levels, batches and bounds, another round while a gate is undecided (golive.endpoint.gates.undecided),
        the ratio rounds of 1 user and the gate level."""
        return cls(
            tuple(levels),
            load.repeats,
            load.warmup,
            load.max_duration_s,
            slo=Slo(load.slo.ttft_s, load.slo.tpot_s, load.slo.e2el_s),
            undecided=lambda level, earlier: gates.undecided(load, level, earlier),
            max_requests=load.max_requests,
            min_requests=load.min_requests,
            paired=load.gate_level,
            rounds=load.rounds_to_run,
            probe_path=probe_path,
        )


# one batch as sent: (kind: timeline.PRIMING, WARMUP, LEVEL or ROUND; users in flight; requests; the ratio round or
# None; the deadline, after which no request starts) → the requests' timelines, and when the batch started and ended
RunBatch = Callable[[str, int, int, int | None, float], Awaitable[tuple[list[RequestTiming], float, float]]]


@dataclass
class _Measured:
    """One level's requests so far (every batch), each batch's own row (the level's rounds), and the level's row."""

    warm: list[RequestTiming]
    timings: list[RequestTiming] = field(default_factory=list)
    spent_s: float = 0.0  # the wall time of its measured batches
    batch_rows: list[LevelResult] = field(default_factory=list)
    rounds: list[tuple[LevelResult, LevelResult]] = field(default_factory=list)  # (1 user, this level) per round

    def add(
        self, concurrency: int, timings: list[RequestTiming], started: float, ended: float, slo: Slo | None
    ) -> LevelResult:
        """One more measured batch: its own row (a round of the level)."""
        own = summarize(concurrency, timings, started, ended, slo, intervals=False)
        self.timings += timings
        self.spent_s += ended - started
        self.batch_rows.append(own)
        return own

    def row(self, concurrency: int, slo: Slo | None) -> LevelResult:
        """The level's row over all its requests (a level of one batch keeps its requests' intervals: the prefill
        measurement reads them), its gated numbers the median of its rounds."""
        level = summarize(concurrency, self.timings, 0.0, self.spent_s, slo, intervals=len(self.batch_rows) == 1)
        return self._rounded(level)

    def gated(self) -> LevelResult:
        """What the gates read so far, without reading every request again: the rounds and the counts (the rules ask
        after every batch; the full row is made once, at the end)."""
        level = self.batch_rows[0].model_copy()
        level.requests = sum(b.requests for b in self.batch_rows)
        level.failures = sum(b.failures for b in self.batch_rows)
        return self._rounded(level)

    def _rounded(self, level: LevelResult) -> LevelResult:
        level.batches = len(self.batch_rows)
        level.warmup_failures = sum(t.error is not None for t in self.warm)
        level.errors = sorted({*level.errors, *(t.error for t in self.warm if t.error)})[:5]
        _with_rounds(level, self.batch_rows)
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


async def run_plan(
    plan: SweepPlan,
    run: RunBatch,
    clock: Callable[[], float] = time.perf_counter,
    progress: Callable[[str], None] = lambda line: None,
) -> tuple[list[LevelResult], list[int]]:
    """The sweep's rules, whatever sends the batches: which batch comes next, when a level or a ratio gate gets
    another round, and when the profile's bounds stop it (sweep_async, below, says the rules). `run` sends one batch
    (the load generator's HTTP client; a station model in bench/operating_characteristic.py, so the gates' error
    rates are measured through this same code); `clock` is the runner's. Returns the levels' rows (ascending) and the
    levels the duration bound left out."""
    return await _PlanRun(plan, run, clock, progress).levels()


class _PlanRun:
    """One run of a sweep plan: the requests sent so far, the levels measured, the rules that pick the next batch."""

    def __init__(
        self, plan: SweepPlan, run: RunBatch, clock: Callable[[], float], progress: Callable[[str], None]
    ) -> None:
        self.plan, self.run, self.clock, self.progress = plan, run, clock, progress
        self.order = sorted(set(plan.levels))
        self.paired = plan.paired
        self.sent = 0
        self.deadline = clock() + plan.max_duration_s
        self.measured: dict[int, _Measured] = {}
        # ratio rounds only where both their levels run (a production station's refused peak level may be the gate
        # level: then 1 user gets lone batches while a floor of its own is undecided)
        self.pairing = (
            self.paired is not None
            and self.paired != 1
            and plan.rounds > 0
            and self.paired in self.order
            and 1 in self.order
        )

    async def levels(self) -> tuple[list[LevelResult], list[int]]:
        """Every level in turn (its warm-up, its first batch, its rounds), then the ratio rounds and what is still
        undecided; the rows ascending and the levels the duration bound left out."""
        plan, measured, paired = self.plan, self.measured, self.paired
        not_run: list[int] = []
        if plan.warmup:
            # the station warmed once at the top level first: measured right after start, a fresh server's first
            # requests (allocation, first batch shapes) made the first 1-user batch 10× slower than the same level
            # measured after the others; not counted in any level, every request still sent within max_requests
            top = self.order[-1]
            primed, _, _ = await self.run(PRIMING, top, plan.warmup * top, None, self.deadline)
            self.sent += len(primed)
        for concurrency in self.order:
            if self.clock() > self.deadline:
                not_run.append(concurrency)
                continue
            warm: list[RequestTiming] = []
            if plan.warmup:
                warm, _, _ = await self.run(WARMUP, concurrency, plan.warmup * concurrency, None, self.deadline)
                self.sent += len(warm)
            measured[concurrency] = _Measured(warm)
            await self.extend(concurrency)
            _progress_line(self.progress, measured[concurrency].gated(), " (its first batch)")
            if not self.rounds_here(concurrency):
                await self.settle(concurrency)  # 1 user and the gate level get their rounds interleaved, below
            elif concurrency == paired and 1 in measured:
                # the ratio rounds as soon as both their levels are in, before the levels above the gate level: a
                # station that cannot batch spends the duration bound on the top level, and its gates at 1 user and
                # the gate level were left without rounds (not checked) where they should fail
                await self.ratio_rounds()
        if self.pairing and 1 in measured and paired in measured:
            await self.ratio_rounds()
        for concurrency in sorted(measured):
            await self.settle(concurrency)
        rows = [m.row(c, plan.slo) for c, m in sorted(measured.items())]
        for level in rows:  # the levels' own numbers, as every report shows them
            _progress_line(self.progress, level)
        return rows, not_run

    def batch_of(self, concurrency: int) -> int:
        return max(self.plan.repeats * concurrency, self.plan.min_requests)

    def room(self, *concurrencies: int) -> bool:
        """Within the bounds, keeping the first batches (and warm-ups) of the levels not run yet: the profile was
        checked to hold them (golive.profile.schema.Load)."""
        plan = self.plan
        needed = sum(self.batch_of(c) for c in concurrencies)
        later = sum(self.batch_of(c) + plan.warmup * c for c in self.order if c not in self.measured)
        return self.clock() < self.deadline and (
            plan.max_requests is None or self.sent + needed + later <= plan.max_requests
        )

    def pending(self, concurrency: int) -> str | None:
        measured, undecided = self.measured, self.plan.undecided
        earlier = [measured[c].gated() for c in sorted(measured) if c < concurrency]
        return None if undecided is None else undecided(measured[concurrency].gated(), earlier)

    async def extend(self, concurrency: int, kind: str = LEVEL, round_: int | None = None) -> LevelResult:
        """One more measured batch of this level; returns that batch's own row."""
        timings, started, ended = await self.run(kind, concurrency, self.batch_of(concurrency), round_, self.deadline)
        self.sent += len(timings)
        return self.measured[concurrency].add(concurrency, timings, started, ended, self.plan.slo)

    async def ratio_round(self) -> None:
        paired = self.paired
        assert paired is not None
        m = self.measured[paired]
        order = (1, paired) if len(m.rounds) % 2 == 0 else (paired, 1)
        number = len(m.rounds) + 1
        batch = {c: await self.extend(c, ROUND, number) for c in order}
        m.rounds.append((batch[1], batch[paired]))
        ratio = batch[paired].aggregate_tok_s / batch[1].aggregate_tok_s if batch[1].aggregate_tok_s > 0 else None
        self.progress(
            f"load: round {len(m.rounds)}: 1 user {batch[1].aggregate_tok_s:,.1f} tok/s, {paired} users "
            f"{batch[paired].aggregate_tok_s:,.1f} tok/s: {_fmt(ratio, '.2f')}×"
        )

    async def ratio_rounds(self) -> None:
        """The profile's ratio rounds (those not run yet), then more while a gate of 1 user or the gate level is
        undecided."""
        paired = self.paired
        assert paired is not None
        while len(self.measured[paired].rounds) < self.plan.rounds and self.room(1, paired):
            await self.ratio_round()
        await self.settle(1)
        await self.settle(paired)

    def rounds_here(self, concurrency: int) -> bool:
        """Whether this level's rounds are the ratio rounds: 1 user and the gate level, interleaved."""
        return self.pairing and concurrency in (1, self.paired)

    async def settle(self, concurrency: int) -> None:
        """More rounds while a floor read at this level is undecided: a ratio round for 1 user and the gate level
        once the rounds have begun (its batches interleave the two levels), else a batch of the level."""
        measured, paired = self.measured, self.paired
        while kind := self.pending(concurrency):
            if kind == "ratio" or self.rounds_here(concurrency):
                assert paired is not None
                begun = paired in measured and measured[paired].rounds and 1 in measured
                if not (self.pairing and begun and self.room(1, paired)):
                    return
                await self.ratio_round()
            elif self.room(concurrency):
                await self.extend(concurrency)
            else:
                return


async def sweep_async(
    target: EndpointTarget, workload: Workload, plan: SweepPlan, progress: Callable[[str], None] = lambda line: None
) -> Sweep:
    """Each level: `warmup` × C requests (not measured), then `repeats` × C requests (at least `min_requests`)
    measured, C in flight; while `undecided` says a floor of that level cannot be judged yet, another batch of it.

    Then the ratio rounds, when `paired` (the gate level) and 1 user were both measured: `rounds` rounds (more while
    a ratio is undecided), each a 1-user batch and a `paired` batch back to back (the order alternating), each giving
    one ratio. A ratio reads the median of its rounds with the order-statistic interval of that median (the 1-user and
    gate-level gates read those levels' batches the same way, one round a batch: golive.endpoint.uncertainty.Rounds;
    their levels get no lone extra batches before the rounds, and after them more rounds, not batches, while one of
    their floors is undecided): two batches a few seconds apart meet the same machine, so other work starting or
    stopping moves both sides of a round instead of one side of the ratio, and a round that met a change anyway is one
    outlier among the rounds (measured on this 2-core machine with two CPU hogs: the 1-user aggregate swung 20–711
    tok/s between batches, 8 users collapsed to 62 tok/s for ~10 s; 25 rounds gave a median of 4.2× with 3
    outliers). Round batches count in their levels' rows too. All within `max_requests` (every request sent, warm-up
    included) and `max_duration_s`. The rules are run_plan's; this sends the batches over HTTP, records each for the
    stream-shape and stall rules, polls vLLM's running and waiting counts beside the gate level's round batches, and
    reads vLLM's own TTFT around the 1-user measured batches (plan.probe_path)."""
    headers = target.headers()
    levels = sorted(set(plan.levels))
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(c)
            for c in lanes(target.chat_url, max(levels), target.request_timeout_s, target.ca_file, caps=target.caps)
        ]
        light = await stack.enter_async_context(
            httpx.AsyncClient(timeout=target.request_timeout_s, verify=trusting(target.ca_file))
        )
        own = target.vllm_name(workload.model)  # what vLLM's own /tokenize and /metrics know the model by
        sentences = await sentences_for(
            light, target.root, replace(workload, model=own), headers, target.caps, target.request_timeout_s
        )
        path = None
        if plan.probe_path:
            path = PathProbe(round_trip_s=await round_trip(light, target.root, 5, target.light_timeout_s, target.caps))
        sender = _HttpBatches(target, headers, workload, plan, clients, light, own, sentences, path)
        rows, not_run = await run_plan(plan, sender.batch, time.perf_counter, progress)
    for level in rows:
        if level.concurrency == plan.paired and sender.engine_samples:
            level.engine_samples = sender.engine_samples
    return Sweep(rows, not_run, batches=sender.batches, started_at=sender.started_at, path=path)


class _HttpBatches:
    """Sends the sweep's batches over HTTP (run_plan's `run`), recording each batch and what vLLM says beside it."""

    def __init__(
        self,
        target: EndpointTarget,
        headers: dict[str, str],
        workload: Workload,
        plan: SweepPlan,
        clients: list[Lane],
        light: httpx.AsyncClient,
        own: str,
        sentences: int,
        path: PathProbe | None,
    ) -> None:
        self.target, self.workload, self.plan = target, workload, plan
        self.clients, self.light, self.own, self.sentences, self.path = clients, light, own, sentences, path
        self.headers = headers
        self.engine_samples: list[list[float]] = []
        self.batches: list[Batch] = []
        self.origin, self.started_at = time.perf_counter(), time.time()

    async def batch(
        self, kind: str, concurrency: int, count: int, round_: int | None, deadline: float
    ) -> tuple[list[RequestTiming], float, float]:
        """One batch (run_level), recorded for the stream-shape and stall rules; around a 1-user measured batch,
        vLLM's own TTFT histogram is read too (plan.probe_path); beside a gate-level round batch, vLLM's running
        and waiting counts (the batch check reads them)."""
        target, light, headers, own, path = self.target, self.light, self.headers, self.own, self.path
        probing = path is not None and path.problem is None and concurrency == 1 and kind in (LEVEL, ROUND)
        before = await vllm_ttft(light, target.root, headers, own, target.light_timeout_s) if probing else None
        done = asyncio.Event()
        watched = kind in (LEVEL, ROUND) and concurrency == self.plan.paired
        poll = (
            asyncio.ensure_future(
                engine_counts(light, target.root, headers, own, done, timeout_s=target.light_timeout_s)
            )
            if watched
            else None
        )
        try:
            timings, started, ended = await run_level(
                self.clients, self.workload, headers, concurrency, count, deadline, self.sentences
            )
        finally:
            done.set()
            if poll is not None:
                self.engine_samples.extend(await poll)
        if path is not None and before is not None:
            after = await vllm_ttft(light, target.root, headers, own, target.light_timeout_s)
            if isinstance(before, str) or isinstance(after, str):
                path.problem = before if isinstance(before, str) else str(after)
            else:
                path.add([t.ttft for t in timings if t.ttft is not None], before, after)
        origin = self.origin
        streams = [Stream(t.sent - origin, t.token_times, t.end, t.completion_tokens, t.error is None) for t in timings]
        record = batch_record(kind, concurrency, streams, started - origin, ended - origin)
        self.batches.append(replace(record, round=round_) if round_ is not None else record)
        return timings, started, ended


def _with_rounds(level: LevelResult, batch_rows: list[LevelResult]) -> None:
    """The level's rounds (one value a measured batch) and, for a level of several batches, in place of the pooled
    requests' numbers and intervals, the median of its rounds with the order-statistic interval of that median
    (golive.endpoint.uncertainty.Rounds; None with 2 to 5 rounds): one number per quantity, the gates' own. A level
    of one batch keeps its requests' intervals (the prefill measurement reads them); no gate reads those."""
    if not batch_rows:
        return
    level.aggregate_tok_s_rounds = [b.aggregate_tok_s for b in batch_rows if b.requests > b.failures]
    level.per_user_tok_s_p50_rounds = [b.per_user_tok_s_p50 for b in batch_rows]
    level.ttft_p50_s_rounds = [b.ttft_p50_s for b in batch_rows]
    level.goodput_share_rounds = None if level.good_requests is None else [b.goodput_share for b in batch_rows]
    if len(batch_rows) < 2:
        return
    for quantity in ROUNDED:
        rounds = Rounds.of(level.rounds_of(quantity))
        interval = None if rounds is None else rounds.interval
        if rounds is not None:
            setattr(level, quantity, rounds.median)
        setattr(level, f"{quantity}_ci", None if interval is None else list(interval))


def _progress_line(progress: Callable[[str], None], level: LevelResult, note: str = "") -> None:
    """A level's line: after its first batch (`note` says so), and at the end of the sweep its own numbers, each the
    median of its rounds, as the sweep table, go-live.md and results.json give them (golive.report.rules.number)."""
    rounds = f" (median of {level.batches} rounds)" if level.batches > 1 else ""
    progress(
        f"load: {level.concurrency:>4} in flight: {level.requests} requests, {level.failures} failed, "
        f"{number(level.aggregate_tok_s)} tok/s aggregate, "
        f"{_number(level.per_user_tok_s_p50)} tok/s per user (p50), "
        f"TTFT p50 {_number(level.ttft_p50_s)} s{rounds}{note}"
    )


def _number(value: float | None) -> str:
    return "n/a" if value is None else number(value)


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def sweep(
    target: EndpointTarget, workload: Workload, plan: SweepPlan, progress: Callable[[str], None] = lambda line: None
) -> Sweep:
    """`sweep_async` from synchronous code (a check)."""
    return asyncio.run(sweep_async(target, workload, plan, progress))
