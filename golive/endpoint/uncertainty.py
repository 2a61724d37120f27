"""How sure a measured number is: every gated number from its rounds (the unit of run-to-run variation), with the
order-statistic interval of their median, a warning where the rounds disagree, and a floor judged on the interval.

**Rounds** (`Rounds`): a gated number is read once per round (one measured batch of its level; the sweep interleaves
the gate level's and the 1-user level's batches, golive.endpoint.load), and the gate reads the **median of the
rounds** with the distribution-free 95 % interval of that median: the order statistics x(k) and x(n+1−k) with k the
largest whose binomial coverage 1 − 2·P(Binomial(n, ½) ≤ k − 1) is at least 95 % (the sign-test interval: Conover,
Practical Nonparametric Statistics, §3.2). It assumes only that rounds are independent draws of the same station, no
shape: one round that met other work widens it as far as that round and no further once there are 9+ rounds. Fewer
than MIN_ROUNDS (6) rounds cover the median with less than 95 % even at their extremes (5 rounds: 93.75 %): then there
is no interval, and the number says so ("5 rounds: too few for an interval") instead of a narrow one.

**Unstable**: pyperf's `check` (https://pyperf.readthedocs.io/en/latest/cli.html#pyperf-check) warns when the standard
deviation is greater than 10 % of the mean, or the minimum or maximum is 50 % away from the mean; hyperfine warns
"Statistical outliers were detected. Consider re-running this benchmark on a quiet system". Rounds that do either are
*unstable*: the number is reported with the rounds' range and spread (max ÷ min − 1). Every gate is judged on the bound
that protects the operator: a floor passes only when the interval's low end clears it (a ceiling: its high end). A gate
whose interval straddles its bound gets more rounds, unstable or not (within the profile's bounds; from 9 rounds on the
interval leaves out the single most extreme round, so one round that met other work does not decide); one that still
straddles is not checked (INCOMPLETE, with the rounds and their spread): unstable rounds keep a station from GO, but
only an interval wholly beyond the bound says NO-GO.

Per-request intervals (below: bootstrap over a level's requests) describe one batch only: three runs of one quiet
station gave 2,518, 2,350 and 2,987 tok/s, each interval excluding the others (issue 28). They remain for the sweep
table's levels that have too few rounds, never for a gate.

Percentile bootstrap (Efron & Tibshirani, ch. 13): resample the level's successful requests with replacement
RESAMPLES times and take the 2.5th and 97.5th percentiles of the statistic. The generator is seeded, so the same
requests always give the same interval (a report that is re-rendered does not move). The aggregate throughput of a
level is one wall-clock ratio (tokens ÷ duration), not a per-request number, so its interval is the aggregate scaled by
the bootstrap spread of the ratio estimator Σ tokens ÷ Σ E2E over the same requests: with C requests in flight for the
whole level, aggregate ≈ C × Σ tokens ÷ Σ E2E, and request-to-request variation is what moves it. A share (goodput)
gets a Wilson score interval (exact enough at small counts, never outside [0, 1]).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 20261201
Interval = tuple[float, float]


def _rng() -> np.random.Generator:
    return np.random.default_rng(SEED)


def median_interval(values: Sequence[float]) -> Interval | None:
    """The bootstrap interval of the median; None with fewer than 2 values (no spread to resample)."""
    if len(values) < 2:
        return None
    data = np.asarray(values, dtype=float)
    medians = np.median(data[_rng().integers(0, len(data), (RESAMPLES, len(data)))], axis=1)
    low, high = np.quantile(medians, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])
    return float(low), float(high)


def aggregate_interval(aggregate: float, tokens: Sequence[float], e2es: Sequence[float]) -> Interval | None:
    """The interval of a level's aggregate tok/s: the aggregate × the bootstrap spread of Σ tokens ÷ Σ E2E."""
    if len(tokens) < 2 or len(tokens) != len(e2es) or sum(e2es) <= 0:
        return None
    tok, e2e = np.asarray(tokens, dtype=float), np.asarray(e2es, dtype=float)
    picks = _rng().integers(0, len(tok), (RESAMPLES, len(tok)))
    ratios = tok[picks].sum(axis=1) / e2e[picks].sum(axis=1)
    low, high = np.quantile(ratios / (tok.sum() / e2e.sum()), [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])
    return float(aggregate * low), float(aggregate * high)


