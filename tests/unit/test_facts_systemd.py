"""systemd parsers on real output formats (systemctl show, unit files, time spans)."""
import pytest

from golive.facts import FactError
from golive.facts.systemd import (
    dropin_dir_names,
    merge_unit_files,
    order_dropins,
    parse_show,
    parse_show_exec,
    parse_timespan,
    parse_unit_exec,
    parse_unit_file,
    unit_from_file,
    unit_from_show,
)

# `systemctl show` of a unit with two ExecStartPre lines (systemd 255 format: Exec* and Exec*Ex twins).
SHOW = """\
Type=simple
Restart=on-failure
RestartUSec=1min
NRestarts=0
ExecStartPre={ path=/usr/bin/mkdir ; argv[]=/usr/bin/mkdir -p /var/log/glm53-flash ; ignore_errors=yes ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }
ExecStartPreEx={ path=/usr/bin/mkdir ; argv[]=/usr/bin/mkdir -p /var/log/glm53-flash ; flags=ignore-failure ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }
ExecStartPre={ path=/usr/local/sbin/glm53-flash-prestart.sh ; argv[]=/usr/local/sbin/glm53-flash-prestart.sh ; ignore_errors=no ; start_time=[Fri 2026-09-25 09:12:03 UTC] ; stop_time=[Fri 2026-09-25 09:12:05 UTC] ; pid=41810 ; code=exited ; status=0 }
ExecStart={ path=/usr/bin/docker ; argv[]=/usr/bin/docker run --name glm53-flash vllm/vllm-openai@sha256:abc --port 8888 ; ignore_errors=no ; start_time=[Fri 2026-09-25 09:12:05 UTC] ; stop_time=[n/a] ; pid=41822 ; code=(null) ; status=0/0 }
StartLimitIntervalUSec=1h
StartLimitBurst=3
UnitFileState=enabled
ActiveState=active
Id=glm53-flash.service
"""


def test_show_keeps_every_execstartpre_in_order():
    unit = unit_from_show(parse_show(SHOW))
    assert [c.argv[0] for c in unit.exec_start_pre] == ["/usr/bin/mkdir", "/usr/local/sbin/glm53-flash-prestart.sh"]
    assert unit.exec_start_pre[0].ignore_errors and not unit.exec_start_pre[1].ignore_errors
    assert unit.exec_start[0].argv[:3] == ["/usr/bin/docker", "run", "--name"]
    assert (unit.restart, unit.restart_sec_s, unit.start_limit_burst, unit.start_limit_interval_s) == \
        ("on-failure", 60, 3, 3600)
    assert (unit.enabled, unit.active, unit.source) == ("enabled", "active", "systemctl show")


def test_show_exec_ex_flags_form():
    [cmd] = parse_show_exec("{ path=/bin/true ; argv[]=/bin/true ; flags=ignore-failure ; start_time=[n/a] }")
    assert cmd.argv == ["/bin/true"] and cmd.ignore_errors


def test_show_without_id_is_rejected():
    with pytest.raises(FactError, match="not a unit"):
        unit_from_show(parse_show("Restart=no\n"))


@pytest.mark.parametrize("text,seconds", [("60", 60), ("1min", 60), ("1h", 3600), ("3600s", 3600),
                                          ("1min 30s", 90), ("100ms", 0.1), ("1 hour", 3600), ("2h 1s", 7201)])
def test_timespans(text, seconds):
    assert parse_timespan(text) == pytest.approx(seconds)


def test_timespan_garbage():
    with pytest.raises(FactError):
        parse_timespan("soon")


UNIT = """\
[Unit]
Description=GLM-5.3-Flash (vLLM)
StartLimitIntervalSec=3600
StartLimitBurst=3

[Service]
# comment between keys
ExecStartPre=-/usr/bin/mkdir -p /var/log/x
ExecStartPre=/usr/local/sbin/glm53-flash-prestart.sh
ExecStart=/usr/bin/docker run --name glm53-flash \\
    --gpus all \\
    vllm/vllm-openai@sha256:abc \\
    --max-model-len 1048576
Restart=on-failure
RestartSec=60
"""


