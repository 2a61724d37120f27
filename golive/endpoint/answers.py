"""Answer batteries: a site's own questions with expected answers, scored by a rule, against a floor.

A site battery is YAML a site writes for its domain (the recipe's closed-book compliance battery is one):

    name: closed-book-compliance
    floor: 0.74                 # fraction of cases that must pass (26/35 at the recipe's go-live)
    cases:
      - id: retention
        prompt: How many days are audit logs kept?
        expect: {numeric: 90, tolerance: 0}
      - id: owner
        messages: [{role: user, content: Who signs a go-live?}]
        expect: {one_of: [operator, the operator]}

Scoring rules (exactly one per `expect`): exact, contains, one_of, regex, numeric (+ tolerance). Text rules compare
case-insensitively with whitespace runs collapsed, as an operator reading the answer would.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from golive.profile.schema import Strict
from golive.profile.yamlfile import ConfigError, load_yaml, validate

_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+")


class Expect(Strict):
    """One scoring rule; `not_contains` may be added to any of them."""

    exact: str | None = None
    contains: str | list[str] | None = None  # a list: every item must appear
    one_of: list[str] | None = None  # the whole answer is one of these
    regex: str | None = None
    numeric: float | None = None
    tolerance: float = Field(default=0.0, ge=0)
    not_contains: list[str] = Field(default_factory=list)

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"regex does not compile: {exc}") from None
        return value

    @model_validator(mode="after")
    def _one_rule(self) -> Expect:
        rules = [r for r in ("exact", "contains", "one_of", "regex", "numeric") if getattr(self, r) is not None]
        if len(rules) > 1:
            raise ValueError(f"one scoring rule per case, got {', '.join(rules)}")
        if not rules and not self.not_contains:
            raise ValueError("give a scoring rule: exact, contains, one_of, regex or numeric")
        return self


class AnswerCase(Strict):
    id: str
    prompt: str | None = None
    messages: list[dict[str, Any]] | None = None
    expect: Expect

    @model_validator(mode="after")
    def _one_prompt(self) -> AnswerCase:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give either prompt or messages")
        return self

    def conversation(self) -> list[dict]:
        return self.messages or [{"role": "user", "content": self.prompt}]


class AnswerBattery(Strict):
    name: str
    description: str = ""
    floor: float = Field(ge=0, le=1)
    max_tokens: int = Field(default=1024, ge=1)
    cases: list[AnswerCase] = Field(min_length=1)

    @field_validator("cases")
    @classmethod
    def _unique(cls, cases: list[AnswerCase]) -> list[AnswerCase]:
        ids = [c.id for c in cases]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"duplicate case ids {dup}")
        return cases


def load_answer_battery(path: Path) -> AnswerBattery:
    """Read and validate a battery file; any problem is a ConfigError with file:line."""
    path = Path(path)
    return validate(AnswerBattery, load_yaml(path), "battery", str(path))


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def score_answer(expect: Expect, answer: str) -> tuple[bool, str]:
    """(passed, reason) for one answer; the reason names what was expected and what came back."""
    got = _norm(answer)
    shown = f"answered {answer.strip()[:120]!r}"
    for bad in expect.not_contains:
        if _norm(bad) in got:
            return False, f"{shown}, which must not contain {bad!r}"
    if expect.exact is not None:
        return (got.strip(" .!") == _norm(expect.exact).strip(" .!"), f"{shown}, expected exactly {expect.exact!r}")
    if expect.contains is not None:
        wanted = [expect.contains] if isinstance(expect.contains, str) else expect.contains
        missing = [w for w in wanted if _norm(w) not in got]
        return not missing, f"{shown}, missing {missing}" if missing else f"{shown}"
    if expect.one_of is not None:
        return (
            got.strip(" .!") in {_norm(o).strip(" .!") for o in expect.one_of},
            f"{shown}, expected one of {expect.one_of}",
        )
    if expect.regex is not None:
        return (
            re.search(expect.regex, answer, re.IGNORECASE) is not None,
            f"{shown}, expected a match for /{expect.regex}/",
        )
    if expect.numeric is not None:
        numbers = [float(n.replace(",", "")) for n in _NUMBER.findall(answer)]
        hit = any(abs(n - expect.numeric) <= expect.tolerance for n in numbers)
        return hit, f"{shown}, expected {expect.numeric:g} ± {expect.tolerance:g}"
    return True, shown


SHIPPED = Path(__file__).parent / "batteries"


def battery_ref(ref: str, relative_to: Path | None) -> Path:
    """A battery named in a profile: a file (relative to the profile that names it) or a shipped battery's name."""
    path = Path(ref).expanduser()
    if not path.is_absolute() and relative_to is not None:
        path = relative_to.parent / path
    if path.is_file():
        return path
    if (SHIPPED / f"{ref}.yaml").is_file():
        return SHIPPED / f"{ref}.yaml"
    raise ConfigError(f"{relative_to or 'profile'}: site battery {ref!r}: no such file ({path})")
