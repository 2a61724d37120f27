"""Shell scripts (prestart) as an ordered list of simple commands, so checks reason about order, not words.

Each command also carries the conditions under which it may NOT run (bash(1), SHELL GRAMMAR: the body of `if`,
`case`, `for`, `while`/`until`; the right-hand side of `&&`/`||`; a function that is never called; anything after an
`exit` that lets the start go on), so a check can ask whether a step runs on every path, not only whether it is written.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace

import bashlex
import bashlex.ast
import bashlex.errors


@dataclass(frozen=True)
class Guard:
    """One reason a command may not run: the construct that decides it, where it is."""

    kind: str      # if, case, for, while, until, &&, ||, function, exit (always taken), exit? (may be)
    line: int
    origin: str
    detail: str = ""   # the function's name, the exit's text
    pos: int = 0       # tells two constructs on one line apart

    def describe(self) -> str:
        at = f"{self.origin}:{self.line}"
        if self.kind in ("&&", "||"):
            return f"it is on the right of `{self.kind}` at {at}: it runs only when the command on the left " \
                   f"{'succeeds' if self.kind == '&&' else 'fails'}"
        if self.kind == "function":
            return f"it is in function `{self.detail}` ({at}), which the script never calls"
        if self.kind == "exit":
            return f"it comes after `{self.detail}` at {at}, which ends the script first"
        if self.kind == "exit?":
            return f"it comes after `{self.detail}` at {at}, which can end the script and let the start go on"
        if self.kind in ("for", "while", "until"):
            return f"it is inside the `{self.kind}` loop at {at}, whose body may run zero times"
        return f"it is inside the `{self.kind}` at {at}: it runs only on the branch that matches"


@dataclass(frozen=True)
class ShellCommand:
    argv: tuple[str, ...]
    redirects: tuple[tuple[str, str], ...] = ()
    line: int = 0
    origin: str = ""  # which file or unit line it came from, for messages
    stdin_from: tuple[str, ...] = ()  # argv of the command piped into this one (`echo 1 | tee …`)
    guards: tuple[Guard, ...] = ()  # why it may not run; () when it runs whenever the script runs to its end

    def where(self) -> str:
        return f"{self.origin}:{self.line}" if self.line else self.origin

    @property
    def always_runs(self) -> bool:
        return not self.guards

    def why_it_may_not_run(self) -> str:
        return "; ".join(g.describe() for g in self.guards)

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
        if writes:
            return _echoes_page_cache_value(self.argv)
        if self.program == "tee" and any(a.endswith(DROP_CACHES) for a in self.argv[1:]):
            return _echoes_page_cache_value(self.stdin_from)
        if self.program == "sysctl":
            return any(re.fullmatch(r"vm[./]drop_caches=[13]", a) for a in self.argv[1:])
        return False

    def writes_drop_caches(self) -> bool:
        """Any write to drop_caches, whatever the value (to tell "drops slab only" from "never drops")."""
        return (any(t.endswith(DROP_CACHES) for op, t in self.redirects if op in (">", ">>", ">|"))
                or (self.program == "tee" and any(a.endswith(DROP_CACHES) for a in self.argv[1:]))
                or (self.program == "sysctl" and any(re.fullmatch(r"vm[./]drop_caches=.*", a) for a in self.argv[1:])))

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


def _echoes_page_cache_value(argv) -> bool:
    """`echo 1`, `echo 3`, `printf '3\\n'`: the value written to drop_caches frees the page cache (1 or 3)."""
    if not argv or argv[0].rsplit("/", 1)[-1] not in ("echo", "printf"):
        return False
    values = [a.replace("\\n", "").strip() for a in argv[1:] if not a.startswith("-")]
    return values[-1:] in (["1"], ["3"])


@dataclass
class Script:
    commands: list[ShellCommand]
    unparsed_lines: list[int] = field(default_factory=list)


class _Walker(bashlex.ast.nodevisitor):
    def __init__(self, origin: str, env: dict[str, str], functions: dict):
        self.text, self.origin, self.env, self.functions = "", origin, env, functions
        self.commands: list[ShellCommand] = []
        self.guards: list[Guard] = []       # the constructs around the command being visited
        self.after_exit: list[Guard] = []   # exits already passed: they hold for every later command
        self.called: set[str] = set()
        self.calling: set[str] = set()

    def line_of(self, pos: int) -> int:
        return self.text.count("\n", 0, pos) + 1

    def guard(self, kind: str, node, detail: str = "") -> Guard:
        return Guard(kind, self.line_of(node.pos[0]), self.origin, detail, node.pos[0])

    def under(self, guard: Guard, node) -> None:
        self.guards.append(guard)
        try:
            self.visit(node)
        finally:
            self.guards.pop()

    def expand(self, word: str) -> str:
        return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: self.env.get(m[1], m[0]), word)

    def visitfunction(self, node, name, body, parts):
        self.functions[name.word] = (body, self.line_of(node.pos[0]))
        return False  # the body runs where the function is called, not where it is defined

    def visitcommandsubstitution(self, node, command):
        return False

    def visitlist(self, node, parts):
        """`a && b || c; d`: b and c are conditional on what came before them in their and-or chain, d is not."""
        chain: list[Guard] = []
        for part in parts:
            if part.kind == "operator":
                if part.op in ("&&", "||"):
                    chain.append(self.guard(part.op, part))
                    self.guards.append(chain[-1])
                else:
                    for guard in chain:
                        self.guards.remove(guard)
                    chain = []
                continue
            self.visit(part)
        for guard in chain:
            self.guards.remove(guard)
        return False

    def visitif(self, node, parts):
        """The first condition always runs; every branch, and every later condition, only on some paths."""
        branch = None
        for part in parts:
            if part.kind == "reservedword":
                if part.word in ("then", "elif", "else") and branch is None:
                    branch = self.guard("if", node)
                continue
            if branch is None:
                self.visit(part)
            else:
                self.under(branch, part)
        return False

    def _loop(self, node, parts, kind: str):
        """`while`/`until` test their condition at least once; the body (and a `for` body) may run zero times."""
        body = False
        for part in parts:
            if part.kind == "reservedword":
                body = body or part.word == "do"
                continue
            if body:
                self.under(self.guard(kind, node), part)
            elif kind != "for":
                self.visit(part)
        return False

    def visitfor(self, node, parts):
        return self._loop(node, parts, "for")

    def visitwhile(self, node, parts):
        return self._loop(node, parts, "while")

    def visituntil(self, node, parts):
        return self._loop(node, parts, "until")

    def visitpipeline(self, node, parts):
        """Visit each stage in order, telling every stage which command feeds its stdin."""
        previous: tuple[str, ...] = ()
        for part in parts:
            if part.kind == "pipe":
                continue
            first = len(self.commands)
            self.visit(part)
            if first < len(self.commands):
                if previous:
                    self.commands[first] = replace(self.commands[first], stdin_from=previous)
                previous = self.commands[first].argv
            else:
                previous = ()
        return False

    def visitcommand(self, node, parts):
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
                name, value = assignment.split("=", 1)
                self.env[name] = self.expand(value)
            return False
        if argv[0] in self.functions and argv[0] not in self.calling:  # a recursive call adds nothing new
            self.called.add(argv[0])
            self.calling.add(argv[0])
            first = len(self.commands)
            self.visit(self.functions[argv[0]][0])
            call_line = self.line_of(node.pos[0])  # report the call site: that is where the order is decided
            self.commands[first:] = [replace(c, line=call_line) for c in self.commands[first:]]
            self.calling.discard(argv[0])
            return False
        guards = tuple(self.guards) + tuple(self.after_exit)
        command = ShellCommand(tuple(argv), tuple(redirects), self.line_of(node.pos[0]), self.origin, guards=guards)
        self.commands.append(command)
        inner = inline_script(argv)
        if inner is not None:
            self.commands.extend(replace(c, guards=guards + c.guards)
                                 for c in parse_script(inner, origin=f"{command.where()} (-c)").commands)
        if argv[0] == "exit" and _exit_lets_start_go_on(argv, conditional=bool(guards)):
            self.after_exit.append(self.guard("exit?" if guards else "exit", node, " ".join(argv)))
        return False

    def uncalled_functions(self) -> None:
        """A function the script defines but never calls: its commands run on no path; say so, do not drop them."""
        self.after_exit = []  # the definition is what is reported, wherever the script ended
        for name, (body, line) in list(self.functions.items()):
            if name not in self.called:
                self.under(Guard("function", line, self.origin, name), body)


def _exit_lets_start_go_on(argv, conditional: bool) -> bool:
    """After `exit 0` / bare `exit` the start goes on without what follows. After `exit 1` (any literal non-zero
    status) inside a branch, systemd stops the start (a failed ExecStartPre fails the unit), so no path that reaches
    the container skips what follows; an unconditional exit of any status leaves what follows unreached."""
    if not conditional:
        return True
    status = argv[1] if len(argv) > 1 else "0"
    return not (status.isdigit() and int(status) % 256 != 0)


def inline_script(argv) -> str | None:
    """`sh -c '…'` / `bash -c '…'` carry a script of their own.

    Older `systemctl show` prints argv unquoted, so a script may arrive as several words: join them back.
    """
    argv = list(argv)
    if argv and argv[0].rsplit("/", 1)[-1] in ("sh", "bash", "dash") and "-c" in argv[1:-1]:
        return " ".join(argv[argv.index("-c") + 1:])
    return None


def commands_of(argv, origin: str, line: int = 0) -> list[ShellCommand]:
    """One command as run, plus what it runs inline (`sh -c`), in order."""
    command = ShellCommand(tuple(argv), (), line, origin)
    inner = inline_script(argv)
    return [command] + (parse_script(inner, origin=f"{command.where()} (-c)").commands if inner else [])


def parse_script(text: str, origin: str = "script") -> Script:
    """Every simple command in execution order; functions expanded where called; simple $VARs substituted; each with
    the conditions under which it may not run.

    A line bashlex cannot parse is recorded, not fatal: the rest of the script still counts. bashlex has no `case`
    (NotImplementedError): its arms are read line by line, each command guarded by the `case`.
    """
    script = Script(commands=[])
    walker = _Walker(origin, {}, {})
    for chunk_start, chunk in _chunks(text):
        first_line = text.count("\n", 0, chunk_start) + 1
        try:
            trees = bashlex.parse(chunk)
        # TypeError: bashlex's tokenizer tests `None in '<>'` at a digit word ending in a backslash (`0\`)
        except (bashlex.errors.ParsingError, NotImplementedError, AttributeError, IndexError, TypeError):
            if not _case_arms(walker, text, chunk_start, chunk):
                script.unparsed_lines.append(first_line)
            continue
        walker.text = "\n" * (first_line - 1) + chunk
        for tree in trees:
            walker.visit(_shift(tree, first_line - 1))
    walker.uncalled_functions()
    script.commands = walker.commands
    return script


_CASE = re.compile(r"\s*case\s.*\bin\s*$")
_ARM = re.compile(r"^\s*\(?[^()]*\)\s*")


def _case_arms(walker: _Walker, text: str, chunk_start: int, chunk: str) -> bool:
    """A `case … in … esac` chunk: each arm's commands under one `case` guard. False when it is not a case."""
    lines = chunk.splitlines()
    if not lines or not _CASE.match(lines[0]) or lines[-1].strip() not in ("esac", "esac;"):
        return False
    first_line = text.count("\n", 0, chunk_start) + 1
    guard = Guard("case", first_line, walker.origin, pos=chunk_start)
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
            walker.text = "\n" * (first_line + offset - 1)
            for tree in trees:
                walker.visit(_shift(tree, len(walker.text)))
    finally:
        walker.guards.remove(guard)
    return True


def _chunks(text: str):
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


def _shift(node, offset: int):
    """Move bashlex positions by `offset` so line numbers refer to the whole file."""
    if offset:
        for child in _walk(node):
            if hasattr(child, "pos"):
                child.pos = (child.pos[0] + offset, child.pos[1] + offset)
    return node


def _walk(node):
    yield node
    for value in vars(node).values():
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, bashlex.ast.node):
                yield from _walk(item)
