"""systemd: `systemctl show` output, unit files and their drop-ins merged as systemd merges them, time spans."""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace

from golive.facts import FactError

_SPAN_UNITS = {
    "us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3,
    "s": 1, "sec": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400, "w": 604800, "week": 604800, "weeks": 604800,
}


def parse_timespan(text: str) -> float:
    """systemd.time(7) span to seconds: "60", "1min", "1h", "1min 30s", "3600s", "infinity"."""
    text = text.strip()
    if text == "infinity":
        return float("inf")
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]+)", text)
    if not parts or re.sub(r"[\d.\sa-z]", "", text):
        raise FactError(f"not a systemd time span: {text!r}")
    total = 0.0
    for number, unit in parts:
        if unit not in _SPAN_UNITS:
            raise FactError(f"unknown time unit {unit!r} in {text!r}")
        total += float(number) * _SPAN_UNITS[unit]
    return total


def parse_show(text: str) -> dict[str, list[str]]:
    """`systemctl show UNIT`: Key=value lines; repeated keys (ExecStartPre) keep every value in order."""
    props: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        props.setdefault(key, []).append(value)
    return props


@dataclass(frozen=True)
class ExecCommand:
    argv: list[str]
    ignore_errors: bool = False
    where: str = ""  # the unit file (or drop-in) and line that set it, where known

    @property
    def path(self) -> str:
        return self.argv[0] if self.argv else ""


# `ignore_errors=` in Exec*, `flags=` in the Exec*Ex variants (systemd ≥ 243)
_SHOW_EXEC = re.compile(r"\{\s*path=(?P<path>[^;]*?)\s*;\s*argv\[\]=(?P<argv>.*?)\s*;\s*"
                        r"(?:ignore_errors=(?P<ign>\w+)|flags=(?P<flags>[^;]*))")


def parse_show_exec(value: str) -> list[ExecCommand]:
    """An Exec* property of `systemctl show`: `{ path=… ; argv[]=… ; ignore_errors=… ; … }`, possibly several."""
    commands = []
    for match in _SHOW_EXEC.finditer(value):
        ignore = match["ign"] == "yes" or "ignore-failure" in (match["flags"] or "")
        commands.append(ExecCommand(argv=_split_argv(match["argv"]), ignore_errors=ignore))
    if value.strip() and not commands:
        raise FactError(f"unrecognised Exec property format: {value[:120]!r}")
    return commands


def _split_argv(text: str) -> list[str]:
    """systemd ≥ 248 quotes arguments with spaces; older versions join them bare, which shlex may not close."""
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


class Value(str):
    """A unit file setting's value that remembers the file and line that set it (`where`)."""

    path: str
    line: int

    def __new__(cls, text: str, path: str = "", line: int = 0) -> Value:
        value = super().__new__(cls, text)
        value.path, value.line = path, line
        return value

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.line else self.path


Sections = dict[str, dict[str, list[Value]]]


def parse_unit_file(text: str, path: str = "unit file", into: Sections | None = None,
                    cleared: dict[tuple[str, str], str] | None = None) -> Sections:
    """A unit file: [Section] Key=value, `\\` continuations joined, comments dropped, repeated keys kept; every value
    remembers its file and line. With `into`, the file's assignments are applied on top of those already there, as
    systemd applies a drop-in to the unit file before it.

    An empty assignment (`ExecStartPre=`) resets the list, as systemd does; `cleared` records where.
    """
    sections: Sections = {} if into is None else into
    current: dict[str, list[Value]] | None = None
    logical: list[str] = []
    first = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not logical and (not stripped or stripped[0] in "#;"):
            continue
        if not logical:
            first = number
        if stripped.endswith("\\"):
            logical.append(stripped[:-1].strip())
            continue
        logical.append(stripped)
        line, logical = " ".join(part for part in logical if part), []
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        if current is None or "=" not in line:
            raise FactError(f"{path}:{first}: unit file line outside a section or without '=': {line[:80]!r}")
        key, value = (s.strip() for s in line.split("=", 1))
        if value == "":
            current[key] = []
            if cleared is not None:
                section = next(name for name, body in sections.items() if body is current)
                cleared[(section, key)] = f"{path}:{first}"
        else:
            current.setdefault(key, []).append(Value(value, path, first))
    return sections


# Where systemd looks for unit files and drop-ins of system units, highest priority first (systemd.unit(5), "Unit File
# Load Path"; src/core/unit.c, src/shared/dropin.c): `systemctl set-property` writes *.control, `systemctl edit` /etc.
UNIT_DIRS = ("/etc/systemd/system.control", "/run/systemd/system.control", "/run/systemd/transient",
             "/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system", "/usr/lib/systemd/system",
             "/lib/systemd/system")


