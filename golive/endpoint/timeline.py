"""The sweep's batches as the stream-shape rules read them: a path that buffers the stream, a stall, and a delay on
the path that vLLM does not see. Definitions and thresholds: docs/metrics.md ("Stream shape, stalls and the path").

Pure functions of typed records the load generator (golive.endpoint.load) leaves beside the sweep's rows: one `Batch`
per batch it sent (priming, warm-up, measured level, ratio round), with when it ran; one `PathProbe` (the client's
TTFT beside vLLM's own `vllm:time_to_first_token_seconds` over the same 1-user batches, and a request-free round trip).

    >>> stalls([Batch("level", 1, 3.0, 9.0, 12, 0, 384, silent_s=6.2, silent_at_s=4.1)], buffered=False)[0].text
    'no byte arrived on any stream for 6.2 s, from 4.1 s into the sweep, while 1 user was in flight (the 1-user level)'
"""

from __future__ import annotations

import itertools
import statistics
import time
from dataclasses import dataclass, field, replace

PRIMING, WARMUP, LEVEL, ROUND = "priming", "warm-up", "level", "round"

# --- what a buffered stream looks like --------------------------------------------------------------------------------
# Token events closer than this count as one read: a proxy's held answer can reach the socket in a few segments
# microseconds apart, while a streamed token follows the one before by a decode step (ms).
READ_GAP_S = 0.001
# An answer arrived in bursts when its token events came in few reads for its length: at most BURST_READS (a proxy
# that flushes the first bytes and holds the rest gives two), or BURST_TOKENS tokens or more a read. A proxy that
# passes events on when its buffer fills, or when its starved worker runs, gives an answer of 32 tokens in 3 or 4
# reads: the "at most 2 reads" rule alone missed those (issue 41: a loaded nginx, 8-user answers in 3 bursts). vLLM
# streams a token a read; the healthy reference station on 2 busy cores gave 1-2 tokens a read, with some answers in
# 1-2 reads where its API process lagged, none in 3-8 (a busy-loop CPU hog on each core, levels 1-8).
BURST_READS = 2
BURST_TOKENS = 8
BURST = f"at most {BURST_READS} reads for an answer, or {BURST_TOKENS} tokens or more a read"  # as findings say it
MIN_TOKENS = 4  # answers shorter than this fit one read anyway
# Share of the sweep's answers (of at least MIN_TOKENS tokens) that arrived in bursts. The healthy reference station
# (2 shared cores during a CI run) gave 30 % of 1,005 answers and 42 % of 670 beside a CPU hog in at most 2 reads (at
# 2 users up to 79 %): its API process writes several tokens at once when it lags. A buffering proxy gives 100 %.
BUFFERED_SHARE = 0.9
MIN_STREAMS = 8  # fewer answers than this decide nothing

# --- stalls -----------------------------------------------------------------------------------------------------------
# A stall must cost at least this much time: the default of the profile's `load.stall_s`. The healthy reference
# station on the 2-core machine during a CI run (5 sweeps, 115 batches; a busy-loop CPU hog beside part of two of
# them) lost at most 1.5 s in a batch to the machine's noise, was silent at most 0.34 s, and its TTFT and ITL p99
# exceeded their p50 by at most 0.44 s and 0.28 s (docs/metrics.md); a frozen server costs seconds. Two CPU hogs
# once stalled it ~10 s: reference-cpu sets 15 s.
STALL_S = 2.0
BATCH_FACTOR = 4.0  # a batch below 1/4 of the median of its level's other batches (healthy worst: 0.29 of it)
SPREAD_FACTOR = 10.0  # a p99 above 10x its p50 (and stall_s above it)
WARMUP_FACTOR = 10.0  # a warm-up batch 10x longer than its requests take measured (and stall_s longer)
MIN_OTHERS = 3  # batches of the same level to compare a batch with

# --- the path ---------------------------------------------------------------------------------------------------------
# Client TTFT − vLLM's own TTFT, means over the same 1-user requests. Healthy, loopback, busy 2 cores: 2-93 ms a
# batch, 4-42 ms pooled over a sweep (the API's chat template, tokenisation and HTTP, which vLLM's engine does not
# time).
PATH_FLOOR_S = 0.1
PATH_SHARE = 0.25  # ... and at least this share of the client's TTFT
# Or a request-free round trip (GET /health) this long, with the requests' added time at least half of it: a path
# of 40 ms (issue 41: it showed only as a number) is below the floor above, but loopback answers /health in
# 0.9-3.2 ms (the busy 2-core machine, load average 8), so 20 ms of it is the path's.
PATH_ROUND_TRIP_S = 0.02


