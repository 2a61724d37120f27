"""systemd 252 as the oracle of golive's unit reader: generated units (systemd_cases) loaded by the real station's
systemd in batches (one tar of files, one daemon-reload, `systemctl show` of each unit, one `systemctl start` of
every unit systemd loaded), each command a recorder that writes down its arguments, working directory and
environment. golive reads the same files (golive.facts.unit_files, systemd, exec_lines, systemd_env) and must say
what systemd said:

- whether systemd loads the unit at all (LoadState=loaded; a bad setting or a broken header refuses it);
- the drop-ins it applies, in its order (DropInPaths=);
- Restart=, RestartSec=, StartLimitBurst=, StartLimitIntervalSec=, Type=, WorkingDirectory=, EnvironmentFiles=;
- every Exec command as `systemctl show` prints it (program, words, `-` and `:` flags), and golive's own reading of
  that `systemctl show` text (what it reads on a station where systemd is PID 1) gives the files' words;
- on start: whether it starts (an env file without `-` missing, a WorkingDirectory= missing), and each command's
  arguments after `$VAR`/`${VAR}` expansion, its working directory and the environment systemd gave it.

    with SystemdOracle(record) as oracle:                       # a station up (golive_testbed.realstation)
        report = oracle.run(count=300, seed=1)
        assert not report.disagreements, report.describe(UnitCase.text)
"""

from __future__ import annotations

import io
import itertools
import re
import shlex
import subprocess
import tarfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from golive.facts import FactError, systemd, unit_files
from golive_testbed.oracles.reduce import Agreement, Disagreement, reduce_parts
from golive_testbed.oracles.systemd_cases import RECORDER, UnitCase, generate
from golive_testbed.realstation_host import Record

RECORDER_SCRIPT = r"""#!/usr/bin/perl
# golive's oracle recorder: one line each for the arguments, the working directory and the environment systemd gave
# this command, hex-encoded, appended to /run/golive-oracle/UNIT
use strict;
use Cwd qw(getcwd);
my $unit = 'unknown';
if (open(my $cg, '<', '/proc/self/cgroup')) { while (<$cg>) { $unit = $1 if m{/([^/]+\.service)$}; } }
$unit =~ s{[^A-Za-z0-9\@._-]}{_}g;
mkdir '/run/golive-oracle';
open(my $out, '>>', "/run/golive-oracle/$unit") or exit 0;
sub h { return unpack('H*', $_[0]); }
my $cwd = getcwd();
$cwd = '' unless defined $cwd;
my $record = join(' ', 'A', map { h($_) } @ARGV) . "\n" . join(' ', 'C', h($cwd)) . "\n"
    . join(' ', 'E', map { h("$_=$ENV{$_}") } sort keys %ENV) . "\n";
syswrite($out, $record);  # one write: commands running side by side do not mix their lines
close $out;
"""
SHOWN = (
    "Id LoadState LoadError FragmentPath DropInPaths Type Restart RestartUSec StartLimitBurst StartLimitIntervalUSec "
    "WorkingDirectory Environment EnvironmentFiles ExecStartPre ExecStartPreEx ExecStart ExecStartEx ExecStartPost "
    "ExecStartPostEx ExecStop ExecStopPost NeedDaemonReload"
).split()
# what systemd adds to every command's environment itself (systemd.exec(5), "Environment Variables in Spawned
# Processes"): not the unit's
SYSTEMD_OWN = frozenset(("INVOCATION_ID", "JOURNAL_STREAM", "LANG", "PATH", "SYSTEMD_EXEC_PID", "MAINPID"))
ORDER = ("exec_start_pre", "exec_start", "exec_start_post")


@dataclass
class Observed:
    """What systemd said of one unit."""

    show: str = ""
    started: bool = False
    result: str = ""
    records: list[tuple[list[str], str, dict[str, str]]] = field(default_factory=list)  # argv[1:], cwd, environment


def _props(show: str) -> dict[str, str]:
    """`systemctl show` of one unit: Key=value, a value running on over the next lines until the next Key= line."""
    props: dict[str, str] = {}
    key = None
    for line in show.split("\n"):
        match = re.match(r"([A-Za-z]+)=", line)
        if match and match.group(1) in SHOWN:
            key = match.group(1)
            props[key] = props[key] + "\n" + line[match.end() :] if key in props else line[match.end() :]
        elif key is not None:
            props[key] += "\n" + line
    return props


