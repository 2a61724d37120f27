"""Conditions related to each other: the condition a path puts on a command, as a formula over atoms.

An atom is the exit status of one test (`[ "$X" = 1 ]`, `test -f /flag$X`) while nothing it reads can have changed
(walk.WalkerBase.atom_of), or of one command golive cannot read (a fresh atom of its own). A command runs on every path
when the disjunction of the conditions of the paths that reach it is true whatever the atoms are (a tautology); it runs
on none when its condition is false whatever they are (unsatisfiable). Both are decided by trying every assignment of
the atoms, up to MAX_ATOMS of them; past that golive does not decide (None), and keeps "may not run".

Treating two atoms as unrelated is never wrong for these two questions (a tautology over every assignment holds over
the ones the station can have), so where golive is unsure whether two tests are the same, they are two atoms."""

from __future__ import annotations

import itertools
import re
from functools import lru_cache
from typing import Union

MAX_ATOMS = 12
# ("true",), ("false",), ("atom", key), ("not", f), ("and", f, g, …), ("or", f, g, …)
Formula = tuple[Union[str, "Formula"], ...]
TRUE: Formula = ("true",)
FALSE: Formula = ("false",)


def atom(key: str) -> Formula:
    return ("atom", key)


def f_not(f: Formula) -> Formula:
    if f == TRUE:
        return FALSE
    if f == FALSE:
        return TRUE
    if f[0] == "not":
        inner = f[1]
        assert isinstance(inner, tuple)
        return inner
    return ("not", f)


def _junction(kind: str, parts: tuple[Formula, ...]) -> Formula:
    unit, zero = (TRUE, FALSE) if kind == "and" else (FALSE, TRUE)
    out: list[Formula] = []
    for part in parts:
        if part == zero:
            return zero
        if part == unit or part in out:
            continue
        out.append(part)
    if not out:
        return unit
    return out[0] if len(out) == 1 else (kind, *out)


def f_and(*parts: Formula) -> Formula:
    return _junction("and", parts)


def f_or(*parts: Formula) -> Formula:
    return _junction("or", parts)


def atoms_of(f: Formula) -> set[str]:
    if f[0] == "atom":
        return {str(f[1])}
    out: set[str] = set()
    for part in f[1:]:
        if isinstance(part, tuple):
            out |= atoms_of(part)
    return out


def _value(f: Formula, world: dict[str, bool]) -> bool:
    kind = f[0]
    if kind == "atom":
        return world[str(f[1])]
    if kind == "true":
        return True
    if kind == "false":
        return False
    parts = [p for p in f[1:] if isinstance(p, tuple)]
    if kind == "not":
        return not _value(parts[0], world)
    if kind == "and":
        return all(_value(p, world) for p in parts)
    return any(_value(p, world) for p in parts)


@lru_cache(maxsize=8192)
def _values(f: Formula) -> frozenset[bool] | None:
    """The values `f` takes over every assignment of its atoms; None past MAX_ATOMS."""
    names = sorted(atoms_of(f))
    if len(names) > MAX_ATOMS:
        return None
    seen: set[bool] = set()
    for values in itertools.product((False, True), repeat=len(names)):
        seen.add(_value(f, dict(zip(names, values, strict=True))))
        if len(seen) == 2:
            break
    return frozenset(seen)


def tautology(f: Formula) -> bool | None:
    """True whatever the atoms are; None where golive does not decide (too many atoms)."""
    values = _values(f)
    return None if values is None else values == {True}


def unsatisfiable(f: Formula) -> bool | None:
    """False whatever the atoms are; None where golive does not decide (too many atoms)."""
    values = _values(f)
    return None if values is None else values == {False}


def all_of(conditions: list[Formula | None]) -> Formula | None:
    """The conjunction; None (not known) when one of them is not known."""
    known = [c for c in conditions if c is not None]
    return f_and(*known) if len(known) == len(conditions) else None


# --- tests as atoms (test(1), bash(1) CONDITIONAL EXPRESSIONS / `test`) ----------------------------------------------

