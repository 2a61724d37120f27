"""Shell scripts (prestart) as an ordered list of simple commands, so checks reason about order, not words.

Each command also carries the conditions under which it may NOT run (bash(1), SHELL GRAMMAR): the body of `if`,
`case`, `for`, `while`/`until`; the right-hand side of `&&`/`||`; a function that is never called; anything after an
`exit` or `exec` that lets the start go on, or after a `return` from its function or sourced file; anything started in
the background with `&`. A condition golive can decide without the station (`true`, `false`, `:`, `[ 1 = 0 ]`,
`test a != a`, a `for` over literal words) turns "may not run" into "never runs", or into no condition at all.

Given a reader of the station's files (the same read-only file access the prestart itself is read with), the walk
follows what the script reads or runs from other files, with the same rules:
- `. FILE` / `source FILE` (bash(1), SHELL BUILTIN COMMANDS, `.`): FILE's commands run in the same shell, so an `exit`
  in it ends the whole script, its functions and variables are the script's, and a `return` at its top level ends only
  the sourced file. "If filename does not contain a slash, filenames in PATH are used to find the directory containing
  filename" (then the current directory, when bash is not in POSIX mode): golive does not search the station's PATH,
  it says it did not read that file; a relative path with a slash depends on the current directory: not read either.
  A FILE that does not exist: bash reports it and goes on with status 1, unless `set -e` is on (and the line is not
  tested by `if`/`&&`/`||`) or the shell is POSIX `sh` (a `.` error ends a non-interactive POSIX shell): then the
  script stops there and the start fails.
- `bash FILE`, `sh FILE`, `/path/to/FILE.sh`, `exec FILE`, `nohup FILE`: FILE runs as its own process: its `exit`,
  functions and variables are its own. Its steps count when it runs to completion before the prestart goes on (not
  backgrounded with `&`): a write to drop_caches from a child process drops the machine's page cache all the same. A
  program run by name alone (`docker`, `drop-caches`) is not read: only absolute paths ending in .sh/.bash, or files
  given to a shell, are (golive never reads a binary to find out).
Files are followed MAX_DEPTH deep; a file that is sourced or run again while it is still being read (a cycle) is read
once, with a finding. A file golive did not read is a finding of its own (Script.findings), never silently skipped.

Two more rules of bash decide what runs, and when:
- `trap ACTION EXIT` (bash(1), SHELL BUILTIN COMMANDS, trap: "If a sigspec is EXIT (0) the command arg is executed on
  exit from the shell"; "If arg is absent (and there is a single sigspec) or -, each specified signal is reset";
  "If arg is the null string the signal specified by each sigspec is ignored"): ACTION's commands run when the shell
  exits, at the end of the script or at an `exit`, so they come AFTER every other line of that shell; the prestart's
  own EXIT trap still runs before the container starts (systemd starts ExecStart only once ExecStartPre has exited).
  They run when the trap was set on every path (a `trap` inside a branch may not run) and nothing resets it before the
  end (`trap - EXIT`, `trap '' EXIT`, another `trap … EXIT`) and no `exec` replaces the shell first (an exec'd shell
  never exits, so it never runs its trap). A trap on a signal only (INT, TERM, ERR, …) runs if that happens: "may
  run". A `( … )` subshell or a script run as its own process has EXIT traps of its own, run when it exits.
- `set -e` / `set -o errexit` / `bash -e` / `#!/bin/bash -e` (bash(1), `set -e`: "Exit immediately if a pipeline …
  returns a non-zero status. The shell does not exit if the command that fails is part of the command list
  immediately following a while or until keyword, part of the test in an if statement, part of any command executed
  in a && or || list except the command following the final && or ||, any command in a pipeline but the last, or if
  the command's return value is being inverted with !"): only a command golive knows ALWAYS fails (`false`,
  `/bin/false`, `[ 1 = 0 ]`, a `( … )` or script run that always fails), where -e applies, ends the script: what
  follows never runs, and the start fails there. Any other command may fail on the station, but golive does not
  guess: a healthy `set -euo pipefail` prestart reads as written. `! CMD` never triggers -e, whatever CMD returns.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import bashlex
import bashlex.ast
import bashlex.errors

MAX_DEPTH = 8  # files sourced or run inside one another, the prestart included
Reader = Callable[[str], "str | None"]  # a station path -> its text; None when it is not a regular file there
SHELLS = ("sh", "bash", "dash")
POSIX_SHELLS = ("sh", "dash")
ALWAYS, MAYBE, NEVER = "always", "maybe", "never"


@dataclass(frozen=True)
class Via:
    """How a command's file was reached: `sourced` (same shell) or `run` (its own process) at origin:line."""

    how: str
    origin: str
    line: int
    path: str

    def __str__(self) -> str:
        if self.how == "trap":  # path: the conditions it is set on ("EXIT", "INT TERM")
            return (
                f"in the EXIT trap set at {self.origin}:{self.line}, run when the script exits"
                if self.path == "EXIT"
                else f"in the trap on {self.path} set at {self.origin}:{self.line}"
            )
        return (
            f"sourced at {self.origin}:{self.line}"
            if self.how == "sourced"
            else f"run as its own process at {self.origin}:{self.line}"
        )


def _at(origin: str, line: int, via: tuple[Via, ...]) -> str:
    at = f"{origin}:{line}" if line else origin
    return at + (f" ({', '.join(str(v) for v in reversed(via))})" if via else "")


