"""A serving station whose truth is known and can be made worse, as a model: what one batch of the go-live sweep
measures on it, drawn fast enough for thousands of simulated go-lives (bench/operating_characteristic.py).

The truth (`Pace`): TTFT and the decode step by the number of sequences the engine runs at once, from a recipe's
measured table (the reference station's, GB300's [000], the two-station TP=2's [002]). One batch of C users in flight
is simulated request by request, as the real station serves it: C client lanes in a closed loop, an engine that runs
at most `max_num_seqs` sequences (the rest wait in its queue: their TTFT includes the wait), each answer a first token
after TTFT and then `output_tokens − 1` decode steps. The rows are golive's own: each request becomes a
golive.endpoint.load_request.RequestTiming and golive.endpoint.load_batch.summarize reads it (docs/metrics.md).

The noise (`Noise`), what moves a real station between batches, fitted to the reference station's own rounds
(bench/results/vs-vllm-bench*.json, docs/performance.md "The operating characteristic"): the machine's state, shared
by consecutive batches (an AR(1) on the log of its speed); each batch's own part, growing with the batch the engine
runs (a busy CPU disturbs a batch of 8 more than one sequence); the odd slow round (a burst of other work); a
per-request part; multi-second freezes (a Poisson process: every stream stops, the client's clock runs on); under CPU
hogs a per-run penalty on batching (the reference station's scaling ratio fell from 4.2× to 2.7–4.4× under two
hogs). The client's own time (`Client`): what golive's client adds to TTFT and loses between requests, measured
against the scripted server (bench/scripted_stream.py --script station) quiet and with CPU hogs on its cores
(bench/operating_characteristic.py --validate).

Degradations (`Degradation`): every time × a factor (a uniformly slower station), TTFT alone × a factor, a batching
limit (--max-num-seqs 1, 2), and prefill stalling decode (each admitted request's prefill freezes the running
streams, as an engine without chunked prefill does).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from golive.endpoint.load_request import RequestTiming
from golive.endpoint.timeline import LEVEL, ROUND


def _interpolated(table: dict[int, float], users: int) -> float:
    """Log-log between the table's points; flat beyond its ends."""
    points = sorted(table.items())
    if users <= points[0][0]:
        return points[0][1]
    for (u0, v0), (u1, v1) in itertools.pairwise(points):
        if users <= u1:
            share = math.log(users / u0) / math.log(u1 / u0)
            return math.exp(math.log(v0) + share * math.log(v1 / v0))
    return points[-1][1]


@dataclass(frozen=True)
class Pace:
    """A healthy station's truth: TTFT and decode step (seconds) by sequences running at once."""

    name: str
    ttft_s: dict[int, float]
    step_s: dict[int, float]
    remote: bool  # the station is not on the client's machine: CPU hogs on the runner reach only the client

    def ttft(self, running: int) -> float:
        return _interpolated(self.ttft_s, running)

    def step(self, running: int) -> float:
        return _interpolated(self.step_s, running)


# The reference station (vLLM's CPU build, 2 cores, 32-token answers), quiet: its medians in
# bench/results/vs-vllm-bench.json (TTFT p50 7.9 / 12.2 / 16.0 / 26.8 ms, aggregate 523 / 918 / 1,628 / 2,432 tok/s at
# 1 / 2 / 4 / 8 users): step = (C × 32 ÷ aggregate − TTFT) ÷ 31.
REFERENCE = Pace(
    "reference",
    ttft_s={1: 0.0079, 2: 0.0122, 4: 0.0160, 8: 0.0268},
    step_s={1: 0.00172, 2: 0.00185, 4: 0.00202, 8: 0.00253},
    remote=False,
)
# GB300 [000]: 1 user 145.9 tok/s aggregate, TTFT 0.061 s; 32 users 55.6 tok/s per user, TTFT 0.985 s; 256 users
# 2,517 tok/s at 29 tok/s per user (256-token answers): step 1 = (256 ÷ 145.9 − 0.061) ÷ 255, step C = 1 ÷ per-user,
# TTFT 256 = 256 × 256 ÷ 2,517 − 255 × step.
GB300 = Pace(
    "gb300",
    ttft_s={1: 0.061, 32: 0.985, 256: 17.25},
    step_s={1: 0.00664, 32: 1 / 55.6, 256: 1 / 29},
    remote=True,
)
# Two stations, TP=2 [002]: mean TTFT 479.75 / 433.79 / 482.90 ms and per-user 115.3 / 53.0 / 42.4 tok/s at 1 / 8 / 16;
# --max-num-seqs 16: 32 users queue (the engine model's own queue gives the 32-user row).
TP2 = Pace(
    "tp2",
    ttft_s={1: 0.480, 8: 0.434, 16: 0.483},
    step_s={1: 1 / 115.3, 8: 1 / 53.0, 16: 1 / 42.4},
    remote=True,
)
PACES = {p.name: p for p in (REFERENCE, GB300, TP2)}


BURST_S = 2.0  # how long the odd burst of other work lasts (the reference station's slow rounds were 0.2-1 s long)


