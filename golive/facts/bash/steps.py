"""One command of a prestart as the bash reader gives it: why it may not run, and what it does in the recipe's terms.

A simple command of a prestart (or of a unit's Exec line): how its file was reached, the reasons it may not run, each
with what to do about it ("never runs" / "may not run", one Do per cause), the files the script reads that golive did
not, and what a command does in the recipe's terms (the page-cache drop, `sync`, `docker logs`)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from golive.facts import docker
from golive.facts.bash.formulas import FALSE, Formula, all_of, f_not, f_or, tautology, unsatisfiable

MAX_DEPTH = 8  # files sourced or run inside one another, the prestart included


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


def located_at(origin: str, line: int, via: tuple[Via, ...]) -> str:
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
    # when the construct lets the command run, as a formula over atoms (golive.facts.bash.formulas); None: not known
    # (a loop, a background job, a trap on a signal: golive does not relate those to other conditions)
    condition: Formula | None = None

    def where(self) -> str:
        return located_at(self.origin, self.line, self.via)

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
    path: str  # as bash finds it (a relative path resolved against the current directory), else as written
    line: int
    origin: str
    via: tuple[Via, ...] = ()
    guards: tuple[Guard, ...] = ()  # the conditions on the line that sources or runs it
    after: str = ""  # missing: what bash does next; cycle: the chain; not-shell: the interpreter; relative: why the
    #                  current directory is not known
    resolved: str = ""  # a relative path: how bash found it (`relative to the current directory /x (the `cd` at …)`)

    @property
    def never(self) -> bool:
        """The line that sources or runs it never runs: nothing is lost by not reading the file."""
        return any(g.never for g in self.guards) or contradicts(self.guards)

    @property
    def unknown(self) -> bool:
        """golive could not follow it (a path it cannot work out, a file it cannot read or did not go into): what the
        file would do is not known, so a rule that depends on it is not checked. A file that does not exist, or one
        read again in a cycle, is known: bash's behaviour there is a fact."""
        return self.kind not in ("missing", "cycle")

    def where(self) -> str:
        return located_at(self.origin, self.line, self.via)

    def describe(self) -> str:
        at, how = self.where(), self.how
        if self.kind == "missing":
            return f"{at} {how} {self.resolved or self.path}, which does not exist on the station: {self.after}"
        if self.kind == "unreadable":
            return f"{at} {how} {self.path}, which golive could not read as text"
        if self.kind == "no-slash":
            return (
                f"{at} sources `{self.path}` without a `/`: bash looks it up in $PATH, then in the current directory "
                f"(bash(1), `.`); it is in no $PATH folder, and golive does not know the current directory "
                f"({self.after or 'not said'}), so it did not read it"
            )
        if self.kind == "relative":
            return (
                f"{at} {how} `{self.path}`, relative to the current directory, which golive does not know "
                f"({self.after or 'not said'}): not read"
            )
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
        return located_at(self.origin, self.line, self.via)

    @property
    def always_runs(self) -> bool:
        return not self.guards

    @property
    def condition(self) -> Formula | None:
        """When it runs, as a formula over atoms: its guards' conditions together; None where one is not known."""
        return condition_of(self.guards)

    @property
    def never_runs(self) -> bool:
        """Some guard decides for certain, or its conditions never hold together (`if [ "$X" != 1 ]; then
        [ "$X" = 1 ] && …`): the line is there and bash never runs it."""
        return any(g.never for g in self.guards) or contradicts(self.guards)

    def verdict(self) -> str:
        """ "runs", "never runs" or "may not run", as the script decides it."""
        return "runs" if self.always_runs else "never runs" if self.never_runs else "may not run"

    def why_it_may_not_run(self) -> str:
        said = "; ".join(g.describe() for g in self.guards)
        if not any(g.never for g in self.guards) and contradicts(self.guards):
            said += ": those conditions never hold together, so it never runs"
        return said

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

    @property
    def runs(self) -> list[str]:
        """The command it runs: `exec docker run …` and `sudo docker rm …` run docker (unwrap)."""
        return unwrap(list(self.argv))

    # --- what a command does, in the terms the recipe uses ----------------------------------------------------------

    def drops_page_cache(self) -> bool:
        """`echo 1|3 > /proc/sys/vm/drop_caches`, `echo 1|3 | tee /proc/sys/vm/drop_caches`,
        `sysctl vm.drop_caches=1|3`.

        2 frees dentries and inodes only (slab), not the page cache: it does not count, in any spelling.
        """
        writes = any(t.endswith(DROP_CACHES) for op, t in self.redirects if op in (">", ">>", ">|"))
        argv = unwrap(list(self.argv))  # `sudo tee …`: sudo runs tee
        if writes:
            return _echoes_page_cache_value(argv)
        program = argv[0].rsplit("/", 1)[-1] if argv else ""
        if program == "tee" and any(a.endswith(DROP_CACHES) for a in argv[1:]):
            # its stdin: the command piped into it, or a here-string (`tee … <<< 3`, bash(1) "Here Strings")
            here = [t for op, t in self.redirects if op == "<<<"]
            return _echoes_page_cache_value(("echo", here[-1]) if here else unwrap(list(self.stdin_from)))
        if program == "sysctl":
            return any(re.fullmatch(r"vm[./]drop_caches=[13]", a) for a in argv[1:])
        return False

    def writes_drop_caches(self) -> bool:
        """Any write to drop_caches, whatever the value (to tell "drops slab only" from "never drops")."""
        argv = unwrap(list(self.argv))
        program = argv[0].rsplit("/", 1)[-1] if argv else ""
        return (
            any(t.endswith(DROP_CACHES) for op, t in self.redirects if op in (">", ">>", ">|"))
            or (program == "tee" and any(a.endswith(DROP_CACHES) for a in argv[1:]))
            or (program == "sysctl" and any(re.fullmatch(r"vm[./]drop_caches=.*", a) for a in argv[1:]))
        )

    def is_sync(self) -> bool:
        """`sync`, `/bin/sync`, `sudo sync`: the whole machine's dirty pages written."""
        argv = unwrap(list(self.argv))
        return len(argv) == 1 and argv[0].rsplit("/", 1)[-1] == "sync"

    def docker_verb(self) -> tuple[str, list[str]] | None:
        """("logs", [args]) for `docker logs …` / `docker container logs …`; None for anything else. `docker
        container remove` is `rm` (its alias)."""
        argv = self.runs
        if not argv or argv[0].rsplit("/", 1)[-1] not in docker.CLIS:
            return None
        args = argv[1:]
        if args and args[0] == "container":
            args = args[1:]
            if args[:1] == ["remove"]:
                args = ["rm", *args[1:]]
        return (args[0], args[1:]) if args else None

    def docker_targets(self, verb: str) -> list[str]:
        found = self.docker_verb()
        if not found or found[0] != verb:
            return []
        return [a for a in found[1] if not a.startswith("-")]