@dataclass(frozen=True)
class Guard:
    """One reason a command may not run: the construct that decides it, where it is.

    `never` when the construct decides for certain that the command does not run (an `exit` before it, an uncalled
    function, a branch whose condition is constant); otherwise it may or may not, depending on the station.
    """

    kind: str  # if, case, for, while, until, &&, ||, function, exit, exit?, return, return?, exec, exec?, &,
    #                fails (a failed source/run stops a `set -e` script), cycle (a file that reads itself again),
    #                errexit (a command that always fails stops a `set -e` script), trap (a trap on signals only),
    #                untrap (a later `trap` that resets the trap it is in)
    line: int
    origin: str
    detail: str = ""  # the function's name, the exit's text, the left side of && / ||, the missing file
    pos: int = 0  # tells two constructs (or two branches of one `if`) on one line apart
    never: bool = False
    why: str = ""  # a constant condition ("`false` is always false"); what a failed line does
    via: tuple[Via, ...] = ()

    def where(self) -> str:
        return _at(self.origin, self.line, self.via)

    def describe(self) -> str:
        at = self.where()
        if self.kind in ("&&", "||"):
            left = f"`{self.detail}`" if self.detail else "the command on the left"
            if self.never:
                return (
                    f"it is on the right of `{self.kind}` at {at}: {left} always "
                    f"{'fails' if self.kind == '&&' else 'succeeds'}, so it never runs"
                )
            return (
                f"it is on the right of `{self.kind}` at {at}: it runs only when {left} "
                f"{'succeeds' if self.kind == '&&' else 'fails'}"
            )
        if self.kind == "function":
            return f"it is in function `{self.detail}` ({at}), which the script never calls"
        if self.kind == "exit":
            return f"it comes after `{self.detail}` at {at}, which ends the script first"
        if self.kind == "exit?":
            return f"it comes after `{self.detail}` at {at}, which can end the script and let the start go on"
        if self.kind in ("return", "return?"):
            verb = "returns" if self.kind == "return" else "can return"
            return f"it comes after `{self.detail}` at {at}, which {verb} from {self.why} first"
        if self.kind in ("exec", "exec?"):
            verb = "replaces" if self.kind == "exec" else "can replace"
            return (
                f"it comes after `{self.detail}` at {at}, which {verb} the script with that program: nothing "
                f"after it runs"
            )
        if self.kind == "&":
            return (
                f"it runs in the background (`{self.detail} &` at {at}): it may not finish before the container starts"
            )
        if self.kind == "fails":
            return f"it comes after {at}, which {self.why}"
        if self.kind == "errexit":
            return (
                f"it comes after `{self.detail}` at {at}, which always fails: with {self.why} bash stops the script "
                f"there with an error, so the start fails"
            )
        if self.kind == "trap":
            when = "a command fails (ERR)" if self.detail == "ERR" else f"the script gets {self.detail}"
            return f"it is in the trap on {self.detail} set at {at}, not on EXIT: it runs only if {when} before it ends"
        if self.kind == "untrap":
            verb = "resets" if self.never else "can reset"
            return f"it is in {self.why}, which `{self.detail}` at {at} {verb} before the script exits"
        if self.kind == "cycle":
            return (
                f"it comes after {at}, which reads {self.detail} again while still reading it: bash never gets "
                f"past that line"
            )
        if self.kind in ("for", "while", "until"):
            if self.never:
                return f"it is inside the `{self.kind}` loop at {at}, whose body never runs ({self.why})"
            return f"it is inside the `{self.kind}` loop at {at}, whose body may run zero times"
        if self.never:
            return f"it is inside the `{self.kind}` at {at}, on a branch that never runs ({self.why})"
        return f"it is inside the `{self.kind}` at {at}: it runs only on the branch that matches"

    def fix(self, step: str) -> str:
        """What to do about this cause, for `step` (a command's text in backquotes)."""
        in_file = f"line {self.line} of {self.origin}"
        if self.kind in ("&&", "||"):
            return f"put {step} on a line of its own, not on the right of `{self.detail} {self.kind}` ({in_file})"
        if self.kind == "function":
            return (
                f"call `{self.detail}` in {self.origin} after its definition (line {self.line}), or put its steps "
                f"at top level"
            )
        if self.kind in ("exit", "exit?", "return", "return?", "exec", "exec?"):
            return f"move {step} above line {self.line}'s `{self.detail}` in {self.origin}"
        if self.kind == "&":
            return f"remove the `&` after `{self.detail}` ({in_file}), so it finishes before the prestart does"
        if self.kind == "fails":
            return f"install {self.detail} on the station, or correct the path at {in_file}"
        if self.kind == "errexit":
            return f"remove `{self.detail}` ({in_file}): under `set -e` a command that always fails ends the script"
        if self.kind == "trap":
            return f"set that trap on EXIT (`trap … EXIT`, {in_file}), or run {step} at top level"
        if self.kind == "untrap":
            return f"remove `{self.detail}` ({in_file}), or run {step} at top level"
        if self.kind == "cycle":
            return f"remove the line that reads {self.detail} again ({in_file}), or guard it so the file is read once"
        if self.kind in ("for", "while", "until"):
            return f"move {step} out of the `{self.kind}` loop at {in_file}"
        return f"move {step} out of that condition (the `{self.kind}` at {in_file})"


@dataclass(frozen=True)
class Unfollowed:
    """A file the script sources or runs that golive did not read, and why: a finding of its own."""

    kind: str  # missing, unreadable, no-slash, relative, unresolved, cycle, depth, not-shell
    how: str  # sources | runs
    path: str
    line: int
    origin: str
    via: tuple[Via, ...] = ()
    guards: tuple[Guard, ...] = ()  # the conditions on the line that sources or runs it
    after: str = ""  # missing: what bash does next; cycle: the chain; not-shell: the interpreter

    @property
    def never(self) -> bool:
        """The line that sources or runs it never runs: nothing is lost by not reading the file."""
        return any(g.never for g in self.guards)

    def where(self) -> str:
        return _at(self.origin, self.line, self.via)

    def describe(self) -> str:
        at, how = self.where(), self.how
        if self.kind == "missing":
            return f"{at} {how} {self.path}, which does not exist on the station: {self.after}"
        if self.kind == "unreadable":
            return f"{at} {how} {self.path}, which golive could not read as text"
        if self.kind == "no-slash":
            return (
                f"{at} sources `{self.path}` without a `/`: bash looks it up in $PATH, then the current directory "
                f"(bash(1), `.`); golive does not search the station's PATH, so it did not read it"
            )
        if self.kind == "relative":
            return f"{at} {how} `{self.path}`, relative to the current directory: golive did not read it"
        if self.kind == "unresolved":
            return f"{at} {how} `{self.path}`, a path that depends on a variable golive cannot work out: not read"
        if self.kind == "cycle":
            return f"{at} {how} {self.path} again while still reading it ({self.after}): golive reads it once"
        if self.kind == "depth":
            return f"{at} {how} {self.path}, more than {MAX_DEPTH} files deep: golive did not read it"
        return f"{at} runs {self.path}, a `{self.after}` program, not a shell script: golive did not read it"

    def fix(self) -> str:
        in_file = f"line {self.line} of {self.origin}"
        if self.kind == "missing":
            return f"install {self.path} on the station, or correct the path at {in_file}"
        if self.kind in ("no-slash", "relative", "unresolved"):
            return f"write the full path of {self.path} at {in_file}"
        if self.kind == "cycle":
            return f"remove the line that reads {self.path} again ({in_file}), or guard it so the file is read once"
        return f"put those steps in {self.origin} itself"