@dataclass(frozen=True)
class Noise:
    """What moves the station between batches and within one (logs of speed factors; see the module's docstring)."""

    name: str
    machine_sigma: float  # the machine's state, shared by consecutive batches
    machine_rho: float  # its correlation from one batch to the next
    batch_sigma: float  # each batch's own part at one sequence …
    batch_sigma_at_8: float  # … plus this much at 8 sequences (log2 of the batch ÷ 3)
    ttft_sigma: float  # each batch's own TTFT part
    slow_round_share: float  # the odd slow round (a burst of other work) …
    slow_round_log: tuple[float, float]  # … slower by exp(U(a, b))
    request_sigma: float  # each request's own TTFT part
    step_sigma: float  # each request's own decode part (small: the sequences of a batch step together)
    freezes_per_s: float  # multi-second freezes: every stream stops
    freeze_s: tuple[float, float]  # their length: lognormal (median, σ of the log), at most 10 s
    batching_penalty: float  # per run, U(0, this) × log2(batch) slows a batch (hogs take the cores it needs)
    held_share: float = 0.03  # healthy: polls that meet a request between two scheduler steps


# The reference station's rounds, quiet (bench/results/vs-vllm-bench.json, vs-vllm-bench-no-warmups.json: tok/s
# rounds σ(log) 0.06–0.17, mostly a few % with the odd round 25 % slow; TTFT 0.08–0.16) and at load average 8–22 with
# other sessions and CPU hogs (vs-vllm-bench-loaded.json: tok/s σ(log) 0.29–0.82, TTFT 0.6–0.8; the scaling ratio's
# medians 2.7–4.4× and rounds from 1.5× under two hogs, docs/performance.md).
STATION_QUIET = Noise(
    "quiet",
    machine_sigma=0.03,
    machine_rho=0.6,
    batch_sigma=0.03,
    batch_sigma_at_8=0.02,
    ttft_sigma=0.08,
    slow_round_share=0.08,
    slow_round_log=(0.1, 0.4),
    request_sigma=0.05,
    step_sigma=0.01,
    freezes_per_s=1 / 600,
    freeze_s=(2.0, 0.4),
    batching_penalty=0.0,
)
STATION_LOADED = Noise(
    "loaded",
    machine_sigma=0.25,
    machine_rho=0.7,
    batch_sigma=0.08,
    batch_sigma_at_8=0.25,
    ttft_sigma=0.45,
    slow_round_share=0.15,
    slow_round_log=(0.3, 1.6),
    request_sigma=0.15,
    step_sigma=0.05,
    freezes_per_s=1 / 60,
    freeze_s=(3.0, 0.5),
    batching_penalty=0.2,
)


@dataclass(frozen=True)
class Client:
    """golive's client's own time: added to each TTFT and E2E it reads (lognormal, median and σ of the log), and
    lost between one answer and the next request on a lane."""

    name: str
    read_s: float
    read_sigma: float
    gap_s: float


# measured against the scripted station (bench/operating_characteristic.py --validate; docs/performance.md)
CLIENT_QUIET = Client("quiet", read_s=0.0005, read_sigma=0.5, gap_s=0.0004)
CLIENT_LOADED = Client("loaded", read_s=0.002, read_sigma=1.0, gap_s=0.002)


@dataclass(frozen=True)
class Degradation:
    name: str
    slower: float = 1.0  # every time × this
    ttft_only: float = 1.0  # TTFT × this, decode unchanged
    max_num_seqs: int | None = None  # a batching limit below the profile's
    prefill_stalls: bool = False  # each admitted request's prefill freezes the running streams


HEALTHY = Degradation("healthy")
DEGRADATIONS = (
    HEALTHY,
    Degradation("1.1× slower", slower=1.1),
    Degradation("1.25× slower", slower=1.25),
    Degradation("1.5× slower", slower=1.5),
    Degradation("2× slower", slower=2.0),
    Degradation("--max-num-seqs 1", max_num_seqs=1),
    Degradation("--max-num-seqs 2", max_num_seqs=2),
    Degradation("TTFT 1.5×", ttft_only=1.5),
    Degradation("TTFT 2×", ttft_only=2.0),
    Degradation("prefill stalls decode", prefill_stalls=True),
)


