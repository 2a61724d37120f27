"""systemd parsers on real output formats (systemctl show, unit files, time spans)."""

import pytest

from golive.facts import FactError
from golive.facts.exec_lines import edit_place, expand_argv, origin_of, parse_show_exec, parse_unit_exec
from golive.facts.systemd import UnitFacts, parse_show, parse_timespan, unit_from_file, unit_from_show
from golive.facts.systemd_env import EnvFileRef, EnvSetting, parse_env_file, parse_environment_line
from golive.facts.unit_files import dropin_dir_names, merge_unit_files, order_dropins, parse_unit_file

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
    assert (unit.restart, unit.restart_sec_s, unit.start_limit_burst, unit.start_limit_interval_s) == (
        "on-failure",
        60,
        3,
        3600,
    )
    assert (unit.enabled, unit.active, unit.source) == ("enabled", "active", "systemctl show")


def test_show_exec_ex_flags_form():
    [cmd] = parse_show_exec("{ path=/bin/true ; argv[]=/bin/true ; flags=ignore-failure ; start_time=[n/a] }")
    assert cmd.argv == ["/bin/true"] and cmd.ignore_errors


def test_show_without_id_is_rejected():
    with pytest.raises(FactError, match="not a unit"):
        unit_from_show(parse_show("Restart=no\n"))


@pytest.mark.parametrize(
    "text,seconds",
    [
        ("60", 60),
        ("1min", 60),
        ("1h", 3600),
        ("3600s", 3600),
        ("1min 30s", 90),
        ("100ms", 0.1),
        ("1 hour", 3600),
        ("2h 1s", 7201),
    ],
)
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
    assert unit.exec_start[0].argv == [
        "/usr/bin/docker",
        "run",
        "--name",
        "glm53-flash",
        "--gpus",
        "all",
        "vllm/vllm-openai@sha256:abc",
        "--max-model-len",
        "1048576",
    ]
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
    [command] = parse_unit_exec("-@/bin/x arg0 y")
    assert (command.argv, command.argv0, command.ignore_errors) == (["/bin/x", "y"], "arg0", True)


# TEST(config_parse_exec) in systemd's src/test/test-load-fragment.c, case by case: (the Exec value, each command as
# (the program, the argv[0] given with `@` or None, the arguments, failure ignored))
CONFIG_PARSE_EXEC = [
    ("-@/RValue argv0 r1 ; /goo/goo boo", [("/RValue", "argv0", ["r1"], True), ("/goo/goo", None, ["boo"], False)]),
    (
        "-@/RValue argv0 r1 ; ; /goo/goo boo",  # two semicolons in a row
        [("/RValue", "argv0", ["r1"], True), ("/goo/goo", None, ["boo"], False)],
    ),
    ("-@/RValue argv0 r1 ; ", [("/RValue", "argv0", ["r1"], True)]),  # trailing semicolon
    ("-@/RValue argv0 r1 ;", [("/RValue", "argv0", ["r1"], True)]),  # trailing semicolon, no whitespace
    ("-@/RValue argv0 r1 ';'", [("/RValue", "argv0", ["r1", ";"], True)]),  # in single quotes: a word
    ("/bin/find \\;", [("/bin/find", None, [";"], False)]),  # escaped semicolon
    ("/sbin/find \\; /x", [("/sbin/find", None, [";", "/x"], False)]),
    ("/sbin/find \\;x", [("/sbin/find", None, ["\\;x"], False)]),  # part of a word: an unknown escape, kept
    ("/bin/find \\073", [("/bin/find", None, [";"], False)]),  # encoded semicolon
    ('/bin/find ";"', [("/bin/find", None, [";"], False)]),  # quoted semicolon
    ('/sbin/find ";" /x', [("/sbin/find", None, [";", "/x"], False)]),
    ('"/PATH WITH SPACES/daemon" -1 -2', [("/PATH WITH SPACES/daemon", None, ["-1", "-2"], False)]),
    ("\"/PATH\\sWITH\\sSPACES/daemon\" '-1 -2'", [("/PATH WITH SPACES/daemon", None, ["-1 -2"], False)]),
    # the program's path simplified (path_simplify: `//` is `/`), argv[0] as given (read back from systemd 252)
    ("@/RValue///slashes2 ///argv0 r1", [("/RValue/slashes2", "///argv0", ["r1"], False)]),  # honour_argv0
    ("-@/RValue///slashes3 argv0a r1", [("/RValue/slashes3", "argv0a", ["r1"], True)]),
    ("@-/RValue///slashes4 argv0b r1", [("/RValue/slashes4", "argv0b", ["r1"], True)]),
    ("/usr//bin/x a", [("/usr/bin/x", "/usr//bin/x", ["a"], False)]),
    ("/bin/grep '\\w+\\K'", [("/bin/grep", None, ["\\w+\\K"], False)]),  # quoted backslashes: kept as written
    # golive's own: the docker idiom before a prestart, and a regex outside quotes ("Ignoring unknown escape")
    (
        "-/usr/bin/docker rm -f glm53-flash ; /usr/local/sbin/glm53-flash-prestart.sh",
        [
            ("/usr/bin/docker", None, ["rm", "-f", "glm53-flash"], True),
            ("/usr/local/sbin/glm53-flash-prestart.sh", None, [], False),
        ],
    ),
    ("/bin/grep -P \\d+ /x", [("/bin/grep", None, ["-P", "\\d+", "/x"], False)]),
]


