"""The operator's commands: bad input gives one line and a usage exit code, never a traceback."""

import re
import subprocess
import sys

import pytest
from golive_run import REPO, golive

from golive.profile.schema import LAYERS


@pytest.mark.parametrize(
    "content,expected",
    [
        (
            "profile: glm-5.3-flash-gb300\nstations:\n  - name: a\n    hots: x\n",
            ":4: unknown key 'stations.0.hots'; did you mean 'host'?",
        ),
        ("profile: glm-5.3-flash-gb300\nstations: {a: 1\n", "YAML syntax error"),
        ("profile: glm-5.3-flash-gb300\nstations: 3\n", ":2: 'stations': expected a list"),
    ],
)
def test_run_bad_inventory_is_one_line(tmp_path, content, expected):
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(content)
    result = golive("run", str(inventory))
    assert result.returncode == 4
    assert result.stderr.count("\n") == 1 and expected in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "reports").exists()


def test_run_missing_inventory(tmp_path):
    result = golive("run", str(tmp_path / "absent.yaml"))
    assert result.returncode == 4 and result.stderr == f"golive: {tmp_path / 'absent.yaml'}: file not found\n"


def test_plain_pytest_bad_inventory_is_usage_error(tmp_path):
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("profile: glm-5.3-flash-gb300\nstations:\n  - name: a\n    phase: live\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(REPO / "suites"),
            f"--golive-inventory={inventory}",
            "-p",
            "no:cacheprovider",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 4 and "Traceback" not in result.stderr + result.stdout
    assert f"{inventory}:4: 'stations.0.phase'" in result.stderr


def test_profile_show_resolves_extends():
    result = golive("profile", "show", "fixtures/profiles/gb300-site.yaml")
    assert result.returncode == 0, result.stderr
    assert "max_model_len: 1048576" in result.stdout
    assert "digest: sha256:adfb5fb0570860760c6334c818692ad883c9c3dd8d916b7f1f424d50567c2f09" in result.stdout
    assert "glm-5.3-flash-gb300.yaml <- " in result.stdout


def test_profile_show_unknown_name():
    result = golive("profile", "show", "glm-5.3")
    assert result.returncode == 4 and result.stderr.startswith("golive: unknown profile 'glm-5.3'")


def test_profile_list_names_the_shipped_recipes():
    names = golive("profile", "list").stdout.split()
    assert {"glm-5.3-2x-station-tp2", "glm-5.3-flash-gb300"} <= set(names)


@pytest.mark.slow  # ~1 min: vLLM tries to start and dies
def test_demo_with_a_dead_reference_station_is_incomplete(tmp_path):
    """The reference station cannot start (its port is taken): the endpoint layer is not checked, so no GO."""
    import json
    import socket

    with socket.socket() as taken:  # bound, not listening: the launcher refuses the port, requests are refused
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        result = golive(
            "demo", "--targets", "bundled", "-o", tmp_path, "-q", timeout=600, env={"GOLIVE_DEMO_PORT": str(port)}
        )
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "endpoint layer not checked:" in output and "verdict: INCOMPLETE" in output
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["verdict"] == "incomplete"
    endpoint = [c for c in results["checks"] if c["layer"] == "endpoint" and c["station"] == "reference-vllm"]
    assert endpoint and {c["outcome"] for c in endpoint} == {"not_checked"}, output


HEALTHY = REPO / "fixtures" / "inventories" / "gb300-healthy.yaml"


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["run"],
        ["nosuch"],
        ["run", "--max-run-time"],
        ["profile", "nosuch"],
        ["profile", "capture"],
        ["run", str(HEALTHY), "--bogus-flag"],
    ],
)
def test_every_usage_error_exits_4_with_one_line(args):
    """As a process (`python -m golive.cli`): the exit status the shell sees, pytest's own refusals included."""
    result = golive(*args)
    assert result.returncode == 4, result
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("golive"), result.stderr


def _testbed() -> bool:
    from importlib.metadata import entry_points

    return {"demo", "reference"} <= {ep.name for ep in entry_points(group="golive.commands")}


