"""systemd: `systemctl show` output, time spans, and `UnitFacts`, the unit the restart, prestart and start checks read.

`UnitFacts` comes from `systemctl show` or from the unit files and their drop-ins merged as systemd merges them, with
the service's environment (Environment=, EnvironmentFile=) and its Exec lines expanded in it as systemd expands them.

The pieces: unit files and drop-ins, golive.facts.unit_files; the environment, golive.facts.systemd_env; Exec lines
and their expansion, golive.facts.exec_lines."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from golive.facts import FactError
from golive.facts.exec_lines import ExecCommand, Word, expand_argv, parse_show_exec, parse_unit_exec
from golive.facts.systemd_env import (
    EnvFileRef,
    EnvSetting,
    parse_env_file,
    parse_environment_line,
    parse_show_env_files,
    parse_show_environment,
)
from golive.facts.unit_files import Sections, Value

_SPAN_UNITS = {
    "us": 1e-6,
    "usec": 1e-6,
    "ms": 1e-3,
    "msec": 1e-3,
    "s": 1,
    "sec": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hr": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "w": 604800,
    "week": 604800,
    "weeks": 604800,
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


# the Exec settings golive reads, and the UnitFacts field each fills, in the order systemd runs them
EXEC_KEYS = {
    "ExecStartPre": "exec_start_pre",
    "ExecStart": "exec_start",
    "ExecStartPost": "exec_start_post",
    "ExecStop": "exec_stop",
    "ExecStopPost": "exec_stop_post",
}


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
    # run when the service stops, after a crash too (systemd.service(5): "the stop operation is always performed if
    # the service started successfully, even if the processes in the service terminated on their own")
    exec_stop: list[ExecCommand] = field(default_factory=list)
    exec_stop_post: list[ExecCommand] = field(default_factory=list)
    enabled: str | None = None
    active: str | None = None
    # `systemctl show`'s NeedDaemonReload=: the files changed since systemd loaded them (None: not read from show)
    need_daemon_reload: bool | None = None
    # where each setting was made: "Restart" → "/etc/systemd/system/x.service.d/override.conf:2"; a key reset by an
    # empty assignment → where the reset is; a key set nowhere is absent (systemd's default)
    set_at: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)  # the unit file, then the drop-ins systemd applied, in order
    emptied: frozenset[str] = frozenset()  # keys whose set_at is an empty assignment (`ExecStartPre=`) that reset them
    # keys written where systemd does not know them, so it ignores them: "StartLimitIntervalSec" → "FILE:LINE"
    misplaced: dict[str, str] = field(default_factory=dict)
    # Environment= as systemd holds it (drop-ins merged, the last assignment of a name wins) and EnvironmentFile=
    environment: list[EnvSetting] = field(default_factory=list)
    environment_files: list[EnvFileRef] = field(default_factory=list)
    # after with_environment: the environment systemd starts the commands with (the files' values override
    # Environment=), and what systemd ignores or refuses in it (a line it skips, a missing file), for findings
    env: dict[str, EnvSetting] = field(default_factory=dict)
    env_notes: list[str] = field(default_factory=list)

    @property
    def dropins(self) -> list[str]:
        return self.files[1:]

    def origin(self, key: str) -> str:
        """`set at FILE:LINE` / `systemd's default: not set in FILE…`, for findings."""
        if key in self.emptied:
            return f"emptied by `{key}=` at {self.set_at[key]}"
        if key in self.set_at:
            return f"set at {self.set_at[key]}"
        if key in self.misplaced:
            return (
                f"systemd's default: the `{key}=` at {self.misplaced[key]} is in [Service], where systemd does not "
                f"know it and ignores it (it belongs in [Unit])"
            )
        return f"systemd's default: not set in {' or '.join(self.files) or 'the unit'}"

    def fix_at(self, key: str, unit: str, setting: str) -> str:
        """Where to make `setting` (e.g. `Restart=on-failure`) so that it holds: the file that set the value now."""
        where = self.set_at.get(key)
        path = where.rsplit(":", 1)[0] if where else (self.files[0] if self.files else unit)
        if path in self.dropins:
            return (
                f"the drop-in {path} sets it (line {where.rsplit(':', 1)[1] if where else '?'}): write "
                f"`{setting}` there or delete that line (`systemctl revert {unit}` removes every drop-in and "
                f"returns to the unit file), then `systemctl daemon-reload`"
            )
        return (
            f"set `{setting}` in {path}"
            + (f" (line {where.rsplit(':', 1)[1]})" if where else "")
            + ", then `systemctl daemon-reload`"
        )

    def with_origins(self, other: UnitFacts) -> UnitFacts:
        """These facts (from `systemctl show`) with where each value was set, read from the files (`other`)."""

        def located(mine: list[ExecCommand], theirs: list[ExecCommand]) -> list[ExecCommand]:
            # `systemctl show` may print argv unquoted (systemd < 248): match on the words joined
            wheres = {" ".join(c.argv): c.where for c in theirs}
            return [replace(c, where=wheres.get(" ".join(c.argv), "")) for c in mine]

        # the file line of each variable: the last line that sets the name to the value systemd holds
        lines = {(s.name, s.value): s.where for s in other.environment}
        files = {ref.path: ref.where for ref in other.environment_files}
        execs: dict[str, Any] = {
            attr: located(getattr(self, attr), getattr(other, attr)) for attr in EXEC_KEYS.values()
        }
        return replace(
            self,
            set_at=other.set_at,
            files=other.files,
            emptied=other.emptied,
            misplaced=other.misplaced,
            **execs,
            environment=[replace(s, where=s.where or lines.get((s.name, s.value), "")) for s in self.environment],
            environment_files=[replace(r, where=r.where or files.get(r.path, "")) for r in self.environment_files],
            env_notes=[*self.env_notes, *other.env_notes],
        )

    def with_environment(
        self, read: Callable[[str], str | None], glob: Callable[[str], list[str]] | None = None
    ) -> UnitFacts:
        """These facts with the environment systemd starts the service with, and every Exec line expanded in it.

        The environment is Environment= (as merged), then each EnvironmentFile= in order, read when the service
        starts; a file's settings override Environment= and a later file's an earlier one's (systemd.exec(5),
        EnvironmentFile=; src/core/execute.c merges `context->environment` before `files_env`). `-/path`: a missing
        file is skipped; without `-` systemd refuses to start ("Failed to load environment files"). A path may be a
        glob (`glob`: the matching paths, sorted). `read(path)` is the file's text, None when it does not exist."""
        env = {s.name: s for s in self.environment}
        notes = list(self.env_notes)
        for ref in self.environment_files:
            if not ref.path.startswith("/"):
                notes.append(
                    f"EnvironmentFile={ref.path} ({ref.where or 'systemctl show'}) is not an absolute path: "
                    f"systemd ignores it"
                )
                continue
            paths = glob(ref.path) if glob is not None and any(ch in ref.path for ch in "*?[") else [ref.path]
            texts = [(path, read(path)) for path in paths]
            missing = [path for path, text in texts if text is None] or ([] if texts else [ref.path])
            if missing and not ref.ignore_errors:
                notes.append(
                    f"EnvironmentFile={ref.path} ({ref.where or 'systemctl show'}): {missing[0]} does not "
                    f'exist, so systemd refuses to start the unit ("Failed to load environment files"); '
                    f"prefix the path with `-` if it is optional"
                )
            for path, text in texts:
                if text is None:
                    continue
                settings, ignored = parse_env_file(text, path, via=ref.where)
                notes.extend(ignored)
                env.update((s.name, s) for s in settings)

        def expanded(commands: list[ExecCommand], label: str) -> list[ExecCommand]:
            out = []
            for command in commands:
                if command.written is not None:  # already expanded
                    out.append(command)
                elif not command.expand_env:
                    out.append(
                        replace(
                            command,
                            argv=[Word(a, command.where, label) for a in command.argv],
                            written=tuple(command.argv),
                        )
                    )
                else:
                    words, unset = expand_argv(command.argv, env, command.where, label)
                    out.append(replace(command, argv=list(words), written=tuple(command.argv), unset=tuple(unset)))
            return out

        execs: dict[str, Any] = {attr: expanded(getattr(self, attr), key) for key, attr in EXEC_KEYS.items()}
        return replace(self, env=env, env_notes=list(dict.fromkeys(notes)), **execs)


