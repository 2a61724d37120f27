"""The bash reader's state and plumbing: where it is, what it holds, `$VAR` substitution, bashlex a group at a time.

Where: file, line, the constructs around the command being visited; what it holds: the functions and traps of one shell
process; `$VAR`/`$(dirname "$0")` substitution; bashlex parsing a file a statement group at a time (`case` arms line by
line: bashlex has no `case`). The walk itself: golive.facts.bash.reader."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import bashlex
import bashlex.ast
import bashlex.errors

from golive.facts.bash.conditions import CASE_ALL, CASE_NONE, known_status
from golive.facts.bash.formulas import FALSE, TRUE, Formula, atom, atom_of_test, f_and, f_not, f_or
from golive.facts.bash.steps import Guard, ShellCommand, Unfollowed, Via, located_at

Reader = Callable[[str], "str | None"]  # a station path -> its text; None when it is not a regular file there
SHELLS = ("sh", "bash", "dash")
_POSIX_SHELLS = ("sh", "dash")


# builtins that change nothing a test reads (bash(1), SHELL BUILTIN COMMANDS); any other builtin may change variables,
# the directory or the files
_UNREAD_NAME = re.compile(r"[$`\\'\"]")  # a command name golive cannot read as written (it may be a builtin)
# each shell read and each fresh atom gets a number of its own, unique in the process: two scripts read apart (two
# ExecStartPre= lines) never share an atom
_NUMBERS = itertools.count(1)
_PURE = {"[", "test", "true", "false", ":", "echo", "printf", "exit", "return"}  # exit/return: nothing after it
_BUILTINS = {
    *"alias bg bind break builtin caller cd command compgen complete compopt continue declare dirs disown".split(),
    *"enable".split(),
    *"eval exec exit export fc fg getopts hash help history jobs kill let local logout mapfile popd pushd pwd".split(),
    *"read readarray readonly return set shift shopt source suspend times trap type typeset ulimit umask".split(),
    *"unalias unset wait . [[".split(),
}
_ASSIGNING = re.compile(r"\$\{[^}]*=|\$\(\(|\$\[")  # ${X:=v}, $((X=1)), $[X=1] assign as they expand
_SUBSTITUTION = re.compile(r"\$\((?!\()|`|[<>]\(")  # $(…), `…`, <(…), >(…): a command runs


@dataclass
class Function:
    body: Any
    line: int
    origin: str
    text: str
    via: tuple[Via, ...]
    guards: tuple[Guard, ...] = ()  # the constructs around its definition: it exists only where they let it run


@dataclass(frozen=True)
class CdScope:
    """A `cd` that may not run, and what decides it: `guards` deep in the walk's guards, and inside the first
    `frames` frames (the innermost that may `return` before it)."""

    guards: int
    frames: int
    before: str | None  # the directory where it does not run
    at: str  # "the `cd /x` at FILE:LINE"

    def holds(self, walker: WalkerBase) -> bool:
        return len(walker.guards) >= self.guards and len(walker.frames) >= self.frames


@dataclass
class Frame:
    """A function call or a sourced file: `return` ends it, and only it."""

    what: str  # "function `f`", "the sourced file /x/y.sh"
    entry: tuple[Guard, ...]  # the guards where it was entered: a `return` under no others is unconditional
    returns: list[Guard] = field(default_factory=list)


@dataclass
class Trap:
    """An action `trap` set, run later: on EXIT when its shell exits; on a signal only if that ever comes."""

    action: str
    on: str  # what it was set on: "EXIT" (among others: it runs on exit), else its signals ("INT TERM")
    conditions: set[str]  # EXIT, INT, TERM, ERR, …: what is left of them after later resets
    line: int
    origin: str
    via: tuple[Via, ...]
    guards: tuple[Guard, ...]  # where it was set: on the paths they allow, only
    ended: int  # how many exits/execs/failures were passed when it was set: the later ones may stop it
    resets: list[Guard] = field(default_factory=list)  # later `trap - EXIT`, `trap '' EXIT`, `trap other EXIT`

    def at(self) -> str:
        return located_at(self.origin, self.line, self.via)


@dataclass
class Context:
    """What every file of one walk shares: the reader, the findings, the files being read (for cycles)."""

    read: Reader | None
    findings: list[Unfollowed] = field(default_factory=list)
    stack: list[str] = field(default_factory=list)
    is_dir: Callable[[str], bool] | None = None  # whether a folder exists on the station: where a `cd` goes


_DIRNAME = re.compile(
    r"\$\(\s*dirname\s+\"?(\$0|\$\{0\}|\$\{?BASH_SOURCE(?:\[0\])?\}?)\"?\s*\)"
    r"|\$\{(0|BASH_SOURCE(?:\[0\])?)%/\*\}"
)
_CD_PWD = re.compile(r"\$\(\s*cd\s+\"?([^\"$()`]*)\"?\s*(?:&&|;)\s*pwd\s*\)")


class WalkerBase(bashlex.ast.nodevisitor):
    """Walks the files of one shell process: its state, and the plumbing every part of the walk uses."""

    def __init__(
        self,
        ctx: Context,
        origin: str,
        *,
        script0: str,
        via: tuple[Via, ...] = (),
        shell: str = "bash",
        errexit: str = "",
    ):
        self.ctx, self.origin, self.via, self.script0 = ctx, origin, via, script0
        self.text = ""
        self.env: dict[str, str] = {}
        self.functions: dict[str, Function] = {}
        self.commands: list[ShellCommand] = []
        self.guards: list[Guard] = []  # the constructs around the command being visited
        self.ended: list[Guard] = []  # exits (and execs, failed lines) already passed: they hold for what follows
        self.frames: list[Frame] = []  # functions being called, files being sourced (innermost last)
        self.called: set[str] = set()
        self.calling: set[str] = set()
        self.posix = shell in _POSIX_SHELLS
        self.errexit = errexit  # where `set -e` was turned on ("" when off), for messages
        self.errexit_sure = bool(errexit)  # on on every path (not set in a branch, not maybe turned off again)
        self.pipefail = False  # `set -o pipefail` on every path
        self.checked = 0  # inside an if/while condition or left of && / ||, negated with !: `set -e` does not apply
        self.traps: list[Trap] = []  # set in this shell, run when it exits (EXIT) or maybe (signals)
        self.exiting = False  # running the traps: a `trap` in a trap sets nothing bash would run
        self.failed = False  # this shell exits with a non-zero status on every path (for a `set -e` caller)
        # the current directory a relative path resolves against (None: golive cannot tell), and why it is that one
        self.cwd: str | None = None
        self.cwd_why = ""
        # each `cd` that may not run, while the walk is still inside what decides it (its branch, loop, `&&`; a
        # function or sourced file that may `return` before it): what lies there ran after it, so its directory holds
        self.cwd_scopes: list[CdScope] = []
        self.exported: set[str] = set()  # the variables a process it runs inherits (systemd's, `export`ed)
        # a relative path it read, by (file, line, path as written): the path bash found and how, for messages
        self.resolved_paths: dict[tuple[str, int, str], tuple[str, str]] = {}
        # conditions as formulas (golive.facts.bash.formulas): a test is the same atom while nothing it reads can have
        # changed: `variables` counts what may have changed a variable, `files` what may have changed a file or the
        # current directory; `unstable` > 0 where a node runs more than once or at another time than where it is read
        # (a loop, an EXIT trap): each test there is an atom of its own
        self.shell_id = next(_NUMBERS)
        self.variables = self.files = self.unstable = 0
        self.background = False  # a job was put in the background: files may change at any time from then on
        self.statuses: dict[int, tuple[Any, Formula]] = {}  # id(node) -> (node, its exit status as a formula)

    # --- plumbing -------------------------------------------------------------------------------------------------

    def line_of(self, pos: int) -> int:
        return self.text.count("\n", 0, pos) + 1

    def guard(self, kind: str, node: Any, detail: str = "", **kw: Any) -> Guard:
        return Guard(kind, self.line_of(node.pos[0]), self.origin, detail, node.pos[0], via=self.via, **kw)

    def source_of(self, start: int, end: int) -> str:
        return " ".join(self.text[start:end].split())

    def under(self, guard: Guard | None, node: Any) -> None:
        if guard is None:
            self.visit(node)
            return
        self.guards.append(guard)
        try:
            self.visit(node)
        finally:
            self.guards.pop()
            self.left_scope()

    def left_scope(self) -> None:
        """Out of what decides a `cd` that may not run: from here on the directory is the one before it or the one it
        went to; known only where those are one."""
        while self.cwd_scopes and not self.cwd_scopes[-1].holds(self):
            scope = self.cwd_scopes.pop()
            if self.cwd != scope.before:
                self.cwd, self.cwd_why = None, f"{scope.at} may not run (so the directory after it is not known)"

    def current_guards(self) -> tuple[Guard, ...]:
        return tuple(self.guards) + tuple(self.ended) + tuple(g for f in self.frames for g in f.returns)

    def expand(self, word: str) -> str:
        here = self.origin if "/" in self.origin else "."
        script0 = self.script0 if "/" in self.script0 else "."

        def dir_of(m: re.Match[str]) -> str:
            name = m[1] or m[2]
            path = script0 if name in ("$0", "${0}", "0") else here
            return path.rsplit("/", 1)[0] or "/" if "/" in path else "."

        word = _DIRNAME.sub(dir_of, word)
        word = _CD_PWD.sub(lambda m: m[1], word)
        return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: self.env.get(m[1], m[0]), word)

    def read_text(self, text: str) -> list[int]:
        """Walk one file's text in this shell; the lines bashlex could not parse (the rest still counts).

        bashlex has no `case` (NotImplementedError): its arms are read line by line, each command guarded by the
        `case`."""
        unparsed: list[int] = []
        text = _case_as_if(text)
        for chunk_start, chunk in _chunks(text):
            first_line = text.count("\n", 0, chunk_start) + 1
            try:
                trees = bashlex.parse(chunk)
            # TypeError: bashlex's tokenizer tests `None in '<>'` at a digit word ending in a backslash (`0\`)
            except (bashlex.errors.ParsingError, NotImplementedError, AttributeError, IndexError, TypeError):
                if not _case_arms(self, text, chunk_start, chunk):
                    unparsed.append(first_line)
                    self.changed()  # what bash does there golive does not know: later tests are new atoms
                continue
            for n, tree in enumerate(trees):
                self.text = "\n" * (first_line - 1) + chunk
                self.visit(_shift(_fix_elif_positions(tree, n == 0), first_line - 1))
        return unparsed

    def _in(self, origin: str, text: str, via: tuple[Via, ...]) -> _Switch:
        return _Switch(self, origin, text, via)

    # --- conditions as formulas -------------------------------------------------------------------------------------

    def fresh(self) -> Formula:
        """An atom related to no other: the status of a command golive does not read."""
        return atom(f"#{next(_NUMBERS)}")

    def changed(self, variables: bool = True, files: bool = True) -> None:
        """Something may have changed the variables (an assignment, a builtin that sets them, a function, a sourced
        file) or the files and the current directory (any program, a redirection, a `cd`): later tests are new atoms."""
        self.variables += variables
        self.files += files

    def note_status(self, node: Any, words: list[str]) -> None:
        """Record the status of a simple command, as it is where the walk reads it (words as written, quotes kept):
        a constant, a test as an atom (the same one for the same test while nothing it reads changed), or a fresh
        one."""
        value = known_status(node)
        shadowed = bool(words) and words[0] in self.functions  # a function named `[` or `test` is no test
        found = None if self.unstable or value is not None or shadowed else atom_of_test(words, bash=not self.posix)
        if value is not None:
            formula = TRUE if value else FALSE
        elif found is None:
            formula = self.fresh()
        else:
            key, negated, reads_files = found
            files = self.files if reads_files else "-"
            fresh = reads_files and self.background
            formula = self.fresh() if fresh else atom(f"{self.shell_id}:{self.variables}:{files}:{key}")
            formula = f_not(formula) if negated else formula
        self.statuses[id(node)] = (node, formula)

    def note_command(self, node: Any, parts: list[Any]) -> None:
        """A simple command is about to run: its status as the walk reads it, then what it may change. A test,
        `true`, `echo` change nothing; any other program may change files; a builtin (`read`, `cd`, `export`, `.`), a
        function or an assignment may change variables too (bash(1), SHELL BUILTIN COMMANDS)."""
        words = [self.text[p.pos[0] : p.pos[1]] for p in parts] if all(p.kind == "word" for p in parts) else []
        self.note_status(node, words)
        raw = self.text[node.pos[0] : node.pos[1]]
        name = parts[0].word if parts and parts[0].kind == "word" else ""
        assigns = any(p.kind == "assignment" for p in parts) or bool(_ASSIGNING.search(raw))
        runs_something = bool(_SUBSTITUTION.search(raw)) or any(p.kind == "redirect" for p in parts)
        pure = name in _PURE and not (name == "printf" and "-v" in raw.split())
        if name in (".", "source") and name not in self.functions:
            pure = True  # the file's own commands say what it changes (Files._source: and where it is not read)
        if name == "set" and name not in self.functions and "posix" not in raw.split():
            # options and positional parameters, which no atom reads (atom_of_test: no `-o`, no $1); noglob may
            # change what an unquoted word globs to: a file test's atom
            self.changed(variables=assigns)
        elif name in self.functions or (name in _BUILTINS and not pure) or _UNREAD_NAME.search(name):
            self.changed()
        elif name and not pure:
            self.changed(variables=assigns)
        else:
            self.changed(variables=assigns, files=runs_something)

    def status(self, node: Any) -> Formula:
        """A node's exit status as a formula (known_status, with atoms where golive cannot decide it)."""
        kind = getattr(node, "kind", "")
        if kind == "list":
            return self.status_of(node.parts)
        if kind == "pipeline":
            stages = [p for p in node.parts if p.kind not in ("pipe", "reservedword")]
            negated = any(p.kind == "reservedword" and p.word == "!" for p in node.parts)
            value = self.status(stages[0]) if len(stages) == 1 else self.fresh()
            return f_not(value) if negated else value
        if kind == "compound" and not node.redirects:
            return self.status_of([p for p in node.list if p.kind != "reservedword"])
        noted = self.statuses.get(id(node))
        return noted[1] if noted is not None and noted[0] is node else self.fresh()

    def status_of(self, nodes: list[Any]) -> Formula:
        """A list returns its last and-or chain's status: `a && b` is a and b, `a || b` a or b (left to right, bash(1)
        Lists); a chain put in the background returns 0 at once."""
        value: Formula | None = None
        op = ";"
        for n in nodes:
            if getattr(n, "kind", "") == "operator":
                value, op = (TRUE if n.op == "&" else value), n.op
                continue
            this = self.status(n)
            if value is not None and op == "&&":
                value = f_and(value, this)
            elif value is not None and op == "||":
                value = f_or(value, this)
            else:
                value = this
        return value if value is not None else self.fresh()