@dataclass(frozen=True)
class ShellCommand:
    argv: tuple[str, ...]
    redirects: tuple[tuple[str, str], ...] = ()
    line: int = 0
    origin: str = ""  # which file or unit line it came from, for messages
    stdin_from: tuple[str, ...] = ()  # argv of the command piped into this one (`echo 1 | tee …`)
    guards: tuple[Guard, ...] = ()  # why it may not run; () when it runs whenever the script runs to its end
    via: tuple[Via, ...] = ()  # how its file was reached from the script: sourced or run, outermost first

    def where(self) -> str:
        return _at(self.origin, self.line, self.via)

    @property
    def always_runs(self) -> bool:
        return not self.guards

    @property
    def never_runs(self) -> bool:
        """Some guard decides for certain: the line is there and bash never runs it."""
        return any(g.never for g in self.guards)

    def verdict(self) -> str:
        """ "runs", "never runs" or "may not run", as the script decides it."""
        return "runs" if self.always_runs else "never runs" if self.never_runs else "may not run"

    def why_it_may_not_run(self) -> str:
        return "; ".join(g.describe() for g in self.guards)

    def fixes(self) -> str:
        """One thing to do per cause that may stop it, in order, without repeats."""
        step = f"`{self.text()}`"
        return "; ".join(dict.fromkeys(g.fix(step) for g in self.guards))

    def always_runs_before(self, other: ShellCommand, order: list[ShellCommand]) -> bool:
        """On every path that reaches `other`, this ran first: it comes earlier and no condition of its own is one
        `other` lacks (both inside the same `if` counts; this one inside an `if` that `other` is outside does not)."""
        return order.index(self) < order.index(other) and set(self.guards) <= set(other.guards)

    def text(self) -> str:
        out = " ".join(shlex.quote(a) for a in self.argv)
        return out + "".join(f" {op} {target}" for op, target in self.redirects)

    @property
    def program(self) -> str:
        return self.argv[0].rsplit("/", 1)[-1] if self.argv else ""

    # --- what a command does, in the terms the recipe uses ----------------------------------------------------------

    def drops_page_cache(self) -> bool:
        """`echo 1|3 > /proc/sys/vm/drop_caches`, `echo 1|3 | tee /proc/sys/vm/drop_caches`,
        `sysctl vm.drop_caches=1|3`.

        2 frees dentries and inodes only (slab), not the page cache: it does not count, in any spelling.
        """
        writes = any(t.endswith(DROP_CACHES) for op, t in self.redirects if op in (">", ">>", ">|"))
        argv = _unwrap(list(self.argv))  # `sudo tee …`: sudo runs tee
        if writes:
            return _echoes_page_cache_value(argv)
        program = argv[0].rsplit("/", 1)[-1] if argv else ""
        if program == "tee" and any(a.endswith(DROP_CACHES) for a in argv[1:]):
            # its stdin: the command piped into it, or a here-string (`tee … <<< 3`, bash(1) "Here Strings")
            here = [t for op, t in self.redirects if op == "<<<"]
            return _echoes_page_cache_value(("echo", here[-1]) if here else _unwrap(list(self.stdin_from)))
        if program == "sysctl":
            return any(re.fullmatch(r"vm[./]drop_caches=[13]", a) for a in argv[1:])
        return False

    def writes_drop_caches(self) -> bool:
        """Any write to drop_caches, whatever the value (to tell "drops slab only" from "never drops")."""
        argv = _unwrap(list(self.argv))
        program = argv[0].rsplit("/", 1)[-1] if argv else ""
        return (
            any(t.endswith(DROP_CACHES) for op, t in self.redirects if op in (">", ">>", ">|"))
            or (program == "tee" and any(a.endswith(DROP_CACHES) for a in argv[1:]))
            or (program == "sysctl" and any(re.fullmatch(r"vm[./]drop_caches=.*", a) for a in argv[1:]))
        )

    def is_sync(self) -> bool:
        return self.program == "sync" and len(self.argv) == 1

    def docker_verb(self) -> tuple[str, list[str]] | None:
        """("logs", [args]) for `docker logs …` / `docker container logs …`; None for anything else."""
        if self.program not in ("docker", "podman", "nerdctl"):
            return None
        args = list(self.argv[1:])
        if args and args[0] == "container":
            args = args[1:]
        return (args[0], args[1:]) if args else None

    def docker_targets(self, verb: str) -> list[str]:
        found = self.docker_verb()
        if not found or found[0] != verb:
            return []
        return [a for a in found[1] if not a.startswith("-")]


DROP_CACHES = "/proc/sys/vm/drop_caches"


def _echoes_page_cache_value(argv: tuple[str, ...] | list[str]) -> bool:
    """`echo 1`, `echo 3`, `printf '3\\n'`: the value written to drop_caches frees the page cache (1 or 3)."""
    if not argv or argv[0].rsplit("/", 1)[-1] not in ("echo", "printf"):
        return False
    values = [a.replace("\\n", "").strip() for a in argv[1:] if not a.startswith("-")]
    return values[-1:] in (["1"], ["3"])


@dataclass
class Script:
    commands: list[ShellCommand]
    unparsed_lines: list[int] = field(default_factory=list)
    findings: list[Unfollowed] = field(default_factory=list)  # files it sources or runs that golive did not read


# --- three-valued logic for conditions golive can decide without the station -----------------------------------------


def _not(value: bool | None) -> bool | None:
    return None if value is None else not value


def _and(left: bool | None, right: bool | None) -> bool | None:
    if left is False or right is False:
        return False
    return True if left is True and right is True else None


def _or(left: bool | None, right: bool | None) -> bool | None:
    if left is True or right is True:
        return True
    return False if left is False and right is False else None


def _reach(reach: str, value: bool | None) -> str:
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
        return _not(_test_value(args[1:]))
    if len(args) == 3:
        left, op, right = args
        if op in ("=", "=="):
            return left == right
        if op == "!=":
            return left != right
        if op in _NUMERIC and _INT.fullmatch(left) and _INT.fullmatch(right):
            return bool(_NUMERIC[op](int(left), int(right)))
    return None


@dataclass
class _Function:
    body: Any
    line: int
    origin: str
    text: str
    via: tuple[Via, ...]


@dataclass
class _Frame:
    """A function call or a sourced file: `return` ends it, and only it."""

    what: str  # "function `f`", "the sourced file /x/y.sh"
    entry: tuple[Guard, ...]  # the guards where it was entered: a `return` under no others is unconditional
    returns: list[Guard] = field(default_factory=list)


@dataclass
class _Trap:
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
        return _at(self.origin, self.line, self.via)


# what, passed after an EXIT trap is set, keeps it from running before the start: an `exec` replaces the shell (it
# never exits, so never runs the trap); a failure that stops the script fails the start (the trap runs, the container
# does not); a cycle never gets to the end. An `exit` does not: it runs the trap.
_STOPS_TRAP = ("exec", "exec?", "fails", "errexit", "cycle")