def unit_from_show(props: dict[str, list[str]]) -> UnitFacts:
    if "Id" not in props and "Names" not in props:
        raise FactError("`systemctl show` printed no Id= or Names=: not a unit's properties")

    def one(key: str) -> str | None:
        return props[key][-1] if key in props else None

    def execs(key: str) -> list[ExecCommand]:
        commands = [cmd for value in props.get(key, []) for cmd in parse_show_exec(value)]
        # the `:` prefix (no $VAR expansion) shows only in the Ex twin's flags= (systemd ≥ 243)
        ex = [cmd for value in props.get(f"{key}Ex", []) for cmd in parse_show_exec(value)]
        if len(ex) == len(commands):
            commands = [replace(c, expand_env=e.expand_env) for c, e in zip(commands, ex, strict=True)]
        return commands

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
        exec_stop=execs("ExecStop"),
        exec_stop_post=execs("ExecStopPost"),
        enabled=one("UnitFileState"),
        active=one("ActiveState"),
        need_daemon_reload={"yes": True, "no": False}.get(one("NeedDaemonReload") or ""),
        environment=parse_show_environment(" ".join(props.get("Environment", []))),
        environment_files=parse_show_env_files(props.get("EnvironmentFiles", [])),
    )


# systemd's defaults when a unit file says nothing (systemd.service(5), systemd.unit(5))
_DEFAULT_RESTART_SEC = 0.1
_DEFAULT_START_LIMIT_BURST = 5
_DEFAULT_START_LIMIT_INTERVAL = 10.0