TESTBED = pytest.mark.skipif(not _testbed(), reason="golive's testbed (demo, reference) is not installed")
H = str(HEALTHY)
# every subcommand's usage errors: (argv, what its one line says); {tmp} is the test's folder, {bad} an inventory
# that does not parse, {file} a plain file, {folder} a folder
USAGE_ERRORS = [
    ([], "the following arguments are required: command"),
    (["nosuch"], "invalid choice: 'nosuch'"),
    (["--version", "x"], None),  # argparse's --version exits 0 before reading the rest: not a usage error
    # golive run
    (["run"], "golive run: the following arguments are required: inventory"),
    (["run", "{tmp}/absent.yaml"], "absent.yaml: file not found"),
    (["run", "{bad}"], "bad.yaml:3: YAML syntax error"),
    (["run", "{folder}"], "cannot read"),
    (["run", H, "--profile", "nosuch"], "unknown profile 'nosuch'"),
    (["run", H, "--profile", "{bad}"], "bad.yaml:3: YAML syntax error"),
    (["run", H, "--baseline", "{tmp}/absent.json"], "--baseline {tmp}/absent.json: baseline results file not found"),
    (["run", H, "--baseline", "{bad}"], "not a readable results.json"),
    (["run", H, "--max-run-time", "abc"], "--max-run-time takes a number of seconds above 0, not 'abc'"),
    (["run", H, "--max-run-time", "0"], "--max-run-time takes a number of seconds above 0"),
    (["run", H, "--max-run-time"], "argument --max-run-time: expected one argument"),
    (["run", H, "-o", "{file}"], "cannot be the report folder"),
    (
        ["run", H, "-o", "{tmp}/out", "--no-such-pytest-flag"],
        "golive run: unrecognized arguments: --no-such-pytest-flag",
    ),
    (["run", H, "-o", "{tmp}/out", "-n", "abc"], "golive run: argument -n/--numprocesses: invalid"),
    # golive profile show | list
    (["profile"], "golive profile: the following arguments are required: action"),
    (["profile", "nosuch"], "invalid choice: 'nosuch'"),
    (["profile", "show"], "profile show needs a profile name or file"),
    (["profile", "show", "nosuch"], "unknown profile 'nosuch'"),
    (["profile", "show", "{tmp}/absent.yaml"], "absent.yaml: file not found"),
    (["profile", "show", "{bad}"], "bad.yaml:3: YAML syntax error"),
    (["profile", "show", "reference-cpu", "-o", "{tmp}/x.yaml"], "profile show does not take --output/-o"),
    (["profile", "show", "reference-cpu", "extra"], "unexpected arguments: extra"),
    (["profile", "list", "extra"], "profile list does not take 'extra'"),
    (["profile", "list", "--station", "a"], "profile list does not take --station"),
    # golive profile capture: all said before the station is read
    (["profile", "capture"], "profile capture needs an inventory file"),
    (["profile", "capture", H], "profile capture needs -o FILE"),
    (["profile", "capture", "{tmp}/absent.yaml", "-o", "{tmp}/s.yaml"], "absent.yaml: file not found"),
    (["profile", "capture", "{bad}", "-o", "{tmp}/s.yaml"], "bad.yaml:3: YAML syntax error"),
    (["profile", "capture", H, "--station", "nosuch", "-o", "{tmp}/s.yaml"], "--station nosuch: the inventory has"),
    (["profile", "capture", H, "--recipe", "nosuch", "-o", "{tmp}/s.yaml"], "--recipe nosuch: not a shipped recipe"),
    (["profile", "capture", H, "-o", "{tmp}/no/s.yaml"], "which is not a folder that exists"),
    (["profile", "capture", H, "-o", "{folder}"], "is a folder"),
    # golive watch
    (["watch"], "golive watch: the following arguments are required: inventory"),
    (["watch", "{tmp}/absent.yaml"], "absent.yaml: file not found"),
    (["watch", "{bad}", "--rules"], "bad.yaml:3: YAML syntax error"),
    (["watch", H, "--every", "abc"], "argument --every: invalid float value: 'abc'"),
    (["watch", H, "--every", "0"], "--every takes seconds above 0"),
    (["watch", H, "--every", "nan"], "--every takes seconds above 0"),
    (["watch", H, "--listen", "abc"], "--listen takes [HOST]:PORT"),
    (["watch", H, "--listen", ":70000"], "--listen takes [HOST]:PORT"),
    (["watch", H, "--listen", "::1:9109"], "an IPv6 host goes in brackets"),
    (["watch", H, "extra"], "unexpected arguments: extra"),
    # the testbed's golive demo | reference: said before the reference station starts
    pytest.param(["demo", "-o"], "golive demo: argument --output/-o: expected one argument", marks=TESTBED),
    pytest.param(["demo", "-o", "{file}"], "cannot be the report folder", marks=TESTBED),
    pytest.param(
        ["demo", "-o", "{tmp}/out", "--no-such-pytest-flag"],
        "golive demo: unrecognized arguments: --no-such-pytest-flag",
        marks=TESTBED,
    ),
    pytest.param(["demo", "-o", "{tmp}/out", "-m", "host or hots"], "no check carries the marker hots", marks=TESTBED),
    pytest.param(["reference"], "golive reference: the following arguments are required: action", marks=TESTBED),
    pytest.param(["reference", "sideways"], "invalid choice: 'sideways'", marks=TESTBED),
    pytest.param(
        ["reference", "up", "--port", "70000"], "argument --port: takes a TCP port 1-65535, not '70000'", marks=TESTBED
    ),
    pytest.param(["reference", "up", "--port", "0"], "argument --port: takes a TCP port 1-65535", marks=TESTBED),
    pytest.param(
        ["reference", "up", "--variant", "nosuch", "--state-dir", "{tmp}/state"],
        "unknown variant 'nosuch'",
        marks=TESTBED,
    ),
    pytest.param(["reference", "down", "extra"], "unexpected arguments: extra", marks=TESTBED),
]


