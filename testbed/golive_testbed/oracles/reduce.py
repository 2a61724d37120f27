"""Reducing a disagreement to its smallest input (delta debugging, Zeller's ddmin) and the agreement figures.

An input is a list of parts (the lines of a unit file and its drop-ins, the lines of a prestart, the words of a
command line); `rebuild` turns a sub-list back into an input. `still_disagrees` is asked about many candidates at
once (one batch for the tool: one daemon-reload for systemd), and says which of them still disagree the same way.

    smallest = reduce_parts(parts, rebuild, lambda candidates: [disagrees(c) for c in candidates])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

Part = TypeVar("Part")
Case = TypeVar("Case")


def reduce_parts(
    parts: Sequence[Part],
    rebuild: Callable[[list[Part]], Case],
    still_disagrees: Callable[[list[Case]], list[bool]],
    rounds: int = 64,
) -> list[Part]:
    """The smallest sub-list of `parts` (1-minimal: no single part can go) whose input still disagrees: ddmin over
    complements, each granularity's candidates judged in one batch."""
    current = list(parts)
    granularity = 2
    for _ in range(rounds):
        if len(current) < 2:
            break
        size = max(1, len(current) // granularity)
        chunks = [current[i : i + size] for i in range(0, len(current), size)]
        candidates = [[p for j, chunk in enumerate(chunks) if j != k for p in chunk] for k in range(len(chunks))]
        verdicts = still_disagrees([rebuild(c) for c in candidates])
        smaller = next((c for c, bad in zip(candidates, verdicts, strict=True) if bad), None)
        if smaller is not None:
            current = smaller
            granularity = max(granularity - 1, 2)
        elif size == 1:
            break
        else:
            granularity = min(granularity * 2, len(current))
    return current


@dataclass
class Disagreement(Generic[Case]):
    """One input on which golive and the tool read differently: what each said, and the input reduced."""

    what: str  # which reading: "ExecStart argv", "drop runs", "--max-num-seqs"
    golive: str
    tool: str
    case: Case
    reduced: Case | None = None

    def describe(self, show: Callable[[Case], str] = str) -> str:
        shown = show(self.reduced if self.reduced is not None else self.case)
        return f"{self.what}: golive {self.golive!r}, the tool {self.tool!r}, on the input:\n{shown}"


@dataclass
class Agreement(Generic[Case]):
    """A run of one generator against its tool: how many inputs, how many golive read as the tool did, and every
    disagreement (reduced where asked)."""

    reader: str
    tool: str
    inputs: int = 0
    agreed: int = 0
    disagreements: list[Disagreement[Case]] = field(default_factory=list)
    seconds: float = 0.0
    abstained: int = 0  # inputs golive said it could not read (not checked, with its reason): counted apart

    @property
    def share(self) -> float:
        return self.agreed / self.inputs if self.inputs else 0.0

    def record(self, found: Disagreement[Case] | None, abstained: bool = False) -> None:
        """One input judged: agreed (`found` None), a disagreement, or one golive said it could not read (agreed:
        not checked with its reason is what the standard asks, counted apart)."""
        self.inputs += 1
        if abstained:
            self.abstained += 1
        if found is None or abstained:
            self.agreed += 1
        else:
            self.disagreements.append(found)

    def line(self) -> str:
        return (
            f"{self.reader} vs {self.tool}: {self.agreed:,}/{self.inputs:,} agree ({self.share:.2%}), "
            f"{len(self.disagreements)} disagreement(s)"
            + (f", {self.abstained:,} not checked by golive with its reason" if self.abstained else "")
            + f", {self.seconds:.0f} s"
        )

    def describe(self, show: Callable[[Case], str] = str, limit: int = 3) -> str:
        return "\n\n".join([self.line(), *(d.describe(show) for d in self.disagreements[:limit])])
