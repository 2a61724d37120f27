"""What a check can end as, how a run's verdict follows, and failures as operator instructions (found, recipe, do).

A check ends passed, failed, waived, not applicable (the profile and the station say it cannot apply; listed with the
reason) or not checked (anything else that did not run). GO only when every check is passed, waived or not
applicable; any failure is NO-GO; otherwise anything not checked, or an interrupted run, is INCOMPLETE.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NoReturn

# The classes pytest names pytest.fail.Exception and pytest.skip.Exception, imported by a name a type checker reads
from _pytest.outcomes import Failed, Skipped

PASSED, FAILED, WAIVED, NOT_APPLICABLE, NOT_CHECKED = "passed", "failed", "waived", "not_applicable", "not_checked"
OUTCOMES = (PASSED, FAILED, WAIVED, NOT_APPLICABLE, NOT_CHECKED)
GO, NO_GO, INCOMPLETE = "pass", "fail", "incomplete"
# not an outcome of its own: how every report counts the not-applicable checks of a layer out of a station's scope
OUT_OF_SCOPE = "out of scope"
# the rules a verdict follows, as results.json (`verdict_rules`) and every report state them
VERDICT_RULES = (
    "A check ends passed, failed, waived, not applicable (the profile and the station say it cannot "
    "apply; listed with the reason) or not checked (anything else that did not run). GO only when every "
    "check is passed, waived or not applicable; any failure is NO-GO; otherwise anything not checked, or "
    "an interrupted run, is INCOMPLETE."
)

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

# what a terminal or a page would obey rather than show: C0/C1 controls but newline and tab (ESC starts "clear screen"
# or "set title"), DEL, lone surrogates (undecodable bytes; no UTF-8 writer accepts them), bidi overrides
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")
TEXT_LIMIT = 2000  # characters of found/recipe/do text; a 1 MB answer is cut, the report stays readable


def printable(text: str) -> str:
    """Control characters (but newline and tab) shown as escapes: "\x1b[2J" prints as the 7 characters \x1b[2J."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape", "backslashreplace").decode("ascii"), text)


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """A count as a finding says it, its noun agreeing: "1 stream", "3 streams", "2 batches" (`plural` where
    adding an s is wrong). Never "stream(s)": the reader should not have to resolve it."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def clipped(text: str, limit: int = TEXT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} … [{len(text) - limit:,} more characters cut]"


def cite(text: str) -> str:
    """ "[000]" → "[single-station recipe]": a tag means nothing outside golive's repository, a name does."""
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


class Finding(Failed):
    """A failed check, with its parts as data: they travel to results.json and the report as fields.

    `flags` names the served vLLM flags (`max-num-seqs`) the check found wrong; `suspects` the served flags whose
    wrong value would explain what an endpoint check found (a batch held at 1: `max-num-seqs`). Where one failed
    check's flags meet another's suspects on the same station, the reports tie the two as one root cause
    (golive.report.causes)."""

    def __init__(self, found: str, recipe: str, fix: str, flags: Iterable[str] = (), suspects: Iterable[str] = ()):
        self.found, self.recipe, self.fix = (printable(clipped(cite(str(part)))) for part in (found, recipe, fix))
        self.sources = sources_in(found, recipe, fix)
        self.flags, self.suspects = sorted(set(flags)), sorted(set(suspects))
        super().__init__(f"Found: {self.found}\nRecipe: {self.recipe}\nDo: {self.fix}", pytrace=False)

    def as_dict(self) -> dict:
        said = {"found": self.found, "recipe": self.recipe, "fix": self.fix, "sources": self.sources}
        return (
            said
            | ({"flags": self.flags} if self.flags else {})
            | ({"suspects": self.suspects} if self.suspects else {})
        )


class NotApplicable(Skipped):
    """The profile and the station say this check cannot apply here (listed in the report with the reason)."""


class OutOfScope(NotApplicable):
    """A whole layer that the profile or the inventory takes out of a station's scope before any check runs
    (golive.run.scope.layer_scope): not applicable, and said once per station and layer in every report ("43 out of
    scope: …"), never as one verdict row per check; results.json keeps each record (`scoped_out`)."""


def require(
    ok: bool, *, found: str, recipe: str, fix: str, flags: Iterable[str] = (), suspects: Iterable[str] = ()
) -> None:
    """Fail the check with what was found, what the recipe says and what to do, unless `ok`; `flags` and `suspects`
    as Finding says (the served vLLM flags found wrong, or that would explain it)."""
    if not ok:
        raise Finding(found, recipe, fix, flags, suspects)


def not_applicable(reason: str) -> NoReturn:
    """End the check as not applicable: only for reasons the profile or the station decide, never for a failure
    elsewhere (a check that cannot run because another failed is not checked: use pytest.skip)."""
    raise NotApplicable(msg=cite(reason), allow_module_level=True, _use_item_location=True)


def out_of_scope(reason: str) -> NoReturn:
    """End the check as not applicable because its whole layer is out of this station's scope (OutOfScope)."""
    raise OutOfScope(msg=cite(reason), allow_module_level=True, _use_item_location=True)
