"""The prestart as ordered commands: order, functions, variables, sh -c."""
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
                 "sysctl vm.drop_caches=3", "printf 1 >/proc/sys/vm/drop_caches", "printf '3\\n' | tee /proc/sys/vm/drop_caches",
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
