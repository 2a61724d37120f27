"""systemd parsers on real output formats (systemctl show, unit files, time spans)."""
import pytest

from golive.facts import FactError
from golive.facts.systemd import (
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
