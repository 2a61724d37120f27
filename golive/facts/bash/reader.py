"""The bash reader's walk: bashlex's AST of a script visited in execution order, each simple command recorded with
the constructs that decide whether it runs (`if`, `case`, loops, `&&`/`||`, `&`, functions never called, `exit`,
`exec`, `return`). The rules are golive.facts.bash's docstring; EXIT traps and `set -e`: golive.facts.bash.exits;
other files: golive.facts.bash.files."""

from __future__ import annotations

import posixpath
import re
from dataclasses import replace
from typing import Any

from golive.facts.bash.conditions import (
    ALWAYS,
    CASE_ALL,
    NEEDS_READING,
    NEVER,
    branch_reach,
    known_status,
    known_status_of,
    tri_and,
    tri_not,
    tri_or,
)
from golive.facts.bash.exits import certain_failure
from golive.facts.bash.files import Files, inline_script, runs_script
from golive.facts.bash.formulas import TRUE, Formula, f_and, f_not, f_or
from golive.facts.bash.steps import Guard, ShellCommand, condition_of, located_at, unwrap
from golive.facts.bash.walk import CASE_NONE, CASE_WORDS, CdScope, Frame, Function

_GLOB = re.compile(r"[*?\[]")
_MOVES = ("cd", "pushd", "popd")


def _moves(node: Any) -> bool:
    """A `cd` (`pushd`, `popd`) in this shell within `node`: not one in a `( … )` subshell, a command substitution or a
    function defined there (it moves when called)."""
    kind = getattr(node, "kind", "")
    if kind in ("function", "commandsubstitution", "processsubstitution"):
        return False
    if kind == "compound" and node.list and getattr(node.list[0], "word", "") == "(":
        return False
    if kind == "command":
        words = [p for p in node.parts if p.kind == "word"]
        if words and words[0].word in _MOVES:
            return True
    for value in vars(node).values():
        for item in value if isinstance(value, list) else [value]:
            if hasattr(item, "kind") and _moves(item):
                return True
    return False


def _exit_lets_start_go_on(argv: list[str], conditional: bool) -> bool:
    """After `exit 0` / bare `exit` the start goes on without what follows. After `exit 1` (any literal non-zero
    status) inside a branch, systemd stops the start (a failed ExecStartPre fails the unit), so no path that reaches
    the container skips what follows; an unconditional exit of any status leaves what follows unreached."""
    if not conditional:
        return True
    status = argv[1] if len(argv) > 1 else "0"
    return not (status.isdigit() and int(status) % 256 != 0)


def _negated(condition: Formula | None) -> Formula | None:
    return None if condition is None else f_not(condition)


def _flat(parts: list[Any]) -> list[Any]:
    """An `if`'s parts in order. bashlex nests each `elif` after the second inside a reserved-word node whose `word`
    is the list of that branch's parts: spliced back in, so its commands are read like the others'."""
    out: list[Any] = []
    for part in parts:
        if part.kind == "reservedword" and isinstance(part.word, list):
            out += _flat(part.word)
        else:
            out.append(part)
    return out


