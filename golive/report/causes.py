"""One root cause, said once in every report: a served vLLM flag a check found wrong, and the checks it explains.

A host check that reads the served flags names the ones it found wrong (a Finding's `flags`: `max-num-seqs` served
as 1, the recipe's 16); an endpoint check names the served flags whose wrong value would explain what it found (its
`suspects`: a batch held at one sequence → `max-num-seqs`). Where the two meet on one station, both findings say so
(`same_cause`, `same_cause_checks`): the endpoint finding points at the flag to fix, the flag finding at what it also
broke. results.json, go-live.md, the HTML summary and the terminal's verdict all read the tie from here.

    >>> tie(checks)                        # the checks of one run, their findings completed in place
    [SameCause(station='gb300-a', flags=('max-num-seqs',), flagged=[…], explained=[…])]
"""

from __future__ import annotations

from dataclasses import dataclass

from golive.core.verdict import FAILED
from golive.report.model import CheckRecord


@dataclass(frozen=True)
class SameCause:
    """Checks of one station that fail on one root cause: the served flags `flagged` found wrong explain `explained`."""

    station: str
    flags: tuple[str, ...]
    flagged: tuple[CheckRecord, ...]
    explained: tuple[CheckRecord, ...]

    def flags_said(self) -> str:
        return ", ".join(f"--{flag}" for flag in self.flags)

    def line(self) -> str:
        """`same cause on gb300-a: --max-num-seqs, found by … (host); it explains … (endpoint)`: the terminal's line."""
        return (
            f"same cause on {self.station}: the served {self.flags_said()}, found by {_names(self.flagged)}; it "
            f"explains {_names(self.explained)}"
        )


def _name(check: CheckRecord) -> str:
    return f"{check.id.split('::')[-1]} ({check.layer})"


def _names(checks: tuple[CheckRecord, ...]) -> str:
    return " and ".join(_name(c) for c in checks)


def tie(checks: list[CheckRecord]) -> list[SameCause]:
    """Tie every failed check whose suspects a failed check of its station found wrong to that check, in both findings
    (`same_cause`, `same_cause_checks`); returns the ties, one per station and set of flags."""
    failed = [c for c in checks if c.outcome == FAILED and c.finding is not None]
    ties: dict[tuple[str, tuple[str, ...]], tuple[list[CheckRecord], list[CheckRecord]]] = {}
    for check in failed:
        assert check.finding is not None
        for other in failed:
            assert other.finding is not None
            shared = tuple(sorted(set(check.finding.suspects) & set(other.finding.flags)))
            if other is check or other.station != check.station or not shared:
                continue
            flagged, explained = ties.setdefault((check.station, shared), ([], []))
            if other not in flagged:
                flagged.append(other)
            if check not in explained:
                explained.append(check)
    found = [SameCause(station, flags, tuple(f), tuple(e)) for (station, flags), (f, e) in ties.items()]
    for cause in found:
        for check in cause.explained:
            assert check.finding is not None
            check.finding.same_cause = _joined(
                check.finding.same_cause,
                f"the same root cause as {_names(cause.flagged)}, which found the served {cause.flags_said()} "
                f"wrong: fix that, then re-run this check",
            )
            check.finding.same_cause_checks = _ids(check.finding.same_cause_checks, cause.flagged)
        for check in cause.flagged:
            assert check.finding is not None
            many = len(cause.explained) > 1
            check.finding.same_cause = _joined(
                check.finding.same_cause,
                f"the same root cause as {_names(cause.explained)}: the served {cause.flags_said()} explains what "
                f"{'they' if many else 'it'} found; fixing it here fixes {'them' if many else 'it'}",
            )
            check.finding.same_cause_checks = _ids(check.finding.same_cause_checks, cause.explained)
    return found


def _joined(said: str, more: str) -> str:
    return f"{said}; {more}" if said and more not in said else said or more


def _ids(known: list[str], checks: tuple[CheckRecord, ...]) -> list[str]:
    return list(dict.fromkeys([*known, *(c.id for c in checks)]))
