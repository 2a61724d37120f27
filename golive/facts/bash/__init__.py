"""The bash reader: a shell script (prestart) as the ordered list of simple commands it runs, so checks reason about
order, not words.

Each command also carries the conditions under which it may NOT run (bash(1), SHELL GRAMMAR): the body of `if`,
`case`, `for`, `while`/`until`; the right-hand side of `&&`/`||`; a function that is never called; anything after an
`exit` or `exec` that lets the start go on, or after a `return` from its function or sourced file; anything started in
the background with `&`. A condition golive can decide without the station (`true`, `false`, `:`, `[ 1 = 0 ]`,
`test a != a`, a `for` over literal words) turns "may not run" into "never runs", or into no condition at all.

golive follows what the script reads or runs from other files, runs its EXIT traps last and stops it where `set -e`
does. The package holds the reader, a module per part:
- steps: one command as the reader gives it (ShellCommand, its Guards, the Via it was reached by), the Script and the
  files it could not follow (Unfollowed);
- conditions: the conditions golive decides without the station, in three-valued logic;
- formulas: each path's condition as a formula over atoms (one per test), so the paths to a step are judged together
  (their disjunction a tautology: it runs on every path) and a condition that never holds is seen;
- walk: the reader's state (where it is, the functions and traps of one shell) and bashlex a statement group at a time;
- exits: EXIT traps and `set -e`; files: `source`/`.`, scripts run as their own process, `sh -c`;
- reader: the walk itself, bashlex's AST visited in execution order;
- this module: the entry points (parse_script, commands_of, script_run_by).

Its public API is `__all__`; the names its modules share among themselves stay inside the package.
"""

from __future__ import annotations

from collections.abc import Callable

from golive.facts import docker
from golive.facts.bash.exits import shebang_errexit
from golive.facts.bash.files import SYSTEMD_PATH, inline_script, shebang_interpreter
from golive.facts.bash.reader import Walker
from golive.facts.bash.steps import (
    DROP_CACHES,
    Guard,
    Script,
    ShellCommand,
    Unfollowed,
    Via,
    always_run,
    always_run_before,
)
from golive.facts.bash.walk import SHELLS, Context, Reader

__all__ = [
    "DROP_CACHES",
    "SHELLS",
    "SYSTEMD_PATH",
    "Guard",
    "Reader",
    "Script",
    "ShellCommand",
    "Unfollowed",
    "Via",
    "always_run",
    "always_run_before",
    "commands_of",
    "parse_script",
    "script_run_by",
]


def commands_of(
    argv: list[str] | tuple[str, ...], origin: str, line: int = 0, cwd: str | None = None, cwd_why: str = ""
) -> list[ShellCommand]:
    """One command as run, plus what it runs inline (`sh -c`), in order."""
    command = ShellCommand(tuple(argv), (), line, origin)
    inner = inline_script(argv)
    if not inner:
        return [command]
    return [command, *parse_script(inner, origin=f"{command.where()} (-c)", cwd=cwd, cwd_why=cwd_why).commands]


def parse_script(
    text: str,
    origin: str = "script",
    read: Reader | None = None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    cwd_why: str = "",
    is_dir: Callable[[str], bool] | None = None,
) -> Script:
    """Every simple command in execution order; functions expanded where called; simple $VARs substituted (`env`: the
    environment the script starts with, e.g. the one systemd gives the unit's commands); each with the conditions
    under which it may not run. `cwd`: the directory it starts in (where systemd runs it), `cwd_why` why that one, for
    messages; `is_dir`: whether a folder exists on the station (a `cd` to one that does not fails, and stays).

    With `read` (a station path → its text, None when it is not a file there), the files the script sources or runs
    are read too (see golive.facts.bash.files): their commands in place, with their own file and line, and a finding
    for each file that could not be. A line bashlex cannot parse is recorded, not fatal: the rest of the script still
    counts.
    """
    ctx = Context(read, stack=[origin], is_dir=is_dir)
    shell = shebang_interpreter(text) or "bash"
    walker = Walker(
        ctx,
        origin,
        script0=origin,
        shell=shell,
        errexit=f"the `#!` line's -e ({origin}:1)" if shebang_errexit(text) else "",
    )
    walker.env.update(env or {})
    walker.exported.update(env or {})
    walker.cwd, walker.cwd_why = cwd, cwd_why or ("" if cwd else "the directory the script starts in was not given")
    unparsed = walker.read_text(text)
    walker.finish()
    return Script(commands=walker.commands, unparsed_lines=unparsed, findings=ctx.findings)


def script_run_by(
    argv: list[str] | tuple[str, ...],
    read: Reader,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    cwd_why: str = "",
) -> tuple[str, Script] | None:
    """The shell script a command runs, read from the station with `read`: `/path/run.sh …` whose `#!` line names a
    shell, or `bash /path/run.sh …`; its path and its commands (the files it sources or runs read too). None for
    anything else: a binary, a `python3` script, `sh -c '…'` (commands_of reads that), a file that is not there."""
    if not argv:
        return None
    program = argv[0].rsplit("/", 1)[-1]
    if program in docker.CLIS:  # read by their arguments (docker_verb), never as a file
        return None
    if program in SHELLS:
        rest = list(argv[1:])
        while rest and rest[0].startswith("-") and rest[0] not in ("-c", "--"):
            rest = rest[1:]  # `bash -e run.sh`
        rest = rest[1:] if rest[:1] == ["--"] else rest
        if not rest or rest[0] == "-c":
            return None
        path, named_shell = rest[0], True
    else:
        path, named_shell = argv[0], False
    if not path.startswith("/"):
        return None
    try:
        text = read(path)
    except UnicodeDecodeError:  # a binary: not a script
        return None
    if text is None:
        return None
    if not named_shell and shebang_interpreter(text) not in SHELLS:
        return None
    return path, parse_script(text, origin=path, read=read, env=env, cwd=cwd, cwd_why=cwd_why)
