"""How a shell ends, in the bash reader: its EXIT traps run last, `set -e` stops it at a command that always fails.

Two rules of bash decide what runs, and when:
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
from typing import Any

from golive.facts.bash.steps import Guard, ShellCommand, Via
from golive.facts.bash.walk import Trap, WalkerBase

# what, passed after an EXIT trap is set, keeps it from running before the start: an `exec` replaces the shell (it
# never exits, so never runs the trap); a failure that stops the script fails the start (the trap runs, the container
# does not); a cycle never gets to the end. An `exit` does not: it runs the trap.
_STOPS_TRAP = ("exec", "exec?", "fails", "errexit", "cycle")


def _exit_status_fails(text: str) -> bool:
    """`exit 1` (a literal non-zero status); `exit`, `exit 0`, `exit $rc`: not certain."""
    words = text.split()
    return len(words) > 1 and words[1].isdigit() and int(words[1]) % 256 != 0


def certain_failure(ended: list[Guard]) -> bool:
    """A shell that passed one of these on every path exits with a non-zero status."""
    return any(
        g.never and (g.kind in ("errexit", "fails") or (g.kind == "exit" and _exit_status_fails(g.detail)))
        for g in ended
    )


def _condition(spec: str) -> str:
    """`exit`, `0`, `EXIT` → EXIT; `SIGINT`, `int` → INT (bash(1), trap: case insensitive, SIG prefix optional)."""
    name = spec.upper()
    return "EXIT" if name in ("0", "EXIT") else name.removeprefix("SIG")


_ERREXIT_SET = re.compile(r"-[a-zA-Z]*e[a-zA-Z]*")
_ERREXIT_UNSET = re.compile(r"\+[a-zA-Z]*e[a-zA-Z]*")
_LONG_OPTION = re.compile(r"[-+][a-zA-Z]*o")  # the next word names an option (bash(1), `set -o option-name`)


def shebang_errexit(text: str) -> bool:
    first = text.split("\n", 1)[0]
    return first.startswith("#!") and any(_ERREXIT_SET.fullmatch(w) for w in first[2:].split()[1:])


class Exits(WalkerBase):
    """The walk's EXIT traps (set, reset, run when the shell exits) and its `set -e`."""

    def finish(self) -> None:
        """The shell exits: its EXIT traps run, last. Then a function the script defines but never calls (the traps
        did not call it either): its commands run on no path; say so, do not drop them."""
        self.failed = certain_failure(self.ended)
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
            saved = self.guards, self.ended, self.frames, self.exiting, self.cwd_scopes
            self.guards, self.ended, self.frames, self.exiting = list(dict.fromkeys(guards)), [], [], True
            self.cwd_scopes = []
            self.unstable += 1  # it runs when the shell exits, wherever that is: its tests are atoms of their own
            try:
                with self._in(trap.origin, "", trap.via + (Via("trap", trap.origin, trap.line, trap.on),)):
                    self.read_text("\n" * (trap.line - 1) + trap.action)  # its commands at the `trap` line
            finally:
                self.guards, self.ended, self.frames, self.exiting, self.cwd_scopes = saved
                self.unstable -= 1

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
        if action not in ("", "-") and names - {"EXIT"}:
            self.unstable += 1  # a trap on a signal or ERR may run between any two commands: no test is stable after
        if action not in ("", "-"):
            self.traps.append(
                Trap(action, on, names, command.line, command.origin, command.via, command.guards, len(self.ended))
            )

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
