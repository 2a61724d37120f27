"""The prestart as ordered commands: order, functions, variables, sh -c."""
import pytest

from golive.facts.shell import commands_of, parse_script

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
    for line in ["echo 3 > /proc/sys/vm/drop_caches", "echo 1 | tee /proc/sys/vm/drop_caches",
                 "echo 3 | tee -a /proc/sys/vm/drop_caches >/dev/null", "sysctl -w vm.drop_caches=1",
                 "sysctl vm.drop_caches=3", "printf 1 >/proc/sys/vm/drop_caches",
                 "printf '3\\n' | tee /proc/sys/vm/drop_caches",
                 "/bin/echo 1 >> /proc/sys/vm/drop_caches"]:
        assert any(c.drops_page_cache() for c in parse_script(line).commands), line
    for line in ["echo 2 > /proc/sys/vm/drop_caches", "echo 2 | tee /proc/sys/vm/drop_caches",
                 "sysctl -w vm.drop_caches=2", "sysctl vm.drop_caches=2", "cat /proc/sys/vm/drop_caches",
                 "tee /proc/sys/vm/drop_caches < /dev/null", "cat /etc/one | tee /proc/sys/vm/drop_caches",
                 "# echo 1 > /proc/sys/vm/drop_caches"]:
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
    (f"while {DROP}; do sleep 1; done\n", True, ""),          # a while condition runs at least once
    (f"if {DROP}; then :; fi\n", True, ""),                   # so does the first if condition
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
    (f"case \"$MODE\" in\n  fast) {DROP} ;;\n  *) : ;;\nesac\n", False, "inside the `case` at p.sh:1"),
    (f"drop() {{\n  {DROP}\n}}\nsync\n", False, "in function `drop` (p.sh:1), which the script never calls"),
    (f"exit 0\n{DROP}\n", False, "after `exit 0` at p.sh:1, which ends the script first"),
    (f"[ -e /skip ] && exit 0\n{DROP}\n", False,
     "after `exit 0` at p.sh:1, which can end the script and let the start go on"),
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


SAVE, RM = 'docker logs x > /var/log/x.log 2>&1', "docker rm -f x"
BEFORE = [  # (script, does the save run on every path that reaches the removal, before it?)
    (f"{SAVE}\n{RM}\n", True),
    (f"if docker inspect x; then\n  {SAVE}\n  {RM}\nfi\n", True),    # both in the same branch: the healthy prestart
    (f"{SAVE} || true\n{RM}\n", True),
    (f"if docker inspect x; then\n  {SAVE}\nfi\n{RM}\n", False),      # saved in a branch, removed outside it
    (f"[ \"$KEEP\" = 1 ] && {SAVE}\n{RM}\n", False),
    (f"{RM}\n{SAVE}\n", False),
]


@pytest.mark.parametrize("script, before", BEFORE, ids=[s.replace("\n", " ")[:50] for s, _ in BEFORE])
def test_a_save_counts_only_when_it_runs_on_every_path_to_the_removal(script, before):
    commands = parse_script(script, "p.sh").commands
    save = next(c for c in commands if c.docker_targets("logs"))
    rm = next(c for c in commands if c.docker_targets("rm"))
    assert save.always_runs_before(rm, commands) is before