def _case_id(value: object) -> str | None:
    return " ".join(value).replace(H, "HEALTHY") or "(none)" if isinstance(value, list) else "-"


@pytest.mark.parametrize("argv,says", USAGE_ERRORS, ids=_case_id)
def test_every_subcommands_usage_errors_exit_4_with_one_line(tmp_path, capsys, argv, says):
    """Every subcommand, every kind of usage error (missing, extra or unknown arguments, bad values, unknown names,
    files that do not exist or do not parse, arguments pytest refuses): exit 4, one line on stderr naming it, nothing
    on stdout, no traceback (README: exit codes). In-process (golive.cli.main)."""
    from golive.cli import main

    (tmp_path / "bad.yaml").write_text("profile: reference-cpu\nstations: {a: 1\n")
    (tmp_path / "file").write_text("")
    (tmp_path / "folder").mkdir()
    names = {
        "tmp": str(tmp_path),
        "bad": str(tmp_path / "bad.yaml"),
        "file": str(tmp_path / "file"),
        "folder": str(tmp_path / "folder"),
    }
    argv = [arg.format(**names) for arg in argv]
    if says is None:
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 0
        return
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 4, (out, err)
    assert err.count("\n") == 1 and err.endswith("\n") and err.startswith("golive"), err
    assert says.format(**names) in err and "Traceback" not in err, err
    if "-m" not in argv:  # an -m typo is found after pytest's session header (stdout); nothing else prints there
        assert out == "", out
    assert not (tmp_path / "s.yaml").exists() and not list((tmp_path / "out").glob("*"))


def test_version_and_python_dash_m():
    from golive import __version__

    for command in ([sys.executable, "-m", "golive", "--version"], [sys.executable, "-m", "golive.cli", "--version"]):
        result = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0 and result.stdout == f"golive {__version__}\n", result


class _BrokenEntryPoint:
    """An entry point in group golive.commands whose code fails: on import, or after adding its subparser."""

    value = "golive_broken_plugin:add"
    dist = None

    def __init__(self, name: str, after_adding: bool):
        self.name, self.after_adding = name, after_adding

    def load(self):
        if not self.after_adding:
            raise ModuleNotFoundError("No module named 'golive_broken_plugin'")

        def add(sub):
            sub.add_parser(self.name).add_argument("action")
            raise RuntimeError("half-added")

        return add


