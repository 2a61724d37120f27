"""The files a shell script reads or runs, followed by the bash reader: `source`/`.` in the same shell, scripts run
to completion as their own process, `sh -c '…'` inline.

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
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, replace

from golive.facts.bash.conditions import NEEDS_READING
from golive.facts.bash.exits import Exits, shebang_errexit
from golive.facts.bash.steps import MAX_DEPTH, Guard, ShellCommand, Unfollowed, Via
from golive.facts.bash.walk import SHELLS, Frame

# the PATH systemd 252 gives a service's commands (Debian's build: src/basic/path-util.h DEFAULT_PATH_SPLIT_USR)
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class ScriptRun:
    """A script run as its own process: which file, by which shell, with `-e`?"""

    path: str
    shell: str | None  # the shell named on the command line (`bash FILE`); None: the file's own #! line
    errexit: bool


def runs_script(argv: list[str]) -> ScriptRun | None:
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
        return ScriptRun(args[0], program, errexit) if args else None
    if "/" in argv[0] and argv[0].endswith((".sh", ".bash")):
        return ScriptRun(argv[0], None, False)
    return None


def shebang_interpreter(text: str) -> str | None:
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


def inline_script(argv: list[str] | tuple[str, ...]) -> str | None:
    """`sh -c '…'` / `bash -c '…'` carry a script of their own.

    Older `systemctl show` prints argv unquoted, so a script may arrive as several words: join them back.
    """
    argv = list(argv)
    if argv and argv[0].rsplit("/", 1)[-1] in SHELLS and "-c" in argv[1:-1]:
        return " ".join(argv[argv.index("-c") + 1 :])
    return None


class Files(Exits):
    """The walk's other files: read in place (sourced), or by a walker of their own (run), or a finding."""

    def _finding(
        self, kind: str, how: str, path: str, command: ShellCommand, after: str = "", resolved: str = ""
    ) -> None:
        self.ctx.findings.append(
            Unfollowed(kind, how, path, command.line, command.origin, command.via, command.guards, after, resolved)
        )

    def _resolved(self, how: str, path: str, command: ShellCommand) -> tuple[str, str] | None:
        """Where bash finds a relative `path` (bash(1), `.`: a name without a slash is looked up in $PATH, then, unless
        POSIX, in the current directory; a script given to `bash` is opened in the current directory, then looked up
        in $PATH; any other relative path is the current directory's): the absolute path and how it was found, for
        the messages. None with a finding where golive cannot tell (the current directory is not known)."""
        if "/" not in path:
            here = [] if how == "sources" and self.posix else [path]
            searched = [f"{d.rstrip('/') or ''}/{path}" for d in self.env.get("PATH", SYSTEMD_PATH).split(":") if d]
            for candidate in searched if how == "sources" else []:
                if self._exists(candidate):
                    return candidate, f"found in $PATH ({self.env.get('PATH', SYSTEMD_PATH)})"
            if here and self.cwd is None:
                self._finding("no-slash" if how == "sources" else "relative", how, path, command, self.cwd_why)
                return None
            if here:
                resolved = posixpath.join(self.cwd or "/", path)
                if self._exists(resolved) or how == "sources":
                    return resolved, self._cwd_said(resolved, "not in $PATH, so ")
            for candidate in searched if how != "sources" else []:
                if self._exists(candidate):
                    return candidate, f"found in $PATH ({self.env.get('PATH', SYSTEMD_PATH)})"
            if not here:
                return searched[0] if searched else path, f"not found in $PATH ({self.env.get('PATH', SYSTEMD_PATH)})"
            return posixpath.join(self.cwd or "/", path), self._cwd_said(posixpath.join(self.cwd or "/", path), "")
        if self.cwd is None:
            self._finding("relative", how, path, command, self.cwd_why)
            return None
        resolved = posixpath.normpath(posixpath.join(self.cwd, path))
        return resolved, self._cwd_said(resolved, "")

    def _cwd_said(self, resolved: str, lead: str) -> str:
        return f"{lead}relative to the current directory {self.cwd} ({self.cwd_why}), that is {resolved}"

    def _exists(self, path: str) -> bool:
        if self.ctx.read is None:
            return False
        try:
            return self.ctx.read(path) is not None
        except UnicodeDecodeError:
            return True

    def _readable(self, how: str, path: str, command: ShellCommand) -> str | None:
        """The file's text, or None with a finding saying why it was not read."""
        if self.ctx.read is None:
            return None
        if NEEDS_READING.search(path):
            self._finding("unresolved", how, path, command)
            return None
        resolved_as = ""
        if not path.startswith("/"):
            found = self._resolved(how, path, command)
            if found is None:
                return None
            written, (path, resolved_as) = path, found
            resolved_as = f"`{written}` {resolved_as}"
            self.resolved_paths[(command.origin, command.line, written)] = (path, resolved_as)
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
            self._missing(how, path, command, resolved_as)
        return text

    def _missing(self, how: str, path: str, command: ShellCommand, resolved_as: str = "") -> None:
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
        self._finding("missing", how, path, command, after, resolved_as)
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
            self.changed()  # a file golive did not read may have changed anything
            return
        path = self.resolved_paths.get((command.origin, command.line, path), (path, ""))[0]
        self.ctx.stack.append(path)
        self.frames.append(Frame(f"the sourced file {path}", self.current_guards()))
        try:
            with self._in(path, "", command.via + (Via("sourced", command.origin, command.line, path),)):
                self.read_text(text)
        finally:
            self.frames.pop()
            self.ctx.stack.pop()
            self.left_scope()

    def _run(self, run: ScriptRun, command: ShellCommand) -> bool:
        """FILE run as its own process: its commands, under the conditions of the line that runs it. True when it
        exits non-zero on every path."""
        text = self._readable("runs", run.path, command)
        if text is None:
            return False
        run = replace(run, path=self.resolved_paths.get((command.origin, command.line, run.path), (run.path, ""))[0])
        interpreter = shebang_interpreter(text)
        shell = run.shell or interpreter or "bash"  # no #! line: bash runs it itself (ENOEXEC)
        if shell not in SHELLS:
            self._finding("not-shell", "runs", run.path, command, interpreter or shell)
            return False
        errexit = (
            f"`{shell} -e` ({command.where()})"
            if run.errexit
            else f"the `#!` line's -e ({run.path}:1)"
            if run.shell is None and shebang_errexit(text)
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
        child = type(self)(self.ctx, origin, script0=origin, via=via, shell=shell, errexit=errexit)
        child.cwd, child.cwd_why = self.cwd, self.cwd_why  # a child process starts in its parent's directory
        child.env.update({k: v for k, v in self.env.items() if k == "PATH" or k in self.exported})
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
