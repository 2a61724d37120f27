"""How sure a measured number is: seeded bootstrap intervals over a level's requests, and a floor judged on them.

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
from collections.abc import Sequence
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