@pytest.mark.parametrize("after_adding", [False, True], ids=["import-error", "error-after-add-parser"])
def test_a_broken_plugin_command_leaves_every_other_command_working(monkeypatch, capsys, after_adding):
    """A distribution's golive.commands entry point that raises: golive --help, run --help and the other commands
    still work, the broken command is listed, and running it is one line naming the entry point and what to do."""
    import golive.cli as cli

    monkeypatch.setattr(
        cli,
        "entry_points",
        lambda group: [_BrokenEntryPoint("station", after_adding), _BrokenEntryPoint("run", after_adding)],
    )
    for argv in (["--help"], ["run", "--help"]):
        with pytest.raises(SystemExit) as exited:
            cli.main(argv)
        assert exited.value.code == 0, argv
        assert "station" in capsys.readouterr().out or argv != ["--help"]
    assert cli.main(["profile", "list"]) == 0
    capsys.readouterr()
    assert cli.main(["station", "up"]) == 4
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(
        "golive: `golive station` could not be loaded: entry point station = golive_broken_plugin:add"
    ), err
    assert "reinstall" in err and "pip install --no-deps -e ./testbed" in err, err


def test_run_help_says_pytest_arguments_pass_through():
    result = golive("run", "--help")
    assert result.returncode == 0 and "passes through to pytest" in " ".join(result.stdout.split())


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_unknown_marker_is_a_usage_error_and_writes_no_report(tmp_path, xdist):
    """With -n too: xdist's controller collects nothing, so the typo is caught before its workers start."""
    result = golive("run", str(HEALTHY), "-o", str(tmp_path / "out"), "-m", "host or hots", *xdist)
    assert result.returncode == 4, result.stdout + result.stderr
    assert "no check carries the marker hots" in result.stderr and "INTERNALERROR" not in result.stdout
    assert not list((tmp_path / "out").glob("*")), "a usage error writes no report"
    assert "no check selected" not in result.stdout


def test_selection_of_nothing_exits_5_and_writes_no_report(tmp_path):
    result = golive("run", str(HEALTHY), "-o", str(tmp_path / "out"), "-k", "no_such_check")
    assert result.returncode == 5, result.stdout + result.stderr
    assert "no check selected (exit 5)" in result.stdout
    assert not list((tmp_path / "out").glob("*")) and "golive: wrote" not in result.stdout


def test_collect_only_lists_the_checks_and_exits_0_without_reports(tmp_path):
    result = golive("run", str(HEALTHY), "-o", str(tmp_path / "out"), "-m", "host", "--co", "-q")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "test_unit_caps_starts_per_interval[gb300-a]" in result.stdout
    assert not list((tmp_path / "out").glob("*"))


@pytest.mark.parametrize(
    "selection,client_imported,listed",
    [
        ("host", False, {"host"}),
        ("host or cluster", False, {"host", "cluster"}),  # layer names only: their suites
        ("host or endpoint", True, {"host", "endpoint"}),
        ("not endpoint", True, {"host", "cluster"}),  # else: all, -m
    ],
)
def test_layers_left_out_by_m_are_not_imported(tmp_path, selection, client_imported, listed):
    """`-m` naming only layers collects only their suites: a run of host checks never imports the endpoint suite and
    the OpenAI client (~0.6 s of its start, golive.run.plugin.pytest_ignore_collect)."""
    # PYTHONPROFILEIMPORTTIME: every import on stderr; -s: the imports made while collecting too
    result = golive(
        "run",
        HEALTHY,
        "-o",
        tmp_path / "out",
        "-m",
        selection,
        "--co",
        "-q",
        "-s",
        env={"PYTHONPROFILEIMPORTTIME": "1"},
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert {layer for layer in LAYERS if f"suites/{layer}/" in result.stdout} == listed
    assert bool(re.search(r"\| +openai$", result.stderr, re.MULTILINE)) == client_imported, result.stdout
