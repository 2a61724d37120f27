"""Shell scripts (prestart) as an ordered list of simple commands, so checks reason about order, not words."""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace

import bashlex
import bashlex.ast
import bashlex.errors


@dataclass(frozen=True)
class ShellCommand:
    argv: tuple[str, ...]
    redirects: tuple[tuple[str, str], ...] = ()
    line: int = 0
    origin: str = ""  # which file or unit line it came from, for messages
    stdin_from: tuple[str, ...] = ()  # argv of the command piped into this one (`echo 1 | tee …`)

    def where(self) -> str:
        return f"{self.origin}:{self.line}" if self.line else self.origin

    def text(self) -> str:
        out = " ".join(shlex.quote(a) for a in self.argv)
        return out + "".join(f" {op} {target}" for op, target in self.redirects)

    @property
    def program(self) -> str:
        return self.argv[0].rsplit("/", 1)[-1] if self.argv else ""

    # --- what a command does, in the terms the recipe uses ----------------------------------------------------------

    def drops_page_cache(self) -> bool:
        """`echo 1|3 > /proc/sys/vm/drop_caches`, `echo 1|3 | tee /proc/sys/vm/drop_caches`, `sysctl vm.drop_caches=1|3`.

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
    def __init__(self, text: str, origin: str, env: dict[str, str], functions: dict):
        self.text, self.origin, self.env, self.functions = text, origin, env, functions
        self.commands: list[ShellCommand] = []

    def line_of(self, pos: int) -> int:
        return self.text.count("\n", 0, pos) + 1

    def expand(self, word: str) -> str:
        return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: self.env.get(m[1], m[0]), word)

    def visitfunction(self, node, name, body, parts):
        self.functions[name.word] = body
        return False  # the body runs where the function is called, not where it is defined

    def visitcommandsubstitution(self, node, command):
        return False

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
        if argv[0] in self.functions:
            first = len(self.commands)
            self.visit(self.functions[argv[0]])
            call_line = self.line_of(node.pos[0])  # report the call site: that is where the order is decided
            self.commands[first:] = [replace(c, line=call_line) for c in self.commands[first:]]
            return False
        command = ShellCommand(tuple(argv), tuple(redirects), self.line_of(node.pos[0]), self.origin)
        self.commands.append(command)
        inner = inline_script(argv)
        if inner is not None:
            self.commands.extend(parse_script(inner, origin=f"{command.where()} (-c)").commands)
        return False


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
    """Every simple command in execution order; functions expanded where called; simple $VARs substituted.

    A line bashlex cannot parse is recorded, not fatal: the rest of the script still counts.
    """
    env: dict[str, str] = {}
    functions: dict = {}
    script = Script(commands=[])
    for chunk_start, chunk in _chunks(text):
        try:
            trees = bashlex.parse(chunk)
        # TypeError: bashlex's tokenizer tests `None in '<>'` at a digit word ending in a backslash (`0\`)
        except (bashlex.errors.ParsingError, NotImplementedError, AttributeError, IndexError, TypeError):
            script.unparsed_lines.append(text.count("\n", 0, chunk_start) + 1)
            continue
        offset_text = "\n" * text.count("\n", 0, chunk_start) + chunk
        walker = _Walker(offset_text, origin, env, functions)
        for tree in trees:
            walker.visit(_shift(tree, len(offset_text) - len(chunk)))
        script.commands.extend(walker.commands)
    return script


def _chunks(text: str):
    """Whole script if it parses; else one top-level statement group at a time (split at blank-depth lines)."""
    try:
        bashlex.parse(text)
        yield 0, text
        return
    except Exception:  # noqa: BLE001 - fall back to line groups below
        pass
    start, depth, buf = 0, 0, []
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
