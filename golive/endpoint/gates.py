"""The sweep's gates as data: each bound of a profile's `load.floors` at its level, the measured value, its interval and
what the interval decides; and the shape of the throughput curve with the cause it usually has.

Every gate reads the median of its rounds (one value per measured batch of its level; the ratios one per ratio round)
with the order-statistic interval of that median (golive.endpoint.uncertainty.Rounds): rounds, not requests, are the
unit, so the interval covers the station's run-to-run variation. Pure functions of the sweep's level results
(golive.endpoint.levels.LevelResult) and the profile's `load` section, so the load generator can ask, level by level,
whether more rounds would decide a floor (`undecided`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from golive.core.verdict import counted
from golive.endpoint.levels import LevelResult, Rounded, catches
from golive.endpoint.uncertainty import (
    Decision,
    Interval,
    Rounds,
    against_ceiling,
    against_floor,
    interval_text,
    ratio_interval,
)
from golive.profile.schema import GATE_NAMES, GateName, Load

SPEED_UNMEASURABLE = (
    "no successful answer had its tokens spread over time (each arrived in one read: no decode "
    "time to divide); longer answers (load.output_tokens) give it one"
)
TTFT_UNMEASURABLE = "no successful answer carried a token event (content, reasoning or a tool call)"
UNMEASURABLE: dict[GateName, str] = {
    "single_user_decode_tok_s": SPEED_UNMEASURABLE,
    "per_user_tok_s_p50": SPEED_UNMEASURABLE,
    "per_user_ratio": SPEED_UNMEASURABLE,
    "single_user_ttft_p50_s": TTFT_UNMEASURABLE,
    "ttft_p50_s": TTFT_UNMEASURABLE,
    "scaling_ratio": "a level had no successful request",
    "goodput_share": "no successful request",
}
# gates that read the time between bytes of one answer: a buffered stream gives them the proxy's timing, not vLLM's
LATENCY: set[GateName] = {
    "single_user_decode_tok_s",
    "single_user_ttft_p50_s",
    "per_user_tok_s_p50",
    "ttft_p50_s",
    "per_user_ratio",
    "goodput_share",
}
CEILINGS: frozenset[GateName] = frozenset({"single_user_ttft_p50_s", "ttft_p50_s"})
RATIOS: frozenset[GateName] = frozenset({"scaling_ratio", "per_user_ratio"})
RISE = 1.15  # a level "raises" the aggregate when it adds at least 15 %: less is within a loaded machine's noise


@dataclass
class Gate:
    field: GateName  # load.floors.<field>
    concurrency: int
    value: float | None
    interval: Interval | None
    bound: float  # the floor (or ceiling) after load.tolerance
    requests: int
    rounds: int | None = None  # how many rounds the value is the median of (None: a number read whole, the peak's)
    spread: Rounds | None = None  # the rounds themselves: their interval, whether they are unstable
    tolerance: float = 0.0  # load.tolerance: the bound is the profile's number less (plus, a ceiling) this share

    @property
    def ceiling(self) -> bool:
        return self.field in CEILINGS

    @property
    def unstable(self) -> bool:
        return self.spread is not None and self.spread.unstable

    @property
    def decision(self) -> Decision:
        """Judged on the interval, the bound that protects the operator first: a floor passes only when the interval's
        low end clears it (a ceiling: its high end) and fails only when the whole interval lies beyond; in between
        undecided: the sweep adds rounds within the profile's bounds (`undecided`; from 9 rounds on the interval no
        longer reaches the single most extreme round, so one round that met other work does not decide), and a gate
        still undecided is not checked, never GO and never NO-GO. Unstable rounds are said with their spread; they
        widen the interval and decide nothing by themselves."""
        if self.value is None:
            return Decision.UNDECIDED
        return against_ceiling(self.interval, self.bound) if self.ceiling else against_floor(self.interval, self.bound)

    @property
    def detectable(self) -> float | None:
        """The smallest degradation this run would have caught with 95 %, from its own rounds' spread: a station
        this many times slower than the profile's number (below it for a floor, above it for a ceiling) fails the gate
        in 95 % of runs of as many rounds (golive.endpoint.uncertainty.Rounds.detectable, the tolerance added on
        top). None where the rounds give no interval."""
        beyond = None if self.spread is None else self.spread.detectable()
        if beyond is None:
            return None
        return beyond * (1 + self.tolerance) if self.ceiling else beyond / (1 - self.tolerance)

    def measured(self, spec: str = ",.4g", unit: str = "") -> str:
        """The value and how sure it is: "2,518 (median of 8 rounds, 95 % CI 2,350–2,987; unstable (…))"; the ratios
        say how their rounds were made."""
        said = self.said(spec, unit)
        if self.field in RATIOS and self.rounds:
            said = said.replace(" rounds", f" rounds of 1 and {self.concurrency} users back to back", 1)
        return f"{format(self.value, spec)} ({said})"

    def recorded(self, unit: str) -> dict[str, Any]:
        """What the check records beside the value (record_metric's keywords): the bound, the interval, the rounds,
        whether they are unstable, and the degradation this run could catch."""
        return {
            "ceiling" if self.ceiling else "floor": self.bound,
            "interval": self.interval,
            "requests": self.requests,
            "passed": self.decision is Decision.PASSES,
            "rounds": self.rounds,
            "unstable": self.spread.range_text(",.4g", unit) if self.spread is not None and self.unstable else None,
            "detectable": self.detectable,
        }

    def undecided(self, what: str, unit: str, load: Load) -> str:
        """Why an undecided gate is not checked: the value, its rounds and interval, and what to raise."""
        kind = "ceiling" if self.ceiling else "floor"
        straddles = "cannot be judged against" if self.interval is None else "straddles"
        value = "n/a" if self.value is None else f"{self.value:,.4g}"
        return (
            f"undecided: {what} at {self.concurrency} users is {value} ({self.said(',.4g', unit)}), which "
            f"{straddles} the {kind} {self.bound:,.4g}; the sweep added rounds up to the profile's bounds "
            f"(load.max_requests {load.max_requests}, load.max_duration_s {load.max_duration_s:g} s) and still could "
            f"not tell: raise them, or measure on a quieter station"
        ) + (
            "; the rounds are unstable (pyperf's check: their standard deviation above 10 % of their mean, or one 50 % "
            "away from it): the station moved while it was measured; find what else runs on it (another workload, "
            "throttling)"
            if self.unstable
            else ""
        )

    def said(self, spec: str = ",.4g", unit: str = "") -> str:
        """How sure the value is, in words (golive.endpoint.uncertainty.Rounds.said)."""
        if self.spread is not None:
            caught = catches(self.detectable, self.ceiling)
            return self.spread.said(spec, unit) + (f"; {caught}" if caught else "")
        return f"{interval_text(self.interval, spec)}, {self.requests} requests"


def bound(load: Load, field: GateName) -> float | None:
    """The profile's number less (a floor) or plus (a ceiling) its tolerance; None where the profile sets none."""
    value = load.floors.of(field)
    if value is None:
        return None
    return value * (1 + load.tolerance) if field in CEILINGS else value * (1 - load.tolerance)


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return None if top is None or not bottom else top / bottom


def level_rounds(level: LevelResult, field: Rounded) -> Rounds | None:
    """A level's number as its rounds: the per-batch values the sweep recorded; a row without them (not made by the
    sweep) is one round of its own value."""
    recorded = level.rounds_of(field)
    if recorded is not None:
        return Rounds.of(recorded)
    value = level.value_of(field)
    return None if value is None else Rounds((value,))


Found = tuple[GateName, float | None, Interval | None, Rounds | None]
AT_GATE_LEVEL: tuple[Rounded, ...] = ("aggregate_tok_s", "per_user_tok_s_p50", "ttft_p50_s", "goodput_share")


def _of(field: GateName, rounds: Rounds | None) -> Found:
    return (field, None, None, None) if rounds is None else (field, rounds.median, rounds.interval, rounds)


def gates_at(load: Load, level: LevelResult, earlier: list[LevelResult]) -> list[Gate]:
    """The gates this level decides (those the profile sets a number for), each the median of its rounds."""
    found: list[Found] = []
    if level.concurrency == 1:
        found += [
            _of("single_user_decode_tok_s", level_rounds(level, "per_user_tok_s_p50")),
            _of("single_user_ttft_p50_s", level_rounds(level, "ttft_p50_s")),
        ]
    if level.concurrency == load.gate_level:
        found += [_of(field, level_rounds(level, field)) for field in AT_GATE_LEVEL]
        one = level if level.concurrency == 1 else next((lv for lv in earlier if lv.concurrency == 1), None)
        if level.scaling_rounds:
            found += [
                _of("scaling_ratio", Rounds.of(level.scaling_rounds)),
                _of("per_user_ratio", Rounds.of(level.per_user_rounds)),
            ]
        elif one is not None:  # no ratio rounds (load.ratio_rounds 0, or the bounds ran out first): the pooled levels
            aggregate = _ratio(level.aggregate_tok_s, one.aggregate_tok_s)
            found += [
                (
                    "scaling_ratio",
                    aggregate,
                    ratio_interval(
                        level.aggregate_tok_s,
                        _rounds_ci(level, "aggregate_tok_s"),
                        one.aggregate_tok_s,
                        _rounds_ci(one, "aggregate_tok_s"),
                    ),
                    None,
                )
            ]
            if level.per_user_tok_s_p50 is not None and one.per_user_tok_s_p50 is not None:
                found += [
                    (
                        "per_user_ratio",
                        _ratio(level.per_user_tok_s_p50, one.per_user_tok_s_p50),
                        ratio_interval(
                            level.per_user_tok_s_p50,
                            _rounds_ci(level, "per_user_tok_s_p50"),
                            one.per_user_tok_s_p50,
                            _rounds_ci(one, "per_user_tok_s_p50"),
                        ),
                        None,
                    )
                ]
            else:
                found += [("per_user_ratio", None, None, None)]
    gates = []
    for field, value, interval, rounds in found:
        limit = bound(load, field)
        if limit is not None:
            gates.append(
                Gate(
                    field,
                    level.concurrency,
                    value,
                    interval,
                    limit,
                    level.requests - level.failures,
                    None if rounds is None else rounds.n,
                    rounds,
                    load.tolerance,
                )
            )
    return gates


def _rounds_ci(level: LevelResult, field: Rounded) -> Interval | None:
    """A level's number's interval from its rounds; a row the sweep did not make (no `*_rounds`) gives its `*_ci`."""
    if level.rounds_of(field) is None:
        ci = level.interval_of(field)
        return None if ci is None else (ci[0], ci[1])
    rounds = level_rounds(level, field)
    return None if rounds is None else rounds.interval


def peak(load: Load, levels: list[LevelResult]) -> Gate | None:
    """The best aggregate of the sweep against peak_tok_s: a level whose rounds' interval clears the bound shows the
    peak (the highest low end of those); else the level with the highest median, judged on its own interval (more
    rounds of that level while it straddles: `undecided`). Choosing among intervals alone left out a top level of
    one batch (no interval) and judged a lower level's interval against the peak: a healthy GB300 station whose 256
    users read 2,517 tok/s failed on its 32 users' 1,464 (bench/operating_characteristic.py). None where the profile
    sets no peak or no level had a successful request."""
    limit = bound(load, "peak_tok_s")
    ran = [(lv, r) for lv in levels if lv.requests > lv.failures and (r := level_rounds(lv, "aggregate_tok_s"))]
    if limit is None or not ran:
        return None
    clear = [(lv, r) for lv, r in ran if r.interval is not None and r.interval[0] >= limit]
    best, rounds = max(
        clear or ran, key=lambda pair: pair[1].interval[0] if clear and pair[1].interval else pair[1].median
    )
    return Gate(
        "peak_tok_s",
        best.concurrency,
        rounds.median,
        rounds.interval,
        limit,
        best.requests - best.failures,
        rounds.n,
        rounds,
        load.tolerance,
    )


def undecided(load: Load, level: LevelResult, earlier: list[LevelResult]) -> str | None:
    """Where more rounds could decide a measured gate at this level (too few rounds for an interval, or an interval
    that straddles its bound, the rounds stable or not): "ratio" (only ratio gates: the 1-user level may be the less
    sure side), "level" (a gate of this level's own), None (all decided)."""
    fields = {
        g.field for g in gates_at(load, level, earlier) if g.value is not None and g.decision is Decision.UNDECIDED
    }
    best = peak(load, [*earlier, level])
    if best is not None and best.concurrency == level.concurrency and best.decision is Decision.UNDECIDED:
        fields.add("peak_tok_s")  # the level that reads the peak gets rounds too
    if not fields:
        return None
    return "ratio" if fields <= RATIOS else "level"


def gate(load: Load, levels: list[LevelResult], field: GateName) -> Gate | None:
    """The named gate, from the level that decides it; None where that level was not run or the profile sets none."""
    for i, level in enumerate(levels):
        for g in gates_at(load, level, levels[:i]):
            if g.field == field:
                return g
    return None


def workload(load: Load, concurrency: int, level: LevelResult | None = None) -> str:
    """The workload as sent: the prompt's size as the server counted it (usage.prompt_tokens, the level's median),
    where the level ran; the profile's design otherwise."""
    counted = level.prompt_tokens_p50 if level is not None else None
    prompt = (
        f"{counted:,.0f}-token salted prompts (usage.prompt_tokens, median; {load.prompt_tokens} asked)"
        if counted is not None
        else f"~{load.prompt_tokens}-token salted prompts"
    )
    return (
        f"{concurrency} in flight, {prompt}, {load.output_tokens}-token answers, "
        f"rounds of {max(load.repeats * concurrency, load.min_requests)} requests after warm-up"
    )


def ratio_rounds(level: LevelResult | None) -> str:
    """ " (rounds: 4.10×, 3.92×, …)": the gate level's scaling rounds, where it has them."""
    if level is None or not level.scaling_rounds:
        return ""
    return " (rounds: " + ", ".join(f"{r:.2f}×" for r in level.scaling_rounds) + ")"


@dataclass
class Curve:
    """The aggregate throughput against users: where it stops rising, and whether it falls after."""

    points: list[tuple[int, float]]  # (users, aggregate tok/s), users ascending
    peak: int  # the first level that no later level raises (by RISE, intervals apart); the top while it rises
    falls: bool  # a later level is lower than the peak by 1 / RISE, intervals apart

    def described(self) -> str:
        return ", ".join(f"{users}: {value:,.4g}" for users, value in self.points)

    def cause(self, max_num_seqs: int | None, ratio: float | None = None, users: int | None = None) -> str:
        """The likely cause the curve's shape names, else the scaling ratio at `users` (a station that batches N
        sequences gives at most N× one user's aggregate); empty when neither names one."""
        expected = f" (the profile serves --max-num-seqs {max_num_seqs})" if max_num_seqs else ""
        if len(self.points) < 2:
            return ""
        # the ratio first: one level measured in a lull of other work can make any curve look like it rises and falls
        if self.peak == self.points[0][0] or (ratio is not None and ratio < 1.5):
            return (
                f"the aggregate is flat from 1 user on: the station does not batch. Batching is capped: "
                f"the served --max-num-seqs is likely 1{expected}; read it in the service's ExecStart or "
                f"`vllm:num_requests_running` on /metrics under load (it never exceeds the cap)"
            )
        if self.falls:
            return (
                f"the aggregate rises to {self.peak} users, then falls: a KV-cache or scheduling ceiling "
                f"(preemptions: `vllm:num_preemptions_total` on /metrics; KV cache too small for more sequences: "
                f"--gpu-memory-utilization, --max-model-len; --max-num-batched-tokens)"
            )
        if self.peak < self.points[-1][0] and (max_num_seqs is None or self.peak < max_num_seqs):
            return (
                f"the aggregate stops rising at {counted(self.peak, 'user')}{expected}: batching is capped at about "
                f"{self.peak} sequences (the served --max-num-seqs) or the KV cache holds no more (a KV or "
                f"scheduling ceiling: `vllm:num_requests_waiting` > 0 while running stays at {self.peak})"
            )
        if ratio is not None and users is not None and (capped := max(1, int(ratio + 0.25))) < users:
            return (
                f"the aggregate at {users} users is only {ratio:.2f}× one user's, and a station that batches N "
                f"sequences gives at most N×: batching is capped at about {capped} sequences (the served "
                f"--max-num-seqs{expected}) or a KV or scheduling ceiling holds it there "
                f"(`vllm:num_requests_running` on /metrics stays at {capped} under load)"
            )
        return ""


def curve(levels: list[LevelResult]) -> Curve:
    ran = [lv for lv in sorted(levels, key=lambda lv: lv.concurrency) if lv.requests > lv.failures]
    points = [(lv.concurrency, lv.aggregate_tok_s) for lv in ran]

    def low(lv: LevelResult) -> float:
        return lv.aggregate_tok_s_ci[0] if lv.aggregate_tok_s_ci else lv.aggregate_tok_s

    def high(lv: LevelResult) -> float:
        return lv.aggregate_tok_s_ci[1] if lv.aggregate_tok_s_ci else lv.aggregate_tok_s

    def raises(later: LevelResult, level: LevelResult) -> bool:
        """By RISE, and beyond the noise: the two intervals do not overlap."""
        return later.aggregate_tok_s >= level.aggregate_tok_s * RISE and low(later) > high(level)

    peak = ran[-1] if ran else None
    for i, level in enumerate(ran):
        # no later level raises it: one noisy level in between does not end the rise (a busy machine)
        if not any(raises(later, level) for later in ran[i + 1 :]):
            peak = level
            break
    if peak is None:
        return Curve(points, 0, False)
    falls = any(
        lv.concurrency > peak.concurrency and lv.aggregate_tok_s < peak.aggregate_tok_s / RISE and high(lv) < low(peak)
        for lv in ran
    )
    return Curve(points, peak.concurrency, falls)


@dataclass(frozen=True)
class HeldBack:
    """The batch check's reading of vLLM's running and waiting counts at the gate level (its round batches)."""

    busy: int  # polls with work in the engine
    held: int  # of those, requests waiting while fewer than the batch ran
    most: float  # the most it ran at once

    @property
    def share(self) -> float:
        return self.held / self.busy if self.busy else 0.0

    @property
    def decision(self) -> Decision:
        """Fails when vLLM held requests back in half the polls or more: a request that reached the engine between
        two scheduler steps waits a few ms and a poll meets that once in a while; a cap holds requests back poll after
        poll (capped at 2 of 8: 6 waiting)."""
        if not self.busy:
            return Decision.UNDECIDED
        return Decision.PASSES if self.held < self.busy / 2 else Decision.FAILS


def held_back(level: LevelResult, batch: int) -> HeldBack:
    """`batch`: min(the gate level, the profile's --max-num-seqs): what a healthy station runs at once."""
    busy = [(running, waiting) for running, waiting in level.engine_samples or [] if running + waiting > 0]
    held = [(running, waiting) for running, waiting in busy if waiting > 0 and running < batch]
    return HeldBack(len(busy), len(held), max((running for running, _ in busy), default=0.0))


BATCH_CHECK = "batch"  # the batch check (vLLM's own counts), beside the gates in `decisions`


def decisions(load: Load, levels: list[LevelResult], max_num_seqs: int | None) -> dict[str, Decision]:
    """Every gate of the sweep the profile sets, decided as its check decides it (suites/endpoint/test_throughput.py),
    and the batch check: PASSES, FAILS, or UNDECIDED (not checked: a level not run or without a successful request, a
    number that could not be measured, an interval that straddles its bound). What the operating characteristic
    (bench/operating_characteristic.py) counts; a run's verdict is NO-GO when one FAILS, else INCOMPLETE when one is
    UNDECIDED, else GO. The stream-shape, stall and path checks read token timelines and are not here."""
    ran = {lv.concurrency: lv for lv in levels if lv.requests > lv.failures}
    found: dict[str, Decision] = {}
    for name in GATE_NAMES:
        if bound(load, name) is None or (name == "goodput_share" and not _has_slo(load)):
            continue
        if name == "peak_tok_s":
            top = max(load.concurrency)
            measured = peak(load, levels) if top in ran else None
        else:
            users = 1 if name.startswith("single_user") else load.gate_level
            needed = {users, 1} if name in RATIOS and users != 1 else {users}
            measured = gate(load, levels, name) if needed <= set(ran) else None
        found[name] = Decision.UNDECIDED if measured is None or measured.value is None else measured.decision
    if load.rounds_to_run:
        level = ran.get(load.gate_level)
        if level is None:
            found[BATCH_CHECK] = Decision.UNDECIDED
        else:
            cap = max_num_seqs
            found[BATCH_CHECK] = held_back(level, min(load.gate_level, cap) if cap else load.gate_level).decision
    return found


def _has_slo(load: Load) -> bool:
    return any(v is not None for v in (load.slo.ttft_s, load.slo.tpot_s, load.slo.e2el_s))


def verdict_of(found: dict[str, Decision]) -> Decision:
    """The sweep's verdict as the run's: FAILS (NO-GO) when a gate fails, UNDECIDED (INCOMPLETE) when one is not
    checked, PASSES (GO) when all pass."""
    if Decision.FAILS in found.values():
        return Decision.FAILS
    return Decision.UNDECIDED if Decision.UNDECIDED in found.values() else Decision.PASSES
