"""The prestart as ordered commands: order, functions, variables, sh -c, the files it sources or runs."""

import os
import shutil
import subprocess

import pytest

from golive.facts.shell import DROP_CACHES, commands_of, parse_script

PRESTART = """#!/bin/bash
set -euo pipefail
NAME=glm53-flash
LOG_DIR="/var/log/${NAME}"

save_logs() {
  docker logs "$NAME" > "$LOG_DIR/$(date +%F-%H%M%S).log" 2>&1 || true
}

if docker container inspect "$NAME" >/dev/null 2>&1; then
  save_logs
  docker rm -f "$NAME"
fi
sync
echo 1 > /proc/sys/vm/drop_caches
"""


def test_order_with_function_and_variables():
    cmds = parse_script(PRESTART, "prestart.sh").commands
    logs = next(i for i, c in enumerate(cmds) if "glm53-flash" in c.docker_targets("logs"))
    rm = next(i for i, c in enumerate(cmds) if "glm53-flash" in c.docker_targets("rm"))
    drop = next(i for i, c in enumerate(cmds) if c.drops_page_cache())
    assert logs < rm < drop and cmds[drop - 1].is_sync()
    assert cmds[logs].line == 11  # reported at the call site
    assert cmds[drop].where() == "prestart.sh:15"


def test_drop_caches_spellings():
    """1 (page cache) and 3 (page cache + slab) drop the page cache in every spelling; 2 (slab only) never does."""
    for line in [
        "echo 3 > /proc/sys/vm/drop_caches",
        "echo 1 | tee /proc/sys/vm/drop_caches",
        "echo 3 | tee -a /proc/sys/vm/drop_caches >/dev/null",
        "sysctl -w vm.drop_caches=1",
        "sysctl vm.drop_caches=3",
        "printf 1 >/proc/sys/vm/drop_caches",
        "printf '3\\n' | tee /proc/sys/vm/drop_caches",
        "/bin/echo 1 >> /proc/sys/vm/drop_caches",
    ]:
        assert any(c.drops_page_cache() for c in parse_script(line).commands), line
    for line in [
        "echo 2 > /proc/sys/vm/drop_caches",
        "echo 2 | tee /proc/sys/vm/drop_caches",
        "sysctl -w vm.drop_caches=2",
        "sysctl vm.drop_caches=2",
        "cat /proc/sys/vm/drop_caches",
        "tee /proc/sys/vm/drop_caches < /dev/null",
        "cat /etc/one | tee /proc/sys/vm/drop_caches",
        "# echo 1 > /proc/sys/vm/drop_caches",
    ]:
        assert not any(c.drops_page_cache() for c in parse_script(line).commands), line
    inline = commands_of(["/bin/sh", "-c", "sync; echo 2 | tee /proc/sys/vm/drop_caches"], "ExecStartPre")
    assert not any(c.drops_page_cache() for c in inline)


def test_pipeline_stages_know_what_feeds_them():
    echo, tee = parse_script("echo 3 | tee /proc/sys/vm/drop_caches").commands
    assert echo.stdin_from == () and tee.stdin_from == ("echo", "3")


def test_sh_c_inline_quoted_and_unquoted():
    quoted = commands_of(["/bin/sh", "-c", "sync; echo 1 > /proc/sys/vm/drop_caches"], "ExecStartPost")
    bare = commands_of(["/bin/sh", "-c", "sync;", "echo", "1", ">", "/proc/sys/vm/drop_caches"], "ExecStartPost")
    for cmds in (quoted, bare):
        assert [c.is_sync() for c in cmds[1:]] == [True, False] and cmds[2].drops_page_cache()


def test_unparseable_line_does_not_lose_the_rest():
    script = parse_script("x=$(( 1 + 2 ))\n[[ $x -gt 1 ]] && echo ok\nsync\necho 1 > /proc/sys/vm/drop_caches\n")
    assert any(c.drops_page_cache() for c in script.commands)


# --- commands that always run: bash(1) SHELL GRAMMAR, one row per construct, both ways ------------------------------

