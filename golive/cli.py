"""`golive run | profile` (and the testbed's `demo | reference` where it is installed): the operator's entry points."""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, NoReturn, TextIO

import yaml

from golive import __version__
from golive.core.secrets import scrub
from golive.core.verdict import EXIT_CODES, EXIT_INCOMPLETE, EXIT_USAGE, printable
from golive.run.scope import suites_dir
from golive.site import loader

COMMANDS_GROUP = "golive.commands"  # other distributions (golive's testbed) add subcommands here
TESTBED_COMMANDS = ("demo", "reference", "station")
REPORT_FILES = ("go-live.html", "go-live.md", "results.json", "junit.xml")
# pytest plugins a Python environment may bring that a go-live run has no use for: hypothesis's loads its whole
# engine (~0.55 s of every run's start) where it is installed; anyio's (installed with httpx) imports its asyncio
# backend (~0.1 s) for async tests the checklist does not have
UNUSED_PLUGINS = ("hypothesispytest", "anyio")


def fail(message: str, code: int = EXIT_USAGE) -> int:
    """One line on stderr (escaped, secrets hidden by their shape: golive.core.secrets), and the exit code."""
    print(f"golive: {printable(scrub(' '.join(message.split())))}", file=sys.stderr)
    return code


def report_folder_problem(out: Path, option: str = "-o") -> str | None:
    """Why `out` cannot be the report folder (a usage error, said before anything runs); None when it can."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"{option} {out}: cannot be the report folder ({exc.strerror or exc})"
    if not os.access(out, os.W_OK | os.X_OK):
        return f"{option} {out}: cannot be the report folder (not writable)"
    return None


def report_args(out: Path) -> list[str]:
    return [f"--golive-output={out}", "-o", "junit_family=xunit2"]


class _UsageLine:
    """sys.stderr while pytest runs: everything passes through at once, except pytest's own usage error (the
    `ERROR: …` lines pytest.main writes as it returns 4: several lines, argparse's usage among them), held back for
    golive to say in one line (README: exit codes); written through as it came when pytest ends otherwise."""

    def __init__(self, stream: TextIO):
        self._stream = stream
        self.held: list[str] = []

    def write(self, text: str) -> int:
        plain = _ANSI.sub("", text)
        if plain.startswith("ERROR: ") or (self.held and not plain.strip()):
            self.held.append(text)
            return len(text)
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:  # fileno, flush, isatty, encoding … are the stream's
        return getattr(self._stream, name)

    def line(self, command: str) -> str:
        """The held error as one line: argparse's own error where pytest's parser refused an argument."""
        text = _ANSI.sub("", "".join(self.held)).strip().removeprefix("ERROR: ")
        refused = re.search(r"^\S*: error: (.+)$", text, re.MULTILINE)
        if refused:
            return f"{command}: {refused[1]} (see `{command} --help`; other arguments go to pytest)"
        return f"golive: {' '.join(text.split())}"


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class _Scrubbed:
    """sys.stdout or sys.stderr while pytest runs: each line scrubbed of every secret the run knows before it is
    written (golive.core.secrets: a server's echo of the key in any form), held until its end or a flush."""

    def __init__(self, stream: TextIO, secrets: list[str]):
        self._stream, self._secrets = stream, secrets
        self._line = ""

    def write(self, text: str) -> int:
        self._line += text
        if "\n" in self._line:
            done, _, self._line = self._line.rpartition("\n")
            self._stream.write(scrub(done + "\n", self._secrets))
        return len(text)

    def flush(self) -> None:
        if self._line:
            self._stream.write(scrub(self._line, self._secrets))
            self._line = ""
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding … are the stream's
        return getattr(self._stream, name)


def _leave_if_stuck(code: int, grace_s: float = 2.0) -> None:
    """After a stopped run (--max-run-time, SIGINT, SIGTERM: every report written), a thread still waiting on a
    station (a connect or a write inside its own timeout) must not hold the exit: it is given `grace_s`, then the
    process ends with the run's code."""
    from golive.endpoint.bounded import stopping

    if not stopping():
        return
    import threading
    import time

    ends = time.monotonic() + grace_s
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join(max(ends - time.monotonic(), 0.0))
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def run_suites(inventory: Path, out: Path, pytest_args: list[str], command: str = "golive run") -> int:
    """Run the checklist against the inventory; the exit code is the verdict's (README: exit codes). A usage error
    (a report folder golive cannot write, an argument pytest refuses) is one line on stderr and exit 4."""
    from golive.run.progress import defer_interrupt, takes_interrupts

    # from here a SIGTERM or Ctrl-C ends the run with its reports (golive.run.plugin), not Python's default exit
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, defer_interrupt)
    if takes_interrupts(before[signal.SIGINT]):
        signal.signal(signal.SIGINT, defer_interrupt)
    try:
        return _run_suites(inventory, out, pytest_args, command)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _run_suites(inventory: Path, out: Path, pytest_args: list[str], command: str) -> int:
    import pytest

    problem = report_folder_problem(out)
    if problem:
        return fail(problem)
    suites = suites_dir()
    before = {name: _stamp(out / name) for name in REPORT_FILES}
    args = [
        str(suites),
        f"--golive-inventory={inventory.resolve()}",
        *report_args(out.resolve()),
        "-p",
        "no:cacheprovider",
        *(a for name in UNUSED_PLUGINS for a in ("-p", f"no:{name}")),
        "-c",
        str(Path(__file__).with_name("suites.ini")),
        f"--rootdir={suites.parent}",
        *pytest_args,
    ]
    here, stdout, stderr = os.getcwd(), sys.stdout, sys.stderr
    known = _secrets_of(inventory)
    sys.stdout = _Scrubbed(stdout, known)  # what pytest writes, scrubbed
    sys.stderr = errors = _UsageLine(_Scrubbed(stderr, known))  # type: ignore[arg-type]
    os.chdir(suites.parent)  # pytest names checks relative to where it starts: `suites/host/test_unit.py::…`
    try:
        code = int(pytest.main(args))
    except KeyboardInterrupt:  # a signal while pytest starts or ends, outside its own interrupt path
        code = fail("the run was interrupted (Ctrl-C or SIGTERM) while pytest started or ended", EXIT_INCOMPLETE)
    finally:
        os.chdir(here)
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = stdout, stderr
    if code == EXIT_USAGE and errors.held:
        print(printable(scrub(errors.line(command))), file=sys.stderr)
    elif errors.held:
        sys.stderr.write("".join(errors.held))
    if code == EXIT_USAGE:
        return code  # pytest refused the arguments: nothing ran, nothing to claim
    for name in REPORT_FILES:
        path = out / name
        if path.exists() and _stamp(path) != before[name]:  # never claim a file an earlier run left
            print(f"golive: wrote {path}")
    _leave_if_stuck(code)
    return code