class _Switch:
    """Walk another file's text (a sourced file, a function defined elsewhere), then come back."""

    def __init__(self, walker: WalkerBase, origin: str, text: str, via: tuple[Via, ...]):
        self.walker, self.state = walker, (origin, text, via)

    def __enter__(self) -> None:
        w = self.walker
        self.saved = (w.origin, w.text, w.via)
        w.origin, w.text, w.via = self.state

    def __exit__(self, *exc: object) -> None:
        w = self.walker
        w.origin, w.text, w.via = self.saved


CASE_ARM = "__golive_case_arm"  # the condition of an arm of a `case` read as an `if`: decided by the station
CASE_WORDS = (CASE_ARM, CASE_NONE, CASE_ALL)
_CASE_OPEN = re.compile(r"^(\s*)case\s.*\bin\s*$")
_CASE_ARM = re.compile(r"^(\s*)\(?\s*([^()\s][^()]*?)\s*\)\s*(.*?)\s*(;;|;&|;;&)?\s*$")


def _case_as_if(text: str) -> str:
    """`case … in` blocks written one arm a line (bashlex has no `case`) as the `if` chain they behave like, line for
    line: `case "$X" in` opens an `if` whose first branch never runs and holds nothing, each `PATTERN) CMDS ;;` is an
    `elif` on an arm condition golive cannot decide, `esac` is `fi`. An arm whose patterns include a bare `*` matches
    every word: its condition is true (the arms after it never run), unless it ends with `;&` / `;;&` (bash goes on to
    the next arm). Nested in any construct, they are then read like the rest (each arm's steps "may not run", inside
    the `case` at its line)."""
    if "case" not in text or "esac" not in text:
        return text
    lines = text.split("\n")
    out = list(lines)
    stack: list[bool] = []  # per open case: has an arm been opened
    for i, line in enumerate(lines):
        stripped = line.strip()
        opened = _CASE_OPEN.match(line)
        if opened:  # the `if` starts on the `case` line, so its line is the one findings name
            stack.append(True)
            out[i] = f"{opened.group(1)}if {CASE_NONE}; then {CASE_ARM}"
            continue
        if not stack:
            continue
        if stripped in ("esac", "esac;"):
            stack.pop()
            out[i] = line.replace("esac", "fi", 1)
            continue
        if stripped in (";;", ";&", ";;&"):
            out[i] = ""
            continue
        arm = _CASE_ARM.match(line)
        if arm and not stripped.startswith("#") and "=" not in arm.group(2).split()[0]:
            keyword = "elif" if stack[-1] else "if"
            stack[-1] = True
            body = arm.group(3)
            matches_all = "*" in (p.strip() for p in arm.group(2).split("|")) and _ends_arm(lines, i) == ";;"
            condition = CASE_ALL if matches_all else CASE_ARM
            out[i] = f"{arm.group(1)}{keyword} {condition}; then" + (f" {body}" if body else "")
    return "\n".join(out) if not stack else text


