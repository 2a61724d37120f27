"""Battery scores over repeated runs: with sampling (temperature > 0) one run is one draw, so a battery runs
`battery_sampling.repeats` times and its score is shown with its spread."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from statistics import fmean


@dataclass
class Spread:
    scores: list[float]  # one per run

    @property
    def min(self) -> float:
        return min(self.scores)

    @property
    def mean(self) -> float:
        return fmean(self.scores)

    @property
    def max(self) -> float:
        return max(self.scores)

    def text(self) -> str:
        if len(self.scores) == 1:
            return f"{self.mean:.0%}"
        return f"mean {self.mean:.0%} (min {self.min:.0%}, max {self.max:.0%} over {len(self.scores)} runs)"

    def record(self, record_metric: Callable[..., object], name: str, floor: float | None) -> None:
        """The mean against the floor; with several runs also its min and max, as metrics of their own."""
        record_metric(name, round(self.mean, 4), "fraction", floor=floor)
        if len(self.scores) > 1:
            record_metric(f"{name}.min", round(self.min, 4), "fraction")
            record_metric(f"{name}.max", round(self.max, 4), "fraction")


def failing_ids(failing_per_run: list[dict[str, str]]) -> list[str]:
    """Case ids that failed in any run, sorted: the baseline gate compares them between go-lives."""
    return sorted({case for run in failing_per_run for case in run})