def _secrets_of(inventory: Path) -> list[str]:
    """Every secret of the inventory's stations, in every form (golive.core.secrets.station_secrets); [] where it
    cannot be read (pytest says why, in one line)."""
    from golive.core.secrets import station_secrets
    from golive.endpoint.target import api_key_of

    try:
        loaded = loader.load_inventory(inventory)
    except loader.ConfigError:
        return []
    return station_secrets(loaded.inventory.stations, api_key_of)


def arguments_refused(inventory: Path, pytest_args: list[str], command: str) -> bool:
    """Whether pytest refuses these arguments for this inventory (then its one line is said, exit 4): collection only,
    nothing run, no report written, in a moment. For a command with a slow start (`golive demo` brings up a vLLM
    server) that would otherwise find a typo minutes later."""
    import contextlib
    import io
    import tempfile

    with tempfile.TemporaryDirectory(prefix="golive-arguments-") as out, contextlib.redirect_stdout(io.StringIO()):
        return run_suites(inventory, Path(out), ["--co", "-q", *pytest_args], command) == EXIT_USAGE


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_ino


def cmd_run(ns: argparse.Namespace, extra: list[str]) -> int:
    try:
        loaded = loader.load_inventory(Path(ns.inventory), ns.profile)
    except loader.ConfigError as exc:
        return fail(str(exc))
    out = (
        Path(ns.output)
        if ns.output
        else ((loaded.path.parent / loaded.inventory.output) if loaded.inventory.output else Path("reports"))
    )
    if ns.profile:
        profile = ns.profile if not ns.profile.endswith((".yaml", ".yml")) else str(Path(ns.profile).resolve())
        extra = [f"--golive-profile={profile}", *extra]
    if ns.baseline:
        from golive.report.baseline import load_baseline

        try:  # read here too: a baseline that cannot be one is a usage error before pytest starts
            load_baseline(Path(ns.baseline), loaded.profile.profile.name)
        except ValueError as exc:
            return fail(f"--baseline {exc}")
        extra = [f"--golive-baseline={Path(ns.baseline).resolve()}", *extra]
    if ns.max_run_time is not None:
        try:
            seconds = float(ns.max_run_time)
        except ValueError:
            seconds = float("nan")
        if not 0 < seconds < float("inf"):
            return fail(f"--max-run-time takes a number of seconds above 0, not {ns.max_run_time!r}")
        extra = [f"--golive-max-run-time={seconds:g}", *extra]
    return run_suites(Path(ns.inventory), out, extra)