def _ends_arm(lines: list[str], i: int) -> str:
    """How the `case` arm opened at line `i` ends (`;;`, `;&`, `;;&`): the first terminator from that line on; "" where
    another `case` opens first (golive does not tell whose terminator it is)."""
    for n, line in enumerate(lines[i:]):
        if n and _CASE_OPEN.match(line):
            return ""
        end = re.search(r"(;;&|;;|;&)\s*$", line)
        if end:
            return end.group(1)
    return ""


_CASE = re.compile(r"\s*case\s.*\bin\s*$")
_ARM = re.compile(r"^\s*\(?[^()]*\)\s*")


def _case_arms(walker: WalkerBase, text: str, chunk_start: int, chunk: str) -> bool:
    """A `case … in … esac` chunk: each arm's commands under one `case` guard. False when it is not a case."""
    lines = chunk.splitlines()
    if not lines or not _CASE.match(lines[0]) or lines[-1].strip() not in ("esac", "esac;"):
        return False
    first_line = text.count("\n", 0, chunk_start) + 1
    guard = Guard("case", first_line, walker.origin, pos=chunk_start, via=walker.via)
    walker.guards.append(guard)
    try:
        for offset, line in enumerate(lines[1:-1], 1):
            body = _ARM.sub("", line, count=1) if re.match(r"^\s*\(?[^()\s]*[^()]*\)", line) else line
            body = re.sub(r";;\s*$", "", body).strip()
            if not body or body.startswith("#"):
                continue
            try:
                trees = bashlex.parse(body)
            except Exception:  # noqa: BLE001 - one arm line that does not parse stays unread, not fatal
                walker.changed()
                continue
            padding = "\n" * (first_line + offset - 1)
            for tree in trees:
                walker.text = padding + body
                walker.visit(_shift(tree, len(padding)))
    finally:
        walker.guards.remove(guard)
        walker.left_scope()
    return True