@pytest.mark.parametrize("line, commands", CONFIG_PARSE_EXEC, ids=[line for line, _ in CONFIG_PARSE_EXEC])
def test_exec_lines_split_as_config_parse_exec_does(line, commands):
    """A word `;` alone separates commands, `\\;` alone is a literal `;`, `@` gives argv[0] apart from the program,
    an unknown escape is kept as written (extract_first_word_and_warn retries with EXTRACT_UNESCAPE_RELAX)."""
    got = [(c.path, c.argv0, c.argv[1:], c.ignore_errors) for c in parse_unit_exec(line)]
    assert got == commands


def test_a_semicolon_line_is_two_commands_each_where_it_was_written():
    """In a unit file, both commands of one ExecStartPre= line keep its file:line, and `systemctl show`'s two
    entries for them find it (with_origins)."""
    text = (
        "[Service]\nExecStartPre=-/usr/bin/docker rm -f x ; /usr/local/sbin/p.sh\nExecStart=@/usr/bin/docker d run x\n"
    )
    unit_file = "/etc/systemd/system/x.service"
    files = unit_from_file(parse_unit_file(text, unit_file), True, "active", files=[unit_file])
    assert [(c.argv, c.where) for c in files.exec_start_pre] == [
        (["/usr/bin/docker", "rm", "-f", "x"], f"{unit_file}:2"),
        (["/usr/local/sbin/p.sh"], f"{unit_file}:2"),
    ]
    shown = unit_from_show(
        parse_show(
            "Id=x.service\n"
            "ExecStartPre={ path=/usr/bin/docker ; argv[]=/usr/bin/docker rm -f x ; ignore_errors=yes ; start_time=[n/a] }\n"
            "ExecStartPre={ path=/usr/local/sbin/p.sh ; argv[]=/usr/local/sbin/p.sh ; ignore_errors=no ; start_time=[n/a] }\n"
            "ExecStart={ path=/usr/bin/docker ; argv[]=d run x ; ignore_errors=no ; start_time=[n/a] }\n"
        )
    ).with_origins(files)
    assert [c.where for c in shown.exec_start_pre] == [f"{unit_file}:2", f"{unit_file}:2"]
    assert [(c.argv, c.argv0, c.where) for c in shown.exec_start] == [
        (["/usr/bin/docker", "run", "x"], "d", f"{unit_file}:3")
    ]


@pytest.mark.parametrize(
    "line,ignored",
    [
        ("-/usr/local/sbin/prestart.sh", True),
        ("+-/usr/local/sbin/prestart.sh", True),
        ("@-/bin/sh sh -c x", True),
        ("+/usr/local/sbin/prestart.sh", False),
        ("/usr/local/sbin/prestart.sh", False),
        ("!/usr/local/sbin/p.sh", False),
    ],
)
def test_unit_exec_prefixes(line, ignored):
    """`-` (in any position among the prefixes) makes systemd ignore the command's failure; the others do not."""
    [command] = parse_unit_exec(line)
    assert command.ignore_errors is ignored and command.path.startswith("/")


UNIT_EXEC_WORDS = [  # (the unit file, an ExecStart= value, the words systemd runs: config_parse_exec, unit_full_printf)
    ("glm53-flash.service", "/usr/bin/docker run --name %N img --served-model-name %n", None),
    (
        "glm53-flash.service",
        "/usr/bin/docker run --name %N img",
        ["/usr/bin/docker", "run", "--name", "glm53-flash", "img"],
    ),
    (
        "glm53@a-b.service",
        "/bin/x %i %I %p %P %j %J %f %n",
        ["/bin/x", "a-b", "a/b", "glm53", "glm53", "glm53"] + ["glm53", "/a/b", "glm53@a-b.service"],
    ),
    ("glm53-flash.service", "/bin/x -e PCT=100%% '50%%' \"%%%%\"", ["/bin/x", "-e", "PCT=100%", "50%", "%%"]),
    # the system manager's constants resolve; the host's are kept as written where golive did not read them
    ("glm53-flash.service", "/bin/x %H %u %t %S", ["/bin/x", "%H", "root", "/run", "/var/lib"]),
    ("glm53@.service", "/bin/x %i %n 10%%", ["/bin/x", "%i", "%n", "10%"]),  # a template's file: no instance known
    (
        "glm53-flash.service",
        "/bin/x \"a\\tb\" a\\x41 'c\\nd'",
        ["/bin/x", "a\tb", "aA", "c\nd"],
    ),  # C escapes, quoted too
    ("glm53-flash.service", "/bin/x --len ${LEN:-8192} $$HOME", ["/bin/x", "--len", "${LEN:-8192}", "$$HOME"]),
]


@pytest.mark.parametrize("unit, line, argv", UNIT_EXEC_WORDS, ids=[line for _, line, _ in UNIT_EXEC_WORDS])
def test_unit_file_exec_words_are_the_ones_systemd_runs(unit, line, argv):
    """Each word extracted with C escapes and quotes removed, then its specifiers resolved with the unit's name
    (from the unit file's own name); the host's specifiers are kept as written, `${X:-y}` is left to expand_argv
    (which keeps it: replace_env_argv passes no REPLACE_ENV_ALLOW_EXTENDED)."""
    sections = parse_unit_file(f"[Service]\nExecStart={line}\n", f"/etc/systemd/system/{unit}")
    got = unit_from_file(sections, True, "active", files=[f"/etc/systemd/system/{unit}"]).exec_start[0].argv
    if argv is None:  # both ways: without the unit's name only `%%` resolves
        bare = unit_from_file(sections, True, "active").exec_start[0].argv
        assert "%N" in bare and "%n" in bare and "glm53-flash" in got and "glm53-flash.service" in got
    else:
        assert got == argv