DROP = "echo 1 > /proc/sys/vm/drop_caches"
ALWAYS_RUNS = [  # (script, does the drop_caches line run on every path that reaches the start?, what the reason says)
    (f"sync\n{DROP}\n", True, ""),
    (f"if docker inspect x; then docker rm -f x; fi\n{DROP}\n", True, ""),
    (f"{{ sync; {DROP}; }}\n", True, ""),
    (f"( sync; {DROP} )\n", True, ""),
    (f"{DROP} || true\n", True, ""),
    (f"while {DROP}; do sleep 1; done\n", True, ""),  # a while condition runs at least once
    (f"if {DROP}; then :; fi\n", True, ""),  # so does the first if condition
    (f"drop() {{ {DROP}; }}\ndrop\n", True, ""),
    (f"if [ -e /x ]; then exit 1; fi\n{DROP}\n", True, ""),  # that path fails the start: it never reaches vLLM
    (f"if false; then\n  {DROP}\nfi\n", False, "inside the `if` at p.sh:1"),
    (f"if true; then :; else {DROP}; fi\n", False, "inside the `if` at p.sh:1"),
    (f"if [ -e /a ]; then :; elif {DROP}; then :; fi\n", False, "inside the `if` at p.sh:1"),
    (f"[ -e /a ] && {DROP}\n", False, "on the right of `&&` at p.sh:1"),
    (f"grep -q x /etc/y || {DROP}\n", False, "on the right of `||` at p.sh:1"),
    (f"for n in $NODES; do {DROP}; done\n", False, "inside the `for` loop at p.sh:1"),
    (f"while read l; do {DROP}; done < /etc/x\n", False, "inside the `while` loop at p.sh:1"),
    (f"until [ -e /x ]; do {DROP}; done\n", False, "inside the `until` loop at p.sh:1"),
    (f'case "$MODE" in\n  fast) {DROP} ;;\n  *) : ;;\nesac\n', False, "inside the `case` at p.sh:1"),
    (f"drop() {{\n  {DROP}\n}}\nsync\n", False, "in function `drop` (p.sh:1), which the script never calls"),
    (f"exit 0\n{DROP}\n", False, "after `exit 0` at p.sh:1, which ends the script first"),
    (
        f"[ -e /skip ] && exit 0\n{DROP}\n",
        False,
        "after `exit 0` at p.sh:1, which can end the script and let the start go on",
    ),
    (f"if [ -e /skip ]; then exit; fi\n{DROP}\n", False, "after `exit` at p.sh:1"),
    (f"sh -c '[ -e /a ] && {DROP}'\n", False, "on the right of `&&`"),
]


@pytest.mark.parametrize("script, always, reason", ALWAYS_RUNS, ids=[s.split("\n")[0][:40] for s, _, _ in ALWAYS_RUNS])
def test_a_step_counts_only_when_it_runs_on_every_path(script, always, reason):
    drops = [c for c in parse_script(script, "p.sh").commands if c.drops_page_cache()]
    assert drops, script  # found wherever it sits: a guarded step is reported, never lost
    assert drops[0].always_runs is always, (script, drops[0].guards)
    assert reason in drops[0].why_it_may_not_run(), drops[0].why_it_may_not_run()
    assert bool(drops[0].why_it_may_not_run()) is not always


SAVE, RM = "docker logs x > /var/log/x.log 2>&1", "docker rm -f x"
BEFORE = [  # (script, does the save run on every path that reaches the removal, before it?)
    (f"{SAVE}\n{RM}\n", True),
    (f"if docker inspect x; then\n  {SAVE}\n  {RM}\nfi\n", True),  # both in the same branch: the healthy prestart
    (f"{SAVE} || true\n{RM}\n", True),
    (f"if docker inspect x; then\n  {SAVE}\nfi\n{RM}\n", False),  # saved in a branch, removed outside it
    (f'[ "$KEEP" = 1 ] && {SAVE}\n{RM}\n', False),
    (f"{RM}\n{SAVE}\n", False),
]