def dropin_dir_names(unit: str) -> list[str]:
    """The drop-in directories that apply to `unit`, most specific first: `glm53-flash.service.d`, then each dash
    prefix (`glm53-.service.d`), then the type's (`service.d`) — systemd.unit(5), "drop-in" (systemd ≥ 246)."""
    name, _, kind = unit.rpartition(".")
    names = [f"{unit}.d"]
    parts = name.split("-")
    for i in range(len(parts) - 1, 0, -1):
        names.append(f"{'-'.join(parts[:i])}-.{kind}.d")
    return names + [f"{kind}.d"]


def order_dropins(paths: list[str], unit: str, dirs: tuple[str, ...] = UNIT_DIRS) -> list[str]:
    """The drop-ins systemd applies, in the order it applies them: of files with one name, the one in the directory
    of highest priority masks the others (/etc over /run over /usr/lib); the survivors are applied sorted by file
    name, whichever directory they are in (systemd.unit(5); src/basic/conf-files.c)."""
    names = dropin_dir_names(unit)
    rank = {f"{d}/{n}": (i, j) for i, d in enumerate(dirs) for j, n in enumerate(names)}
    winners: dict[str, tuple[tuple[int, int], str]] = {}
    for path in paths:
        folder, _, filename = path.rpartition("/")
        if folder not in rank or not filename.endswith(".conf"):
            continue
        if filename not in winners or rank[folder] < winners[filename][0]:
            winners[filename] = (rank[folder], path)
    return [winners[name][1] for name in sorted(winners)]


def merge_unit_files(files: list[tuple[str, str]]) -> tuple[Sections, dict[tuple[str, str], str]]:
    """The effective unit of a fragment and its drop-ins (`[(path, text)]`, fragment first, drop-ins in order)."""
    sections: Sections = {}
    cleared: dict[tuple[str, str], str] = {}
    for path, text in files:
        parse_unit_file(text, path, into=sections, cleared=cleared)
    return sections, cleared


def parse_unit_exec(value: str) -> ExecCommand:
    """An Exec line of a unit file; leading `-@:+!` prefixes are flags, not the command."""
    prefix = value[:len(value) - len(value.lstrip("-@:+!"))]
    return ExecCommand(argv=_split_argv(value[len(prefix):]), ignore_errors="-" in prefix,
                       where=value.where if isinstance(value, Value) else "")


@dataclass
class UnitFacts:
    """What the restart/prestart/start checks need, whichever source it came from."""

    source: str
    restart: str | None
    restart_sec_s: float | None
    start_limit_burst: int | None
    start_limit_interval_s: float | None
    exec_start_pre: list[ExecCommand] = field(default_factory=list)
    exec_start: list[ExecCommand] = field(default_factory=list)
    exec_start_post: list[ExecCommand] = field(default_factory=list)
    enabled: str | None = None
    active: str | None = None
    # where each setting was made: "Restart" → "/etc/systemd/system/x.service.d/override.conf:2"; a key reset by an
    # empty assignment → where the reset is; a key set nowhere is absent (systemd's default)
    set_at: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)  # the unit file, then the drop-ins systemd applied, in order
    emptied: frozenset[str] = frozenset()  # keys whose set_at is an empty assignment (`ExecStartPre=`) that reset them

    @property
    def dropins(self) -> list[str]:
        return self.files[1:]

    def origin(self, key: str) -> str:
        """`set at FILE:LINE` / `systemd's default: not set in FILE…`, for findings."""
        if key in self.emptied:
            return f"emptied by `{key}=` at {self.set_at[key]}"
        if key in self.set_at:
            return f"set at {self.set_at[key]}"
        return f"systemd's default: not set in {' or '.join(self.files) or 'the unit'}"

    def fix_at(self, key: str, unit: str, setting: str) -> str:
        """Where to make `setting` (e.g. `Restart=on-failure`) so that it holds: the file that set the value now."""
        where = self.set_at.get(key)
        path = where.rsplit(":", 1)[0] if where else (self.files[0] if self.files else unit)
        if path in self.dropins:
            return (f"the drop-in {path} sets it (line {where.rsplit(':', 1)[1] if where else '?'}): write "
                    f"`{setting}` there or delete that line (`systemctl revert {unit}` removes every drop-in and "
                    f"returns to the unit file), then `systemctl daemon-reload`")
        return f"set `{setting}` in {path}" + (f" (line {where.rsplit(':', 1)[1]})" if where else "") + \
            ", then `systemctl daemon-reload`"

    def with_origins(self, other: UnitFacts) -> UnitFacts:
        """These facts (from `systemctl show`) with where each value was set, read from the files (`other`)."""
        def located(mine: list[ExecCommand], theirs: list[ExecCommand]) -> list[ExecCommand]:
            # `systemctl show` may print argv unquoted (systemd < 248): match on the words joined
            wheres = {" ".join(c.argv): c.where for c in theirs}
            return [replace(c, where=wheres.get(" ".join(c.argv), "")) for c in mine]
        return replace(self, set_at=other.set_at, files=other.files, emptied=other.emptied,
                       exec_start_pre=located(self.exec_start_pre, other.exec_start_pre),
                       exec_start=located(self.exec_start, other.exec_start),
                       exec_start_post=located(self.exec_start_post, other.exec_start_post))