# a word whose value depends only on variables and is one word for sure: a literal, '…', or "…" holding literal
# characters and $NAME / ${NAME}
_LITERAL = r"[^\s$`\"'\\*?\[\]{}()<>|&;~#]"  # one character: no nested repeats, so no backtracking blow-up
_SINGLE = r"'[^']*+'"
_NAME = r"(?:\$[A-Za-z_][A-Za-z0-9_]*+|\$\{[A-Za-z_][A-Za-z0-9_]*+\})"  # as bash reads it: the longest name
_DOUBLE = f'"(?:[^"\\\\$`]|{_NAME})*+"'
_ONE_WORD = re.compile(f"(?:{_LITERAL}|{_SINGLE}|{_DOUBLE})++")
# unquoted $NAME as well: split into words and globbed by bash, so what it gives depends on the files too
_WORD = re.compile(f"(?:{_LITERAL}|{_SINGLE}|{_DOUBLE}|{_NAME})++")
_NAMES = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
# variables bash changes by itself, between any two commands
_DYNAMIC = {
    "_",
    "RANDOM",
    "SRANDOM",
    "SECONDS",
    "EPOCHSECONDS",
    "EPOCHREALTIME",
    "LINENO",
    "BASHPID",
    "BASH_COMMAND",
    "BASH_LINENO",
    "BASH_SOURCE",
    "FUNCNAME",
    "PIPESTATUS",
    "HISTCMD",
    "OLDPWD",
    "PWD",
    "BASH_REMATCH",
    "BASH_ARGC",
    "BASH_ARGV",
    "COLUMNS",
    "LINES",
    "SHELLOPTS",
    "BASHOPTS",
    "POSIXLY_CORRECT",
}
_BINARY = {"=", "==", "!=", "<", ">", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-nt", "-ot", "-ef", "-a", "-o"}
# test operators that read the file system (test(1)): a `cd`, or any command that may create or delete files, between
# two uses makes them two atoms
_FILE_OPERATORS = {
    "-a",
    "-b",
    "-c",
    "-d",
    "-e",
    "-f",
    "-g",
    "-h",
    "-k",
    "-p",
    "-r",
    "-s",
    "-t",
    "-u",
    "-w",
    "-x",
    "-G",
    "-L",
    "-N",
    "-O",
    "-S",
    "-nt",
    "-ot",
    "-ef",
}


def atom_of_test(words: list[str], bash: bool) -> tuple[str, bool, bool] | None:
    """A `[ … ]` / `test …` command, its words as written (quotes kept), as an atom: (its key, whether the command is
    the negation of that atom, whether it reads the file system). None where it is not one golive relates to others
    (a word that runs something, globs, or reads a variable bash changes by itself).

    `test ARGS` is `[ ARGS ]`; under bash, `A == B` is `A = B` and `A != B` is the negation of `A = B` where A and B
    are one word each for sure (with three arguments and `=`/`!=` second, test(1) compares them, whatever they
    hold)."""
    if words[:1] == ["["]:
        if words[-1:] != ["]"] or len(words) < 2:
            return None
        args = words[1:-1]
    elif words[:1] == ["test"]:
        args = words[1:]
    else:
        return None
    if not args or not all(_WORD.fullmatch(w) for w in args):
        return None
    if any(name in _DYNAMIC for w in args for name in _NAMES.findall(w)):
        return None
    if "-o" in args:  # `-o OPTION` reads the shell's options (`set` changes them); as `or`, left to a fresh atom
        return None
    one_word_each = all(_ONE_WORD.fullmatch(a) for a in args)  # so the count of arguments is the count of words
    plain_second = len(args) > 1 and "$" not in args[1] and args[1] not in _BINARY
    if bash and one_word_each and args[0] == "!" and (len(args) in (2, 4) or len(args) == 3 and plain_second):
        # bash(1), test: with 2, 3 (no binary operator second) or 4 arguments, `!` first negates the rest
        inner = atom_of_test(["[", *args[1:], "]"], bash)
        return None if inner is None else (inner[0], not inner[1], inner[2])
    negated = False
    if bash and len(args) == 3 and _ONE_WORD.fullmatch(args[0]) and _ONE_WORD.fullmatch(args[2]):
        if args[1] == "==":
            args = [args[0], "=", args[2]]
        elif args[1] == "!=":
            args, negated = [args[0], "=", args[2]], True
    reads_files = any(a in _FILE_OPERATORS for a in args) or any(not _ONE_WORD.fullmatch(a) for a in args)
    return "[ " + " ".join(args) + " ]", negated, reads_files