@pytest.mark.parametrize("script, before", BEFORE, ids=[s.replace("\n", " ")[:50] for s, _ in BEFORE])
def test_a_save_counts_only_when_it_runs_on_every_path_to_the_removal(script, before):
    commands = parse_script(script, "p.sh").commands
    save = next(c for c in commands if c.docker_targets("logs"))
    rm = next(c for c in commands if c.docker_targets("rm"))
    assert save.always_runs_before(rm, commands) is before


# --- the files a script sources or runs, read as bash would (bash(1): `.`/source, exit, return, exec, &) ------------
# Each case: the prestart (`main`) and the other files it reaches, {D} standing for a folder of the case's own; the
# verdict the reader gives the drop_caches line; and whether bash itself can be the oracle (a background job races,
# a cycle never ends: those are checked by the tests after this one). The oracle runs the very same files with
# drop_caches swapped for a marker file, in two worlds (X=0 and X=1, FILES empty or not): "runs" must drop in both,
# "never runs" in neither, "may not run" in exactly one of them (a witness each way).

LIB = f"sync\n{DROP}\n"
FILES_CASES: list[tuple[str, dict[str, str], str]] = [
    # sourced: the same shell
    ("source-steps", {"main": ". {D}/lib.sh\n", "lib.sh": LIB}, "runs"),
    ("source-word", {"main": "source {D}/lib.sh\n", "lib.sh": LIB}, "runs"),
    ("source-via-dirname-0", {"main": '. "$(dirname "$0")/lib.sh"\n', "lib.sh": LIB}, "runs"),
    ("source-in-dead-branch", {"main": "if false; then\n  . {D}/lib.sh\nfi\n", "lib.sh": LIB}, "never runs"),
    ("source-on-condition", {"main": '[ "$X" = 1 ] && . {D}/lib.sh\n', "lib.sh": LIB}, "may not run"),
    ("exit-in-sourced-ends-caller", {"main": f". {{D}}/ex.sh\n{DROP}\n", "ex.sh": "exit 0\n"}, "never runs"),
    ("maybe-exit-in-sourced", {"main": f". {{D}}/ex.sh\n{DROP}\n", "ex.sh": '[ "$X" = 1 ] && exit 0\n'}, "may not run"),
    ("return-ends-sourced-file", {"main": ". {D}/ret.sh\n", "ret.sh": f"return 0\n{DROP}\n"}, "never runs"),
    ("return-ends-only-sourced", {"main": f". {{D}}/ret.sh\n{DROP}\n", "ret.sh": "return 0\n"}, "runs"),
    (
        "maybe-return-in-sourced",
        {"main": ". {D}/ret.sh\n", "ret.sh": f'[ "$X" = 1 ] && return 0\n{DROP}\n'},
        "may not run",
    ),
    (
        "function-from-sourced-called",
        {"main": ". {D}/lib.sh\ndrop\n", "lib.sh": f"drop() {{\n  sync\n  {DROP}\n}}\n"},
        "runs",
    ),
    (
        "function-from-sourced-uncalled",
        {"main": ". {D}/lib.sh\n", "lib.sh": f"drop() {{\n  {DROP}\n}}\n"},
        "never runs",
    ),
    ("missing-with-set-e-stops", {"main": f"set -e\n. {{D}}/missing.sh\n{DROP}\n"}, "never runs"),
    ("missing-without-set-e-goes-on", {"main": f". {{D}}/missing.sh\n{DROP}\n"}, "runs"),
    ("missing-tested-goes-on", {"main": f"set -euo pipefail\n. {{D}}/missing.sh || true\n{DROP}\n"}, "runs"),
    ("missing-dot-in-posix-sh-stops", {"main": f"#!/bin/sh\n. {{D}}/missing.sh\n{DROP}\n"}, "never runs"),
    # run as its own process
    ("bash-file", {"main": "bash {D}/child.sh\n", "child.sh": LIB}, "runs"),
    ("sh-e-file", {"main": "sh -e {D}/child.sh\n", "child.sh": LIB}, "runs"),
    ("direct-file", {"main": "{D}/child.sh\n", "child.sh": "#!/bin/sh\n" + LIB}, "runs"),
    ("exit-in-child-ends-child-only", {"main": f"bash {{D}}/child.sh\n{DROP}\n", "child.sh": "exit 0\n"}, "runs"),
    ("exec-file-that-drops", {"main": "exec {D}/child.sh\n", "child.sh": "#!/bin/bash\n" + LIB}, "runs"),
    ("after-exec-never", {"main": f"exec {{D}}/child.sh\n{DROP}\n", "child.sh": "#!/bin/sh\ntrue\n"}, "never runs"),
    ("child-on-condition", {"main": '[ "$X" = 1 ] || bash {D}/child.sh\n', "child.sh": LIB}, "may not run"),
    ("missing-child-with-set-e", {"main": f"set -e\n{{D}}/missing.sh\n{DROP}\n"}, "never runs"),
    # control flow the reader decides without the station
    ("exit-0-first", {"main": f"exit 0\n{DROP}\n"}, "never runs"),
    ("maybe-exit", {"main": f'[ "$X" = 1 ] && exit 0\n{DROP}\n'}, "may not run"),
    ("dead-exit", {"main": f"if false; then exit 0; fi\n{DROP}\n"}, "runs"),
    ("subshell-exit", {"main": f"( exit 0 ); {DROP}\n"}, "runs"),
    ("background-exit", {"main": f"exit 0 &\n{DROP}\n"}, "runs"),  # a background job is a subshell too
    ("if-false", {"main": f"if false; then\n  {DROP}\nfi\n"}, "never runs"),
    ("if-1-eq-0", {"main": f"if [ 1 -eq 0 ]; then {DROP}; fi\n"}, "never runs"),
    ("else-of-true", {"main": f"if true; then :; else {DROP}; fi\n"}, "never runs"),
    ("elif-true-after-false", {"main": f"if [ a = b ]; then :; elif true; then {DROP}; fi\n"}, "runs"),
    ("if-on-station", {"main": f'if [ "$X" = 1 ]; then {DROP}; fi\n'}, "may not run"),
    ("false-and", {"main": f"false && {DROP}\n"}, "never runs"),
    ("true-or", {"main": f"true || {DROP}\n"}, "never runs"),
    ("true-and", {"main": f"true && {DROP}\n"}, "runs"),
    ("and-on-station", {"main": f'[ "$X" = 1 ] && {DROP}\n'}, "may not run"),
    ("or-on-station", {"main": f'[ "$X" = 1 ] || {DROP}\n'}, "may not run"),
    ("case-on-station", {"main": f'case "$X" in\n  1) {DROP} ;;\nesac\n'}, "may not run"),
    ("for-literal-words", {"main": f"for n in a b; do {DROP}; done\n"}, "runs"),
    ("for-station-words", {"main": f"for f in $FILES; do {DROP}; done\n"}, "may not run"),
    ("while-false", {"main": f"while false; do {DROP}; done\n"}, "never runs"),
    ("until-true", {"main": f"until true; do {DROP}; done\n"}, "never runs"),
    ("uncalled-function", {"main": f"drop() {{\n  {DROP}\n}}\nsync\n"}, "never runs"),
    ("return-in-function", {"main": f"f() {{\n  return 0\n  {DROP}\n}}\nf\n"}, "never runs"),
    ("maybe-return-in-function", {"main": f'f() {{\n  [ "$X" = 1 ] && return 0\n  {DROP}\n}}\nf\n'}, "may not run"),
]
WORLDS = [{"X": "0", "FILES": ""}, {"X": "1", "FILES": "a"}]


