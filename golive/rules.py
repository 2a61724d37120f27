"""A check's Rule line: its docstring's first paragraph, rendered with the numbers of the profile in force.

A docstring names the rule in words and takes its numbers from the profile with `{field.path}` placeholders, so the
same check reads right under every profile: "At {load.gate_concurrency} users the station delivers at least
{load.floors.aggregate_tok_s} tok/s aggregate [000]." Numbers are shown to 4 significant digits, thousands grouped.
"""
from __future__ import annotations

import re
from typing import Any

import pytest

from golive.schema import Profile
from golive.verdict import cite

_FIELD = re.compile(r"\{([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*)\}")


def number(value: float | int) -> str:
    """A number as an operator reads it: 4 significant digits, thousands grouped (1,464; 145.9; 0.061; 5,933,986)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    if abs(value) >= 1e4:
        return f"{value:,.0f}"
    return f"{value:,.4g}"


def shown(value: Any) -> str:
    if value is None:
        return "(not set in this profile)"
    if isinstance(value, (int, float)):
        return number(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(shown(v) for v in value)
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


def render(text: str, profile: Profile | None) -> str:
    """The text with `{field.path}` placeholders filled from `profile`; without a profile, the paths stay named."""
    if profile is None:
        return _FIELD.sub(lambda m: f"<{m.group(1)}>", text)
    return _FIELD.sub(lambda m: shown(field_value(profile, m.group(1))), text)


def first_paragraph(doc: str) -> str:
    """The docstring up to its first blank line, joined into one line: a rule is never cut mid-sentence."""
    paragraph = doc.strip().split("\n\n", 1)[0]
    return " ".join(paragraph.split())


def rule_of(item: pytest.Item, profile: Profile | None) -> str:
    """The Rule line of a check for the station's profile: its docstring's first paragraph, rendered and cited."""
    function = getattr(item, "function", None)
    doc = getattr(function, "__doc__", None)
    if not doc:
        return item.name
    return cite(render(first_paragraph(doc), profile))
