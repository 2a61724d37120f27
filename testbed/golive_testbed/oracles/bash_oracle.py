"""bash as the oracle of golive's prestart reader: each generated prestart (bash_cases) is run by bash in a sandbox
of its own, in both worlds the station may be in ($X 0 and 1), with every step that matters (`sync`, the drop of
the page cache, `docker logs`, `docker rm`) recording that it ran, from which file and line, in which order; golive
reads the same files (golive.facts.bash.parse_script, as the prestart checks read a station) and must say:

- in the worlds where the prestart ends well (exit 0: systemd starts the container), a step golive says "runs" ran
  in each; one it says "never runs" ran in none; one it says "may not run" did not run in both (a step in the
  background is not judged: bash's order there is a race);
- every step bash ran is one golive lists, at the same file and line (a step in a called function at the call, as
  golive reports it; an EXIT trap's at the `trap` line and those below it);
- the steps golive says run come in the order bash ran them: golive's list of them is a subsequence of every step
  bash ran, each time it ran (a step also reached earlier on a path golive says may not run, a file sourced on a
  condition and then for sure, ran first there: golive's order is about where it runs for sure).

Where golive said it could not follow a file (a path it cannot work out), the case is counted as not checked by
golive, apart from the agreements.

    report = run(count=500, seed=3)
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from golive.facts import bash
from golive_testbed.oracles.bash_cases import DC, PRESTART, ScriptCase, generate
from golive_testbed.oracles.reduce import Agreement, Disagreement, reduce_parts

# sourced by every bash the prestart starts (BASH_ENV): `__golive_run KIND CMD…` records where CMD ran, then runs it.
# The place is the one golive reports: in a function, the call's (climbing every function frame); in an EXIT trap,
# the `trap` line and those below it (__GOLIVE_TRAP, set by the trap's own action, is the `trap` line).
RECORDER = r"""
__GOLIVE_START=$PWD
declare -A __golive_where
# `.`/`source` note where a relative path was found (the directory then), for the steps of that file: keyed by the
# depth of the stack the file is read at, not by its name (a file may source another of the same relative name, which
# may not exist, from another directory)
source() { [ "${1#/}" = "$1" ] && __golive_where[$(( ${#BASH_SOURCE[@]} + 1 ))]=$PWD/$1; builtin source "$@"; }
.() { [ "${1#/}" = "$1" ] && __golive_where[$(( ${#BASH_SOURCE[@]} + 1 ))]=$PWD/$1; builtin . "$@"; }
__golive_run() {
  local kind=$1 i=1 at=1 file=${BASH_SOURCE[1]} line=${BASH_LINENO[0]} last=${#FUNCNAME[@]}
  shift
  # in an EXIT trap: the frames below the trap's own are the functions that were running when the shell exited
  # (FUNCNAME is empty at the top level, where it has `main` seen from a function)
  if [ -n "${__GOLIVE_TRAP:-}" ]; then
    last=$(( ${#FUNCNAME[@]} - (${__GOLIVE_TRAP_DEPTH:-0} > 0 ? ${__GOLIVE_TRAP_DEPTH:-0} : 1) ))
  fi
  while [ $i -lt $last ] && [ "${FUNCNAME[$i]}" != source ] && [ "${FUNCNAME[$i]}" != main ]; do
    file=${BASH_SOURCE[$((i+1))]} line=${BASH_LINENO[$i]} at=$((i+1))
    i=$((i+1))
  done
  if [ -n "${__GOLIVE_TRAP:-}" ] && [ $i -ge $last ]; then
    file=$__GOLIVE_TRAP_FILE line=$((__GOLIVE_TRAP + line - 1))
  fi
  if [ "${file#/}" = "$file" ]; then file=${__golive_where[$(( ${#BASH_SOURCE[@]} - at ))]:-$__GOLIVE_START/$file}; fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$kind" "$PWD" "$file" "$line" "$BASHPID" >> "$GOLIVE_TRACE"
  "$@"
}
"""
STUBS = {
    # docker: the container exists in world X=1; everything else succeeds and prints nothing
    "docker": '#!/bin/sh\n[ "$1 $2" = "container inspect" ] && { [ "$X" = 1 ]; exit $?; }\nexit 0\n',
    "sync": "#!/bin/sh\nexit 0\n",
    "sysctl": "#!/bin/sh\nexit 0\n",
    # sudo: runs the command (its options skipped), as root already
    "sudo": '#!/bin/sh\nwhile [ $# -gt 0 ]; do case "$1" in -u|-g) shift 2 ;; -*) shift ;; *) break ;; esac; done\n'
    'exec "$@"\n',
}
_MARK = re.compile(r"@@(sync|drop|logs|rm) ")
_TRAP = re.compile(r"^(\s*)trap '([^']*)' EXIT\s*$")


def _for_golive(text: str, folder: str) -> str:
    return _MARK.sub("", text).replace("{D}", folder)


def _for_bash(text: str, folder: str, path: str) -> str:
    lines = []
    for number, line in enumerate(text.split("\n"), 1):
        line = _MARK.sub(lambda m: f"__golive_run {m.group(1)} ", line)
        trap = _TRAP.match(line)
        if trap:  # the action knows it runs as the trap set at this line of this file
            depth = "${FUNCNAME[0]+${#FUNCNAME[@]}}"  # FUNCNAME is unset at the top level (and `set -u` minds)
            mark = f"__GOLIVE_TRAP={number} __GOLIVE_TRAP_FILE={path} __GOLIVE_TRAP_DEPTH={depth}"
            line = f"{trap.group(1)}trap '{mark}; {trap.group(2)}' EXIT"
        lines.append(line)
    return "\n".join(lines).replace(DC, "{D}/proc/sys/vm/drop_caches").replace("{D}", folder)


def _kind(command: bash.ShellCommand) -> str | None:
    if command.writes_drop_caches():
        return "drop"
    if command.is_sync():
        return "sync"
    if command.docker_targets("logs"):
        return "logs"
    if command.docker_targets("rm"):
        return "rm"
    return None


Event = tuple[str, str, int]  # kind, file, line


def golive_reading(case: ScriptCase, folder: str) -> tuple[list[tuple[Event, str, bool]], list[Event], list[str]]:
    """golive's steps: (kind, file, line), its verdict, whether it is in the background; and the files golive said it
    could not follow."""
    files = {p.replace("{D}", folder): _for_golive(t, folder) for p, t in case.files}
    main = PRESTART.replace("{D}", folder)
    start = case.start.replace("{D}", folder)
    script = bash.parse_script(
        files[main],
        origin=main,
        read=files.get,
        env={"PATH": bash.SYSTEMD_PATH},
        cwd=start,
        cwd_why="where systemd starts it",
        is_dir=os.path.isdir,
    )
    # one step reached on several paths (a file run twice, in a loop and after it, in each arm of a `case`) is one
    # place to bash: it runs where golive says one of its commands runs on every path (bash.always_run: the paths'
    # conditions together cover every case), else the best of golive's verdicts for it holds; each place golive says
    # one command runs for sure comes in the order
    best: dict[Event, tuple[str, bool]] = {}
    reached: dict[Event, list[bash.ShellCommand]] = {}
    rank = {"runs": 0, "may not run": 1, "never runs": 2}
    sure: list[Event] = []
    for command in script.commands:
        kind = _kind(command)
        if kind is not None:
            event = (kind, command.origin, command.line)
            reached.setdefault(event, []).append(command)
            said = (command.verdict(), any(g.kind == "&" for g in command.guards))
            if event not in best or rank[said[0]] < rank[best[event][0]]:
                best[event] = said
            if said == ("runs", False):
                sure.append(event)
    for event, commands in reached.items():
        if best[event][0] != "runs" and bash.always_run(commands):
            best[event] = ("runs", False)
    steps = [(event, verdict, background) for event, (verdict, background) in best.items()]
    return steps, sure, [f.describe() for f in script.findings if f.unknown and not f.never]


def bash_run(case: ScriptCase, folder: str, world: str) -> tuple[list[Event], bool]:
    """The steps bash ran, in order (each time it ran), in world X=`world`, and whether the prestart ended well
    (exit 0: systemd goes on to start the container)."""
    root = Path(folder)
    trace = root / f"trace-{world}"
    trace.unlink(missing_ok=True)
    env = {
        "PATH": f"{folder}/bin:{bash.SYSTEMD_PATH}",
        "BASH_ENV": f"{folder}/.golive-env.sh",
        "GOLIVE_TRACE": str(trace),
        "X": world,
        "HOME": "/root",
        "LANG": "C.UTF-8",
    }
    main = PRESTART.replace("{D}", folder)
    start = case.start.replace("{D}", folder)
    try:
        done = subprocess.run([main], cwd=start, env=env, capture_output=True, timeout=20, check=False)
        ok = done.returncode == 0
    except subprocess.TimeoutExpired:
        ok = False
    events: list[Event] = []
    for line in trace.read_text().splitlines() if trace.exists() else []:
        kind, pwd, file, number, _ = line.split("\t")
        path = posixpath.normpath(file if file.startswith("/") else posixpath.join(pwd, file))
        events.append((kind, path, int(number)))
    return events, ok


def _lay_out(case: ScriptCase, folder: str) -> None:
    root = Path(folder)
    for sub in ("work", "usr/local/lib/g", "usr/local/sbin", "logs", "bin", "proc/sys/vm"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "flag1").write_text("")
    (root / ".golive-env.sh").write_text(RECORDER)
    for name, text in STUBS.items():
        stub = root / "bin" / name
        stub.write_text(text)
        stub.chmod(0o755)
    for path, text in case.files:
        target = Path(path.replace("{D}", folder))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_for_bash(text, folder, str(target)))
        target.chmod(0o755)


def compare(case: ScriptCase) -> tuple[Disagreement[ScriptCase] | None, bool]:
    """The first place golive and bash differ on this case (None where they agree), and whether golive said it
    could not follow a file."""
    folder = tempfile.mkdtemp(prefix="golive-bash-oracle-")
    try:
        _lay_out(case, folder)
        steps, sure, unknown = golive_reading(case, folder)
        runs = [bash_run(case, folder, x) for x in ("0", "1")]
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    def local(event: Event) -> str:
        kind, path, line = event
        return f"{kind} at {path.replace(folder, '{D}')}:{line}"

    if unknown:
        return None, True
    listed = {event for event, _, _ in steps}
    worlds = [ran for ran, _ in runs]
    for world, ran in zip(("0", "1"), worlds, strict=True):
        for event in ran:
            if event not in listed:
                return Disagreement(
                    "a step bash ran that golive does not list", "not listed", f"{local(event)} ran (X={world})", case
                ), False
    # golive's verdicts are about the start: "runs" is on every path that reaches it (bash exits 0 and systemd starts
    # the container); a world where the prestart fails starts nothing, so it says nothing either way
    started = [ran for ran, ok in runs if ok]
    for event, verdict, background in steps:
        count = sum(event in ran for ran in started)
        if background:
            continue
        said = {
            "runs": count == len(started),
            "never runs": count == 0,
            "may not run": count < 2 or len(started) < 2,
        }[verdict]
        if not said:
            return Disagreement(
                "whether a step runs",
                f"{local(event)} {verdict}",
                f"ran in {count} of the {len(started)} worlds where the prestart ends well",
                case,
            ), False
    for world, ran in [(w, r) for w, (r, ok) in zip(("0", "1"), runs, strict=True) if ok]:
        if not _in_order(sure, ran):
            order = [e for e in ran if e in sure]
            return Disagreement(
                "the order the steps run in",
                ", ".join(local(e) for e in sure),
                f"X={world}: " + ", ".join(local(e) for e in order),
                case,
            ), False
    return None, False


def _in_order(steps: list[Event], ran: list[Event]) -> bool:
    """`steps` come in `ran` in this order (each one a later run than the one before)."""
    runs = iter(ran)
    return all(any(r == step for r in runs) for step in steps)


def run(count: int, seed: int, reduce: bool = True, say: Callable[[str], None] | None = None) -> Agreement[ScriptCase]:
    started = time.monotonic()
    report: Agreement[ScriptCase] = Agreement("golive's prestart reader", f"bash {_bash_version()}")
    for case in generate(count, seed):
        found, unknown = compare(case)
        report.record(found, abstained=unknown)
    if reduce:
        for found in report.disagreements[:5]:
            found.reduced = reduced(found)
    report.seconds = time.monotonic() - started
    return report


def reduced(found: Disagreement[ScriptCase]) -> ScriptCase:
    def still(candidates: list[ScriptCase]) -> list[bool]:
        verdicts = []
        for candidate in candidates:  # a candidate bash cannot parse is no smaller form of the same input
            d = compare(candidate)[0] if _parses(candidate) else None
            verdicts.append(d is not None and _signature(d) == _signature(found))
        return verdicts

    return found.case.rebuilt(reduce_parts(found.case.parts(), found.case.rebuilt, still))


def _signature(found: Disagreement[ScriptCase]) -> tuple[str, str, str]:
    """The same disagreement, wherever its lines moved: what, and each side's words without line numbers."""
    return found.what, re.sub(r":\d+", "", found.golive), re.sub(r":\d+", "", found.tool)


def _parses(case: ScriptCase) -> bool:
    """`bash -n` accepts every file of the case."""
    for _, text in case.files:
        done = subprocess.run(["bash", "-n"], input=_MARK.sub("", text), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return False
    return True


def _bash_version() -> str:
    done = subprocess.run(["bash", "-c", "echo $BASH_VERSION"], capture_output=True, text=True, check=False)
    return done.stdout.strip()