def _chunks(text: str) -> Iterator[tuple[int, str]]:
    """Whole script if it parses; else one top-level statement group at a time (split at blank-depth lines)."""
    try:
        bashlex.parse(text)
        yield 0, text
        return
    except Exception:  # noqa: BLE001 - fall back to line groups below
        pass
    start, depth = 0, 0
    buf: list[str] = []
    pos = 0
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if not buf:
            start = pos
        buf.append(line)
        depth += len(re.findall(r"\b(if|case|while|for|until)\b|\{\s*$", stripped))
        depth -= len(re.findall(r"\b(fi|esac|done)\b|^\}", stripped))
        pos += len(line)
        if depth <= 0 and not stripped.endswith("\\"):
            chunk = "".join(buf)
            buf, depth = [], 0
            if chunk.strip() and not chunk.strip().startswith("#"):
                yield start, chunk
    if buf and "".join(buf).strip():
        yield start, "".join(buf)


def _shift(node: Any, offset: int) -> Any:
    """Move bashlex positions by `offset` so line numbers refer to the whole file."""
    if offset:
        for child in _walk(node):
            if hasattr(child, "pos"):
                child.pos = (child.pos[0] + offset, child.pos[1] + offset)
    return node


def _walk(node: Any) -> Iterator[Any]:
    yield node
    for value in vars(node).values():
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, bashlex.ast.node):
                yield from _walk(item)


def _fix_elif_positions(tree: Any, first: bool) -> Any:
    """bashlex gives the parts of every `elif` after the second (nested in a reserved-word node whose `word` is a
    list) positions that, in any top-level command of a parse but the first, are counted from that command's start,
    not from the text's (read back on many layouts): add it once to each of their nodes, so their lines are right
    (however deep the `if` is: in a loop, a function, another `elif`)."""
    if first:
        return tree
    base = tree.pos[0]
    seen: set[int] = set()

    def fix(current: Any) -> None:
        if getattr(current, "kind", None) == "if":
            for part in current.parts:
                if part.kind == "reservedword" and isinstance(part.word, list):
                    for child in part.word:
                        for inner in _walk(child):
                            if id(inner) not in seen and hasattr(inner, "pos"):
                                seen.add(id(inner))
                                inner.pos = (inner.pos[0] + base, inner.pos[1] + base)
        for value in vars(current).values():
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, bashlex.ast.node):
                    fix(item)

    fix(tree)
    return tree