def _exit_status_fails(text: str) -> bool:
    """`exit 1` (a literal non-zero status); `exit`, `exit 0`, `exit $rc`: not certain."""
    words = text.split()
    return len(words) > 1 and words[1].isdigit() and int(words[1]) % 256 != 0


def _certain_failure(ended: list[Guard]) -> bool:
    """A shell that passed one of these on every path exits with a non-zero status."""
    return any(
        g.never and (g.kind in ("errexit", "fails") or (g.kind == "exit" and _exit_status_fails(g.detail)))
        for g in ended
    )


def _condition(spec: str) -> str:
    """`exit`, `0`, `EXIT` → EXIT; `SIGINT`, `int` → INT (bash(1), trap: case insensitive, SIG prefix optional)."""
    name = spec.upper()
    return "EXIT" if name in ("0", "EXIT") else name.removeprefix("SIG")


@dataclass
class _Context:
    """What every file of one walk shares: the reader, the findings, the files being read (for cycles)."""

    read: Reader | None
    findings: list[Unfollowed] = field(default_factory=list)
    stack: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Run:
    """A script run as its own process: which file, by which shell, with `-e`?"""

    path: str
    shell: str | None  # the shell named on the command line (`bash FILE`); None: the file's own #! line
    errexit: bool


_NEEDS_READING = re.compile(r"[$`]")
_GLOB = re.compile(r"[*?\[]")
_DIRNAME = re.compile(
    r"\$\(\s*dirname\s+\"?(\$0|\$\{0\}|\$\{?BASH_SOURCE(?:\[0\])?\}?)\"?\s*\)"
    r"|\$\{(0|BASH_SOURCE(?:\[0\])?)%/\*\}"
)
_CD_PWD = re.compile(r"\$\(\s*cd\s+\"?([^\"$()`]*)\"?\s*(?:&&|;)\s*pwd\s*\)")
_ERREXIT_SET = re.compile(r"-[a-zA-Z]*e[a-zA-Z]*")
_ERREXIT_UNSET = re.compile(r"\+[a-zA-Z]*e[a-zA-Z]*")
_LONG_OPTION = re.compile(r"[-+][a-zA-Z]*o")  # the next word names an option (bash(1), `set -o option-name`)


