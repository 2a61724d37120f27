"""systemd: `systemctl show` output, unit files, time spans."""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

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


def parse_unit_file(text: str) -> dict[str, dict[str, list[str]]]:
    """A unit file: [Section] Key=value, `\\` continuations joined, comments dropped, repeated keys kept.

    An empty assignment (`ExecStartPre=`) resets the list, as systemd does.
    """
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    logical: list[str] = []
    for raw in text.splitlines():
        stripped = raw.strip()
        if not logical and (not stripped or stripped[0] in "#;"):
            continue
        if stripped.endswith("\\"):
            logical.append(stripped[:-1].strip())
            continue
        logical.append(stripped)
        line, logical = " ".join(part for part in logical if part), []
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        if current is None or "=" not in line:
            raise FactError(f"unit file line outside a section or without '=': {line[:80]!r}")
        key, value = (s.strip() for s in line.split("=", 1))
        if value == "":
            current[key] = []
        else:
            current.setdefault(key, []).append(value)
    return sections


def parse_unit_exec(value: str) -> ExecCommand:
    """An Exec line of a unit file; leading `-@:+!` prefixes are flags, not the command."""
    prefix = re.match(r"[-@:+!]*", value).group(0)
    return ExecCommand(argv=_split_argv(value[len(prefix):]), ignore_errors="-" in prefix)


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


def unit_from_file(sections: dict[str, dict[str, list[str]]], enabled: bool | None, active: str | None) -> UnitFacts:
    unit, service = sections.get("Unit", {}), sections.get("Service", {})

    def last(section: dict[str, list[str]], *keys: str) -> str | None:
        for key in keys:
            if section.get(key):
                return section[key][-1]
        return None

    restart_sec = last(service, "RestartSec")
    # StartLimitInterval= in [Service] is the pre-230 spelling systemd still accepts
    interval = last(unit, "StartLimitIntervalSec", "StartLimitInterval") or last(service, "StartLimitInterval")
    burst = last(unit, "StartLimitBurst") or last(service, "StartLimitBurst")
    return UnitFacts(
        source="unit file",
        restart=last(service, "Restart") or "no",
        restart_sec_s=parse_timespan(restart_sec) if restart_sec else _DEFAULT_RESTART_SEC,
        start_limit_burst=int(burst) if burst else _DEFAULT_START_LIMIT_BURST,
        start_limit_interval_s=parse_timespan(interval) if interval else _DEFAULT_START_LIMIT_INTERVAL,
        exec_start_pre=[parse_unit_exec(v) for v in service.get("ExecStartPre", [])],
        exec_start=[parse_unit_exec(v) for v in service.get("ExecStart", [])],
        exec_start_post=[parse_unit_exec(v) for v in service.get("ExecStartPost", [])],
        enabled=None if enabled is None else ("enabled" if enabled else "disabled"),
        active=active,
    )
