"""A capture written out as a site profile: `extends:` the recipe, only the values that differ or that only the site
knows, each commented with where it was read, and the review list on top."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from golive.core.secrets import scrub
from golive.core.verdict import counted, printable
from golive.day2.captured import Capture, Value

SECTION_ORDER = ("service", "image", "vllm", "checkpoint", "gpu", "endpoint", "security", "cluster")


def yaml_scalar(value: object) -> str:
    """A scalar as YAML reads it back: JSON strings are YAML double-quoted scalars."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value)  # JSON is YAML's flow style
    return json.dumps(str(value))


def _comment(text: str, secrets: list[str]) -> str:
    return printable(scrub(text.replace("\n", " "), secrets))


def render(result: Capture, when: datetime | None = None) -> str:
    when = when or datetime.now(UTC)
    lines = [
        f"# Site profile captured by `golive profile capture` from station {result.station} on "
        f"{when:%Y-%m-%d %H:%M} UTC.",
        f"# Read from: {_comment('; '.join(result.read_from), result.secrets)}.",
        f"# Extends {result.recipe}: {_comment(result.why, result.secrets)}.",
        f"# {counted(result.matched, 'captured value')} equal the recipe's and are not repeated here.",
        "# Secrets (API keys, passwords in host specs) are never captured.",
    ]
    if result.review or result.cannot_keep:
        lines.append("# REVIEW before go-live:")
        lines += [f"#   - {_comment(item, result.secrets)}" for item in result.review + result.cannot_keep]
    lines.append(f"extends: {result.recipe}")
    by_section: dict[str, list[Value]] = {}
    for value in result.values:
        by_section.setdefault(value.section, []).append(value)
    for section in sorted(by_section, key=lambda s: SECTION_ORDER.index(s) if s in SECTION_ORDER else 99):
        lines.append(f"{section}:")
        for value in by_section[section]:
            lines.append(f"  {value.key}: {yaml_scalar(value.value)}  # {_comment(value.source, result.secrets)}")
    return "\n".join(lines) + "\n"