_EXEC = re.compile(
    r"\{ path=(?P<path>.*?) ; argv\[\]=(?P<argv>.*?) ; (?:ignore_errors=(?P<ign>yes|no)|flags=(?P<flags>[^;]*?)) ; "
    r"start_time=",
    re.DOTALL,
)


def _shown_execs(props: dict[str, str], key: str) -> list[tuple[str, str, bool, bool]]:
    """Each command systemd holds: (program, its words as shown, failure ignored, no `$VAR` expansion)."""
    plain = [(m["path"], m["argv"], m["ign"] == "yes") for m in _EXEC.finditer(props.get(key, ""))]
    ex = [m["flags"] or "" for m in _EXEC.finditer(props.get(f"{key}Ex", ""))]
    return [(p, a, i, "no-env-expand" in (ex[n] if n < len(ex) else "")) for n, (p, a, i) in enumerate(plain)]


class SystemdOracle:
    """The real station's systemd, loading generated units in batches."""

    def __init__(self, record: Record, batch: int = 150):
        self.record, self.batch = record, batch
        self.host: dict[str, str] = {}

    def __enter__(self) -> SystemdOracle:
        tar = _tar(
            {
                RECORDER: (RECORDER_SCRIPT, 0o755),
            },
            links={"/usr/local/bin/golive-rec": RECORDER, "/usr/local/lib/golive oracle": "golive-oracle"},
        )
        self._ssh("tar -xf - -C / && mkdir -p /run/golive-oracle", stdin=tar)
        # the host's specifier values, as golive reads them on a station (golive.facts.systemd.host_specifiers)
        files = ["/proc/sys/kernel/hostname", "/etc/machine-info", "/etc/machine-id", "/proc/sys/kernel/random/boot_id"]
        files += ["/proc/sys/kernel/osrelease", "/etc/os-release", "/usr/lib/os-release", "/etc/passwd"]
        said = self._ssh(
            "uname -m; " + "; ".join(f"echo @@@ {f}; cat {f} 2>/dev/null || echo @@@missing" for f in files)
        ).decode()
        machine, _, rest = said.partition("\n")
        texts: dict[str, str | None] = {}
        for chunk in rest.split("@@@ ")[1:]:
            path, _, text = chunk.partition("\n")
            texts[path] = None if text.startswith("@@@missing") else text
        self.host = systemd.host_specifiers(texts.get, machine)
        return self

    def __exit__(self, *exc: object) -> None:
        self._ssh(
            "rm -rf /usr/local/lib/golive-oracle '/usr/local/lib/golive oracle' /usr/local/bin/golive-rec "
            "/run/golive-oracle /srv/golive-oracle",
            check=False,
        )

    def _ssh(self, command: str, stdin: bytes = b"", check: bool = True, timeout: float = 600) -> bytes:
        done = subprocess.run(
            ["ssh", "-F", str(self.record.ssh_config), "-p", str(self.record.ssh_port), "127.0.0.1", command],
            input=stdin,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"`{command[:100]}` failed in the station: {done.stderr.decode()[-500:]}")
        return done.stdout

    # --- one batch ----------------------------------------------------------------------------------------------

    def observe(self, cases: Sequence[UnitCase]) -> list[Observed]:
        """Load, show and start every case in one batch; remove them all after."""
        files: dict[str, tuple[str, int]] = {}
        folders: list[str] = []
        for case in cases:
            for path, text in [*case.files, *case.env_files]:
                files[path] = (text, 0o644)
            folders += case.folders
        names = [c.name for c in cases]
        quoted = " ".join(shlex.quote(n) for n in names)
        paths = sorted({p for c in cases for p, _ in [*c.files, *c.env_files]} | set(folders))
        self._ssh(
            "rm -rf /run/golive-oracle/* && tar -xf - -C / && systemctl daemon-reload", stdin=_tar(files, folders)
        )
        try:
            shown = self._ssh(
                f'for u in {quoted}; do echo "@@@ $u"; systemctl show -p {",".join(SHOWN)} "$u"; done'
            ).decode("utf-8", "surrogateescape")
            observed = {name: Observed() for name in names}
            for chunk in shown.split("@@@ ")[1:]:
                name, _, text = chunk.partition("\n")
                observed[name].show = text
            loaded = [n for n in names if _props(observed[n].show).get("LoadState") == "loaded"]
            if loaded:
                listing = " ".join(shlex.quote(n) for n in loaded)
                said = self._ssh(
                    f"systemctl start {listing} >/dev/null 2>&1; "
                    f'for u in {listing}; do echo "@@@ $u"; systemctl show -p Result --value "$u"; '
                    f'cat "/run/golive-oracle/$u" 2>/dev/null; done; true'
                ).decode()
                for chunk in said.split("@@@ ")[1:]:
                    name, _, text = chunk.partition("\n")
                    result, _, lines = text.partition("\n")
                    found = observed[name]
                    found.started, found.result = True, result.strip()
                    found.records = _records(lines)
        finally:
            self._ssh(
                f"systemctl stop {quoted} >/dev/null 2>&1; rm -rf "
                + " ".join(shlex.quote(p) for p in paths)
                + " /etc/systemd/system/g*-.service.d /run/systemd/system/g*-.service.d "
                "/usr/lib/systemd/system/g*-.service.d"
                + f"; systemctl reset-failed {quoted} >/dev/null 2>&1; systemctl daemon-reload",
                check=False,
            )
        return [observed[n] for n in names]

    # --- many batches -------------------------------------------------------------------------------------------

    def run(self, count: int, seed: int, tag: str = "a", reduce: bool = True) -> Agreement[UnitCase]:
        started = time.monotonic()
        report: Agreement[UnitCase] = Agreement("golive's unit reader", "systemd 252")
        cases = generate(count, seed, tag)
        for start in range(0, len(cases), self.batch):
            chunk = cases[start : start + self.batch]
            for case, seen in zip(chunk, self.observe(chunk), strict=True):
                report.record(compare(case, seen, self.host))
        if reduce:
            for found in report.disagreements[:5]:
                found.reduced = self.reduced(found)
        report.seconds = time.monotonic() - started
        return report

    def reduced(self, found: Disagreement[UnitCase]) -> UnitCase:
        """The smallest form of the case that still disagrees on the same reading."""
        case = found.case
        tried = itertools.count()  # a name of its own for each candidate: a command of one still running (Restart=)
        # writes no record into another's

        def still(candidates: list[UnitCase]) -> list[bool]:
            renamed = [_renamed(c, f"{c.name.split('-')[0]}r{next(tried)}-svc.service") for c in candidates]
            seen = self.observe(renamed)
            verdicts = []
            for c, s in zip(renamed, seen, strict=True):
                d = compare(c, s, self.host)
                verdicts.append(d is not None and d.what == found.what)
            return verdicts

        parts = reduce_parts(case.parts(), case.rebuilt, still)
        return case.rebuilt(parts)