# what each `golive profile` action takes besides its action: anything else given is a usage error
PROFILE_TAKES = {"list": set(), "show": {"name"}, "capture": {"name", "station", "recipe", "output"}}
PROFILE_OPTIONS = {"name": "a name", "station": "--station", "recipe": "--recipe", "output": "--output/-o"}


def cmd_profile(ns: argparse.Namespace, extra: list[str]) -> int:
    given = [option for option in PROFILE_OPTIONS if getattr(ns, option) is not None]
    refused = [PROFILE_OPTIONS[option] for option in given if option not in PROFILE_TAKES[ns.action]]
    if refused:
        what = f"{ns.name!r}" if refused == ["a name"] else ", ".join(refused)
        return fail(f"profile {ns.action} does not take {what} (see `golive profile --help`)")
    if ns.action == "capture":
        from golive.day2.capture import cmd_capture

        return cmd_capture(ns)
    if ns.action == "list":
        for name in loader.shipped_profiles():
            print(name)
        return 0
    if not ns.name:
        return fail("profile show needs a profile name or file")
    try:
        ref = Path(ns.name) if ns.name.endswith((".yaml", ".yml")) else ns.name
        loaded = loader.load_profile(ref)
    except loader.ConfigError as exc:
        return fail(str(exc))
    print(f"# resolved from: {' <- '.join(str(p) for p in loaded.files)}")
    print(f"# sha256: {loaded.sha256}")
    print(yaml.safe_dump(loaded.profile.model_dump(mode="json"), sort_keys=False), end="")
    return 0


def cmd_watch(ns: argparse.Namespace, extra: list[str]) -> int:
    from golive.day2.watch import cmd_watch as watch

    return watch(ns)


class UsageExit(Exception):
    """argparse refused the command line; its message is the one line shown (exit 4, never INCOMPLETE's 2)."""


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.broken: dict[str, str] = {}  # a plugin command that could not be loaded -> its one line

    def error(self, message: str) -> NoReturn:
        raise UsageExit(f"{self.prog}: {message} (see `{self.prog} --help`)")