def _lay_out(files: dict[str, str], folder) -> dict[str, str]:
    """{station path: text}, the prestart as {folder}/p.sh."""
    return {
        f"{folder}/{'p.sh' if name == 'main' else name}": text.replace("{D}", str(folder))
        for name, text in files.items()
    }


def _drop_of(files: dict[str, str], folder):
    laid = _lay_out(files, folder)
    script = parse_script(laid[f"{folder}/p.sh"], f"{folder}/p.sh", read=laid.get)
    drops = [c for c in script.commands if c.drops_page_cache()]
    assert drops, script.commands  # found wherever it sits: a step that does not run is reported, never lost
    return drops[-1], script


@pytest.mark.parametrize("name, files, verdict", FILES_CASES, ids=[c[0] for c in FILES_CASES])
def test_reader_matches_what_bash_does(name, files, verdict, tmp_path):
    drop, _ = _drop_of(files, tmp_path)
    assert drop.verdict() == verdict, (drop.where(), drop.guards)
    if not shutil.which("bash") or not shutil.which("sh"):
        pytest.skip("bash and sh are the oracle")
    marker = tmp_path / "dropped"
    for path, text in _lay_out(files, tmp_path).items():
        with open(path, "w") as f:
            f.write(text.replace(DROP_CACHES, str(marker)))
        os.chmod(path, 0o755)
    main = tmp_path / "p.sh"
    dropped = []
    for world in WORLDS:
        marker.unlink(missing_ok=True)
        argv = [str(main)] if main.read_text().startswith("#!") else ["bash", str(main)]
        subprocess.run(argv, env={"PATH": os.environ["PATH"], **world}, cwd=tmp_path, capture_output=True, timeout=20)
        dropped.append(marker.exists())
    expected = {"runs": [True, True], "never runs": [False, False]}.get(verdict)
    if expected is not None:
        assert dropped == expected, (verdict, dropped)
    else:
        assert sorted(dropped) == [False, True], (verdict, dropped)  # a world where it runs, one where it does not