def _renamed(case: UnitCase, name: str) -> UnitCase:
    """The same case under another unit name (every path that names it follows), so candidates of one batch differ."""

    def swap(text: str) -> str:
        return text.replace(case.name, name).replace(case.name.split("-")[0] + "-", name.split("-")[0] + "-")

    return UnitCase(
        name,
        tuple((swap(p), swap(t)) for p, t in case.files),
        tuple((swap(p), swap(t)) for p, t in case.env_files),
        tuple(swap(f) for f in case.folders),
    )


def _records(text: str) -> list[tuple[list[str], str, dict[str, str]]]:
    def unhex(word: str) -> str:
        return bytes.fromhex(word).decode("utf-8", "surrogateescape")

    out: list[tuple[list[str], str, dict[str, str]]] = []
    argv: list[str] = []
    cwd = ""
    for line in text.splitlines():
        kind, *words = line.split(" ")
        if kind == "A":
            argv = [unhex(w) for w in words]
        elif kind == "C":
            cwd = unhex(words[0]) if words else ""
        elif kind == "E":
            env = dict(unhex(w).split("=", 1) for w in words)
            out.append((argv, cwd, {k: v for k, v in env.items() if k not in SYSTEMD_OWN}))
    return out


def _tar(files: dict[str, tuple[str, int]], folders: Sequence[str] = (), links: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        made: set[str] = set()

        def folder(path: str) -> None:
            parts = path.strip("/").split("/")
            for i in range(1, len(parts) + 1):
                sub = "/".join(parts[:i])
                if sub not in made:
                    made.add(sub)
                    info = tarfile.TarInfo(sub)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)

        for path in folders:
            folder(path)
        for path, (text, mode) in files.items():
            folder(path.rsplit("/", 1)[0])
            data = text.encode("utf-8", "surrogateescape")
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
        for path, target in (links or {}).items():
            folder(path.rsplit("/", 1)[0])
            info = tarfile.TarInfo(path.lstrip("/"))
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buffer.getvalue()