def build_parser() -> _Parser:
    codes = "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES.items())
    parser = _Parser(
        prog="golive",
        description="Go-live acceptance for self-hosted LLM serving "
        "stations: host, cluster and endpoint checks against a recipe profile.",
        epilog=f"exit codes: {codes}",
    )
    parser.add_argument("--version", action="version", version=f"golive {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser(
        "run",
        help="run the checklist against an inventory's stations (extra args go to pytest)",
        description="Run the checklist against the inventory's stations and write go-live.html, "
        "go-live.md, results.json and junit.xml. Any argument golive does not know "
        "passes through to pytest: -m host, -k needle, -x, -n 2, -v …",
        epilog=f"exit codes: {codes}",
    )
    run.add_argument("inventory")
    run.add_argument("--output", "-o", help="report folder (default: the inventory's `output`, else ./reports)")
    run.add_argument("--profile", help="use this profile instead of the inventory's")
    run.add_argument(
        "--baseline",
        metavar="RESULTS_JSON",
        help="the last go-live's results.json: add what changed since (post-upgrade gate)",
    )
    run.add_argument(
        "--max-run-time",
        metavar="SECONDS",
        help="stop the whole run after this long: "
        "the running check is stopped, the reports are written, the verdict is INCOMPLETE (exit 2)",
    )
    run.set_defaults(func=cmd_run)

    prof = sub.add_parser(
        "profile",
        help="list shipped profiles, show one resolved (extends applied), or capture a "
        "known-good station into a site profile",
    )
    prof.add_argument("action", choices=["show", "list", "capture"])
    prof.add_argument("name", nargs="?", help="show: a profile name or file; capture: the inventory")
    prof.add_argument("--station", help="capture: the inventory's station to read (default: its only station)")
    prof.add_argument(
        "--recipe",
        help="capture: extend this shipped recipe or profile file (default: the shipped one the station fits best)",
    )
    prof.add_argument("--output", "-o", help="capture: the site profile to write")
    prof.set_defaults(func=cmd_profile)

    watch = sub.add_parser(
        "watch",
        help="after go-live: re-run the light checks, a liveness canary and a small timed "
        "probe on a schedule and serve them as Prometheus metrics (--rules: print alert rules)",
    )
    watch.add_argument("inventory")
    watch.add_argument(
        "--every", type=float, default=300, metavar="SECONDS", help="seconds between rounds (default 300)"
    )
    watch.add_argument(
        "--listen", default=":9109", metavar="[HOST]:PORT", help="where /metrics is served (default :9109)"
    )
    watch.add_argument(
        "--rules", action="store_true", help="print Prometheus alert rules for the profile in force and exit"
    )
    watch.add_argument("--once", action="store_true", help="one round, print the metrics, exit")
    watch.set_defaults(func=cmd_watch)

    for ep in entry_points(group=COMMANDS_GROUP):
        _add_plugin_command(parser, sub, ep)
    return parser


def _add_plugin_command(parser: _Parser, sub: Any, ep: Any) -> None:
    """Let an entry point add its subparser. One that cannot (an import error, a bug) leaves every other command
    working; its own command is listed and fails with one line saying why and what to do (parser.broken)."""
    before = set(sub.choices)
    try:
        ep.load()(sub)  # adds its subparser and sets func
    except Exception as exc:  # noqa: BLE001 - any error in another distribution's code
        dist = getattr(ep.dist, "name", None) or "the distribution that registers it"
        for name in (set(sub.choices) - before) or ({ep.name} - before):
            parser.broken[name] = (
                f"`golive {name}` could not be loaded: entry point {ep.name} = {ep.value} of {dist} raised "
                f"{type(exc).__name__}: {exc}; reinstall {dist} (golive's testbed: `.venv/bin/pip install --no-deps "
                f"-e ./testbed` in golive's checkout)"
            )
            if name not in sub.choices:
                sub.add_parser(name, help=f"(not loaded: {type(exc).__name__}; `golive {name}` says why)")


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # golive as the program (not called from another one): --max-run-time counts its own start
        from golive.run import progress

        progress.STARTED_AT = time.monotonic() - progress.process_age()
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    commands = {
        name for action in parser._actions if isinstance(action, argparse._SubParsersAction) for name in action.choices
    }
    if argv and argv[0] in parser.broken:
        return fail(parser.broken[argv[0]])
    if argv and argv[0] in TESTBED_COMMANDS and argv[0] not in commands:
        return fail(
            f"`golive {argv[0]}` belongs to golive's testbed, which runs from golive's source checkout: "
            f"run `bash scripts/setup.sh` there, then `.venv/bin/golive {argv[0]}`"
        )
    try:
        ns, extra = parser.parse_known_args(argv)
    except UsageExit as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    if extra and ns.command not in ("run", "demo"):
        return fail(f"unexpected arguments: {' '.join(extra)}")
    return int(ns.func(ns, extra))


if __name__ == "__main__":
    sys.exit(main())