def test_environment_lines_resolve_the_units_specifiers():
    sections = parse_unit_file("[Service]\nEnvironment=NAME=%N PCT=5%%\n", "/etc/systemd/system/glm53-flash.service")
    unit = unit_from_file(sections, True, "active", files=["/etc/systemd/system/glm53-flash.service"])
    assert [(e.name, e.value) for e in unit.environment] == [("NAME", "glm53-flash"), ("PCT", "5%")]


# --- the effective unit: drop-ins merged as systemd merges them (systemd.unit(5), "Description") ------------------

E, RUN, LIB = "/etc/systemd/system", "/run/systemd/system", "/usr/lib/systemd/system"
D = "glm53-flash.service.d"


def test_dropin_directories_most_specific_first():
    assert dropin_dir_names("glm53-flash.service") == ["glm53-flash.service.d", "glm53-.service.d", "service.d"]
    assert dropin_dir_names("a-b-c.service") == ["a-b-c.service.d", "a-b-.service.d", "a-.service.d", "service.d"]


ORDER = [  # (drop-ins found, the ones systemd applies, in its order)
    ([f"{E}/{D}/override.conf"], [f"{E}/{D}/override.conf"]),
    # sorted by file name whatever the directory
    (
        [f"{LIB}/{D}/60-b.conf", f"{E}/{D}/70-c.conf", f"{RUN}/{D}/50-a.conf"],
        [f"{RUN}/{D}/50-a.conf", f"{LIB}/{D}/60-b.conf", f"{E}/{D}/70-c.conf"],
    ),
    # one name in two directories: /etc masks /run masks /usr/lib
    ([f"{LIB}/{D}/50-x.conf", f"{E}/{D}/50-x.conf"], [f"{E}/{D}/50-x.conf"]),
    ([f"{LIB}/{D}/50-x.conf", f"{RUN}/{D}/50-x.conf"], [f"{RUN}/{D}/50-x.conf"]),
    # the type-wide and prefix directories apply too; the specific one masks a same-named file in them
    (
        [f"{E}/service.d/10-all.conf", f"{E}/glm53-.service.d/20-prefix.conf"],
        [f"{E}/service.d/10-all.conf", f"{E}/glm53-.service.d/20-prefix.conf"],
    ),
    ([f"{E}/service.d/10-x.conf", f"{E}/{D}/10-x.conf"], [f"{E}/{D}/10-x.conf"]),
    # not a drop-in: other suffixes, other units' directories
    ([f"{E}/{D}/notes.txt", f"{E}/other.service.d/x.conf", f"{E}/{D}/x.conf.bak"], []),
]


@pytest.mark.parametrize("found, applied", ORDER)
def test_dropins_in_systemds_order(found, applied):
    assert order_dropins(found, "glm53-flash.service") == applied


