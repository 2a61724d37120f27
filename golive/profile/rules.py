"""A check's Rule line: its docstring's first paragraph, rendered with the numbers of the profile in force.

A docstring names the rule in words and takes its numbers from the profile with `{field.path}` placeholders, so the
same check reads right under every profile: "At {load.gate_level} users the station delivers at least
{load.floors.aggregate_tok_s} tok/s aggregate [000]." `{field.path:%}` shows a fraction as a percentage (0.1 → 10 %).
Numbers are shown to 4 significant digits, thousands grouped (`number`, which every report uses for measured numbers).

A field that is not set (None, or an empty list) shows as "(not set in this profile)": a check whose rule names such a
field is not applicable under that profile (its fixture or body says so, with the reason), and the Rule line says why
its numbers are missing. tests/unit/test_rules.py renders every check under every shipped profile and holds that
line: no unset field where the check applies, no number of another profile, no rule cut mid-sentence.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import pytest

from golive.core.verdict import cite
from golive.profile.schema import Profile

_FIELD = re.compile(r"\{([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*)(:%)?\}")
NOT_SET = "(not set in this profile)"


def number(value: float | int) -> str:
    """A number as an operator reads it: 4 significant digits, thousands grouped (1,464; 145.9; 0.061; 5,933,986)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    if abs(value) >= 1e4:
        return f"{value:,.0f}"
    return f"{value:,.4g}"


def measured(value: object) -> object:
    """A report cell: numbers through `number` (results.json keeps them whole), anything else as it is."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return number(value)
    return value


def profile_value_text(value: Any, percent: bool = False) -> str:
    if value is None or value == []:
        return NOT_SET
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{number(round(value * 100, 6))} %" if percent else number(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(profile_value_text(v, percent) for v in value)
    return str(value)


def field_value(profile: Profile, path: str) -> Any:
    """`load.floors.aggregate_tok_s` → that value of the profile (None where a section is absent)."""
    value: Any = profile
    for part in path.split("."):
        if value is None:
            return None
        if not hasattr(value, part):
            raise KeyError(f"profile has no field {path!r}")
        value = getattr(value, part)
    return value


def fields_in(text: str) -> list[str]:
    """The profile fields a rule's text names."""
    return [m.group(1) for m in _FIELD.finditer(text)]


def render(text: str, profile: Profile | None) -> str:
    """The text with `{field.path}` placeholders filled from `profile`; without a profile, the paths stay named."""
    if profile is None:
        return _FIELD.sub(lambda m: f"<{m.group(1)}>", text)
    return _FIELD.sub(lambda m: profile_value_text(field_value(profile, m.group(1)), percent=bool(m.group(2))), text)


def first_paragraph(doc: str) -> str:
    """The docstring up to its first blank line, joined into one line: a rule is never cut mid-sentence."""
    paragraph = doc.strip().split("\n\n", 1)[0]
    return " ".join(paragraph.split())


def rule_text(function: Callable[..., Any] | None, profile: Profile | None) -> str | None:
    """A check function's rule for `profile`: its docstring's first paragraph, rendered and cited (None: no doc)."""
    doc = getattr(function, "__doc__", None) if function is not None else None
    return cite(render(first_paragraph(doc), profile)) if doc else None


def rule_of(item: pytest.Item, profile: Profile | None) -> str:
    """The Rule line of a check for the station's profile: its docstring's first paragraph, rendered and cited."""
    return rule_text(getattr(item, "function", None), profile) or item.name


def duration(seconds: float) -> str:
    """A time span as an operator reads it: "5 min 45 s", "1 h 2 min", "20 s"."""
    seconds = max(0, math.ceil(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min {secs} s" if minutes else f"{secs} s"