# --- golive's reading, and the comparison --------------------------------------------------------------------------


@dataclass
class Reading:
    """golive's reading of a case: from the files, and from the `systemctl show` text systemd printed."""

    files: systemd.UnitFacts | None
    error: str | None = None


def golive_reading(case: UnitCase, host: dict[str, str]) -> Reading:
    """What golive reads of the case, as StationFacts reads a station: the unit file and the drop-ins that apply to
    the unit (unit_files.order_dropins), merged, with the env files as they are and the folders that exist."""
    paths = [p for p, _ in case.files]
    dropins = unit_files.order_dropins(paths[1:], case.name)
    texts = dict(case.files)
    env = dict(case.env_files)
    try:
        unit = systemd.read_unit([(p, texts[p]) for p in [paths[0], *dropins]], host=host)
    except FactError as exc:
        return Reading(None, str(exc))
    unit = unit.with_environment(
        env.get,
        glob=lambda pattern: sorted(p for p in env if re.fullmatch(_glob_re(pattern), p)),
        is_dir=lambda path: path in case.folders or path in ("/", "/tmp", "/root", "/run"),
    )
    return Reading(unit)


def _glob_re(pattern: str) -> str:
    return "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)


def compare(case: UnitCase, seen: Observed, host: dict[str, str]) -> Disagreement[UnitCase] | None:
    """The first reading where golive and systemd differ, or None."""
    props = _props(seen.show)
    reading = golive_reading(case, host)
    state = props.get("LoadState", "")
    unit = reading.files
    golive_loads = unit is not None and unit.load_error is None
    if golive_loads != (state == "loaded"):
        why = reading.error or (unit.load_error if unit else None) or "loaded"
        return Disagreement(
            "whether systemd loads the unit", why, f"LoadState={state} {props.get('LoadError', '')}", case
        )
    if unit is None or state != "loaded":
        return None
    return _settings_differ(case, unit, props) or _show_differs(case, unit, seen) or _start_differs(case, unit, seen)


def _differ(case: UnitCase, what: str, golive: object, tool: object) -> Disagreement[UnitCase] | None:
    return None if golive == tool else Disagreement(what, str(golive), str(tool), case)


def _settings_differ(case: UnitCase, unit: systemd.UnitFacts, props: dict[str, str]) -> Disagreement[UnitCase] | None:
    """The loaded unit's settings and Exec lines, golive's reading of the files against `systemctl show`'s."""
    checks: list[tuple[str, object, object]] = [
        ("the drop-ins applied, in order", unit.files[1:], props.get("DropInPaths", "").split()),
        ("Type=", unit.service_type, props.get("Type")),
        ("Restart=", unit.restart, props.get("Restart")),
        (
            "RestartSec=",
            unit.restart_sec_s,
            systemd.parse_timespan(props.get("RestartUSec", "")) if props.get("RestartUSec") else None,
        ),
        ("StartLimitBurst=", unit.start_limit_burst, int(props.get("StartLimitBurst", "-1"))),
        (
            "StartLimitIntervalSec=",
            unit.start_limit_interval_s,
            systemd.parse_timespan(props.get("StartLimitIntervalUSec", "0")),
        ),
        ("WorkingDirectory=", unit.working_directory or "", _workdir(props.get("WorkingDirectory", ""))),
        (
            "EnvironmentFiles=",
            [(r.path, r.ignore_errors) for r in unit.environment_files],
            [
                (m.group(1), m.group(2) == "yes")
                for m in re.finditer(r"^(.*) \(ignore_errors=(yes|no)\)$", props.get("EnvironmentFiles", ""), re.M)
            ],
        ),
    ]
    for key, attr in systemd.EXEC_KEYS.items():
        mine = [
            (
                (c.written or c.argv)[0],
                " ".join(
                    [c.argv0 if c.argv0 is not None else (c.written or c.argv)[0], *list(c.written or c.argv)[1:]]
                ),
                c.ignore_errors,
                not c.expand_env,
            )
            for c in getattr(unit, attr)
        ]
        checks.append((f"{key}= as systemd holds it", mine, _shown_execs(props, key)))
    for what, golive, tool in checks:
        found = _differ(case, what, golive, tool)
        if found is not None:
            return found
    return None