FRAGMENT = (
    f"{E}/glm53-flash.service",
    "[Unit]\nStartLimitBurst=3\n\n[Service]\nExecStartPre=/usr/local/sbin/p.sh\n"
    "ExecStart=/usr/bin/docker run x\nRestart=on-failure\nRestartSec=60\n",
)
MERGED = [  # (drop-ins, Restart, RestartSec, ExecStartPre argv lists, where Restart / ExecStartPre were set)
    ([], "on-failure", 60, [["/usr/local/sbin/p.sh"]], f"{E}/glm53-flash.service:7", f"{E}/glm53-flash.service:5"),
    (
        [(f"{E}/{D}/override.conf", "[Service]\nRestart=always\n")],
        "always",
        60,
        [["/usr/local/sbin/p.sh"]],
        f"{E}/{D}/override.conf:2",
        f"{E}/glm53-flash.service:5",
    ),
    # list settings accumulate; an empty assignment resets the list, and that is where it was set
    (
        [(f"{E}/{D}/a.conf", "[Service]\nExecStartPre=/bin/true\n")],
        "on-failure",
        60,
        [["/usr/local/sbin/p.sh"], ["/bin/true"]],
        f"{E}/glm53-flash.service:7",
        f"{E}/{D}/a.conf:2",
    ),
    (
        [(f"{E}/{D}/a.conf", "# off\n[Service]\nExecStartPre=\n")],
        "on-failure",
        60,
        [],
        f"{E}/glm53-flash.service:7",
        f"{E}/{D}/a.conf:3",
    ),
    (
        [(f"{E}/{D}/a.conf", "[Service]\nExecStartPre=\nExecStartPre=-/bin/other\n")],
        "on-failure",
        60,
        [["/bin/other"]],
        f"{E}/glm53-flash.service:7",
        f"{E}/{D}/a.conf:3",
    ),
    # single-valued: the last assignment systemd accepts wins
    (
        [(f"{E}/{D}/a.conf", "[Service]\nRestart=always\n"), (f"{E}/{D}/b.conf", "[Service]\nRestart=on-failure\n")],
        "on-failure",
        60,
        [["/usr/local/sbin/p.sh"]],
        f"{E}/{D}/b.conf:2",
        f"{E}/glm53-flash.service:5",
    ),
    # an empty Restart= or RestartSec= is a value their parsers refuse: systemd 252 ignores the line ("Failed to parse
    # service restart specifier, ignoring"), the value before it holds (read back from systemd 252 in the real station)
    (
        [(f"{E}/{D}/a.conf", "[Service]\nRestart=\nRestartSec=\n")],
        "on-failure",
        60,
        [["/usr/local/sbin/p.sh"]],
        f"{E}/glm53-flash.service:7",
        f"{E}/glm53-flash.service:5",
    ),
    (
        [(f"{E}/{D}/a.conf", "[Service]\nRestart=sometimes\nRestartSec=5x\n")],
        "on-failure",
        60,
        [["/usr/local/sbin/p.sh"]],
        f"{E}/glm53-flash.service:7",
        f"{E}/glm53-flash.service:5",
    ),
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


@pytest.mark.parametrize(
    "dropin, burst, at",
    [
        ("[Service]\nStartLimitBurst=10\n", 10, f"{E}/{D}/a.conf:2"),  # the legacy [Service] name, read last: wins
        ("[Unit]\nStartLimitBurst=4\n", 4, f"{E}/{D}/a.conf:2"),
        ("[Service]\nRestart=always\n", 3, f"{E}/glm53-flash.service:2"),  # the unit file's, untouched
    ],
)
def test_a_setting_under_its_legacy_name_wins_when_read_last(dropin, burst, at):
    """StartLimitBurst= in [Service] is the pre-230 name of [Unit]'s: systemd's load-fragment gperf table stores
    both into the unit's start rate limit as it reads them, so a drop-in's, read after the unit file, wins."""
    files = [FRAGMENT, (f"{E}/{D}/a.conf", dropin)]
    sections, cleared = merge_unit_files(files)
    unit = unit_from_file(sections, enabled=True, active="active", cleared=cleared, files=[p for p, _ in files])
    assert (unit.start_limit_burst, unit.set_at.get("StartLimitBurst")) == (burst, at)


def test_start_limit_interval_sec_in_service_is_ignored_and_the_finding_says_where():
    """`StartLimitIntervalSec=` has no [Service] entry in systemd's load-fragment gperf table (only the legacy
    `StartLimitInterval=` has): an unknown key, ignored; the interval stays systemd's default, and says why."""
    files = [FRAGMENT, (f"{E}/{D}/a.conf", "[Service]\nStartLimitIntervalSec=1h\n")]
    sections, cleared = merge_unit_files(files)
    unit = unit_from_file(sections, enabled=True, active="active", cleared=cleared, files=[p for p, _ in files])
    assert unit.start_limit_interval_s == 10 and "StartLimitIntervalSec" not in unit.set_at
    assert unit.origin("StartLimitIntervalSec") == (
        f"systemd's default: the `StartLimitIntervalSec=` at {E}/{D}/a.conf:2 is in [Service], where systemd does "
        "not know it and ignores it (it belongs in [Unit])"
    )
    legacy = [FRAGMENT, (f"{E}/{D}/a.conf", "[Service]\nStartLimitInterval=1h\n")]
    sections, cleared = merge_unit_files(legacy)
    unit = unit_from_file(sections, enabled=True, active="active", cleared=cleared, files=[p for p, _ in legacy])
    assert unit.start_limit_interval_s == 3600 and unit.origin("StartLimitIntervalSec") == f"set at {E}/{D}/a.conf:2"


def test_a_finding_points_at_the_file_that_set_the_value():
    files = [FRAGMENT, (f"{E}/{D}/override.conf", "[Service]\nRestart=always\n")]
    sections, cleared = merge_unit_files(files)
    unit = unit_from_file(sections, True, "active", cleared, [p for p, _ in files])
    assert unit.origin("Restart") == f"set at {E}/{D}/override.conf:2"
    fix = unit.fix_at("Restart", "glm53-flash.service", "Restart=on-failure")
    assert f"the drop-in {E}/{D}/override.conf sets it (line 2)" in fix
    assert "systemctl revert glm53-flash.service" in fix
    assert (
        unit.fix_at("RestartSec", "glm53-flash.service", "RestartSec=60")
        == f"set `RestartSec=60` in {E}/glm53-flash.service (line 8), then `systemctl daemon-reload`"
    )
    assert unit.origin("StartLimitIntervalSec").startswith("systemd's default: not set in")


def test_lines_systemd_ignores_are_said_and_a_bad_header_refuses_the_unit():
    """systemd 252's config_parse ignores an assignment before any section and a line without `=` (each with a
    warning), and refuses the whole unit for a section header without its `]` (LoadState=error)."""
    notes: list[str] = []
    sections, _ = merge_unit_files(
        [FRAGMENT, (f"{E}/{D}/x.conf", "# c\n\nRestart=always\n[Service]\nnoequals\n")], notes
    )
    assert sections["Service"]["Restart"] == ["on-failure"]
    assert notes == [
        f"{E}/{D}/x.conf:3: `Restart=always` is before any [Section]: systemd ignores it",
        f"{E}/{D}/x.conf:5: `noequals` has no `Key=`: systemd ignores the line",
    ]
    with pytest.raises(FactError, match=f"{E}/{D}/x.conf:2: invalid section header '\\[Service': systemd refuses"):
        merge_unit_files([FRAGMENT, (f"{E}/{D}/x.conf", "# c\n[Service\nRestart=always\n")])


def test_a_comment_inside_a_continuation_is_skipped_and_the_line_goes_on():
    """systemd 252 (src/shared/conf-parser.c): a comment line inside a `\\` continuation is skipped, the continuation
    goes on; an empty line ends it; blanks of the next line are kept (inside quotes they are the word's)."""
    text = '[Service]\nExecStart=/bin/x a \\\n# --max-num-seqs 1 \\\n  b "c \\\n  d"\nExecStartPre=/bin/y \\\n\n  z\n'
    unit = unit_from_file(parse_unit_file(text, f"{E}/x.service"), True, "active", files=[f"{E}/x.service"])
    assert [c.argv for c in unit.exec_start] == [["/bin/x", "a", "b", "c    d"]]
    assert unit.exec_start[0].where == f"{E}/x.service:2"
    assert [c.argv for c in unit.exec_start_pre] == [["/bin/y"]]


def test_an_emptied_list_says_so():
    files = [FRAGMENT, (f"{E}/{D}/10-off.conf", "[Service]\nExecStartPre=\n")]
    sections, cleared = merge_unit_files(files)
    unit = unit_from_file(sections, True, "active", cleared, [p for p, _ in files])
    assert unit.origin("ExecStartPre") == f"emptied by `ExecStartPre=` at {E}/{D}/10-off.conf:2"


# --- the service's environment and Exec line expansion (systemd.exec(5) "Environment", systemd.service(5) "Command
# lines"); the cases are systemd's own, from src/test/test-env-util.c and src/test/test-env-file.c -------------------

SYSTEMD_ENV = {"FOO": "BAR BAR", "BAR": "waldo"}
# test-env-util.c TEST(replace_env_argv): line → result, word for word (`$FOO` alone splits in two, `$FOO$FOO`
# names no valid variable and gives no word)
REPLACE_ENV_ARGV = [
    (["FOO$FOO"], ["FOO$FOO"]),
    (["FOO$FOOFOO"], ["FOO$FOOFOO"]),
    (["FOO${FOO}$FOO"], ["FOOBAR BAR$FOO"]),
    (["FOO${FOO}"], ["FOOBAR BAR"]),
    (["${FOO}"], ["BAR BAR"]),
    (["$FOO"], ["BAR", "BAR"]),
    (["$FOO$FOO"], []),
    (["${FOO}${BAR}"], ["BAR BARwaldo"]),
    (["${FOO"], ["${FOO"]),
    (["FOO$$${FOO}"], ["FOO$BAR BAR"]),
    (["$$FOO${FOO}"], ["$FOOBAR BAR"]),
    (["${FOO:-${BAR}}"], ["${FOO:-waldo}"]),
    (["${QUUX:-${FOO}}"], ["${QUUX:-BAR BAR}"]),
    (["${FOO:+${BAR}}"], ["${FOO:+waldo}"]),
    (["${QUUX:+${BAR}}"], ["${QUUX:+waldo}"]),
    (["${FOO:+|${BAR}|}}"], ["${FOO:+|waldo|}}"]),
    (["${FOO:+|${BAR}{|}"], ["${FOO:+|waldo{|}"]),
    # TEST(replace_env_argv_bad): unset and invalid names expand to nothing
    (["A${FOO}B"], ["ABAR BARB"]),
    (["a${~}${%}b"], ["ab"]),
    (["x${}y"], ["xy"]),
    (["$UNSET2"], []),
    (["z${UNSET3}z${UNSET1}z"], ["zzz"]),
    (["piff${UNSET2}piff"], ["piffpiff"]),
    # and the served-flag shapes: `${VAR}` stays one word, `$VAR` splits with quotes honoured
    (["--max-model-len", "${LEN}"], ["--max-model-len", ""]),
    (["--x", "$ARGS"], ["--x"]),
]


@pytest.mark.parametrize("line, result", REPLACE_ENV_ARGV, ids=[" ".join(a) or "-" for a, _ in REPLACE_ENV_ARGV])
def test_exec_lines_expand_as_systemd_expands_them(line, result):
    env = {k: EnvSetting(k, v) for k, v in SYSTEMD_ENV.items()}
    words, _ = expand_argv(line, env)
    assert [str(w) for w in words] == result


def test_expansion_reports_unset_variables_and_keeps_the_settings_used():
    env = {
        "LEN": EnvSetting("LEN", "1m", "/etc/default/x:3", "EnvironmentFile"),
        "ARGS": EnvSetting("ARGS", "--tool-call-parser 'glm 47' \"a b\"", "/u:9"),
    }
    words, unset = expand_argv(["--max-model-len", "${LEN}", "$ARGS", "${NOPE}", "$ALSO_NOPE"], env, "/u:20")
    assert [str(w) for w in words] == ["--max-model-len", "1m", "--tool-call-parser", "glm 47", "a b", ""]
    assert unset == ["NOPE", "ALSO_NOPE"]
    assert words[1].settings == (env["LEN"],) and words[0].settings == () and words[0].where == "/u:20"
    assert origin_of(words[1]) == ("/etc/default/x:3 sets LEN=1m, expanded in ExecStart (/u:20)")
    assert edit_place(words[1], "ExecStart") == "`LEN=` in /etc/default/x (line 3)"
    assert edit_place(words[2], "ExecStart") == "`Environment=ARGS=…` in /u (line 9)"
    assert "`${NOPE}` is set by no Environment= or EnvironmentFile=" in origin_of(words[5])
    assert edit_place(words[0], "ExecStart of u") == "ExecStart (/u:20)"


# test-env-file.c: file → the assignments systemd loads (load_env_file), each with the line its key starts on
ENV_FILES = [
    # TEST(load_env_file_1): later entries win; backslash-newline continues; trailing blanks go, escaped ones stay
    (
        "a=a\na=b\na=b\na=a\nb=b\\\nc\nd= d\\\ne  \\\nf  \ng=g\\ \nh= ąęół\\ śćńźżμ \ni=i\\",
        [("a", "a", 4), ("b", "bc", 5), ("d", "de  f", 7), ("g", "g ", 10), ("h", "ąęół śćńźżμ", 11), ("i", "i", 12)],
    ),
    ("a=a\\\n", [("a", "a", 1)]),  # TEST(load_env_file_2)
    # TEST(load_env_file_3): `#` and `;` comment lines; after a comment ending in `\` (systemd ≥ 254) a new line
    (
        '#SPAMD_ARGS="-d --socketpath=/var/lib/bulwark/spamd \\\n#--nouser-config        \\\nnormal1=line\\\n111\n'
        ";normal=ignored            \\\nnormal2=line222\nnormal ignored             \\\n",
        [("normal1", "line111", 3), ("normal2", "line222", 6)],
    ),
    (
        '# Generated\n\nHWMON_MODULES="coretemp f71882fg"\n\n# For compatibility reasons\n\nMODULE_0=coretemp\n'
        "MODULE_1=f71882fg",  # TEST(load_env_file_4)
        [("HWMON_MODULES", "coretemp f71882fg", 3), ("MODULE_0", "coretemp", 7), ("MODULE_1", "f71882fg", 8)],
    ),
    ("a=\nb=", [("a", "", 1), ("b", "", 2)]),  # TEST(load_env_file_5)
    # TEST(load_env_file_6): escapes outside quotes, in '…' (none), in "…" (only " \ ` $ newline)
    (
        "a=\\ \\n \\t \\x \\y \\' \nb= \\$'                  \nc= ' \\n\\t\\$\\`\\\\\n'   \nd= \" \\n\\t\\$\\`\\\\\n\"   \n",
        [("a", " n t x y '", 1), ("b", "$'", 2), ("c", " \\n\\t\\$\\`\\\\\n", 3), ("d", " \\n\\t$`\\\n", 5)],
    ),
    # TEST(parse_env_file): blanks around key and value, no inline comments, text after a closing quote goes on
    (
        "one=BAR   \n# comment\n # comment \n ; comment \n  two   =   bar    \ninvalid line\ninvalid line #comment\n"
        'three = "333\nxxxx"\nfour = \'44\\"44\'\nfive = "55\\"55" "FIVE" cinco   \nsix = seis sechs\\\n sis\n'
        'seven="sevenval" #nocomment\neight=eightval #nocomment\nten=ignored\nten=\neleven=\\value\n'
        "twelve=\"\\value\"\nthirteen='\\value'",
        [
            ("one", "BAR", 1),
            ("two", "bar", 5),
            ("three", "333\nxxxx", 8),
            ("four", '44\\"44', 10),
            ("five", '55"55FIVEcinco', 11),
            ("six", "seis sechs sis", 12),
            ("seven", "sevenval#nocomment", 14),
            ("eight", "eightval #nocomment", 15),
            ("ten", "", 17),
            ("eleven", "value", 18),
            ("twelve", "\\value", 19),
            ("thirteen", "\\value", 20),
        ],
    ),
    # TEST(parse_multiline_env_file)
    (
        'one=BAR\\\n\\ \\ \\ \\ VAR\\\n\\\tGAR\n#comment\ntwo="bar\\\n    var\\\n\tgar"\n#comment\n'
        'tri="bar \\\n    var \\\n\tgar "\n',
        [("one", "BAR    VAR\tGAR", 1), ("two", "bar    var\tgar", 5), ("tri", "bar     var \tgar ", 9)],
    ),
]


@pytest.mark.parametrize("text, expected", ENV_FILES, ids=[f"env_file_{i}" for i in range(len(ENV_FILES))])
def test_env_files_read_as_systemd_reads_them(text, expected):
    settings, notes = parse_env_file(text, "/etc/default/x")
    got = sorted((s.name, s.value, int(s.line)) for s in settings)
    assert got == sorted(expected) and not notes
    assert all(s.source == "EnvironmentFile" and s.path == "/etc/default/x" for s in settings)


def test_export_is_not_special_in_an_env_file():
    """test-env-file.c: `export nine=nineval` loads as the name `export nine`, which systemd then ignores
    (exec_context_load_environment: "Ignoring invalid environment assignment")."""
    settings, notes = parse_env_file("export MAX_LEN=1m\nPORT=8888\n", "/etc/default/x")
    assert [(s.name, s.value) for s in settings] == [("PORT", "8888")]
    assert notes == [
        "/etc/default/x:1: `export MAX_LEN=…` is not a valid assignment (`export` is not special in an "
        "EnvironmentFile=): systemd ignores it"
    ]


ENVIRONMENT_LINES = [  # one Environment= value → the assignments (config_parse_environ), what systemd ignores
    ('"A=1 2" B=3', [("A", "1 2"), ("B", "3")], 0),
    ("A=\"1 2\" B='x y'", [("A", "1 2"), ("B", "x y")], 0),
    ("A=a\\x41\\tb C=50%%", [("A", "aA\tb"), ("C", "50%")], 0),  # C escapes; %% is %
    ("A=1 A=2", [("A", "1"), ("A", "2")], 0),  # the later wins once merged (see below)
    ("5X=1 a-b=2 OK=3", [("OK", "3")], 2),  # invalid names are ignored, one note each
    ('A=1 "B=2', [("A", "1")], 1),  # unbalanced quote: the rest of the line is ignored
    ("A=\\q B=2", [], 1),  # an unknown escape: the line is ignored from there
]


@pytest.mark.parametrize("value, settings, ignored", ENVIRONMENT_LINES, ids=[v for v, _, _ in ENVIRONMENT_LINES])
def test_environment_lines_read_as_systemd_reads_them(value, settings, ignored):
    got, notes = parse_environment_line(value, "/u:7")
    assert [(s.name, s.value) for s in got] == settings and len(notes) == ignored
    assert all(s.where == "/u:7" for s in got)


UNIT_ENV = (
    f"{E}/glm53-flash.service",
    """\
[Service]
Environment=LEN=1048576 "ARGS=--a 1"
EnvironmentFile=/etc/default/glm53-flash
EnvironmentFile=-/etc/default/glm53-flash.local
Environment=GPU=0.94
ExecStart=/usr/bin/docker run x --max-model-len ${LEN} --gpu-memory-utilization ${GPU} $ARGS
ExecStartPre=:/bin/echo ${LEN}
""",
)
ENV_MERGED = [  # (drop-ins, env files on disk, LEN and where it was set, GPU's where, the env files read)
    (
        [],
        {"/etc/default/glm53-flash": "# tuned\nLEN=1m\n"},
        "1m",
        "/etc/default/glm53-flash:2",
        f"{E}/glm53-flash.service:5",
        ["/etc/default/glm53-flash", "/etc/default/glm53-flash.local"],
    ),
    # an env file overrides Environment= whatever the order of the lines; a later file overrides an earlier one
    (
        [],
        {"/etc/default/glm53-flash": "LEN=1m\n", "/etc/default/glm53-flash.local": "LEN=2m\nGPU=0.9\n"},
        "2m",
        "/etc/default/glm53-flash.local:1",
        "/etc/default/glm53-flash.local:2",
        ["/etc/default/glm53-flash", "/etc/default/glm53-flash.local"],
    ),
    # nothing in the files: Environment= holds
    (
        [],
        {"/etc/default/glm53-flash": ""},
        "1048576",
        f"{E}/glm53-flash.service:2",
        f"{E}/glm53-flash.service:5",
        ["/etc/default/glm53-flash", "/etc/default/glm53-flash.local"],
    ),
    # a drop-in's empty Environment= and EnvironmentFile= reset the lists; its own lines follow
    (
        [(f"{E}/{D}/10-env.conf", "[Service]\nEnvironment=\nEnvironmentFile=\nEnvironment=LEN=8k GPU=0.5\n")],
        {"/etc/default/glm53-flash": "LEN=1m\n"},
        "8k",
        f"{E}/{D}/10-env.conf:4",
        f"{E}/{D}/10-env.conf:4",
        [],
    ),
]


@pytest.mark.parametrize("dropins, on_disk, length, length_at, gpu_at, env_files", ENV_MERGED)
def test_the_environment_and_where_each_variable_was_set(dropins, on_disk, length, length_at, gpu_at, env_files):
    files = [UNIT_ENV, *dropins]
    sections, cleared = merge_unit_files(files)
    unit = unit_from_file(sections, True, "active", cleared, [p for p, _ in files]).with_environment(on_disk.get)
    assert [r.path for r in unit.environment_files] == env_files
    assert (unit.env["LEN"].value, unit.env["LEN"].where) == (length, length_at)
    assert unit.env["GPU"].where == gpu_at
    [start] = unit.exec_start
    assert start.argv[start.argv.index("--max-model-len") + 1] == length
    assert start.written is not None and "${LEN}" in start.written
    # `:` turns expansion off for that line (systemd.service(5), the executable prefixes table)
    assert [str(w) for w in unit.exec_start_pre[0].argv] == ["/bin/echo", "${LEN}"]


def test_a_missing_env_file_is_an_error_unless_prefixed_with_dash():
    sections, cleared = merge_unit_files([UNIT_ENV])
    unit = unit_from_file(sections, True, "active", cleared, [UNIT_ENV[0]]).with_environment(lambda path: None)
    [note] = unit.env_notes  # the `-/…local` one is skipped without a word
    assert note.startswith(f"EnvironmentFile=/etc/default/glm53-flash ({E}/glm53-flash.service:3): ")
    assert "systemd refuses to start the unit" in note
    words = unit.exec_start[0].argv
    assert words[words.index("--max-model-len") + 1] == "1048576"  # Environment= still holds


def test_env_file_globs_take_every_match_in_order():
    unit = UnitFacts(
        "unit file",
        None,
        None,
        None,
        None,
        environment_files=[EnvFileRef("/etc/default/glm53-*.env", False, "/u:3")],
        exec_start=parse_unit_exec("/bin/x ${A}"),
    )
    files = {"/etc/default/glm53-a.env": "A=1\n", "/etc/default/glm53-b.env": "A=2\n"}
    expanded = unit.with_environment(files.get, lambda pattern: sorted(files))
    assert expanded.env["A"].where == "/etc/default/glm53-b.env:1" and expanded.env["A"].via == "/u:3"
    assert [str(w) for w in expanded.exec_start[0].argv] == ["/bin/x", "2"]


SHOW_ENV = SHOW.replace(
    "Id=glm53-flash.service\n",
    """\
Environment=LEN=1048576 "ARGS=--a 1" "DOLLAR=\\$HOME"
EnvironmentFiles=/etc/default/glm53-flash (ignore_errors=no)
EnvironmentFiles=/etc/default/glm53-flash.local (ignore_errors=yes)
ExecStartEx={ path=/usr/bin/docker ; argv[]=/usr/bin/docker run --name glm53-flash vllm/vllm-openai@sha256:abc --port 8888 ; flags=no-env-expand ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }
Id=glm53-flash.service
""",
)  # noqa: E501  (systemctl show prints one property a line)


def test_systemctl_show_environment_and_env_files():
    """`Environment=` is the merged list, each string through shell_maybe_quote; `EnvironmentFiles=` one line a file,
    "%s (ignore_errors=%s)" (src/systemctl/systemctl-show.c); the `:` prefix shows as `flags=no-env-expand`."""
    unit = unit_from_show(parse_show(SHOW_ENV))
    assert [(s.name, s.value) for s in unit.environment] == [("LEN", "1048576"), ("ARGS", "--a 1"), ("DOLLAR", "$HOME")]
    assert unit.environment_files == [
        EnvFileRef("/etc/default/glm53-flash", False),
        EnvFileRef("/etc/default/glm53-flash.local", True),
    ]
    assert not unit.exec_start[0].expand_env
    sections, cleared = merge_unit_files([UNIT_ENV])
    located = unit.with_origins(unit_from_file(sections, True, "active", cleared, [UNIT_ENV[0]]))
    assert located.environment[0].where == f"{E}/glm53-flash.service:2"
    assert located.environment_files[1].where == f"{E}/glm53-flash.service:4"


# --- read back from systemd 252 by the systemd oracle (testbed/golive_testbed/oracles/systemd_oracle.py) ----------


def _read(*files: tuple[str, str]):
    from golive.facts.systemd import read_unit

    return read_unit(list(files))


def test_a_refused_line_in_a_drop_in_ends_that_drop_in_and_the_unit_still_loads():
    """systemd 252 stops reading a drop-in at a setting it refuses (here a `+!` prefix): what came before stays, the
    commands before the refused one on that line too, and the unit loads; in the unit file it refuses the unit."""
    unit = _read(
        (f"{E}/x.service", "[Service]\nType=oneshot\nExecStart=/bin/a\n"),
        (
            f"{E}/x.service.d/a.conf",
            "[Service]\nEnvironment=A=1\nExecStartPre=/bin/b x ; +!/bin/c\nRestart=on-failure\n",
        ),
    )
    assert unit.load_error is None and unit.env == {} and unit.restart == "no"  # Restart= came after: not applied
    assert [c.argv for c in unit.exec_start_pre] == [["/bin/b", "x"]]
    assert [s.name for s in unit.environment] == ["A"]
    assert any("systemd stops reading" in n for n in unit.ignored)
    refused = _read((f"{E}/x.service", "[Service]\nExecStartPre=/bin/a %Z\nExecStartPre=\nExecStart=/bin/a\n"))
    assert refused.load_error and "bad-setting" in refused.load_error  # even though a later line resets it


def test_what_service_verify_refuses_and_an_empty_unit_file():
    assert "only Type=oneshot" in (
        _read((f"{E}/x.service", "[Service]\nExecStart=/a\nExecStart=/b\n")).load_error or ""
    )
    assert "Restart=always" in (
        _read((f"{E}/x.service", "[Service]\nType=oneshot\nExecStart=/a\nRestart=always\n")).load_error or ""
    )
    assert "no ExecStart=" in (_read((f"{E}/x.service", "[Service]\nType=simple\n")).load_error or "")
    assert "masked" in (_read((f"{E}/x.service", "")).load_error or "")


def test_working_directory_as_systemd_runs_the_commands():
    """WorkingDirectory=: `-` makes a missing folder no error (the commands run in `/`), without it every command
    fails (200/CHDIR) and the start with it; `~` is root's home and sets $HOME; a relative path refuses the unit."""

    def unit(line: str):
        return _read((f"{E}/x.service", f"[Service]\nExecStart=/bin/a\n{line}\n")).with_environment(
            lambda p: None, is_dir=lambda p: p in ("/srv", "/root")
        )

    assert unit("WorkingDirectory=/srv").run_directory == "/srv"
    assert (unit("WorkingDirectory=-/gone").run_directory, unit("WorkingDirectory=-/gone").start_fails()) == ("/", None)
    assert "status=200/CHDIR" in (unit("WorkingDirectory=/gone").start_fails() or "")
    home = unit("WorkingDirectory=~")
    assert home.run_directory == "/root" and home.env["HOME"].value == "/root"
    assert "bad-setting" in (unit("WorkingDirectory=relative").load_error or "")


def test_systemctl_show_of_252_prints_argv_bare_and_the_files_say_where_words_end():
    """252 prints `"c d"` as `c d` and a newline in an argument as it is: the words come from the unit file."""
    text = "[Service]\nExecStart=/bin/x \"c d\" 'e\\nf'\n"
    files = unit_from_file(parse_unit_file(text, f"{E}/x.service"), True, "active", files=[f"{E}/x.service"])
    shown = unit_from_show(
        parse_show(
            "Id=x.service\nExecStart={ path=/bin/x ; argv[]=/bin/x c d e\nf ; ignore_errors=no ; start_time=[n/a] }\n"
        )
    ).with_origins(files)
    assert shown.exec_start[0].argv == ["/bin/x", "c d", "e\nf"] and shown.exec_start[0].where == f"{E}/x.service:2"


def test_specifiers_of_the_system_manager_and_the_host():
    from golive.facts.unit_files import BadSpecifier, Specifiers

    spec = Specifiers("a-b.service", f"{E}/a-b.service", {"H": "gb300-a", "m": "0123"})
    assert spec.resolve("%t %u %S %H %m %y %Y %j %%") == f"/run root /var/lib gb300-a 0123 {E}/a-b.service {E} b %"
    with pytest.raises(BadSpecifier):
        spec.resolve("%Z")