def test_steps_in_a_sourced_file_carry_its_path_and_line():
    files = {"/p.sh": "set -e\n\n. /lib/steps.sh\n", "/lib/steps.sh": f"# steps\nsync\n{DROP}\n"}
    commands = parse_script(files["/p.sh"], "/p.sh", read=files.get).commands
    sync, drop = [c for c in commands if c.is_sync() or c.drops_page_cache()]
    assert (sync.origin, sync.line, drop.origin, drop.line) == ("/lib/steps.sh", 2, "/lib/steps.sh", 3)
    assert drop.where() == "/lib/steps.sh:3 (sourced at /p.sh:3)"
    assert drop.always_runs and sync.always_runs_before(drop, commands)
    child = parse_script("bash /lib/steps.sh\n", "/p.sh", read=files.get).commands[-1]
    assert child.where() == "/lib/steps.sh:3 (run as its own process at /p.sh:1)" and child.via[0].how == "run"


MISSING = [  # (prestart, what the finding says bash does next, does every later line never run?)
    (
        "set -euo pipefail\n. /lib/gone.sh\n",
        "with `set -euo pipefail` (/p.sh:1) bash stops the script there with an error, so the start fails",
        True,
    ),
    ("#!/bin/bash -e\nsource /lib/gone.sh\n", "with the `#!` line's -e (/p.sh:1) bash stops the script there", True),
    (". /lib/gone.sh\n", "without `set -e` bash reports the error and carries on with the next line", False),
    ("set -e\n. /lib/gone.sh || true\n", "`set -e` does not stop the script", False),
    ("set -e\nset +e\n. /lib/gone.sh\n", "without `set -e` bash reports the error and carries on", False),
    ("#!/bin/sh\n. /lib/gone.sh\n", "under POSIX `sh` a `.` that fails ends the script with an error", True),
    ("set -e\n/lib/gone.sh\n", "with `set -e` (/p.sh:1) bash stops the script there", True),
    ("set -e\nif [ -e /x ]; then . /lib/gone.sh; fi\n", "bash stops the script there", False),  # fails that path only
]


@pytest.mark.parametrize("script, after, stops", MISSING, ids=[s.replace("\n", " ")[:40] for s, _, _ in MISSING])
def test_a_missing_file_is_a_finding_saying_whether_bash_stops(script, after, stops):
    parsed = parse_script(script + "echo 1 > /proc/sys/vm/drop_caches\n", "/p.sh", read={}.get)
    [finding] = parsed.findings
    how = "runs" if "\n/lib" in script else "sources"
    assert finding.describe().startswith(
        f"/p.sh:{script.count(chr(10))} {how} /lib/gone.sh, which does not exist on the station: "
    ), finding.describe()
    assert after in finding.describe(), finding.describe()
    assert finding.fix().startswith("install /lib/gone.sh on the station, or correct the path at line ")
    drop = parsed.commands[-1]
    assert drop.never_runs is stops, drop.guards
    if stops:
        assert "a file that does not exist on the station" in drop.why_it_may_not_run()
        assert drop.fixes().startswith("install /lib/gone.sh on the station")