def unit_from_show(props: dict[str, list[str]]) -> UnitFacts:
    if "Id" not in props and "Names" not in props:
        raise FactError("`systemctl show` printed no Id= or Names=: not a unit's properties")

    def one(key: str) -> str | None:
        return props[key][-1] if key in props else None

    def execs(key: str) -> list[ExecCommand]:
        return [cmd for value in props.get(key, []) for cmd in parse_show_exec(value)]

    restart_usec = one("RestartUSec")
    interval = one("StartLimitIntervalUSec") or one("StartLimitIntervalSec")
    burst = one("StartLimitBurst")
    return UnitFacts(
        source="systemctl show",
        restart=one("Restart"),
        restart_sec_s=parse_timespan(restart_usec) if restart_usec else None,
        start_limit_burst=int(burst) if burst else None,
        start_limit_interval_s=parse_timespan(interval) if interval else None,
        exec_start_pre=execs("ExecStartPre"),
        exec_start=execs("ExecStart"),
        exec_start_post=execs("ExecStartPost"),
        enabled=one("UnitFileState"),
        active=one("ActiveState"),
    )


# systemd's defaults when a unit file says nothing (systemd.service(5), systemd.unit(5))
_DEFAULT_RESTART_SEC = 0.1
_DEFAULT_START_LIMIT_BURST = 5
_DEFAULT_START_LIMIT_INTERVAL = 10.0


def unit_from_file(sections: Sections, enabled: bool | None, active: str | None,
                   cleared: dict[tuple[str, str], str] | None = None, files: list[str] | None = None) -> UnitFacts:
    unit, service = sections.get("Unit", {}), sections.get("Service", {})
    set_at: dict[str, str] = {}
    emptied: set[str] = set()

    def last(section: dict[str, list[Value]], *keys: str) -> Value | None:
        for key in keys:
            if section.get(key):
                return section[key][-1]
        return None

    def note(name: str, value: Value | None) -> str | None:
        if value is not None and value.line:
            set_at[name] = value.where
        return value

    restart_sec = note("RestartSec", last(service, "RestartSec"))
    # StartLimitInterval= in [Service] is the pre-230 spelling systemd still accepts
    interval = note("StartLimitIntervalSec", last(unit, "StartLimitIntervalSec", "StartLimitInterval")
                    or last(service, "StartLimitInterval"))
    burst = note("StartLimitBurst", last(unit, "StartLimitBurst") or last(service, "StartLimitBurst"))
    restart = note("Restart", last(service, "Restart"))
    for key in ("ExecStartPre", "ExecStart", "ExecStartPost"):
        values = service.get(key)
        if values and values[-1].line:
            set_at[key] = values[-1].where
        elif (cleared or {}).get(("Service", key)):
            set_at[key] = (cleared or {})[("Service", key)]
            emptied.add(key)
    return UnitFacts(
        source="unit file" if not files or len(files) == 1 else "unit file and drop-ins",
        restart=restart or "no",
        restart_sec_s=parse_timespan(restart_sec) if restart_sec else _DEFAULT_RESTART_SEC,
        start_limit_burst=_int(burst) if burst else _DEFAULT_START_LIMIT_BURST,
        start_limit_interval_s=parse_timespan(interval) if interval else _DEFAULT_START_LIMIT_INTERVAL,
        exec_start_pre=[parse_unit_exec(v) for v in service.get("ExecStartPre", [])],
        exec_start=[parse_unit_exec(v) for v in service.get("ExecStart", [])],
        exec_start_post=[parse_unit_exec(v) for v in service.get("ExecStartPost", [])],
        enabled=None if enabled is None else ("enabled" if enabled else "disabled"),
        active=active,
        set_at=set_at,
        files=list(files or []),
        emptied=frozenset(emptied),
    )


def _int(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise FactError(f"{getattr(value, 'where', '')}: not a number: {value!r}") from None
