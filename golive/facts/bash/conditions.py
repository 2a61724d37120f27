"""Shell conditions golive decides without the station, in three-valued logic (true, false, not known).

As bash(1) (SHELL GRAMMAR) and test(1) decide them: `true`, `false`, `:`, `!`, `[ … ]` / `test …` over literal words,
a list's status (its last command's); the logic turns "may not run" into "never runs" or into no condition at all."""

from __future__ import annotations

import re
from typing import Any

ALWAYS, MAYBE, NEVER = "always", "maybe", "never"
NEEDS_READING = re.compile(r"[$`]")
# a `case` read as the `if` chain it behaves like (walk._case_as_if): the condition before its first arm (false),
# and that of an arm whose pattern is a bare `*` (true: it matches every word, bash(1), Pattern Matching)
CASE_NONE, CASE_ALL = "__golive_case_none", "__golive_case_all"


def tri_not(value: bool | None) -> bool | None:
    return None if value is None else not value


def tri_and(left: bool | None, right: bool | None) -> bool | None:
    if left is False or right is False:
        return False
    return True if left is True and right is True else None


def tri_or(left: bool | None, right: bool | None) -> bool | None:
    if left is True or right is True:
        return True
    return False if left is False and right is False else None


def branch_reach(reach: str, value: bool | None) -> str:
    """Whether a branch runs, from whether its condition is reached and what the condition is."""
    if reach == NEVER or value is False:
        return NEVER
    return ALWAYS if reach == ALWAYS and value is True else MAYBE


_INT = re.compile(r"-?\d+")
_NUMERIC = {
    "-eq": int.__eq__,
    "-ne": int.__ne__,
    "-lt": int.__lt__,
    "-le": int.__le__,
    "-gt": int.__gt__,
    "-ge": int.__ge__,
}


def _test_value(args: list[str]) -> bool | None:
    """`[ a = b ]`, `[ 1 -eq 0 ]`, `[ -n x ]`, `[ x ]` over literal words (test(1)); None when it is not one."""
    if len(args) == 1:
        return args[0] != ""
    if len(args) == 2 and args[0] in ("-n", "-z"):
        return (args[1] != "") is (args[0] == "-n")
    if len(args) == 2 and args[0] == "!":
        return tri_not(_test_value(args[1:]))
    if len(args) == 3:
        left, op, right = args
        if op in ("=", "=="):
            return left == right
        if op == "!=":
            return left != right
        if op in _NUMERIC and _INT.fullmatch(left) and _INT.fullmatch(right):
            return bool(_NUMERIC[op](int(left), int(right)))
    return None


def known_status(node: Any) -> bool | None:
    """The exit status of `true`, `:`, `false`, `! …`, `[ … ]` / `test …` over literal words; None otherwise."""
    kind = getattr(node, "kind", "")
    if kind == "list":
        return known_status_of(node.parts)
    if kind == "pipeline":
        stages = [p for p in node.parts if p.kind not in ("pipe", "reservedword")]
        negated = any(p.kind == "reservedword" and p.word == "!" for p in node.parts)
        if len(stages) != 1:
            return None
        value = known_status(stages[0])
        return tri_not(value) if negated else value
    if kind == "compound":
        inner = [p for p in node.list if p.kind != "reservedword"]
        return known_status_of(inner) if not node.redirects else None
    if kind != "command" or any(p.kind != "word" for p in node.parts):
        return None
    words = [p.word for p in node.parts]
    if words in ([CASE_NONE], [CASE_ALL]):
        return words == [CASE_ALL]
    if any(NEEDS_READING.search(w) for w in words):
        return None
    if words in (["true"], [":"], ["/bin/true"], ["/usr/bin/true"]):
        return True
    if words in (["false"], ["/bin/false"], ["/usr/bin/false"]):
        return False
    if words[0] == "[" and words[-1] == "]":
        return _test_value(words[1:-1])
    if words[0] == "test":
        return _test_value(words[1:])
    return None


def known_status_of(nodes: list[Any]) -> bool | None:
    """A list of commands returns the status of its last one: decided when that one is."""
    commands = [n for n in nodes if getattr(n, "kind", "") != "operator"]
    if not commands or any(getattr(n, "kind", "") == "operator" and n.op in ("&&", "||", "&") for n in nodes):
        return None
    return known_status(commands[-1])