def test_files_golive_does_not_read_are_findings_not_silence():
    files = {"/usr/local/sbin/tool.sh": "#!/usr/bin/env python3\nprint('hi')\n"}  # run directly: its #! decides

    def read(path):
        if path == "/lib/binary.sh":
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
        return files.get(path)

    script = parse_script(
        'source lib.sh\n. ./lib/x.sh\n. "$LIBDIR/x.sh"\nbash tool.sh\n. /lib/binary.sh\n/usr/local/sbin/tool.sh\n',
        "/p.sh",
        read=read,
    )
    said = [f.describe() for f in script.findings]
    assert [f.kind for f in script.findings] == [
        "no-slash",
        "relative",
        "unresolved",
        "relative",
        "unreadable",
        "not-shell",
    ], said
    assert "bash looks it up in $PATH, then the current directory (bash(1), `.`)" in said[0]
    assert "a `python3` program, not a shell script" in said[5]
    assert script.findings[0].fix() == "write the full path of lib.sh at line 1 of /p.sh"


def test_only_scripts_are_read_never_programs():
    """`docker`, `/usr/bin/docker`, `sync`: programs, not read; a `*.sh` by absolute path or a file given to a shell
    is; without a reader, nothing is."""
    asked: list[str] = []
    script = "/usr/bin/docker logs x\nsync\n/usr/local/sbin/a.sh\nsh /opt/b\n. /etc/c.conf\n"
    parse_script(script, "/p.sh", read=lambda p: asked.append(p) and None)
    assert asked == ["/usr/local/sbin/a.sh", "/opt/b", "/etc/c.conf"]
    assert parse_script(script, "/p.sh").findings == []


def test_cycles_stop_with_a_finding():
    files = {
        "/a.sh": ". /b.sh\nsync\n",
        "/b.sh": '[ -n "$A" ] && return 0\nA=1\n. /a.sh\n',
        "/self.sh": "echo once\n. /self.sh\necho 1 > /proc/sys/vm/drop_caches\n",
    }
    guarded = parse_script(". /a.sh\necho 1 > /proc/sys/vm/drop_caches\n", "/p.sh", read=files.get)
    [finding] = guarded.findings
    assert finding.kind == "cycle" and "(/a.sh → /b.sh → /a.sh): golive reads it once" in finding.describe()
    assert guarded.commands[-1].always_runs  # guarded by a condition: bash gets past it
    forever = parse_script(". /self.sh\n", "/p.sh", read=files.get)
    drop = forever.commands[-1]
    assert drop.never_runs and "bash never gets past that line" in drop.why_it_may_not_run()
    runs_itself = parse_script("bash /r.sh\n", "/p.sh", read={"/r.sh": "bash /r.sh\n"}.get)
    assert [f.kind for f in runs_itself.findings] == ["cycle"]


def test_depth_is_bounded():
    files = {f"/d{i}.sh": f". /d{i + 1}.sh\n" for i in range(20)}
    script = parse_script(". /d0.sh\n", "/p.sh", read=files.get)
    [finding] = script.findings
    assert finding.kind == "depth" and finding.path == "/d7.sh" and "more than 8 files deep" in finding.describe()


def test_background_jobs_may_not_finish_before_the_start():
    files = {"/usr/local/sbin/drop.sh": "#!/bin/sh\nsync\necho 1 > /proc/sys/vm/drop_caches\n"}
    for line in [
        "/usr/local/sbin/drop.sh &",
        "nohup /usr/local/sbin/drop.sh >/dev/null 2>&1 &",
        "bash /usr/local/sbin/drop.sh & wait_for_nothing",
        "{ sync; echo 1 > /proc/sys/vm/drop_caches; } &",
    ]:
        drop = next(c for c in parse_script(line + "\n", "/p.sh", read=files.get).commands if c.drops_page_cache())
        assert drop.verdict() == "may not run", line
        assert (
            "it runs in the background" in drop.why_it_may_not_run()
            and "may not finish before the container starts" in drop.why_it_may_not_run()
        ), line
        assert drop.fixes().startswith("remove the `&` after `"), drop.fixes()


