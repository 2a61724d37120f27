"""Waivers: a failure the site accepted for a while, with who, why and until when (a YAML file the inventory names).

A waiver matches a check by `check` (a nodeid substring, e.g. the test name) or `rule` (a substring of the rule shown in
the report), optionally on one station. A matching failure ends `waived` while the waiver is in force; once it has
expired the failure stands and says which waiver ran out.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from pydantic import Field, model_validator

from golive.profile.schema import Strict
from golive.profile.yamlfile import load_yaml, validate


class Waiver(Strict):
    id: str | None = None
    check: str | None = None  # nodeid substring, e.g. test_served_flags_match_profile
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

    def matches(self, nodeid: str, rule: str, station: str) -> bool:
        if self.station and self.station != station:
            return False
        return bool((self.check and self.check in nodeid) or (self.rule and self.rule in rule))

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

    def find(self, nodeid: str, rule: str, station: str) -> Waiver | None:
        """The waiver for this check: one in force before an expired one (a renewal beside its old entry)."""
        matching = [w for w in self.entries if w.matches(nodeid, rule, station)]
        return next((w for w in matching if not w.expired()), matching[0] if matching else None)


def load_waivers(path: Path) -> Waivers:
    located = load_yaml(path)
    loaded = validate(WaiverFile, located, "waiver file", str(path))
    return Waivers(path=path, entries=list(loaded.waivers))


def expired_message(waiver: Waiver) -> str:
    return (
        f"Waiver '{waiver.name}' (owner {waiver.owner}) expired on {waiver.expires.isoformat()}: it no longer "
        f"waives this failure. Fix the failure, or renew the waiver with a new `expires` if the owner agrees."
    )