class Walker(Files):
    """Walks the files of one shell process; a script it runs as its own process gets a walker of its own."""

    # --- constructs -----------------------------------------------------------------------------------------------

    def visitfunction(self, node: Any, name: Any, body: Any, parts: Any) -> bool:
        """A definition that never runs (in a dead branch, a loop that never turns) defines nothing: a call of the name
        is then a command bash does not find. One that may not run defines it on those paths only."""
        guards = self.current_guards()
        if any(g.never for g in guards):
            return False
        self.functions[name.word] = Function(body, self.line_of(node.pos[0]), self.origin, self.text, self.via, guards)
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
        cwd = (self.cwd, self.cwd_why, list(self.cwd_scopes))  # a `cd` in a subshell changes only its own directory
        self.traps = []  # its own EXIT traps, run when it exits
        try:
            for child in list_:
                self.visit(child)
            failed = certain_failure(self.ended[ended:]) or known_status(node) is False
            self.run_traps()
        finally:
            del self.ended[ended:]
            for frame, count in zip(self.frames, returns, strict=True):
                del frame.returns[count:]
            (self.errexit, self.errexit_sure, self.pipefail), self.env, self.traps = options, env, traps
            self.cwd, self.cwd_why, self.cwd_scopes = cwd
            self.changed()  # its variables and directory are the parent's again: later tests are new atoms
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
            formula: Formula = TRUE  # the status of the chain so far, as a formula
            op = ""
            for part in chain:
                if part.kind == "operator":
                    op = part.op
                    continue
                tested = part is not nodes[-1]
                guard = None
                if op:
                    runs = value if op == "&&" else tri_not(value)
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
                            condition=formula if op == "&&" else f_not(formula),
                        )
                self.checked += tested
                try:
                    self.under(guard, part)
                finally:
                    self.checked -= tested
                this = known_status(part)
                value = this if not op else tri_and(value, this) if op == "&&" else tri_or(value, this)
                status = self.status(part)
                formula = status if not op else f_and(formula, status) if op == "&&" else f_or(formula, status)
        finally:
            if bg is not None:
                self.guards.remove(bg)
                self.background = True  # it may change files at any time from here on

    def _branch_guard(
        self, reach: str, node: Any, pos: int, why: str, kind: str = "if", condition: Formula | None = None
    ) -> Guard | None:
        if reach == ALWAYS:
            return None
        return Guard(
            kind,
            self.line_of(node.pos[0]),
            self.origin,
            pos=pos,
            never=reach == NEVER,
            why=why if reach == NEVER else "",
            via=self.via,
            condition=condition,
        )

    def visitif(self, node: Any, parts: Any) -> bool:
        """The first condition always runs; each branch runs when its condition is reached and true, each later
        condition when every earlier one was false. A condition golive can decide decides it."""
        reach, why = ALWAYS, ""  # of the next condition (or else)
        section: list[Any] = []
        is_case = self.source_of(node.pos[0], node.pos[1]).startswith(f"if {CASE_NONE};")  # walk._case_as_if
        in_condition = False
        guard: Guard | None = None
        reached: Formula = TRUE  # when the next condition (or else) is reached, as a formula
        for part in _flat(parts):
            if part.kind == "reservedword":
                if part.word in ("if", "elif"):
                    in_condition, section = True, []
                    guard = self._branch_guard(reach, node, part.pos[0], why, condition=reached)
                elif part.word == "then":
                    value = known_status_of(section)
                    status = self.status_of(section)
                    taken, reached = f_and(reached, status), f_and(reached, f_not(status))
                    condition = (
                        self.source_of(section[0].pos[0], section[-1].pos[1]).rstrip(";").strip() if section else ""
                    )
                    decided = (
                        ""
                        if value is None
                        else f"an arm before it, `*)` at line {self.line_of(section[0].pos[0])}, matches every word"
                        if condition == CASE_ALL
                        else f"`{condition}` is always {'true' if value else 'false'}"
                    )
                    branch = branch_reach(reach, value)
                    guard = self._branch_guard(
                        branch,
                        node,
                        part.pos[0],
                        why if reach == NEVER else decided,
                        "case" if is_case else "if",
                        taken,
                    )
                    after = branch_reach(reach, tri_not(value))
                    why = why if reach == NEVER else decided
                    reach = after
                    in_condition = False
                elif part.word == "else":
                    guard = self._branch_guard(reach, node, part.pos[0], why, "case" if is_case else "if", reached)
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
        over literal words runs its body; `while false` / `until true` never do. What runs in a loop may run more
        than once: each test there is an atom of its own (and the loop may change what later tests read)."""
        self.changed()
        self.unstable += 1
        try:
            return self._loop_parts(node, parts, kind)
        finally:
            self.unstable -= 1
            self.changed()

    def _loop_parts(self, node: Any, parts: Any, kind: str) -> bool:
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
                    self._loop_moves(node, kind, guard, words)
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

    def _loop_moves(self, node: Any, kind: str, guard: Guard | None, words: list[Any]) -> None:
        """A loop whose body may run more than once and changes the directory (`cd`, `pushd`, `popd` in it): each pass
        starts where the last one left, so golive, reading the body once, does not know the directory in it or after
        it."""
        once = (guard is not None and guard.never) or (kind == "for" and guard is None and len(words) == 1)
        if not once and _moves(node):
            at = f"the `{kind}` loop at {located_at(self.origin, self.line_of(node.pos[0]), self.via)}"
            self.cwd, self.cwd_why = None, f"{at} changes the directory on each pass (not known in it or after it)"

    def _loop_guard(self, node: Any, kind: str, words: list[Any], condition: list[Any], after_in: bool) -> Guard | None:
        if kind == "for":
            if not after_in or any(NEEDS_READING.search(w.word) or _GLOB.search(w.word) for w in words):
                return self.guard(kind, node)
            if words:
                return None
            return self.guard(kind, node, never=True, why="its word list is empty")
        value = known_status_of(condition)
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
            if self.pipefail and any(known_status(p) is False for p in stages[:-1]):  # its status is that stage's
                self._errexit_stop(node, self.source_of(node.pos[0], node.pos[1]))
        finally:
            self.checked -= negated
        return False

    # --- simple commands ------------------------------------------------------------------------------------------

    def visitcommand(self, node: Any, parts: Any) -> bool:
        if parts and parts[0].kind == "word" and parts[0].word in CASE_WORDS:
            self.note_status(node, [])
            return False  # a `case` arm's condition (walk._case_as_if): nothing runs
        self.note_command(node, parts)
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
                if argv[0] == "export" and not word.startswith("-"):
                    self.exported.add(word.split("=", 1)[0])
        if argv[0] in self.functions and argv[0] not in self.calling:  # a recursive call adds nothing new
            self._call(argv[0], node)
            return False
        guards = self.current_guards()
        line = self.line_of(node.pos[0])
        command = ShellCommand(tuple(argv), tuple(redirects), line, self.origin, guards=guards, via=self.via)
        self.commands.append(command)
        never = command.never_runs
        target = unwrap(argv)
        if argv[0] == "set" and not never:
            self._set(argv, command)
        cd_fails = False
        if target[:1] in (["cd"], ["pushd"], ["popd"]) and not never and not any(g.kind == "&" for g in self.guards):
            cd_fails = self._cd(target, command)
        if argv[0] == "trap":
            self._trap(argv, command, node)
        inner = inline_script(target)
        failed = False  # a script run as its own process that exits non-zero on every path
        if inner is not None:
            failed = self._inline(inner, command)
        elif target[:1] in (["."], ["source"]) and len(target) > 1:
            self._source(target[1], command)
        else:
            run = runs_script(target)
            if run is not None:
                failed = self._run(run, command)
        if never or any(g.kind == "&" for g in self.guards):  # a background job is a subshell: it ends only itself
            return False
        # what follows runs only where this did not end the script: the negation of the conditions it ran on
        unless = _negated(condition_of(guards))
        if argv[0] == "exit" and _exit_lets_start_go_on(argv, conditional=bool(guards)):
            self.ended.append(
                self.guard("exit?" if guards else "exit", node, " ".join(argv), never=not guards, condition=unless)
            )
        elif argv[0] == "return" and self.frames:
            frame = self.frames[-1]
            own = tuple(g for g in guards if g not in frame.entry)
            frame.returns.append(
                self.guard(
                    "return?" if own else "return",
                    node,
                    " ".join(argv),
                    never=not own,
                    why=frame.what,
                    condition=_negated(condition_of(own)),
                )
            )
        elif argv[0] == "exec" and len(argv) > 1:
            self.ended.append(
                self.guard("exec?" if guards else "exec", node, " ".join(argv), never=not guards, condition=unless)
            )
        elif failed or cd_fails or known_status(node) is False:
            self._errexit_stop(node, command.text())
        return False

    def _cd(self, argv: list[str], command: ShellCommand) -> bool:
        """`cd DIR` (bash(1), `cd`): the directory relative paths resolve against from here on. A relative DIR is
        taken from the current one, no DIR is $HOME (root's: /root); a DIR golive cannot work out (a variable, `cd
        -`, `popd`), or a `cd` that may not run, leaves the current directory unknown from here on. A DIR that does not
        exist on the station: the `cd` fails and bash stays where it was (True: it fails, for `set -e`)."""
        at = f"the `{' '.join(argv)}` at {command.where()}"
        args = [a for a in argv[1:] if a not in ("-L", "-P", "-e", "-@", "--")]
        target = args[0] if args else (self.env.get("HOME", "/root") if argv[0] == "cd" else None)
        before = self.cwd
        if target is None or target == "-" or NEEDS_READING.search(target):
            self.cwd, self.cwd_why = None, f"golive cannot work out the directory of {at}"
        elif target.startswith("/") or self.cwd is not None:
            went = "/" + posixpath.normpath(posixpath.join(self.cwd or "/", target)).lstrip("/")
            if self.ctx.is_dir is not None and not self.ctx.is_dir(went):
                return True  # bash: "cd: …: No such file or directory"; the directory stays
            self.cwd, self.cwd_why = went, at
        else:
            self.cwd_why = f"{at}, from a directory golive does not know" + (
                f" ({self.cwd_why})" if self.cwd_why else ""
            )
        # inside a branch, a loop, on the right of && or ||, after a `return` that may end its function or sourced
        # file first: it may not run. What follows it there runs after it (its directory holds); once out, the
        # directory is known only where it is the same either way (left_scope)
        returns = [n for n, frame in enumerate(self.frames, 1) if frame.returns]
        if self.guards or returns:
            self.cwd_scopes.append(CdScope(len(self.guards), max(returns, default=0), before, at))
        return False

    def _assign(self, assignment: str) -> None:
        name, value = assignment.split("=", 1)
        self.env[name] = self.expand(value)

    def _call(self, name: str, node: Any) -> None:
        func = self.functions[name]
        self.called.add(name)
        self.calling.add(name)
        first = len(self.commands)
        self.frames.append(Frame(f"function `{name}`", self.current_guards()))
        missing = [g for g in func.guards if g not in self.current_guards()]  # defined on some paths only
        self.guards.extend(missing)
        try:
            with self._in(func.origin, func.text, func.via):
                self.visit(func.body)
        finally:
            del self.guards[len(self.guards) - len(missing) :]
            self.frames.pop()
            self.left_scope()
            self.calling.discard(name)
            self.changed()  # its `local` variables are gone again: later tests are new atoms
        call_line = self.line_of(node.pos[0])  # report the call site: that is where the order is decided
        self.commands[first:] = [
            replace(c, line=call_line, origin=self.origin, via=self.via)
            if (c.origin, c.via) == (func.origin, func.via)
            else c
            for c in self.commands[first:]
        ]