def condition_of(guards: tuple[Guard, ...]) -> Formula | None:
    """The conditions of a path's constructs together (each one is reached only when those around it let it run)."""
    return all_of([FALSE if g.never else g.condition for g in guards])


def contradicts(guards: tuple[Guard, ...]) -> bool:
    """The conditions of these constructs never hold together (and golive can tell: few enough atoms)."""
    condition = condition_of(guards) if guards else None
    return condition is not None and unsatisfiable(condition) is True


def always_run(commands: list[ShellCommand]) -> bool:
    """One of these commands runs on every path: one of them always runs, or the paths that reach them cover every
    case together (a `sync` in each arm of a `case` with a `*)` arm, a file sourced under `[ "$X" = 1 ] &&` and under
    `[ "$X" != 1 ] &&`): the disjunction of their conditions is true whatever the conditions golive cannot decide
    are. A command whose condition golive cannot write (in a loop, in the background) does not count."""
    if any(c.always_runs for c in commands):
        return True
    known = [c.condition for c in commands if not c.never_runs]
    conditions = [k for k in known if k is not None]
    return bool(conditions) and tautology(f_or(*conditions)) is True


def always_run_before(earlier: list[ShellCommand], later: ShellCommand, order: list[ShellCommand]) -> bool:
    """On every path that reaches `later`, one of `earlier` ran first: one always does (ShellCommand.
    always_runs_before), or, of those that come before it, the conditions cover every case where `later` runs."""
    if any(e.always_runs_before(later, order) for e in earlier):
        return True
    before = [e.condition for e in earlier if order.index(e) < order.index(later) and not e.never_runs]
    conditions = [b for b in before if b is not None]
    if later.condition is None or not conditions:
        return False
    return tautology(f_or(f_not(later.condition), *conditions)) is True


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


# sudo(8) options that take a value (`-u USER`); the others are flags
_SUDO_VALUED = ("-u", "-g", "-C", "-h", "-p", "-r", "-t", "-U", "-D", "-R", "-T")


def unwrap(argv: list[str]) -> list[str]:
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