class _Walker(bashlex.ast.nodevisitor):
    """Walks the files of one shell process; a script it runs as its own process gets a walker of its own."""

    def __init__(
        self,
        ctx: _Context,
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
        self.functions: dict[str, _Function] = {}
        self.commands: list[ShellCommand] = []
        self.guards: list[Guard] = []  # the constructs around the command being visited
        self.ended: list[Guard] = []  # exits (and execs, failed lines) already passed: they hold for what follows
        self.frames: list[_Frame] = []  # functions being called, files being sourced (innermost last)
        self.called: set[str] = set()
        self.calling: set[str] = set()
        self.posix = shell in POSIX_SHELLS
        self.errexit = errexit  # where `set -e` was turned on ("" when off), for messages
        self.errexit_sure = bool(errexit)  # on on every path (not set in a branch, not maybe turned off again)
        self.pipefail = False  # `set -o pipefail` on every path
        self.checked = 0  # inside an if/while condition or left of && / ||, negated with !: `set -e` does not apply
        self.traps: list[_Trap] = []  # set in this shell, run when it exits (EXIT) or maybe (signals)
        self.exiting = False  # running the traps: a `trap` in a trap sets nothing bash would run
        self.failed = False  # this shell exits with a non-zero status on every path (for a `set -e` caller)

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
        for chunk_start, chunk in _chunks(text):
            first_line = text.count("\n", 0, chunk_start) + 1
            try:
                trees = bashlex.parse(chunk)
            # TypeError: bashlex's tokenizer tests `None in '<>'` at a digit word ending in a backslash (`0\`)
            except (bashlex.errors.ParsingError, NotImplementedError, AttributeError, IndexError, TypeError):
                if not _case_arms(self, text, chunk_start, chunk):
                    unparsed.append(first_line)
                continue
            for tree in trees:
                self.text = "\n" * (first_line - 1) + chunk
                self.visit(_shift(tree, first_line - 1))
        return unparsed

    def finish(self) -> None:
        """The shell exits: its EXIT traps run, last. Then a function the script defines but never calls (the traps
        did not call it either): its commands run on no path; say so, do not drop them."""
        self.failed = _certain_failure(self.ended)
        self.run_traps()
        self.ended, self.frames = [], []  # the definition is what is reported, wherever the script ended
        for name, func in list(self.functions.items()):
            if name not in self.called:
                self.called.add(name)
                with self._in(func.origin, func.text, func.via):
                    self.under(Guard("function", func.line, func.origin, name, never=True, via=func.via), func.body)
        self.run_traps()  # set in a function never called: never set, never run; reported all the same

    def run_traps(self) -> None:
        """bash(1), trap: "If a sigspec is EXIT (0) the command arg is executed on exit from the shell": after every
        other command of this shell, on the paths where the trap was set, unless something after it reset it or
        replaced the shell (`exec`), or the script failed first. A trap on signals only may run, or not."""
        traps, self.traps = self.traps, []
        for trap in traps:
            guards = list(trap.guards) + trap.resets
            if "EXIT" in trap.conditions:
                guards += [g for g in self.ended[trap.ended :] if g.kind in _STOPS_TRAP]
            elif trap.conditions:  # cleared of all of them: its resets say so
                guards.append(Guard("trap", trap.line, trap.origin, " or ".join(sorted(trap.conditions)), via=trap.via))
            saved = self.guards, self.ended, self.frames, self.exiting
            self.guards, self.ended, self.frames, self.exiting = list(dict.fromkeys(guards)), [], [], True
            try:
                with self._in(trap.origin, "", trap.via + (Via("trap", trap.origin, trap.line, trap.on),)):
                    self.read_text("\n" * (trap.line - 1) + trap.action)  # its commands at the `trap` line
            finally:
                self.guards, self.ended, self.frames, self.exiting = saved

    def _in(self, origin: str, text: str, via: tuple[Via, ...]) -> _Switch:
        return _Switch(self, origin, text, via)

    # --- constructs -----------------------------------------------------------------------------------------------

    def visitfunction(self, node: Any, name: Any, body: Any, parts: Any) -> bool:
        self.functions[name.word] = _Function(body, self.line_of(node.pos[0]), self.origin, self.text, self.via)
        return False  # the body runs where the function is called, not where it is defined

    def visitcommandsubstitution(self, node: Any, command: Any) -> bool:
        return False

    def visitprocesssubstitution(self, node: Any, command: Any) -> bool:
        return False

    def visitcompound(self, node: Any, list_: Any, redirects: Any) -> bool:
        """`( … )` is a subshell: an `exit` or `return` inside it ends the subshell, not the script."""
        if not (list_ and list_[0].kind == "reservedword" and list_[0].word == "("):
            return True
        ended, returns = len(self.ended), [len(f.returns) for f in self.frames]
        options, env, traps = (self.errexit, self.errexit_sure, self.pipefail), dict(self.env), self.traps
        self.traps = []  # its own EXIT traps, run when it exits
        try:
            for child in list_:
                self.visit(child)
            failed = _certain_failure(self.ended[ended:]) or _constant(node) is False
            self.run_traps()
        finally:
            del self.ended[ended:]
            for frame, count in zip(self.frames, returns, strict=True):
                del frame.returns[count:]
            (self.errexit, self.errexit_sure, self.pipefail), self.env, self.traps = options, env, traps
        if failed:  # the subshell exits non-zero: under `set -e`, the script stops here
            self._errexit_stop(node, self.source_of(node.pos[0], node.pos[1]))
        return False

    def visitlist(self, node: Any, parts: Any) -> bool:
        """`a && b || c; d &`: each and-or chain ends at `;`, `&` or a newline; `&` puts the whole chain in the
        background."""
        chain: list[Any] = []
        for part in parts:
            if part.kind == "operator" and part.op not in ("&&", "||"):
                self._chain(chain, background=part.op == "&")
                chain = []
            else:
                chain.append(part)
        self._chain(chain, background=False)
        return False

    def _chain(self, chain: list[Any], background: bool) -> None:
        """b in `a && b` runs only when a succeeds, c in `… || c` only when what is on its left fails; a left side
        golive can decide (`true`, `false`, `[ 1 = 0 ]`) decides it."""
        nodes = [p for p in chain if p.kind != "operator"]
        if not nodes:
            return
        bg = self.guard("&", nodes[0], self.source_of(nodes[0].pos[0], nodes[-1].pos[1])) if background else None
        if bg is not None:
            self.guards.append(bg)
        try:
            value: bool | None = None
            op = ""
            for part in chain:
                if part.kind == "operator":
                    op = part.op
                    continue
                tested = part is not nodes[-1]
                guard = None
                if op:
                    runs = value if op == "&&" else _not(value)
                    if runs is not True:
                        left = self.source_of(nodes[0].pos[0], part.pos[0]).removesuffix(op).strip()
                        guard = Guard(
                            op,
                            self.line_of(part.pos[0]),
                            self.origin,
                            left,
                            part.pos[0],
                            never=runs is False,
                            via=self.via,
                        )
                self.checked += tested
                try:
                    self.under(guard, part)
                finally:
                    self.checked -= tested
                this = _constant(part)
                value = this if not op else _and(value, this) if op == "&&" else _or(value, this)
        finally:
            if bg is not None:
                self.guards.remove(bg)

    def _branch_guard(self, reach: str, node: Any, pos: int, why: str) -> Guard | None:
        if reach == ALWAYS:
            return None
        return Guard(
            "if",
            self.line_of(node.pos[0]),
            self.origin,
            pos=pos,
            never=reach == NEVER,
            why=why if reach == NEVER else "",
            via=self.via,
        )

    def visitif(self, node: Any, parts: Any) -> bool:
        """The first condition always runs; each branch runs when its condition is reached and true, each later
        condition when every earlier one was false. A condition golive can decide decides it."""
        reach, why = ALWAYS, ""  # of the next condition (or else)
        section: list[Any] = []
        in_condition = False
        guard: Guard | None = None
        for part in parts:
            if part.kind == "reservedword":
                if part.word in ("if", "elif"):
                    in_condition, section = True, []
                    guard = self._branch_guard(reach, node, part.pos[0], why)
                elif part.word == "then":
                    value = _constant_of(section)
                    decided = (
                        f"`{self.source_of(section[0].pos[0], section[-1].pos[1]).rstrip(';').strip()}` is "
                        f"always {'true' if value else 'false'}"
                        if section and value is not None
                        else ""
                    )
                    branch = _reach(reach, value)
                    guard = self._branch_guard(branch, node, part.pos[0], why if reach == NEVER else decided)
                    after = _reach(reach, _not(value))
                    why = why if reach == NEVER else decided
                    reach = after
                    in_condition = False
                elif part.word == "else":
                    guard = self._branch_guard(reach, node, part.pos[0], why)
                continue
            if in_condition:
                section.append(part)
                self.checked += 1
                try:
                    self.under(guard, part)
                finally:
                    self.checked -= 1
            else:
                self.under(guard, part)
        return False

    def _loop(self, node: Any, parts: Any, kind: str) -> bool:
        """`while`/`until` test their condition at least once; the body (and a `for` body) may run zero times. A `for`
        over literal words runs its body; `while false` / `until true` never do."""
        body, after_in = False, False
        words: list[Any] = []
        condition: list[Any] = []
        guard: Guard | None = None
        for part in parts:
            if part.kind == "reservedword":
                if part.word == "in":
                    after_in = True
                if part.word == "do" and not body:
                    body = True
                    guard = self._loop_guard(node, kind, words, condition, after_in)
                continue
            if body:
                self.under(guard, part)
            elif kind == "for":
                if after_in and part.kind == "word":
                    words.append(part)
            else:
                condition.append(part)
                self.checked += 1
                try:
                    self.visit(part)
                finally:
                    self.checked -= 1
        return False

    def _loop_guard(self, node: Any, kind: str, words: list[Any], condition: list[Any], after_in: bool) -> Guard | None:
        if kind == "for":
            if not after_in or any(_NEEDS_READING.search(w.word) or _GLOB.search(w.word) for w in words):
                return self.guard(kind, node)
            if words:
                return None
            return self.guard(kind, node, never=True, why="its word list is empty")
        value = _constant_of(condition)
        if value is (kind == "until"):
            text = self.source_of(condition[0].pos[0], condition[-1].pos[1]).rstrip(";").strip()
            return self.guard(kind, node, never=True, why=f"`{text}` is always {'true' if value else 'false'}")
        return self.guard(kind, node)

    def visitfor(self, node: Any, parts: Any) -> bool:
        return self._loop(node, parts, "for")

    def visitwhile(self, node: Any, parts: Any) -> bool:
        return self._loop(node, parts, "while")

    def visituntil(self, node: Any, parts: Any) -> bool:
        return self._loop(node, parts, "until")

    def visitpipeline(self, node: Any, parts: Any) -> bool:
        """Visit each stage in order, telling every stage which command feeds its stdin."""
        previous: tuple[str, ...] = ()
        negated = any(p.kind == "reservedword" and p.word == "!" for p in parts)
        stages = [p for p in parts if p.kind not in ("pipe", "reservedword")]
        self.checked += negated
        try:
            for part in stages:
                first = len(self.commands)
                early = part is not stages[-1]  # `set -e` looks at the pipeline's status, not at this stage's
                self.checked += early
                try:
                    self.visit(part)
                finally:
                    self.checked -= early
                if first < len(self.commands):
                    if previous:
                        self.commands[first] = replace(self.commands[first], stdin_from=previous)
                    previous = self.commands[first].argv
                else:
                    previous = ()
            if self.pipefail and any(_constant(p) is False for p in stages[:-1]):  # its status is that stage's
                self._errexit_stop(node, self.source_of(node.pos[0], node.pos[1]))
        finally:
            self.checked -= negated
        return False

    # --- simple commands ------------------------------------------------------------------------------------------

    def visitcommand(self, node: Any, parts: Any) -> bool:
        argv, redirects, assignments = [], [], []
        for part in parts:
            if part.kind == "word":
                argv.append(self.expand(part.word))
            elif part.kind == "assignment":
                assignments.append(part.word)
            elif part.kind == "redirect" and hasattr(part.output, "word"):
                redirects.append((part.type, self.expand(part.output.word)))
        if not argv:
            for assignment in assignments:
                self._assign(assignment)
            return False
        if argv[0] in ("export", "readonly", "local", "declare", "typeset"):
            for word in argv[1:]:
                if "=" in word and not word.startswith("-"):
                    self._assign(word)
        if argv[0] in self.functions and argv[0] not in self.calling:  # a recursive call adds nothing new
            self._call(argv[0], node)
            return False
        guards = self.current_guards()
        line = self.line_of(node.pos[0])
        command = ShellCommand(tuple(argv), tuple(redirects), line, self.origin, guards=guards, via=self.via)
        self.commands.append(command)
        never = command.never_runs
        target = _unwrap(argv)
        if argv[0] == "set" and not never:
            self._set(argv, command)
        if argv[0] == "trap":
            self._trap(argv, command, node)
        inner = inline_script(target)
        failed = False  # a script run as its own process that exits non-zero on every path
        if inner is not None:
            failed = self._inline(inner, command)
        elif target[:1] in (["."], ["source"]) and len(target) > 1:
            self._source(target[1], command)
        else:
            run = _runs_script(target)
            if run is not None:
                failed = self._run(run, command)
        if never or any(g.kind == "&" for g in self.guards):  # a background job is a subshell: it ends only itself
            return False
        if argv[0] == "exit" and _exit_lets_start_go_on(argv, conditional=bool(guards)):
            self.ended.append(self.guard("exit?" if guards else "exit", node, " ".join(argv), never=not guards))
        elif argv[0] == "return" and self.frames:
            frame = self.frames[-1]
            conditional = bool(set(guards) - set(frame.entry))
            frame.returns.append(
                self.guard(
                    "return?" if conditional else "return", node, " ".join(argv), never=not conditional, why=frame.what
                )
            )
        elif argv[0] == "exec" and len(argv) > 1:
            self.ended.append(self.guard("exec?" if guards else "exec", node, " ".join(argv), never=not guards))
        elif failed or _constant(node) is False:
            self._errexit_stop(node, command.text())
        return False

    def _errexit_stop(self, node: Any, what: str) -> None:
        """bash(1), `set -e`: a command that always fails, where -e applies (not tested by `if`/`while`/`&&`/`||`,
        not negated, not early in a pipeline), ends the script with an error: nothing after it runs, the start
        fails. Under a condition it fails the start on that path only: no path reaches the container without what
        follows, so nothing is recorded."""
        if not (self.errexit and self.errexit_sure) or self.checked or self.current_guards():
            return
        self.ended.append(self.guard("errexit", node, what, never=True, why=self.errexit))

    def _trap(self, argv: list[str], command: ShellCommand, node: Any) -> None:
        """`trap ACTION COND…` sets ACTION for each COND; `trap - COND…`, `trap COND`, `trap '' COND…` reset it
        (bash(1), SHELL BUILTIN COMMANDS, trap). A reset on every path where an earlier trap was set takes the
        condition from it for sure; one under a condition of its own may."""
        if self.exiting:
            return
        args = argv[1:]
        if args[:1] == ["--"]:
            args = args[1:]
        if not args or (args[0].startswith("-") and args[0] != "-"):
            return  # `trap`, `trap -p`, `trap -l`: print, set nothing
        action, conditions = ("", args) if len(args) == 1 else (args[0], args[1:])
        names = {_condition(c) for c in conditions}
        on = "EXIT" if "EXIT" in names else " ".join(sorted(names))
        if not command.never_runs:
            text = command.text()
            for trap in self.traps:
                hit = trap.conditions & names
                if not hit:
                    continue
                sure = set(command.guards) <= set(trap.guards)
                if sure:
                    trap.conditions -= hit
                if sure and not trap.conditions or not sure and ("EXIT" in hit or trap.conditions <= names):
                    what = "the EXIT trap" if "EXIT" in hit else f"the trap on {' '.join(sorted(hit))}"
                    trap.resets.append(self.guard("untrap", node, text, never=sure, why=f"{what} set at {trap.at()}"))
        if action not in ("", "-"):
            self.traps.append(
                _Trap(action, on, names, command.line, command.origin, command.via, command.guards, len(self.ended))
            )

    def _assign(self, assignment: str) -> None:
        name, value = assignment.split("=", 1)
        self.env[name] = self.expand(value)

    def _set(self, argv: list[str], command: ShellCommand) -> None:
        """`set -e`, `set -euo pipefail`, `set -o errexit` turn errexit on; `set +e`, `set +o errexit` off; under a
        condition, on (or off) on some paths only: not on for sure. The same for `-o pipefail`."""
        args, sure = argv[1:], not command.guards
        for i, arg in enumerate(args):
            following = args[i + 1] if i + 1 < len(args) else ""
            long_option = following if _LONG_OPTION.fullmatch(arg) else ""  # `-o NAME`, `-euo NAME`, `+o NAME`
            if _ERREXIT_SET.fullmatch(arg) or (arg.startswith("-") and long_option == "errexit"):
                if sure or not self.errexit_sure:
                    self.errexit, self.errexit_sure = f"`{' '.join(argv)}` ({command.where()})", sure
            elif _ERREXIT_UNSET.fullmatch(arg) or (arg.startswith("+") and long_option == "errexit"):
                self.errexit, self.errexit_sure = ("" if sure else self.errexit), False
            if long_option == "pipefail":
                self.pipefail = arg.startswith("-") and (sure or self.pipefail)

    def _call(self, name: str, node: Any) -> None:
        func = self.functions[name]
        self.called.add(name)
        self.calling.add(name)
        first = len(self.commands)
        self.frames.append(_Frame(f"function `{name}`", self.current_guards()))
        try:
            with self._in(func.origin, func.text, func.via):
                self.visit(func.body)
        finally:
            self.frames.pop()
            self.calling.discard(name)
        call_line = self.line_of(node.pos[0])  # report the call site: that is where the order is decided
        self.commands[first:] = [
            replace(c, line=call_line, origin=self.origin, via=self.via)
            if (c.origin, c.via) == (func.origin, func.via)
            else c
            for c in self.commands[first:]
        ]

    # --- other files ----------------------------------------------------------------------------------------------

    def _finding(self, kind: str, how: str, path: str, command: ShellCommand, after: str = "") -> None:
        self.ctx.findings.append(
            Unfollowed(kind, how, path, command.line, command.origin, command.via, command.guards, after)
        )

    def _readable(self, how: str, path: str, command: ShellCommand) -> str | None:
        """The file's text, or None with a finding saying why it was not read."""
        if self.ctx.read is None:
            return None
        if _NEEDS_READING.search(path):
            self._finding("unresolved", how, path, command)
            return None
        if "/" not in path:
            self._finding("no-slash" if how == "sources" else "relative", how, path, command)
            return None
        if not path.startswith("/"):
            self._finding("relative", how, path, command)
            return None
        if path in self.ctx.stack:
            chain = " → ".join(self.ctx.stack[self.ctx.stack.index(path) :] + [path])
            self._finding("cycle", how, path, command, chain)
            if not command.guards:
                self.ended.append(Guard("cycle", command.line, command.origin, path, never=True, via=command.via))
            return None
        if len(self.ctx.stack) >= MAX_DEPTH:
            self._finding("depth", how, path, command)
            return None
        try:
            text = self.ctx.read(path)
        except UnicodeDecodeError:
            self._finding("unreadable", how, path, command)
            return None
        if text is None:
            self._missing(how, path, command)
        return text

    def _missing(self, how: str, path: str, command: ShellCommand) -> None:
        """bash reports a missing file and goes on, unless the line stops a `set -e` (or POSIX `.`) script."""
        if how == "sources" and self.posix:
            after, stops = "under POSIX `sh` a `.` that fails ends the script with an error, so the start fails", True
        elif self.errexit and not self.checked:
            after, stops = f"with {self.errexit} bash stops the script there with an error, so the start fails", True
        elif self.errexit:
            after, stops = (
                "the line is tested (`if`, `&&`, `||`), so `set -e` does not stop the script: bash "
                "carries on without what that file would have done",
                False,
            )
        else:
            after, stops = (
                "without `set -e` bash reports the error and carries on with the next line, without "
                "what that file would have done",
                False,
            )
        self._finding("missing", how, path, command, after)
        stops = stops and (self.errexit_sure or self.posix and how == "sources")  # -e set in a branch: maybe on
        if stops and not command.guards:  # a failure on some paths only fails the start there: no path goes on
            self.ended.append(
                Guard(
                    "fails",
                    command.line,
                    command.origin,
                    path,
                    never=True,
                    via=command.via,
                    why=f"{how} {path}, a file that does not exist on the station: {after}",
                )
            )

    def _source(self, path: str, command: ShellCommand) -> None:
        """`. FILE`: FILE's commands, in this shell, at this point; `return` at its top level ends only FILE."""
        text = self._readable("sources", path, command)
        if text is None:
            return
        self.ctx.stack.append(path)
        self.frames.append(_Frame(f"the sourced file {path}", self.current_guards()))
        try:
            with self._in(path, "", command.via + (Via("sourced", command.origin, command.line, path),)):
                self.read_text(text)
        finally:
            self.frames.pop()
            self.ctx.stack.pop()

    def _run(self, run: _Run, command: ShellCommand) -> bool:
        """FILE run as its own process: its commands, under the conditions of the line that runs it. True when it
        exits non-zero on every path."""
        text = self._readable("runs", run.path, command)
        if text is None:
            return False
        interpreter = _interpreter(text)
        shell = run.shell or interpreter or "bash"  # no #! line: bash runs it itself (ENOEXEC)
        if shell not in SHELLS:
            self._finding("not-shell", "runs", run.path, command, interpreter or shell)
            return False
        errexit = (
            f"`{shell} -e` ({command.where()})"
            if run.errexit
            else f"the `#!` line's -e ({run.path}:1)"
            if run.shell is None and _shebang_errexit(text)
            else ""
        )
        via = command.via + (Via("run", command.origin, command.line, run.path),)
        return self._child(text, run.path, via, command, shell=shell, errexit=errexit)

    def _inline(self, inner: str, command: ShellCommand) -> bool:
        return self._child(
            inner,
            f"{command.origin}:{command.line} (-c)",
            command.via,
            command,
            shell=command.program if command.program in SHELLS else "bash",
            errexit="",
            stacked=False,
        )

    def _child(
        self,
        text: str,
        origin: str,
        via: tuple[Via, ...],
        command: ShellCommand,
        *,
        shell: str,
        errexit: str,
        stacked: bool = True,
    ) -> bool:
        child = _Walker(self.ctx, origin, script0=origin, via=via, shell=shell, errexit=errexit)
        if stacked:
            self.ctx.stack.append(origin)
        try:
            child.read_text(text)
            child.finish()
        finally:
            if stacked:
                self.ctx.stack.pop()
        self.commands.extend(replace(c, guards=command.guards + c.guards) for c in child.commands)
        return child.failed


class _Switch:
    """Walk another file's text (a sourced file, a function defined elsewhere), then come back."""

    def __init__(self, walker: _Walker, origin: str, text: str, via: tuple[Via, ...]):
        self.walker, self.state = walker, (origin, text, via)

    def __enter__(self) -> None:
        w = self.walker
        self.saved = (w.origin, w.text, w.via)
        w.origin, w.text, w.via = self.state

    def __exit__(self, *exc: object) -> None:
        w = self.walker
        w.origin, w.text, w.via = self.saved


def _constant(node: Any) -> bool | None:
    """The exit status of `true`, `:`, `false`, `! …`, `[ … ]` / `test …` over literal words; None otherwise."""
    kind = getattr(node, "kind", "")
    if kind == "list":
        return _constant_of(node.parts)
    if kind == "pipeline":
        stages = [p for p in node.parts if p.kind not in ("pipe", "reservedword")]
        negated = any(p.kind == "reservedword" and p.word == "!" for p in node.parts)
        if len(stages) != 1:
            return None
        value = _constant(stages[0])
        return _not(value) if negated else value
    if kind == "compound":
        inner = [p for p in node.list if p.kind != "reservedword"]
        return _constant_of(inner) if not node.redirects else None
    if kind != "command" or any(p.kind != "word" for p in node.parts):
        return None
    words = [p.word for p in node.parts]
    if any(_NEEDS_READING.search(w) for w in words):
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


def _constant_of(nodes: list[Any]) -> bool | None:
    """A list of commands returns the status of its last one: decided when that one is."""
    commands = [n for n in nodes if getattr(n, "kind", "") != "operator"]
    if not commands or any(getattr(n, "kind", "") == "operator" and n.op in ("&&", "||", "&") for n in nodes):
        return None
    return _constant(commands[-1])


# sudo(8) options that take a value (`-u USER`); the others are flags
_SUDO_VALUED = ("-u", "-g", "-C", "-h", "-p", "-r", "-t", "-U", "-D", "-R", "-T")


def _unwrap(argv: list[str]) -> list[str]:
    """What `exec CMD`, `nohup CMD`, `command CMD` and `sudo [-E] [-u USER] CMD` run: CMD (sudo runs it as its own
    process, as root: a drop written there drops the machine's page cache all the same)."""
    while len(argv) > 1:
        if argv[0] in ("exec", "nohup", "command") and not argv[1].startswith("-"):
            argv = argv[1:]
        elif argv[0].rsplit("/", 1)[-1] == "sudo":
            i = 1
            while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
                if argv[i] in ("-l", "-ll", "-v", "-K", "-e", "-V", "--list", "--validate", "--edit", "--version"):
                    return argv  # lists, validates, edits: runs no command
                i += 2 if argv[i] in _SUDO_VALUED else 1
            i += 1 if i < len(argv) and argv[i] == "--" else 0
            if i >= len(argv) or "=" in argv[i]:
                break  # `sudo -l`, `sudo VAR=x …`: not a command golive follows
            argv = argv[i:]
        else:
            break
    return argv


def _runs_script(argv: list[str]) -> _Run | None:
    """`bash [-e…] FILE`, `sh FILE`, `/path/FILE.sh`: the script file run as its own process; None otherwise."""
    if not argv:
        return None
    program = argv[0].rsplit("/", 1)[-1]
    if program in SHELLS:
        args, errexit = argv[1:], False
        while args and args[0].startswith(("-", "+")) and args[0] not in ("-", "--"):
            flag = args.pop(0)
            if flag.startswith("--"):
                continue  # --norc, --posix, …
            if flag in ("-o", "+o") and args:
                errexit = errexit or (flag == "-o" and args[0] == "errexit")
                args.pop(0)
            elif "c" in flag or "s" in flag:
                return None  # -c: inline script (see inline_script); -s: the script comes on stdin
            elif flag.startswith("-") and "e" in flag:
                errexit = True
        if args and args[0] == "--":
            args = args[1:]
        return _Run(args[0], program, errexit) if args else None
    if "/" in argv[0] and argv[0].endswith((".sh", ".bash")):
        return _Run(argv[0], None, False)
    return None


def _interpreter(text: str) -> str | None:
    """`#!/bin/bash -e` → bash; `#!/usr/bin/env python3` → python3; None without a #! line."""
    first = text.split("\n", 1)[0]
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if not words:
        return None
    name = words[0].rsplit("/", 1)[-1]
    if name == "env" and len(words) > 1:
        name = next((w for w in words[1:] if not w.startswith("-")), name)
    return name


def _shebang_errexit(text: str) -> bool:
    first = text.split("\n", 1)[0]
    return first.startswith("#!") and any(_ERREXIT_SET.fullmatch(w) for w in first[2:].split()[1:])


def _exit_lets_start_go_on(argv: list[str], conditional: bool) -> bool:
    """After `exit 0` / bare `exit` the start goes on without what follows. After `exit 1` (any literal non-zero
    status) inside a branch, systemd stops the start (a failed ExecStartPre fails the unit), so no path that reaches
    the container skips what follows; an unconditional exit of any status leaves what follows unreached."""
    if not conditional:
        return True
    status = argv[1] if len(argv) > 1 else "0"
    return not (status.isdigit() and int(status) % 256 != 0)


def inline_script(argv: list[str] | tuple[str, ...]) -> str | None:
    """`sh -c '…'` / `bash -c '…'` carry a script of their own.

    Older `systemctl show` prints argv unquoted, so a script may arrive as several words: join them back.
    """
    argv = list(argv)
    if argv and argv[0].rsplit("/", 1)[-1] in SHELLS and "-c" in argv[1:-1]:
        return " ".join(argv[argv.index("-c") + 1 :])
    return None


def commands_of(argv: list[str] | tuple[str, ...], origin: str, line: int = 0) -> list[ShellCommand]:
    """One command as run, plus what it runs inline (`sh -c`), in order."""
    command = ShellCommand(tuple(argv), (), line, origin)
    inner = inline_script(argv)
    return [command] + (parse_script(inner, origin=f"{command.where()} (-c)").commands if inner else [])


def parse_script(text: str, origin: str = "script", read: Reader | None = None) -> Script:
    """Every simple command in execution order; functions expanded where called; simple $VARs substituted; each with
    the conditions under which it may not run.

    With `read` (a station path → its text, None when it is not a file there), the files the script sources or runs
    are read too (see the module's docstring): their commands in place, with their own file and line, and a finding
    for each file that could not be. A line bashlex cannot parse is recorded, not fatal: the rest of the script still
    counts.
    """
    ctx = _Context(read, stack=[origin])
    shell = _interpreter(text) or "bash"
    walker = _Walker(
        ctx,
        origin,
        script0=origin,
        shell=shell,
        errexit=f"the `#!` line's -e ({origin}:1)" if _shebang_errexit(text) else "",
    )
    unparsed = walker.read_text(text)
    walker.finish()
    return Script(commands=walker.commands, unparsed_lines=unparsed, findings=ctx.findings)


_CASE = re.compile(r"\s*case\s.*\bin\s*$")
_ARM = re.compile(r"^\s*\(?[^()]*\)\s*")


def _case_arms(walker: _Walker, text: str, chunk_start: int, chunk: str) -> bool:
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
                continue
            padding = "\n" * (first_line + offset - 1)
            for tree in trees:
                walker.text = padding + body
                walker.visit(_shift(tree, len(padding)))
    finally:
        walker.guards.remove(guard)
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