def test_unit_file_continuations_prefixes_and_repeats():
    sections = parse_unit_file(UNIT)
    unit = unit_from_file(sections, enabled=True, active="active")
    assert unit.exec_start[0].argv == ["/usr/bin/docker", "run", "--name", "glm53-flash", "--gpus", "all",
                                       "vllm/vllm-openai@sha256:abc", "--max-model-len", "1048576"]
    assert len(unit.exec_start_pre) == 2 and unit.exec_start_pre[0].ignore_errors
    assert (unit.start_limit_burst, unit.start_limit_interval_s, unit.restart_sec_s) == (3, 3600, 60)


def test_unit_file_defaults_are_systemds():
    unit = unit_from_file(parse_unit_file("[Service]\nExecStart=/bin/true\n"), enabled=False, active=None)
    assert (unit.restart, unit.start_limit_burst, unit.start_limit_interval_s) == ("no", 5, 10)
    assert unit.enabled == "disabled"


def test_empty_assignment_resets_list():
    sections = parse_unit_file("[Service]\nExecStartPre=/a\nExecStartPre=\nExecStartPre=/b\n")
    assert sections["Service"]["ExecStartPre"] == ["/b"]


def test_exec_prefixes():
    assert parse_unit_exec("-@/bin/x arg0 y").argv == ["/bin/x", "arg0", "y"]


@pytest.mark.parametrize("line,ignored", [
    ("-/usr/local/sbin/prestart.sh", True), ("+-/usr/local/sbin/prestart.sh", True), ("@-/bin/sh sh -c x", True),
    ("+/usr/local/sbin/prestart.sh", False), ("/usr/local/sbin/prestart.sh", False), ("!/usr/local/sbin/p.sh", False),
])
def test_unit_exec_prefixes(line, ignored):
    """`-` (in any position among the prefixes) makes systemd ignore the command's failure; the others do not."""
    command = parse_unit_exec(line)
    assert command.ignore_errors is ignored and command.path.startswith("/")


# --- the effective unit: drop-ins merged as systemd merges them (systemd.unit(5), "Description") ------------------

E, RUN, LIB = "/etc/systemd/system", "/run/systemd/system", "/usr/lib/systemd/system"
D = "glm53-flash.service.d"


def test_dropin_directories_most_specific_first():
    assert dropin_dir_names("glm53-flash.service") == ["glm53-flash.service.d", "glm53-.service.d", "service.d"]
    assert dropin_dir_names("a-b-c.service") == ["a-b-c.service.d", "a-b-.service.d", "a-.service.d", "service.d"]


ORDER = [  # (drop-ins found, the ones systemd applies, in its order)
    ([f"{E}/{D}/override.conf"], [f"{E}/{D}/override.conf"]),
    # sorted by file name whatever the directory
    ([f"{LIB}/{D}/60-b.conf", f"{E}/{D}/70-c.conf", f"{RUN}/{D}/50-a.conf"],
     [f"{RUN}/{D}/50-a.conf", f"{LIB}/{D}/60-b.conf", f"{E}/{D}/70-c.conf"]),
    # one name in two directories: /etc masks /run masks /usr/lib
    ([f"{LIB}/{D}/50-x.conf", f"{E}/{D}/50-x.conf"], [f"{E}/{D}/50-x.conf"]),
    ([f"{LIB}/{D}/50-x.conf", f"{RUN}/{D}/50-x.conf"], [f"{RUN}/{D}/50-x.conf"]),
    # the type-wide and prefix directories apply too; the specific one masks a same-named file in them
    ([f"{E}/service.d/10-all.conf", f"{E}/glm53-.service.d/20-prefix.conf"],
     [f"{E}/service.d/10-all.conf", f"{E}/glm53-.service.d/20-prefix.conf"]),
    ([f"{E}/service.d/10-x.conf", f"{E}/{D}/10-x.conf"], [f"{E}/{D}/10-x.conf"]),
    # not a drop-in: other suffixes, other units' directories
    ([f"{E}/{D}/notes.txt", f"{E}/other.service.d/x.conf", f"{E}/{D}/x.conf.bak"], []),
]


@pytest.mark.parametrize("found, applied", ORDER)
def test_dropins_in_systemds_order(found, applied):
    assert order_dropins(found, "glm53-flash.service") == applied


FRAGMENT = (f"{E}/glm53-flash.service", "[Unit]\nStartLimitBurst=3\n\n[Service]\nExecStartPre=/usr/local/sbin/p.sh\n"
            "ExecStart=/usr/bin/docker run x\nRestart=on-failure\nRestartSec=60\n")