def share_interval(good: int, total: int) -> Interval | None:
    """Wilson score interval of good ÷ total (95 %)."""
    if total <= 0:
        return None
    z = 1.959963984540054
    p = good / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return max(0.0, centre - half), min(1.0, centre + half)


def ratio_interval(top: float, top_ci: Interval | None, bottom: float, bottom_ci: Interval | None) -> Interval | None:
    """The interval of top ÷ bottom, two independent estimates (two levels' requests): in log space their errors
    add in quadrature (the delta method), each side from its own side of the two intervals. Taking each end at its
    least favourable (top low ÷ bottom high) would add the errors instead: a ~99.8 % interval, undecided too often."""
    if top_ci is None or bottom_ci is None or min(top, bottom, top_ci[0], bottom_ci[0]) <= 0:
        return None
    ratio = top / bottom
    down = math.hypot(math.log(top / top_ci[0]), math.log(bottom_ci[1] / bottom))
    up = math.hypot(math.log(top_ci[1] / top), math.log(bottom / bottom_ci[0]))
    return ratio * math.exp(-down), ratio * math.exp(up)


POWER = 0.95  # the detectable degradation (Rounds.detectable): the factor a gate catches in 95 % of runs
MIN_ROUNDS = 6  # the fewest rounds whose extremes cover the median with ≥ 95 %: 1 − 2 × 0.5⁶ = 96.9 %
UNSTABLE_CV = 0.10  # pyperf check: standard deviation > 10 % of the mean
UNSTABLE_EXTREME = 0.5  # pyperf check: the minimum or the maximum 50 % away from the mean


