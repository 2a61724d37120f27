"""Waivers: a failure the site accepted for a while, with who, why and until when (a YAML file the inventory names).

A waiver matches a check by `check`, the id the check declares (golive.checklist:
`host.vllm.served_flags_match_profile`; with a parametrized check's parameter, one case:
`endpoint.context.needle_retrieved_near_full_context[depth50]`), or by `rule` (a substring of the rule shown in the
report), optionally on one station. A matching failure ends `waived` while
the waiver is in force; once it has expired the failure stands and says which waiver ran out. A waiver that matches no
check of the run is a warning in the run and in every report (`Waivers.unmatched`), never silence.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Self

from pydantic import Field, model_validator

from golive.profile.schema import Strict
from golive.profile.yamlfile import load_yaml, validate


class CollectedCase(Protocol):
    """One check on one station as the run collected it (golive.checklist.Collected): what a waiver is matched on."""

    @property
    def station(self) -> str: ...
    @property
    def case(self) -> str: ...
    @property
    def declared(self) -> str: ...
    @property
    def rule(self) -> str: ...


class CollectedChecks(Protocol):
    """What the run collected (golive.checklist.CollectedChecks). A protocol, not the checklist's class: the checklist
    reads the profile (its layers and gate names), so the profile may not import it."""

    @property
    def cases(self) -> Sequence[CollectedCase]: ...
    @property
    def every_layer(self) -> bool: ...
    def knows(self, id: str) -> bool: ...
    def closest(self, text: str) -> list[str]: ...


class Waiver(Strict):
    id: str | None = None
    check: str | None = None  # a declared check id, e.g. host.vllm.served_flags_match_profile (or id[parameter])
    rule: str | None = None  # substring of the rule text (the check's docstring line)
    station: str | None = None  # only on this station; default every station
    justification: str = Field(min_length=1)
    owner: str = Field(min_length=1)
    expires: dt.date

    @model_validator(mode="after")
    def _names_a_check(self) -> Self:
        if not (self.check or self.rule):
            raise ValueError("a waiver names the check it waives: give `check` or `rule`")
        return self

    @property
    def name(self) -> str:
        return self.id or self.check or self.rule or ""

    def matches(self, case: str, rule: str, station: str) -> bool:
        """`case`: the check's id less the station (`host.vllm.served_flags_match_profile`, `….needle[depth50]`)."""
        if self.station and self.station != station:
            return False
        return bool((self.check and self.check in (case, case.partition("[")[0])) or (self.rule and self.rule in rule))

    def unmatched(self, collected: CollectedChecks, stations: set[str]) -> str | None:
        """Why this waiver matches no check the run collected (one line), or None: it matches one, or it names a check
        of a layer this run did not collect (`-m host` and an endpoint check), which is no news."""
        where = f"waiver '{self.name}'"
        if self.station and self.station not in stations:
            return f"{where}: station {self.station!r} is not in the inventory ({', '.join(sorted(stations))})"
        cases = [c for c in collected.cases if not self.station or c.station == self.station]
        if self.check and not any(self.check in (c.case, c.declared) for c in cases):
            if not collected.knows(self.check):
                return None
            closest = collected.closest(self.check)
            hint = f"; did you mean {' or '.join(closest)}?" if closest else ""
            return f"{where}: check {self.check!r} matches no check id{hint} (every id: docs/ci.md, Check ids)"
        if not self.check and self.rule and collected.every_layer and not any(self.rule in c.rule for c in cases):
            return f"{where}: rule {self.rule!r} is in no check's rule"
        return None

    def expired(self, today: dt.date | None = None) -> bool:
        return (today or dt.date.today()) > self.expires

    def as_dict(self, today: dt.date | None = None) -> dict:
        return {**self.model_dump(mode="json"), "name": self.name, "expired": self.expired(today)}


class WaiverFile(Strict):
    waivers: list[Waiver] = Field(default_factory=list)


@dataclass
class Waivers:
    path: Path | None
    entries: list[Waiver]

    def find(self, case: str, rule: str, station: str) -> Waiver | None:
        """The waiver for this check (`case`: its id less the station): one in force before an expired one (a renewal
        beside its old entry)."""
        matching = [w for w in self.entries if w.matches(case, rule, station)]
        return next((w for w in matching if not w.expired()), matching[0] if matching else None)

    def unmatched(self, collected: CollectedChecks, stations: set[str]) -> list[str]:
        """A line for each waiver that matches no check the run collected (`Waiver.unmatched`)."""
        where = f" ({self.path})" if self.path else ""
        return [f"{line}{where}" for w in self.entries if (line := w.unmatched(collected, stations))]


def load_waivers(path: Path) -> Waivers:
    located = load_yaml(path)
    loaded = validate(WaiverFile, located, "waiver file", str(path))
    return Waivers(path=path, entries=list(loaded.waivers))


def expired_message(waiver: Waiver) -> str:
    return (
        f"Waiver '{waiver.name}' (owner {waiver.owner}) expired on {waiver.expires.isoformat()}: it no longer "
        f"waives this failure. Fix the failure, or renew the waiver with a new `expires` if the owner agrees."
    )