MERGED = [  # (drop-ins, Restart, RestartSec, ExecStartPre argv lists, where Restart / ExecStartPre were set)
    ([], "on-failure", 60, [["/usr/local/sbin/p.sh"]], f"{E}/glm53-flash.service:7", f"{E}/glm53-flash.service:5"),
    ([(f"{E}/{D}/override.conf", "[Service]\nRestart=always\n")], "always", 60, [["/usr/local/sbin/p.sh"]],
     f"{E}/{D}/override.conf:2", f"{E}/glm53-flash.service:5"),
    # list settings accumulate; an empty assignment resets the list, and that is where it was set
    ([(f"{E}/{D}/a.conf", "[Service]\nExecStartPre=/bin/true\n")], "on-failure", 60,
     [["/usr/local/sbin/p.sh"], ["/bin/true"]], f"{E}/glm53-flash.service:7", f"{E}/{D}/a.conf:2"),
    ([(f"{E}/{D}/a.conf", "# off\n[Service]\nExecStartPre=\n")], "on-failure", 60, [], f"{E}/glm53-flash.service:7",
     f"{E}/{D}/a.conf:3"),
    ([(f"{E}/{D}/a.conf", "[Service]\nExecStartPre=\nExecStartPre=-/bin/other\n")], "on-failure", 60,
     [["/bin/other"]], f"{E}/glm53-flash.service:7", f"{E}/{D}/a.conf:3"),
    # single-valued: the last assignment wins; an empty one returns to systemd's default
    ([(f"{E}/{D}/a.conf", "[Service]\nRestart=always\n"), (f"{E}/{D}/b.conf", "[Service]\nRestart=on-failure\n")],
     "on-failure", 60, [["/usr/local/sbin/p.sh"]], f"{E}/{D}/b.conf:2", f"{E}/glm53-flash.service:5"),
    ([(f"{E}/{D}/a.conf", "[Service]\nRestart=\nRestartSec=\n")], "no", 0.1, [["/usr/local/sbin/p.sh"]], None,
     f"{E}/glm53-flash.service:5"),
]


@pytest.mark.parametrize("dropins, restart, delay, pre, restart_at, pre_at", MERGED)
def test_the_effective_unit_and_where_each_value_was_set(dropins, restart, delay, pre, restart_at, pre_at):
    files = [FRAGMENT, *dropins]
    sections, cleared = merge_unit_files(files)
    unit = unit_from_file(sections, enabled=True, active="active", cleared=cleared, files=[p for p, _ in files])
    assert (unit.restart, unit.restart_sec_s) == (restart, delay)
    assert [c.argv for c in unit.exec_start_pre] == pre
    assert unit.set_at.get("Restart") == restart_at and unit.set_at.get("ExecStartPre") == pre_at
    assert unit.dropins == [p for p, _ in dropins]


def test_a_finding_points_at_the_file_that_set_the_value():
    files = [FRAGMENT, (f"{E}/{D}/override.conf", "[Service]\nRestart=always\n")]
    sections, cleared = merge_unit_files(files)
    unit = unit_from_file(sections, True, "active", cleared, [p for p, _ in files])
    assert unit.origin("Restart") == f"set at {E}/{D}/override.conf:2"
    fix = unit.fix_at("Restart", "glm53-flash.service", "Restart=on-failure")
    assert f"the drop-in {E}/{D}/override.conf sets it (line 2)" in fix
    assert "systemctl revert glm53-flash.service" in fix
    assert unit.fix_at("RestartSec", "glm53-flash.service", "RestartSec=60") == \
        f"set `RestartSec=60` in {E}/glm53-flash.service (line 8), then `systemctl daemon-reload`"
    assert unit.origin("StartLimitIntervalSec").startswith("systemd's default: not set in")


def test_a_bad_line_names_its_file_and_line():
    with pytest.raises(FactError, match=f"{E}/{D}/x.conf:3: unit file line outside a section"):
        merge_unit_files([FRAGMENT, (f"{E}/{D}/x.conf", "# c\n\nRestart=always\n")])


def test_an_emptied_list_says_so():
    files = [FRAGMENT, (f"{E}/{D}/10-off.conf", "[Service]\nExecStartPre=\n")]
    sections, cleared = merge_unit_files(files)
    unit = unit_from_file(sections, True, "active", cleared, [p for p, _ in files])
    assert unit.origin("ExecStartPre") == f"emptied by `ExecStartPre=` at {E}/{D}/10-off.conf:2"