def unit_from_file(
    sections: Sections,
    enabled: bool | None,
    active: str | None,
    cleared: dict[tuple[str, str], str] | None = None,
    files: list[str] | None = None,
    name: str | None = None,
) -> UnitFacts:
    """The effective unit from its merged sections. `name`: the unit's name, for the `%n`/`%i` … specifiers of its
    Exec lines; by default the first file's name where that is a unit's own file (not a template's `x@.service`)."""
    if name is None and files:
        base = files[0].rsplit("/", 1)[-1]
        name = None if "@." in base else base
    unit, service = sections.get("Unit", {}), sections.get("Service", {})
    set_at: dict[str, str] = {}
    emptied: set[str] = set()

    order = {path: i for i, path in enumerate(files or [])}

    def latest(*spellings: tuple[dict[str, list[Value]], str]) -> Value | None:
        """A setting's value: the last assignment systemd reads, under any of its names (StartLimitBurst= in
        [Unit], its legacy alias in [Service]: each stores into the same field, so the one read last wins)."""
        values = [section[key][-1] for section, key in spellings if section.get(key)]
        return max(values, key=lambda v: (order.get(v.path, 0), v.line), default=None)

    def note(name: str, value: Value | None) -> str | None:
        if value is not None and value.line:
            set_at[name] = value.where
        return value

    restart_sec = note("RestartSec", latest((service, "RestartSec")))
    # StartLimitInterval= and StartLimitBurst= in [Service] are the pre-230 spellings systemd still accepts
    interval = note(
        "StartLimitIntervalSec",
        latest((unit, "StartLimitIntervalSec"), (unit, "StartLimitInterval"), (service, "StartLimitInterval")),
    )
    burst = note("StartLimitBurst", latest((unit, "StartLimitBurst"), (service, "StartLimitBurst")))
    restart = note("Restart", latest((service, "Restart")))
    environment: dict[str, EnvSetting] = {}
    notes: list[str] = []
    for value in service.get("Environment", []):
        settings, ignored = parse_environment_line(value, value.where, name)
        notes.extend(ignored)
        for setting in settings:
            environment.pop(setting.name, None)
            environment[setting.name] = setting
    env_files = [
        EnvFileRef(v[1:] if v.startswith("-") else str(v), v.startswith("-"), v.where)
        for v in service.get("EnvironmentFile", [])
    ]

    def commands(key: str) -> list[ExecCommand]:
        return [command for value in service.get(key, []) for command in parse_unit_exec(value, name)]

    for key in EXEC_KEYS:
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
        exec_start_pre=commands("ExecStartPre"),
        exec_start=commands("ExecStart"),
        exec_start_post=commands("ExecStartPost"),
        exec_stop=commands("ExecStop"),
        exec_stop_post=commands("ExecStopPost"),
        enabled=None if enabled is None else ("enabled" if enabled else "disabled"),
        active=active,
        set_at=set_at,
        files=list(files or []),
        emptied=frozenset(emptied),
        # [Unit]-only names in [Service]: load-fragment-gperf keeps only the legacy Service.StartLimitInterval= and
        # Service.StartLimitBurst= there, so `StartLimitIntervalSec=` in [Service] is an unknown key
        misplaced={k: service[k][-1].where for k in ("StartLimitIntervalSec",) if service.get(k) and k not in set_at},
        environment=list(environment.values()),
        environment_files=env_files,
        env_notes=notes,
    )


def _int(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise FactError(f"{getattr(value, 'where', '')}: not a number: {value!r}") from None


def unit_differences(loaded: UnitFacts, on_disk: UnitFacts) -> list[str]:
    """What the unit files say now that the unit systemd loaded does not (NeedDaemonReload=yes), in the settings golive
    reads: `Restart=always on disk (FILE:LINE), on-failure as loaded`, an Exec line added or changed."""

    def at(key: str) -> str:
        return f" ({on_disk.set_at[key]})" if key in on_disk.set_at else ""

    def lines(unit: UnitFacts, attr: str) -> list[str]:  # the words as written: both sides before expansion
        return [" ".join(map(str, c.written or c.argv)) for c in getattr(unit, attr)]

    out = []
    settings = [
        ("Restart", loaded.restart, on_disk.restart),
        ("RestartSec", loaded.restart_sec_s, on_disk.restart_sec_s),
        ("StartLimitBurst", loaded.start_limit_burst, on_disk.start_limit_burst),
        ("StartLimitIntervalSec", loaded.start_limit_interval_s, on_disk.start_limit_interval_s),
    ]
    for key, was, now in settings:
        if was is not None and now is not None and was != now:
            out.append(f"{key}={_shown(now)} on disk{at(key)}, {_shown(was)} as loaded")
    for key, attr in EXEC_KEYS.items():
        was_lines, now_lines = lines(loaded, attr), lines(on_disk, attr)
        if was_lines != now_lines:
            out.append(f"{key} on disk{at(key)}: {now_lines or 'none'}; as loaded: {was_lines or 'none'}")
    added = [f for f in on_disk.files if f not in loaded.files]
    if added and loaded.files:
        out.append(f"not loaded yet: {', '.join(added)}")
    return out


def _shown(value: object) -> str:
    """A setting as golive holds it: a time span (seconds, a float) with its unit."""
    return f"{value:g} s" if isinstance(value, float) else str(value)