STEP = "`echo 1 > /proc/sys/vm/drop_caches`"
DO = [  # (script, the drop's verdict, what it says, what to do): one Do per cause, each in its own words
    (
        f"exit 0\n{DROP}\n",
        "never runs",
        "after `exit 0` at p.sh:1, which ends the script first",
        f"move {STEP} above line 1's `exit 0` in p.sh",
    ),
    (
        f"drop() {{\n  {DROP}\n}}\n",
        "never runs",
        "in function `drop` (p.sh:1), which the script never calls",
        "call `drop` in p.sh after its definition (line 1), or put its steps at top level",
    ),
    (
        f"if false; then\n  {DROP}\nfi\n",
        "never runs",
        "inside the `if` at p.sh:1, on a branch that never runs (`false` is always false)",
        f"move {STEP} out of that condition (the `if` at line 1 of p.sh)",
    ),
    (
        f"if [ 1 = 0 ]; then\n  {DROP}\nfi\n",
        "never runs",
        "(`[ 1 = 0 ]` is always false)",
        f"move {STEP} out of that condition",
    ),
    (
        f"if [ -e /a ]; then\n  {DROP}\nfi\n",
        "may not run",
        "inside the `if` at p.sh:1: it runs only on the branch",
        f"move {STEP} out of that condition (the `if` at line 1 of p.sh)",
    ),
    (
        f"case $M in\n  x) {DROP} ;;\nesac\n",
        "may not run",
        "inside the `case` at p.sh:1",
        f"move {STEP} out of that condition (the `case` at line 1 of p.sh)",
    ),
    (
        f"[ -e /a ] && {DROP}\n",
        "may not run",
        "it runs only when `[ -e /a ]` succeeds",
        f"put {STEP} on a line of its own, not on the right of `[ -e /a ] &&` (line 1 of p.sh)",
    ),
    (
        f"grep -q x /y || {DROP}\n",
        "may not run",
        "it runs only when `grep -q x /y` fails",
        f"put {STEP} on a line of its own, not on the right of `grep -q x /y ||` (line 1 of p.sh)",
    ),
    (f"false && {DROP}\n", "never runs", "`false` always fails, so it never runs", "not on the right of `false &&`"),
    (
        f"for n in $NODES; do\n  {DROP}\ndone\n",
        "may not run",
        "inside the `for` loop at p.sh:1, whose body may run zero times",
        f"move {STEP} out of the `for` loop at line 1 of p.sh",
    ),
    (
        f"while false; do {DROP}; done\n",
        "never runs",
        "whose body never runs (`false` is always false)",
        f"move {STEP} out of the `while` loop at line 1 of p.sh",
    ),
    (
        f"[ -e /skip ] && exit 0\n{DROP}\n",
        "may not run",
        "which can end the script and let the start go on",
        f"move {STEP} above line 1's `exit 0` in p.sh",
    ),
    (
        f"exec docker run x\n{DROP}\n",
        "never runs",
        "which replaces the script with that program",
        f"move {STEP} above line 1's `exec docker run x` in p.sh",
    ),
    (f"{DROP} &\n", "may not run", "it runs in the background", "remove the `&` after "),
]


@pytest.mark.parametrize("script, verdict, says, do", DO, ids=[s.split("\n")[0][:40] for s, _, _, _ in DO])
def test_each_cause_says_never_or_may_and_its_own_do(script, verdict, says, do):
    drop = next(c for c in parse_script(script, "p.sh").commands if c.drops_page_cache())
    assert drop.verdict() == verdict, drop.guards
    assert says in drop.why_it_may_not_run(), drop.why_it_may_not_run()
    assert do in drop.fixes(), drop.fixes()
