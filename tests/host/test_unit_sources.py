"""The unit as systemd runs it, read two ways on the same station trees: from `systemctl show` (systemd is PID 1) and
from the unit file merged with its drop-ins (pre-start trees, chroot, no systemd). Both must give the same answers,
and both must name the same file and line for each value (systemd.unit(5): drop-ins, masking, empty assignments)."""

import os
from pathlib import Path

import pytest

from golive.facts.systemd import unit_differences
from golive.site.loader import load_inventory
from golive.station.connection import connect
from golive.station.host import StationFacts
from golive_testbed.targets import build_station_trees, load_variants

REPO = Path(__file__).resolve().parents[2]
INVENTORIES = REPO / "fixtures" / "inventories"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="station trees are reached through chroot, which needs root")


def trees_with_systemd() -> list[str]:
    """Every GB300 tree whose recording answers `systemctl show` (systemd as PID 1)."""
    names = ["gb300-healthy"] + [v.name for v in load_variants()]
    src = REPO / "fixtures" / "stations"
    return [n for n in names if _has_show(src, n)]


def _has_show(src: Path, name: str) -> bool:
    variants = {v.name: v for v in load_variants()}
    rec = "opt/golive-recorded/systemctl-show-glm53-flash.txt"
    while name in variants:
        if rec in variants[name].delete:
            return False
        if (src / "variants" / name / rec).exists():
            return True
        name = variants[name].base
    return (src / name / rec).exists()


@pytest.fixture(scope="module")
def trees():
    return build_station_trees()


def facts_of(name: str) -> StationFacts:
    loaded = load_inventory(INVENTORIES / f"{name}.yaml")
    [station] = loaded.inventory.stations
    host_spec = station.host
    tree = (INVENTORIES / host_spec.removeprefix("chroot://")).resolve()
    return StationFacts(connect(f"chroot://{tree}").host, station, loaded.profile.profile)


def answers(unit) -> dict:
    # older `systemctl show` prints argv unquoted: the words joined are what both sources agree on
    execs = {
        k: [(" ".join(c.argv), c.ignore_errors, c.where) for c in getattr(unit, k)]
        for k in ("exec_start_pre", "exec_start", "exec_start_post", "exec_stop", "exec_stop_post")
    }
    # the environment systemd starts it with, and the line that set each variable (Environment=, EnvironmentFile=)
    env = {name: (v.value, v.where, v.via) for name, v in unit.env.items()}
    env_files = [(r.path, r.ignore_errors, r.where) for r in unit.environment_files]
    return dict(
        restart=unit.restart,
        restart_sec_s=unit.restart_sec_s,
        burst=unit.start_limit_burst,
        interval=unit.start_limit_interval_s,
        enabled=unit.enabled,
        set_at=unit.set_at,
        files=unit.files,
        env=env,
        env_files=env_files,
        **execs,
    )


@pytest.mark.parametrize("name", trees_with_systemd())
def test_systemctl_show_and_the_files_agree(trees, name):
    facts = facts_of(name)
    assert facts.systemd_running, name
    shown, from_files = facts.unit, facts.unit_from_files
    assert shown.source == "systemctl show" and from_files.source.startswith("unit file")
    # they agree unless the files changed since systemd loaded them, which systemd says (NeedDaemonReload=yes)
    assert (answers(shown) == answers(from_files)) is (shown.need_daemon_reload is False), name
    assert bool(unit_differences(shown, from_files)) is bool(shown.need_daemon_reload), name
    assert shown.set_at["ExecStart"].startswith("/etc/systemd/system/glm53-flash.service:")


def test_the_trees_cover_the_drop_in_cases(trees):
    """The agreement above is not vacuous: it covers a drop-in, a masked drop-in and an emptied list."""
    cases = {
        name: facts_of(name).unit_from_files
        for name in (
            "restart-always-drop-in",
            "drop-ins-masked-and-ordered",
            "prestart-unwired-by-drop-in",
            "gb300-healthy",
        )
    }
    assert cases["restart-always-drop-in"].restart == "always"
    assert (
        cases["restart-always-drop-in"].set_at["Restart"] == "/etc/systemd/system/glm53-flash.service.d/override.conf:2"
    )
    masked = cases["drop-ins-masked-and-ordered"]
    assert masked.dropins == [
        "/etc/systemd/system/glm53-flash.service.d/50-restart.conf",
        "/usr/lib/systemd/system/glm53-flash.service.d/60-delay.conf",
    ]
    assert (masked.restart, masked.restart_sec_s) == ("on-failure", 60)
    assert masked.set_at["RestartSec"] == "/usr/lib/systemd/system/glm53-flash.service.d/60-delay.conf:3"
    unwired = cases["prestart-unwired-by-drop-in"]
    assert unwired.exec_start_pre == []
    assert unwired.set_at["ExecStartPre"] == "/etc/systemd/system/glm53-flash.service.d/10-no-prestart.conf:3"
    assert cases["gb300-healthy"].dropins == [] and cases["gb300-healthy"].restart == "on-failure"


def test_the_trees_cover_the_environment_cases(trees):
    """The agreement above covers an EnvironmentFile= (one file missing and optional), Environment= in the unit and in
    a drop-in, and `${VAR}` / `$VAR` in ExecStart: expanded, each word naming the line that set its value."""
    unit = facts_of("served-flag-from-env-file").unit
    assert [(r.path, r.ignore_errors) for r in unit.environment_files] == [
        ("/etc/default/glm53-flash", False),
        ("/etc/default/glm53-flash.local", True),
    ]
    assert unit.env["MAX_MODEL_LEN"].where == "/etc/default/glm53-flash:3"
    assert unit.env["GPU_MEMORY_UTILIZATION"].where == "/etc/systemd/system/glm53-flash.service:18"
    [command] = unit.exec_start
    argv = [str(w) for w in command.argv]
    assert argv[argv.index("--max-model-len") + 1] == "1048576"
    assert argv[-4:] == ["--tool-call-parser", "glm47", "--reasoning-parser", "glm45"]  # $VLLM_PARSER_ARGS, split
    assert command.written is not None and "${MAX_MODEL_LEN}" in command.written
    twice = facts_of("served-flag-given-twice").unit
    assert twice.env["VLLM_EXTRA_ARGS"].where == "/etc/systemd/system/glm53-flash.service.d/10-context.conf:3"
    assert [str(w) for w in twice.exec_start[0].argv][-2:] == ["--max-model-len", "1m"]