def _show_differs(case: UnitCase, unit: systemd.UnitFacts, seen: Observed) -> Disagreement[UnitCase] | None:
    """golive's reading of that `systemctl show` text, with the files for word boundaries: what a station gives."""
    try:
        shown = systemd.unit_from_show(systemd.parse_show(seen.show)).with_origins(unit)
    except FactError as exc:
        return Disagreement("golive's reading of `systemctl show`", f"FactError: {exc}", "loaded", case)
    for key, attr in systemd.EXEC_KEYS.items():
        found = _differ(
            case,
            f"{key}= read from `systemctl show`",
            [(c.argv, c.argv0) for c in getattr(shown, attr)],
            [(list(c.written or c.argv), c.argv0) for c in getattr(unit, attr)],
        )
        if found is not None:
            return found
    return None


def _expected_run(unit: systemd.UnitFacts) -> tuple[list[systemd.ExecCommand], bool, bool]:
    """The commands golive expects to run at the start, in order; whether a command without `-` fails, and whether
    an ExecStartPost= one does. A program the station does not have fails its command: the start goes on past it
    only with `-`; golive does not judge that, the station's files do."""
    expected: list[systemd.ExecCommand] = []
    failed = post_failed = stopped = False
    for attr in ORDER:
        for command in getattr(unit, attr):
            if _exists((command.written or command.argv)[0]) and not unit.chdir_fails:
                expected.append(command)
            elif not command.ignore_errors:
                failed, post_failed = True, post_failed or attr == "exec_start_post"
                # Type=simple forks the main process and goes on to ExecStartPost= before the main process execs
                # its program: a program that is not there fails the main process, not what follows it
                stopped = attr != "exec_start" or unit.service_type != "simple"
                if stopped:
                    break
        if stopped:
            break
    return expected, failed, post_failed


def _start_differs(case: UnitCase, unit: systemd.UnitFacts, seen: Observed) -> Disagreement[UnitCase] | None:
    """The start: refused, or each command as it ran, in the folder and environment golive reads."""
    refused = bool(unit.start_refused)  # an env file without `-` missing: systemd does not start it at all
    expected, failed, post_failed = _expected_run(unit)
    # with Restart= systemd may start it again (after a failed command, or a main process that ended): the start
    # limit then stops it; the first attempt is what golive reads
    again = unit.restart != "no"
    result = ("exit-code" if failed else "success") if again and seen.result == "start-limit-hit" else seen.result
    if refused != (result != "success") and not (failed and not refused and result == "exit-code"):
        return Disagreement(
            "whether the unit starts", "; ".join(unit.start_refused) or "starts", f"Result={seen.result}", case
        )
    if refused:
        return None
    mine_runs = [[str(w) for w in c.argv[1:]] for c in expected]
    ran = [argv for argv, _, _ in seen.records]
    if again and unit.service_type == "oneshot":  # the first attempt's commands
        ran = ran[: len(mine_runs)]
    if unit.service_type != "oneshot":
        # ExecStartPost= runs beside the main process, and not at all once it has ended, and with Restart= the
        # whole may run again: each command that ran is one golive expected, and every ExecStartPre= and ExecStart=
        # command ran
        def words(commands: list[systemd.ExecCommand]) -> list[list[str]]:
            return [[str(w) for w in c.argv[1:]] for c in expected if any(c is x for x in commands)]

        # an ExecStartPost= that fails stops the unit: its main process may be killed before it records
        must = words(unit.exec_start_pre) + ([] if post_failed else words(unit.exec_start))
        if not all(r in mine_runs for r in ran) or not all(m in ran for m in must):
            return Disagreement(
                "the commands run, each with its arguments after $VAR expansion", str(mine_runs), str(ran), case
            )
    else:
        found = _differ(case, "the commands run, each with its arguments after $VAR expansion", mine_runs, ran)
        if found is not None:
            return found
    for _, cwd, env in seen.records:
        found = _differ(case, "the working directory the commands run in", unit.run_directory, cwd) or _differ(
            case, "the environment the commands get", {k: v.value for k, v in unit.env.items()}, env
        )
        if found is not None:
            return found
    return None


def _exists(program: str) -> bool:
    """The programs the station has for these units: the recorder, under its spellings (systemd_cases.PROGRAMS)."""
    return program in ("golive-rec", RECORDER, "/usr/local/lib/golive oracle/rec")


def _workdir(shown: str) -> str:
    """`!/x` is the file's `-/x`; a bare `!` is what is left after `WorkingDirectory=` emptied a `-/x`: not set."""
    return "" if shown == "!" else "-" + shown[1:] if shown.startswith("!") else shown