@dataclass
class SimulatedStation:
    """One go-live's station: a load.RunBatch on a virtual clock (no request is sent, no time passes)."""

    pace: Pace
    degradation: Degradation
    station: Noise
    client: Client
    max_num_seqs: int  # the profile's (the recipe's) batch; a degradation may cap it lower
    prompt_tokens: int
    output_tokens: int
    paired: int | None  # the gate level: its round batches are polled for vLLM's running and waiting counts
    rng: np.random.Generator
    now: float = 0.0
    machine: float = 0.0
    penalty: float = 0.0
    engine_samples: list[list[float]] = field(default_factory=list)
    polled: tuple[str, ...] = (LEVEL, ROUND)  # the gate level's batches beside which vLLM's counts are read

    def __post_init__(self) -> None:
        self.penalty = float(self.rng.uniform(0, self.station.batching_penalty)) if self.station.batching_penalty else 0
        self.machine = float(self.rng.normal(0, self.station.machine_sigma))

    def clock(self) -> float:
        return self.now

    async def run(
        self, kind: str, concurrency: int, count: int, round_: int | None, deadline: float
    ) -> tuple[list[RequestTiming], float, float]:
        return self.batch(kind, concurrency, count, deadline)

    def batch(
        self, kind: str, concurrency: int, count: int, deadline: float
    ) -> tuple[list[RequestTiming], float, float]:
        rng, noise, degradation = self.rng, self.station, self.degradation
        cap = min(self.max_num_seqs, degradation.max_num_seqs or self.max_num_seqs)
        running = min(concurrency, cap)
        rho = noise.machine_rho
        self.machine = rho * self.machine + math.sqrt(1 - rho * rho) * float(rng.normal(0, noise.machine_sigma))
        # a remote accelerator's batch is not disturbed more for being larger: that growth is a shared CPU's
        grows = 0.0 if self.pace.remote else noise.batch_sigma_at_8 * math.log2(running) / 3
        own = float(rng.normal(0, noise.batch_sigma + grows))
        ttft = self.pace.ttft(running) * degradation.slower * degradation.ttft_only
        answer = ttft + (self.output_tokens - 1) * self.pace.step(running) * degradation.slower
        # a burst of other work lasts a few seconds: a batch much longer than that is slowed by its share only
        span = math.ceil(count / running) * answer
        burst = min(1.0, BURST_S / span) if span > 0 else 1.0
        slow = burst * float(rng.uniform(*noise.slow_round_log)) if rng.random() < noise.slow_round_share else 0.0
        speed = math.exp(self.machine + own - slow) / (1 + self.penalty * math.log2(running))
        ttft *= math.exp(float(rng.normal(0, noise.ttft_sigma)) + self.machine - slow)
        step = self.pace.step(running) * degradation.slower / speed
        answer = ttft + (self.output_tokens - 1) * step
        if degradation.prefill_stalls and running > 1:
            # each of the other running streams' arrivals freezes this one for a prefill (its TTFT less the queue)
            step *= 1 + (running - 1) * self.pace.ttft(1) * degradation.slower / answer
        # freezes over the batch's span (work time → wall time: a freeze stops every stream and the client waits)
        waves = math.ceil(count / running) * (1 + concurrency / running)
        horizon = waves * (ttft + (self.output_tokens - 1) * step) * 2 + 1
        starts: list[float] = []
        if noise.freezes_per_s:
            t = float(rng.exponential(1 / noise.freezes_per_s))
            while t < horizon:
                starts.append(t)
                t += float(rng.exponential(1 / noise.freezes_per_s))
        lengths = [min(10.0, float(rng.lognormal(math.log(noise.freeze_s[0]), noise.freeze_s[1]))) for _ in starts]
        added = list(itertools.accumulate(lengths))

        def wall(work: float) -> float:
            i = bisect.bisect_left(starts, work)
            return work + (added[i - 1] if i else 0.0)

        jitter_ttft = rng.lognormal(0, noise.request_sigma, count)
        jitter_step = rng.lognormal(0, noise.step_sigma, count)
        read = self.client.read_s * rng.lognormal(0, self.client.read_sigma, (count, 2))
        lanes = [0.0] * concurrency
        slots = [0.0] * running
        timings: list[RequestTiming] = []
        last = 0.0
        for i in range(count):
            send = heapq.heappop(lanes)
            if self.now + wall(send) > deadline:
                break
            admitted = max(send, heapq.heappop(slots))
            first = admitted + ttft * jitter_ttft[i]
            end = first + (self.output_tokens - 1) * step * jitter_step[i]
            heapq.heappush(slots, end)
            heapq.heappush(lanes, end + self.client.gap_s)
            sent = wall(send)
            timings.append(
                RequestTiming(
                    sent=self.now + sent,
                    token_times=[wall(first) - sent + read[i, 0]],
                    end=wall(end) - sent + read[i, 0] + read[i, 1],
                    prompt_tokens=self.prompt_tokens,
                    completion_tokens=self.output_tokens,
                )
            )
            last = max(last, wall(end) + read[i, 0] + read[i, 1])
        started, ended = self.now, self.now + last
        if kind in self.polled and concurrency == self.paired:
            self._poll(concurrency, running, ended - started)
        self.now = ended + 0.05  # the client's own time between batches
        return timings, started, ended

    def _poll(self, users: int, running: int, duration_s: float) -> None:
        """vLLM's running and waiting counts every 0.1 s (at most 40 polls a batch): a cap keeps the rest waiting;
        a healthy station only shows a request that arrived between two scheduler steps."""
        for _ in range(max(1, min(40, int(duration_s / 0.1)))):
            if users > running:
                self.engine_samples.append([float(running), float(users - running)])
            elif self.rng.random() < self.station.held_share:
                self.engine_samples.append([float(running - 1), 1.0])
            else:
                self.engine_samples.append([float(running), 0.0])