def _order_rank(n: int) -> int | None:
    """The largest k with P(x(k) ≤ median ≤ x(n+1−k)) = 1 − 2·P(Binomial(n, ½) ≤ k − 1) ≥ CONFIDENCE; None when
    even the extremes (k = 1) cover less."""
    best = None
    below = 0.0  # P(Binomial(n, ½) ≤ k − 1)
    for k in range(1, (n + 1) // 2 + 1):
        below += math.comb(n, k - 1) / 2**n
        if 1 - 2 * below < CONFIDENCE:
            break
        best = k
    return best


@dataclass(frozen=True)
class Rounds:
    """One gated number's values, one a round, in the order measured."""

    values: tuple[float, ...]

    @classmethod
    def of(cls, values: Sequence[float | None] | None) -> Rounds | None:
        kept = tuple(v for v in values or [] if v is not None)
        return cls(kept) if kept else None

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def interval(self) -> Interval | None:
        """The order-statistic 95 % interval of the median; None with fewer than MIN_ROUNDS rounds."""
        k = _order_rank(self.n)
        if k is None:
            return None
        ordered = sorted(self.values)
        return ordered[k - 1], ordered[self.n - k]

    @property
    def cv(self) -> float | None:
        mean = statistics.fmean(self.values)
        return statistics.stdev(self.values) / mean if self.n >= 2 and mean > 0 else None

    @property
    def spread(self) -> float | None:
        """max ÷ min − 1; None where the smallest round is not positive."""
        low = min(self.values)
        return max(self.values) / low - 1 if low > 0 else None

    @property
    def unstable(self) -> bool:
        """pyperf check's two warnings: std > 10 % of the mean, or an extreme 50 % away from the mean."""
        if self.n < 2:
            return False
        mean = statistics.fmean(self.values)
        if mean <= 0:
            return max(self.values) != min(self.values)
        cv = self.cv
        far = max(abs(v - mean) for v in self.values) / mean
        return (cv is not None and cv > UNSTABLE_CV) or far >= UNSTABLE_EXTREME

    def detectable(self, power: float = POWER) -> float | None:
        """How far beyond its bound a station must be for a gate judged on as many rounds as these, spread as these
        are, to FAIL with probability `power`: the factor s such that rounds drawn around bound ÷ s (a floor; bound × s
        for a ceiling) put the interval's far end beyond the bound in `power` of runs. The rounds' spread is read as
        lognormal (σ: the standard deviation of their logs, an outlier round widening it); the far end x(n+1−k) lies
        below the bound when at least n+1−k rounds do: P(Binomial(n, p) ≥ n+1−k) ≥ power fixes p, and
        p = Φ(ln s ÷ σ) fixes s. None with fewer than MIN_ROUNDS rounds (no interval: no round count can fail) or a
        round that is not positive."""
        k = _order_rank(self.n)
        if k is None or min(self.values) <= 0:
            return None
        logs = [math.log(v) for v in self.values]
        sigma = statistics.stdev(logs)
        needed = self.n + 1 - k  # rounds beyond the bound for the far end of the interval to be

        def caught(p: float) -> float:
            return sum(math.comb(self.n, j) * p**j * (1 - p) ** (self.n - j) for j in range(needed, self.n + 1))

        low, high = 0.5, 1.0 - 1e-12
        for _ in range(60):  # bisection: caught() rises with p
            middle = (low + high) / 2
            low, high = (middle, high) if caught(middle) < power else (low, middle)
        return math.exp(sigma * statistics.NormalDist().inv_cdf(high))

    def said(self, spec: str = ",.4g", unit: str = "") -> str:
        """How sure the median is, in words: "median of 8 rounds, 95 % CI 2,350–2,987", or "3 rounds: too few for
        an interval (…)"; then "; unstable (rounds …, spread …)" where the rounds disagree."""
        interval = self.interval
        if interval is None:
            text = (
                f"{self.n} round{'s' if self.n != 1 else ''}: too few for an interval "
                f"(a 95 % interval of a median needs at least {MIN_ROUNDS} rounds)"
            )
        else:
            text = f"median of {self.n} rounds, {interval_text(interval, spec)}"
        return text + self.instability(spec, unit)

    def instability(self, spec: str = ",.4g", unit: str = "") -> str:
        """ "; unstable (rounds 2,350–2,987 tok/s, spread 27 %)" where the rounds disagree; else empty."""
        return f"; unstable ({self.range_text(spec, unit)})" if self.unstable else ""

    def range_text(self, spec: str = ",.4g", unit: str = "") -> str:
        spread = self.spread
        unit = f" {unit}" if unit else ""
        return f"rounds {format(min(self.values), spec)}–{format(max(self.values), spec)}{unit}" + (
            f", spread {spread * 100:.0f} %" if spread is not None else ""
        )


class Decision(Enum):
    PASSES = "passes"
    FAILS = "fails"
    UNDECIDED = "undecided"


def against_floor(interval: Interval | None, floor: float) -> Decision:
    """Passes when the whole interval clears the floor, fails when the whole interval is below it."""
    if interval is None:
        return Decision.UNDECIDED
    if interval[0] >= floor:
        return Decision.PASSES
    return Decision.FAILS if interval[1] < floor else Decision.UNDECIDED


def against_ceiling(interval: Interval | None, ceiling: float) -> Decision:
    if interval is None:
        return Decision.UNDECIDED
    if interval[1] <= ceiling:
        return Decision.PASSES
    return Decision.FAILS if interval[0] > ceiling else Decision.UNDECIDED


def interval_text(interval: Interval | None, spec: str = ",.4g") -> str:
    return (
        "no interval (fewer than 2 requests)"
        if interval is None
        else f"95 % CI {format(interval[0], spec)}–{format(interval[1], spec)}"
    )
