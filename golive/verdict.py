"""What a check can end as, how a run's verdict follows, and failures as operator instructions (found, recipe, do).

A check ends passed, failed, waived, not applicable (the profile and the station say it cannot apply; listed with the
reason) or not checked (anything else that did not run). GO only when every check is passed, waived or not
applicable; any failure is NO-GO; otherwise anything not checked, or an interrupted run, is INCOMPLETE.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

import pytest

PASSED, FAILED, WAIVED, NOT_APPLICABLE, NOT_CHECKED = "passed", "failed", "waived", "not_applicable", "not_checked"
OUTCOMES = (PASSED, FAILED, WAIVED, NOT_APPLICABLE, NOT_CHECKED)
GO, NO_GO, INCOMPLETE = "pass", "fail", "incomplete"

EXIT_GO, EXIT_NO_GO, EXIT_INCOMPLETE, EXIT_USAGE, EXIT_NOTHING_SELECTED = 0, 1, 2, 4, 5
EXIT_CODES = {
    EXIT_GO: "GO: every check passed, was waived or is not applicable",
    EXIT_NO_GO: "NO-GO: a check failed",
    EXIT_INCOMPLETE: "INCOMPLETE: a check was not checked, or the run was interrupted",
    EXIT_USAGE: "bad inventory, profile or usage",
    EXIT_NOTHING_SELECTED: "no check selected",
}

# The recipes golive's shipped profiles and checklist cite, by the short tag the checklist uses.
RECIPES = {
    "000": "single-station recipe",
    "001": "single-station operations discussion",
    "002": "two-station recipe",
}
_TAG = re.compile(r"\[(\d{3})\]")


def cite(text: str) -> str:
    """"[000]" → "[single-station recipe]": a tag means nothing outside golive's repository, a name does."""
    return _TAG.sub(lambda m: f"[{RECIPES.get(m.group(1), m.group(1))}]", text)


def sources_in(*texts: str) -> list[str]:
    return sorted({RECIPES.get(tag, tag) for text in texts for tag in _TAG.findall(text)})


def verdict(outcomes: Iterable[str], interrupted: bool = False) -> str:
    seen = set(outcomes)
    if FAILED in seen:
        return NO_GO
    if interrupted or NOT_CHECKED in seen or not seen & {PASSED, WAIVED}:
        return INCOMPLETE
    return GO


def exit_code(verdict_: str) -> int:
    return {GO: EXIT_GO, NO_GO: EXIT_NO_GO}.get(verdict_, EXIT_INCOMPLETE)


class Finding(pytest.fail.Exception):
    """A failed check, with its parts as data: they travel to results.json and the report as fields."""

    def __init__(self, found: str, recipe: str, fix: str):
        self.found, self.recipe, self.fix = cite(found), cite(recipe), cite(fix)
        self.sources = sources_in(found, recipe, fix)
        super().__init__(f"Found: {self.found}\nRecipe: {self.recipe}\nDo: {self.fix}", pytrace=False)

    def as_dict(self) -> dict:
        return {"found": self.found, "recipe": self.recipe, "fix": self.fix, "sources": self.sources}


class NotApplicable(pytest.skip.Exception):
    """The profile and the station say this check cannot apply here (listed in the report with the reason)."""


def require(ok: bool, *, found: str, recipe: str, fix: str) -> None:
    """Fail the check with what was found, what the recipe says and what to do, unless `ok`."""
    if not ok:
        raise Finding(found, recipe, fix)


def not_applicable(reason: str) -> None:
    """End the check as not applicable: only for reasons the profile or the station decide, never for a failure
    elsewhere (a check that cannot run because another failed is not checked: use pytest.skip)."""
    raise NotApplicable(msg=cite(reason), allow_module_level=True, _use_item_location=True)