def _percentile(values: list[float], p: int) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    if p == 50:
        return statistics.median(values)
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def reads(token_times: list[float]) -> int:
    """How many reads of the socket brought a stream's token events: arrivals within READ_GAP_S are one read.

    >>> reads([0.04, 0.05, 0.06]), reads([0.3, 0.3, 0.3002])
    (3, 1)
    """
    count, last = 0, None
    for at in token_times:
        if last is None or at - last > READ_GAP_S:
            count += 1
        last = at
    return count


def bursty(read_count: int, tokens: int) -> bool:
    """Whether an answer of `tokens` tokens that came in `read_count` reads arrived in bursts (BURST_READS,
    BURST_TOKENS).

    >>> bursty(2, 32), bursty(3, 32), bursty(4, 32), bursty(5, 32), bursty(3, 16)
    (True, True, True, False, False)
    """
    return read_count <= max(BURST_READS, tokens // BURST_TOKENS)


@dataclass(frozen=True)
class Stream:
    """What the rules read of one request (times in seconds since the sweep began; `token_times` since it was sent)."""

    sent_s: float
    token_times: list[float]
    end: float | None  # since sent
    completion_tokens: int | None
    ok: bool


@dataclass(frozen=True)
class Batch:
    """One batch the sweep sent: C requests in flight until `requests` were done."""

    kind: str  # PRIMING, WARMUP, LEVEL or ROUND
    concurrency: int
    started_s: float  # since the sweep began
    duration_s: float
    requests: int
    failures: int
    output_tokens: int  # usage, successful requests
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    itl_p50_s: float | None = None
    itl_p99_s: float | None = None
    e2e_p50_s: float | None = None
    slowest_ttft_at_s: float | None = None  # when the request with the longest TTFT was sent
    longest_itl_at_s: float | None = None  # when the longest gap between two token events began
    silent_s: float = 0.0  # the longest time with requests in flight and no token, start or end arriving
    silent_at_s: float = 0.0  # when that silence began
    streams: int = 0  # successful answers of at least MIN_TOKENS tokens
    bunched: int = 0  # of those, the ones that arrived in bursts (`bursty`)
    bunched_tokens: int = 0  # their tokens
    bunched_reads: int = 0  # and the reads that brought them
    round: int | None = None  # the ratio round (1-based)

    @property
    def aggregate_tok_s(self) -> float:
        return self.output_tokens / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def measured(self) -> bool:
        return self.kind in (LEVEL, ROUND)

    def describe(self) -> str:
        users = f"{self.concurrency}-user"
        if self.kind == ROUND:
            return f"ratio round {self.round}, its {users} batch"
        if self.kind == PRIMING:
            return f"the priming batch at {self.concurrency} users"
        return f"the {users} {self.kind}"


def batch_of(kind: str, concurrency: int, streams: list[Stream], started_s: float, ended_s: float) -> Batch:
    """A batch's record from its requests (`started_s`, `ended_s`: the batch's clock, since the sweep began)."""
    ok = [s for s in streams if s.ok]
    ttfts = [(s.token_times[0], s.sent_s) for s in ok if s.token_times]
    gaps = [(b - a, s.sent_s + a) for s in ok for a, b in itertools.pairwise(s.token_times)]
    moments = sorted(
        [started_s, ended_s]
        + [s.sent_s for s in streams]
        + [s.sent_s + t for s in streams for t in s.token_times]
        + [s.sent_s + s.end for s in streams if s.end is not None]
    )
    silent, silent_at = max(((b - a, a) for a, b in itertools.pairwise(moments)), default=(0.0, started_s))
    long = [s for s in ok if (s.completion_tokens or 0) >= MIN_TOKENS and s.token_times]
    bunched = [
        (s.completion_tokens or 0, n) for s in long if bursty(n := reads(s.token_times), s.completion_tokens or 0)
    ]
    return Batch(
        kind=kind,
        concurrency=concurrency,
        started_s=started_s,
        duration_s=max(ended_s - started_s, 1e-9),
        requests=len(streams),
        failures=len(streams) - len(ok),
        output_tokens=sum(s.completion_tokens or 0 for s in ok),
        ttft_p50_s=_percentile([t for t, _ in ttfts], 50),
        ttft_p99_s=_percentile([t for t, _ in ttfts], 99),
        itl_p50_s=_percentile([g for g, _ in gaps], 50),
        itl_p99_s=_percentile([g for g, _ in gaps], 99),
        e2e_p50_s=_percentile([s.end for s in ok if s.end is not None], 50),
        slowest_ttft_at_s=max(ttfts)[1] if ttfts else None,
        longest_itl_at_s=max(gaps)[1] if gaps else None,
        silent_s=silent,
        silent_at_s=silent_at,
        streams=len(long),
        bunched=len(bunched),
        bunched_tokens=sum(tokens for tokens, _ in bunched),
        bunched_reads=sum(n for _, n in bunched),
    )


# --- buffering --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Buffering:
    """The sweep's answers arrived in bursts: something between the client and vLLM held the stream and passed it on
    whole or a few pieces at a time."""

    streams: int
    bunched: int
    ttft_p50_s: float | None
    e2e_p50_s: float | None
    tokens_per_read: float = 0.0  # in the answers that arrived in bursts
    by_users: tuple[tuple[int, int, int], ...] = ()  # (users, answers, of them in bursts), by level

    def found(self) -> str:
        times = ""
        if self.ttft_p50_s is not None and self.e2e_p50_s is not None:
            times = f"; TTFT p50 {self.ttft_p50_s:.3f} s against end-to-end p50 {self.e2e_p50_s:.3f} s"
            if self.ttft_p50_s >= 0.9 * self.e2e_p50_s:
                times += ": the first token arrives when the whole answer does"
        levels = ", ".join(f"{users} {_plural(users, 'user')}: {bunched} of {n}" for users, n, bunched in self.by_users)
        return (
            f"{self.bunched} of {self.streams} streamed answers of {MIN_TOKENS}+ tokens "
            f"({self.bunched / self.streams:.0%}) arrived in bursts, {self.tokens_per_read:,.1f} tokens a read of the "
            f"socket on average (in bursts: {BURST})"
            + (f"; by level, {levels}" if len(self.by_users) > 1 else "")
            + f"{times}. The response is "
            f"buffered between the client and vLLM: a proxy or gateway holds the stream and passes it on whole or in "
            f"pieces, when its buffer fills or when it gets the CPU (vLLM streams each token as it is generated)"
        )


def buffering(batches: list[Batch]) -> Buffering | None:
    """Buffering when at least BUFFERED_SHARE of the sweep's answers of MIN_TOKENS+ tokens arrived in bursts."""
    streams = sum(b.streams for b in batches)
    bunched = sum(b.bunched for b in batches)
    if streams < MIN_STREAMS or bunched < BUFFERED_SHARE * streams:
        return None
    measured = [b for b in batches if b.measured] or batches
    ttft = [b.ttft_p50_s for b in measured if b.ttft_p50_s is not None]
    e2e = [b.e2e_p50_s for b in measured if b.e2e_p50_s is not None]
    reads_ = sum(b.bunched_reads for b in batches)
    by_users: dict[int, tuple[int, int]] = {}
    for b in batches:
        n, bursts = by_users.get(b.concurrency, (0, 0))
        by_users[b.concurrency] = (n + b.streams, bursts + b.bunched)
    return Buffering(
        streams,
        bunched,
        _percentile(ttft, 50),
        _percentile(e2e, 50),
        tokens_per_read=sum(b.bunched_tokens for b in batches) / reads_ if reads_ else 0.0,
        by_users=tuple((users, n, bursts) for users, (n, bursts) in sorted(by_users.items()) if n),
    )


# --- stalls -----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stall:
    """One stall: what was seen, and when (seconds since the sweep began) until when. Where several rules see the same
    stall (a freeze is a silence, a slow batch and a TTFT spread at once), it is one Stall saying all of them."""

    at_s: float
    text: str
    batch: Batch
    until_s: float = 0.0
    precise: int = 2  # how closely at_s marks when the stall began: 0 a silence, 1 the worst request, 2 its batch


def _plural(n: int, noun: str) -> str:
    return noun if n == 1 else f"{noun}s"


def _users(n: int) -> str:
    return f"{n} {_plural(n, 'user')}"


def _times(ratio: float) -> str:
    """A ratio as a finding says it, with a decimal below 100 (a rule at "10×" must not read 10.4 as "10×")."""
    return f"{ratio:.1f}×" if ratio < 100 else f"{ratio:,.0f}×"


def _one_per_stall(found: list[Stall]) -> list[Stall]:
    """The rules' findings with those that overlap in time (the same stall) joined, in time order: each says first,
    and is timed by, the rule that marks the stall's start most closely (a silence before its batch's start)."""
    groups: list[list[Stall]] = []
    for stall in sorted(found, key=lambda s: (s.at_s, s.until_s)):
        if groups and stall.at_s < max(s.until_s for s in groups[-1]):
            groups[-1].append(stall)
        else:
            groups.append([stall])
    joined = []
    for group in groups:
        lead = min(group, key=lambda s: (s.precise, s.at_s))
        others = [s.text for s in group if s is not lead]
        text = "; the same stall: ".join([lead.text, *others])
        joined.append(replace(lead, text=text, until_s=max(s.until_s for s in group)))
    return sorted(joined, key=lambda s: s.at_s)


def stalls(batches: list[Batch], buffered: bool, stall_s: float = STALL_S) -> list[Stall]:
    """The stalls the sweep's batches show, in time order; each costs `stall_s` or more (the profile's
    `load.stall_s`). With a buffered stream (`buffered`) the timing within answers says nothing, so only whole-batch
    times are read (the batch rule, the warm-up rule)."""
    found: list[Stall] = []
    measured: dict[int, list[Batch]] = {}
    for b in batches:
        if b.measured:
            measured.setdefault(b.concurrency, []).append(b)
    for b in batches:
        where = f"({b.describe()})"
        if not buffered and b.silent_s >= stall_s:
            found.append(
                Stall(
                    b.silent_at_s,
                    f"no byte arrived on any stream for {b.silent_s:.1f} s, from {b.silent_at_s:.1f} s into the "
                    f"sweep, while {_users(b.concurrency)} {'was' if b.concurrency == 1 else 'were'} in flight {where}",
                    b,
                    b.silent_at_s + b.silent_s,
                    precise=0,
                )
            )
        others = [o for o in measured.get(b.concurrency, []) if o is not b]
        if b.measured and len(others) >= MIN_OTHERS and b.output_tokens:
            typical = statistics.median(o.aggregate_tok_s for o in others)
            lost = b.duration_s - b.output_tokens / typical if typical > 0 else 0.0
            if b.aggregate_tok_s * BATCH_FACTOR < typical and lost >= stall_s:
                found.append(
                    Stall(
                        b.started_s,
                        f"a batch at {_users(b.concurrency)} gave {b.aggregate_tok_s:,.1f} tok/s against a median of "
                        f"{typical:,.1f} over its {len(others)} other batches: {lost:.1f} s lost, in the batch that "
                        f"began {b.started_s:.1f} s into the sweep and took {b.duration_s:.1f} s {where}",
                        b,
                        b.started_s + b.duration_s,
                    )
                )
        for what, p50, p99, at in (
            ("TTFT", b.ttft_p50_s, b.ttft_p99_s, b.slowest_ttft_at_s),
            ("ITL", None if buffered else b.itl_p50_s, b.itl_p99_s, b.longest_itl_at_s),
        ):
            if p50 is None or p99 is None or at is None:
                continue
            if p99 > SPREAD_FACTOR * p50 and p99 - p50 >= stall_s:
                spread = (
                    f"is {_times(p99 / p50)} its p50 {p50:.3f} s"
                    if p50 > 0
                    else "against a p50 of 0 s (its tokens merged into reads)"
                )
                found.append(
                    Stall(
                        at,
                        f"{what} p99 {p99:.2f} s {spread} in a batch at {_users(b.concurrency)}; the worst began "
                        f"{at:.1f} s into the sweep {where}",
                        b,
                        at + p99,
                        precise=1,
                    )
                )
        if b.kind in (WARMUP, PRIMING) and b.requests:
            same = [o for o in measured.get(b.concurrency, []) if o.requests]
            if same:
                per_request = statistics.median(o.duration_s / o.requests for o in same)
                expected = per_request * b.requests
                if b.duration_s > WARMUP_FACTOR * expected and b.duration_s - expected >= stall_s:
                    found.append(
                        Stall(
                            b.started_s,
                            f"{b.describe()} took {b.duration_s:.1f} s for {b.requests} "
                            f"{_plural(b.requests, 'request')}, {_times(b.duration_s / expected)} what the same "
                            f"{_plural(b.requests, 'request')} took measured ({expected:.2f} s); it began "
                            f"{b.started_s:.1f} s into the sweep",
                            b,
                            b.started_s + b.duration_s,
                        )
                    )
    return _one_per_stall(found)


# --- the path ---------------------------------------------------------------------------------------------------------


@dataclass
class PathProbe:
    """The client's TTFT beside vLLM's own over the same 1-user batches, and a request-free round trip.

    vLLM's `vllm:time_to_first_token_seconds` histogram (_sum and _count, the served model's series) is read from
    /metrics just before and just after each 1-user measured batch; the difference is vLLM's TTFT of those requests.
    """

    client_ttft_s: float = 0.0  # the sum over the batches' successful requests
    client_requests: int = 0
    vllm_ttft_s: float = 0.0  # Δ _sum
    vllm_requests: float = 0.0  # Δ _count
    round_trip_s: float | None = None  # GET /health, the median of a few, before any load
    problem: str | None = None  # why vLLM's TTFT could not be read (the comparison is then not possible)
    scraped_at: list[float] = field(default_factory=list)  # when (epoch) each comparison's batch ended

    def add(self, client_ttfts: list[float], before: tuple[float, float], after: tuple[float, float]) -> None:
        self.client_ttft_s += sum(client_ttfts)
        self.client_requests += len(client_ttfts)
        self.vllm_ttft_s += after[0] - before[0]
        self.vllm_requests += after[1] - before[1]
        self.scraped_at.append(time.time())


@dataclass(frozen=True)
class PathDelay:
    """What the comparison says: the mean time between client and vLLM that vLLM does not see."""

    client_ttft_s: float  # mean
    vllm_ttft_s: float  # mean
    requests: int
    round_trip_s: float | None

    @property
    def added_s(self) -> float:
        return self.client_ttft_s - self.vllm_ttft_s

    @property
    def significant(self) -> bool:
        if self.round_trip_s is not None and self.round_trip_s >= PATH_ROUND_TRIP_S:
            return self.added_s >= self.round_trip_s / 2
        return self.added_s >= PATH_FLOOR_S and self.added_s >= PATH_SHARE * self.client_ttft_s

    def said(self) -> str:
        """≈ 300 ms between client and vLLM that vLLM does not see (…)"""
        trip = ""
        if self.round_trip_s is not None:
            trip = f"; a request-free round trip (GET /health) takes {self.round_trip_s * 1000:,.0f} ms"
            trip += (
                ": the delay is on the path (a proxy, a gateway or the network), not in generation"
                if self.round_trip_s >= self.added_s / 2
                else ": only requests are held, so something on the path holds request bodies (a gateway, an "
                "authenticating or buffering proxy), or vLLM's API process is slow to tokenise and queue them"
            )
        return (
            f"≈ {self.added_s * 1000:,.0f} ms between client and vLLM that vLLM does not see (mean TTFT at 1 user: "
            f"{self.client_ttft_s:.3f} s at the client, {self.vllm_ttft_s:.3f} s in vLLM's own "
            f"vllm:time_to_first_token_seconds, {self.requests} {_plural(self.requests, 'request')}{trip})"
        )


def path_delay(probe: PathProbe) -> PathDelay | str:
    """The comparison, or why it was not possible."""
    if probe.problem is not None:
        return probe.problem
    if probe.client_requests == 0 or probe.vllm_requests <= 0:
        return "no 1-user request was timed by both golive and vLLM's vllm:time_to_first_token_seconds"
    if round(probe.vllm_requests) != probe.client_requests:
        return (
            f"vLLM's vllm:time_to_first_token_seconds counted {probe.vllm_requests:g} first tokens while golive "
            f"timed {probe.client_requests} requests: another client was using the station (or its /metrics is "
            f"another server's)"
        )
    return PathDelay(
        probe.client_ttft_s / probe.client_requests,
        probe.vllm_ttft_s / probe.vllm_requests,
        probe.client_requests,
        probe.round_trip_s,
    )
