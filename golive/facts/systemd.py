"""systemd: `systemctl show` output, unit files and their drop-ins merged as systemd merges them, time spans, the
service's environment (Environment=, EnvironmentFile=) and Exec lines expanded in it as systemd expands them."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from golive.facts import FactError

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


@dataclass(frozen=True)
class ExecCommand:
    argv: list[str]  # after UnitFacts.with_environment: the words systemd runs (Word: each knows where it came from)
    ignore_errors: bool = False
    where: str = ""  # the unit file (or drop-in) and line that set it, where known
    expand_env: bool = True  # False for the `:` prefix (ExecStartEx `flags=no-env-expand`): no $VAR substitution
    written: tuple[str, ...] | None = None  # the words as written, before the expansion (None: not expanded)
    unset: tuple[str, ...] = ()  # variables the line names that nothing sets: systemd expands them to nothing

    @property
    def path(self) -> str:
        return self.argv[0] if self.argv else ""


# `ignore_errors=` in Exec*, `flags=` in the Exec*Ex variants (systemd ≥ 243)
_SHOW_EXEC = re.compile(
    r"\{\s*path=(?P<path>[^;]*?)\s*;\s*argv\[\]=(?P<argv>.*?)\s*;\s*"
    r"(?:ignore_errors=(?P<ign>\w+)|flags=(?P<flags>[^;]*))"
)


def parse_show_exec(value: str) -> list[ExecCommand]:
    """An Exec* property of `systemctl show`: `{ path=… ; argv[]=… ; ignore_errors=… ; … }`, possibly several."""
    commands = []
    for match in _SHOW_EXEC.finditer(value):
        ignore = match["ign"] == "yes" or "ignore-failure" in (match["flags"] or "")
        commands.append(
            ExecCommand(
                argv=_split_argv(match["argv"]),
                ignore_errors=ignore,
                expand_env="no-env-expand" not in (match["flags"] or ""),
            )
        )
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


def parse_unit_file(
    text: str, path: str = "unit file", into: Sections | None = None, cleared: dict[tuple[str, str], str] | None = None
) -> Sections:
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
UNIT_DIRS = (
    "/etc/systemd/system.control",
    "/run/systemd/system.control",
    "/run/systemd/transient",
    "/etc/systemd/system",
    "/run/systemd/system",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
)


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


def unit_specifiers(text: str, unit: str | None) -> str:
    """A unit file word with its unit-name specifiers resolved, as src/core/unit-printf.c unit_full_printf() does for
    every word of an Exec line (src/core/load-fragment.c config_parse_exec, after extract_first_word): `%%` is `%`;
    with the unit's name (`glm53@a-b.service`): `%n` the name, `%N` without its type, `%p` the prefix (before `@`),
    `%i` the instance, `%j` the prefix's last `-` part, and `%P` `%I` `%J` `%f` those unescaped (`-` is `/`, `\\xNN`
    a byte: unit_name_unescape). Specifiers of the host (`%H`, `%u`, `%t` …) stay as written: golive does not know
    the values systemd would give them."""
    values: dict[str, str] = {"%": "%"}
    if unit and "." in unit:
        name = unit.rsplit(".", 1)[0]
        prefix, at, instance = name.partition("@")
        last = prefix.rsplit("-", 1)[-1]
        values |= {"n": unit, "N": name, "p": prefix, "i": instance, "j": last}
        values |= {"P": _unescape(prefix), "I": _unescape(instance), "J": _unescape(last)}
        values["f"] = "/" + (_unescape(instance) if at else _unescape(prefix)).lstrip("/")
    return re.sub(r"%(.)", lambda m: values.get(m.group(1), m.group(0)), text)


def _unescape(text: str) -> str:
    """src/basic/unit-name.c unit_name_unescape: `-` is `/`, `\\xNN` the byte NN."""
    return re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), text.replace("-", "/"))


def parse_unit_exec(value: str, unit: str | None = None) -> ExecCommand:
    """An Exec line of a unit file as src/core/load-fragment.c config_parse_exec reads it: leading `-@:+!` prefixes
    are flags, not the command (`:`: no $VAR expansion); words by extract_first_word(EXTRACT_UNQUOTE|
    EXTRACT_CUNESCAPE) (`"a\\tb"` is a, tab, b), each with its specifiers resolved (`unit_specifiers`, `unit`: the
    unit's name). A line systemd would reject as a whole (a bad escape) is split as a shell would."""
    prefix = value[: len(value) - len(value.lstrip("-@:+!"))]
    words, error = extract_words(value[len(prefix) :], cunescape=True)
    argv = _split_argv(value[len(prefix) :]) if error else words
    return ExecCommand(
        argv=[unit_specifiers(word, unit) for word in argv],
        ignore_errors="-" in prefix,
        where=value.where if isinstance(value, Value) else "",
        expand_env=":" not in prefix,
    )


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
        return replace(
            self,
            set_at=other.set_at,
            files=other.files,
            emptied=other.emptied,
            exec_start_pre=located(self.exec_start_pre, other.exec_start_pre),
            exec_start=located(self.exec_start, other.exec_start),
            exec_start_post=located(self.exec_start_post, other.exec_start_post),
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

        return replace(
            self,
            env=env,
            env_notes=list(dict.fromkeys(notes)),
            exec_start_pre=expanded(self.exec_start_pre, "ExecStartPre"),
            exec_start=expanded(self.exec_start, "ExecStart"),
            exec_start_post=expanded(self.exec_start_post, "ExecStartPost"),
        )


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
        enabled=one("UnitFileState"),
        active=one("ActiveState"),
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
    interval = note(
        "StartLimitIntervalSec",
        last(unit, "StartLimitIntervalSec", "StartLimitInterval") or last(service, "StartLimitInterval"),
    )
    burst = note("StartLimitBurst", last(unit, "StartLimitBurst") or last(service, "StartLimitBurst"))
    restart = note("Restart", last(service, "Restart"))
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
        exec_start_pre=[parse_unit_exec(v, name) for v in service.get("ExecStartPre", [])],
        exec_start=[parse_unit_exec(v, name) for v in service.get("ExecStart", [])],
        exec_start_post=[parse_unit_exec(v, name) for v in service.get("ExecStartPost", [])],
        enabled=None if enabled is None else ("enabled" if enabled else "disabled"),
        active=active,
        set_at=set_at,
        files=list(files or []),
        emptied=frozenset(emptied),
        environment=list(environment.values()),
        environment_files=env_files,
        env_notes=notes,
    )


def _int(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise FactError(f"{getattr(value, 'where', '')}: not a number: {value!r}") from None


# --- the service's environment (systemd.exec(5), "Environment") and Exec line expansion (systemd.service(5)) -------

_WHITESPACE = " \t\n\r"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# src/basic/escape.c cunescape_one: the C escapes systemd's unit file parser decodes with EXTRACT_CUNESCAPE
_C_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "s": " ",
}


def env_name_is_valid(name: str) -> bool:
    """src/basic/env-util.c env_name_is_valid: letters, digits and `_`, not starting with a digit."""
    return bool(_ENV_NAME.fullmatch(name))


def _env_value_is_valid(value: str) -> bool:
    """env_value_is_valid: no control characters but tab, newline and carriage return."""
    return not any((ord(c) < 0x20 and c not in "\t\n\r") or ord(c) == 0x7F for c in value)


@dataclass(frozen=True)
class EnvSetting:
    """One variable of the service's environment and the line that set it."""

    name: str
    value: str
    where: str = ""  # FILE:LINE of the assignment; "" where systemctl show gave it and no file did
    source: str = "Environment"  # "Environment" (a unit file or drop-in line) or "EnvironmentFile"
    via: str = ""  # for an env file: the `EnvironmentFile=` line that reads it

    @property
    def path(self) -> str:
        return self.where.rsplit(":", 1)[0] if ":" in self.where else self.where

    @property
    def line(self) -> str:
        return self.where.rsplit(":", 1)[1] if ":" in self.where else "?"

    def describe(self) -> str:
        """`/etc/default/glm53-flash:3 sets MAX_LEN=1m` / `Environment= at FILE:LINE sets …`, for findings."""
        if self.source == "EnvironmentFile":
            return f"{self.where} sets {self.name}={self.value}" + (
                f" (EnvironmentFile= at {self.via})" if self.via else ""
            )
        at = f"at {self.where}" if self.where else "(systemctl show; no unit file line sets it)"
        return f"`Environment=` {at} sets {self.name}={self.value}"

    def edit(self) -> str:
        """Where to change it, for a Do line."""
        if self.source == "EnvironmentFile":
            return f"`{self.name}=` in {self.path} (line {self.line})"
        if not self.where:
            return f"the `Environment={self.name}=…` line of the unit (`systemctl cat` shows where)"
        return f"`Environment={self.name}=…` in {self.path} (line {self.line})"


@dataclass(frozen=True)
class EnvFileRef:
    """An `EnvironmentFile=` of the unit: its path (a glob is allowed), `-` = a missing file is no error."""

    path: str
    ignore_errors: bool = False
    where: str = ""  # the unit file (or drop-in) and line of the EnvironmentFile= line


def extract_words(text: str, *, cunescape: bool = False, relax: bool = False) -> tuple[list[str], str | None]:
    """systemd's `extract_first_word` with EXTRACT_UNQUOTE (src/basic/extract-word.c), word after word: whitespace
    separates, `'…'` and `"…"` may open anywhere in a word and are removed, a backslash escapes the next character
    (inside quotes too); with `cunescape` that character is a C escape (`\\n`, `\\x41`, `\\s` …). Returns the words and
    the error that stopped it (unbalanced quote, bad escape) — systemd keeps the words before it — or None; with
    `relax` (EXTRACT_RELAX) an unbalanced quote or trailing backslash ends the last word instead."""
    words: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            return words, None
        word: list[str] = []
        quote = ""
        while i < n:
            c = text[i]
            if c == "\\":
                if i + 1 >= n:
                    if relax:
                        i += 1
                        break
                    return words, "a trailing backslash"
                if cunescape:
                    decoded, used = _cunescape_one(text, i + 1)
                    if decoded is None:
                        return words, f"unknown escape sequence \\{text[i + 1]}"
                    word.append(decoded)
                    i += 1 + used
                else:
                    word.append(text[i + 1])
                    i += 2
            elif quote:
                if c == quote:
                    quote = ""
                else:
                    word.append(c)
                i += 1
            elif c in "'\"":
                quote = c
                i += 1
            elif c in _WHITESPACE:
                break
            else:
                word.append(c)
                i += 1
        if quote and not relax:
            return words, f"unbalanced {quote}"
        words.append("".join(word))


def _cunescape_one(text: str, i: int) -> tuple[str | None, int]:
    """The character a C escape at text[i:] (after the backslash) stands for, and how many characters it used."""
    c = text[i]
    if c in _C_ESCAPES:
        return _C_ESCAPES[c], 1
    digits = {"x": (2, 16), "u": (4, 16), "U": (8, 16)}.get(c)
    if digits:
        count, base = digits
        chunk = text[i + 1 : i + 1 + count]
        if (
            len(chunk) == count
            and all(ch in "0123456789abcdefABCDEF" for ch in chunk)
            and 0 < int(chunk, base) <= 0x10FFFF
        ):
            return chr(int(chunk, base)), 1 + count
        return None, 0
    chunk = text[i : i + 3]
    if len(chunk) == 3 and all(ch in "01234567" for ch in chunk) and int(chunk, 8):
        return chr(int(chunk, 8)), 3
    return None, 0


def parse_environment_line(value: str, where: str = "", unit: str | None = None) -> tuple[list[EnvSetting], list[str]]:
    """One `Environment=` value as systemd's config_parse_environ reads it (src/core/load-fragment.c): words by
    extract_first_word(EXTRACT_CUNESCAPE|EXTRACT_UNQUOTE), so `Environment="A=1 2" B=3` and `A="1 2"` both set A to
    `1 2`; `%%` is `%`; an assignment with an invalid name is ignored; a syntax error ignores the rest of the line.
    Returns the assignments and, for findings, what systemd ignores and why."""
    words, error = extract_words(value, cunescape=True)
    settings, notes = [], []
    for word in words:
        word = unit_specifiers(word, unit)  # config_parse_environ: unit_env_printf on each word
        name, eq, text = word.partition("=")
        if not eq or not env_name_is_valid(name) or not _env_value_is_valid(text):
            notes.append(f"{where}: `{word[:60]}` is not a valid assignment: systemd ignores it")
            continue
        settings.append(EnvSetting(name, text, where, "Environment"))
    if error:
        notes.append(f"{where}: {error} in `Environment={value[:60]}`: systemd ignores the rest of the line")
    return settings, notes


def parse_env_file(text: str, path: str, via: str = "") -> tuple[list[EnvSetting], list[str]]:
    """An `EnvironmentFile=` as systemd reads it: src/basic/env-file.c `parse_env_file_internal`, state for state.

    `KEY=VALUE` lines; `#` and `;` start a comment only where a key could start; whitespace around key and value is
    dropped; `'…'` is literal; in `"…"` a backslash escapes only `"`, `\\`, `` ` ``, `$` and a newline (others stay);
    an unquoted backslash escapes the next character and a backslash-newline continues the value; text after a closing
    quote goes on the value (`A="x" #y` is `x#y`: no inline comments); a line without `=` is dropped; the last
    assignment of a name wins. No `${VAR}` expansion, and `export` is not special: `export A=1` has the name
    `export A`, which exec_context_load_environment() ignores ("Ignoring invalid environment assignment") — reported
    in the notes. Every setting keeps the line its key starts on."""
    PRE_KEY, KEY, PRE_VALUE, VALUE, VALUE_ESCAPE, SQ, DQ, DQ_ESCAPE, COMMENT, COMMENT_ESCAPE = range(10)
    state = PRE_KEY
    found: list[tuple[str, str, int]] = []
    key: list[str] = []
    value: list[str] = []
    key_ws = value_ws = -1  # where trailing whitespace of the key / the unquoted value starts
    start = 0

    def push() -> None:
        k = "".join(key[:key_ws] if key_ws >= 0 else key)
        found.append((k, "".join(value), text.count("\n", 0, start) + 1))

    for pos, c in enumerate(text):
        if state == PRE_KEY:
            if c in "#;":
                state = COMMENT
            elif c not in _WHITESPACE:
                state, key, value, key_ws, start = KEY, [c], [], -1, pos
        elif state == KEY:
            if c in "\n\r":
                state = PRE_KEY
            elif c == "=":
                state, value_ws = PRE_VALUE, -1
            else:
                if c not in _WHITESPACE:
                    key_ws = -1
                elif key_ws < 0:
                    key_ws = len(key)
                key.append(c)
        elif state == PRE_VALUE:
            if c in "\n\r":
                state = PRE_KEY
                push()
            elif c == "'":
                state = SQ
            elif c == '"':
                state = DQ
            elif c == "\\":
                state = VALUE_ESCAPE
            elif c not in _WHITESPACE:
                state = VALUE
                value.append(c)
        elif state == VALUE:
            if c in "\n\r":
                state = PRE_KEY
                if value_ws >= 0:
                    del value[value_ws:]
                push()
            elif c == "\\":
                state, value_ws = VALUE_ESCAPE, -1
            else:
                if c not in _WHITESPACE:
                    value_ws = -1
                elif value_ws < 0:
                    value_ws = len(value)
                value.append(c)
        elif state == VALUE_ESCAPE:
            state = VALUE
            if c not in "\n\r":  # an escaped newline is eaten up entirely
                value.append(c)
        elif state == SQ:
            if c == "'":
                state = PRE_VALUE
            else:
                value.append(c)
        elif state == DQ:
            if c == '"':
                state = PRE_VALUE
            elif c == "\\":
                state = DQ_ESCAPE
            else:
                value.append(c)
        elif state == DQ_ESCAPE:
            state = DQ
            if c in '"\\`$':  # SHELL_NEED_ESCAPE: unescaped
                value.append(c)
            elif c != "\n":  # any other character keeps its backslash, as the shell does
                value.extend(("\\", c))
        elif state == COMMENT:
            if c == "\\":
                state = COMMENT_ESCAPE
            elif c in "\n\r":
                state = PRE_KEY
        elif state == COMMENT_ESCAPE:  # systemd ≥ 254: the line after a comment ending in `\` is not a comment
            state = PRE_KEY if c in "\n\r" else COMMENT
    if state in (PRE_VALUE, VALUE, VALUE_ESCAPE, SQ, DQ, DQ_ESCAPE):
        if state == VALUE and value_ws >= 0:
            del value[value_ws:]
        push()
    settings: dict[str, EnvSetting] = {}
    notes = []
    for name, val, line in found:
        if not env_name_is_valid(name) or not _env_value_is_valid(val):
            why = " (`export` is not special in an EnvironmentFile=)" if name.startswith("export") else ""
            notes.append(f"{path}:{line}: `{name}=…` is not a valid assignment{why}: systemd ignores it")
            continue
        settings.pop(name, None)
        settings[name] = EnvSetting(name, val, f"{path}:{line}", "EnvironmentFile", via)
    return list(settings.values()), notes


def _posix_words(text: str) -> list[str]:
    """Words as `systemctl show` prints a string list (src/shared/bus-print-properties.c: each string through
    shell_maybe_quote: `"…"` with `\\` before `"`, `\\`, `` ` ``, `$`), or bare where older versions print them so."""
    words: list[str] = []
    word: list[str] | None = None
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in _WHITESPACE:
            if word is not None:
                words.append("".join(word))
                word = None
            i += 1
            continue
        word = word if word is not None else []
        if c == "\\" and i + 1 < n:
            word.append(text[i + 1])
            i += 2
        elif c == "'":
            end = text.find("'", i + 1)
            end = n if end < 0 else end
            word.append(text[i + 1 : end])
            i = end + 1
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n and text[i + 1] in '"\\`$\n':
                    i += 1
                word.append(text[i])
                i += 1
            i += 1
        else:
            word.append(c)
            i += 1
    if word is not None:
        words.append("".join(word))
    return words


def parse_show_environment(value: str) -> list[EnvSetting]:
    """`systemctl show`'s `Environment=` line: the unit's Environment= list as systemd holds it (drop-ins merged)."""
    settings = {}
    for word in _posix_words(value):
        name, eq, text = word.partition("=")
        if eq:
            settings[name] = EnvSetting(name, text)
    return list(settings.values())


_SHOW_ENV_FILE = re.compile(r"(?P<path>.*) \(ignore_errors=(?P<ign>yes|no)\)")


def parse_show_env_files(values: list[str]) -> list[EnvFileRef]:
    """`systemctl show`'s `EnvironmentFiles=` lines, one a file: `/etc/default/x (ignore_errors=no)` (systemd's
    src/systemctl/systemctl-show.c prints "%s (ignore_errors=%s)" for each, from 232 to this day)."""
    refs = []
    for value in values:
        match = _SHOW_ENV_FILE.fullmatch(value.strip())
        if match:
            refs.append(EnvFileRef(match["path"], match["ign"] == "yes"))
        elif value.strip():
            refs.append(EnvFileRef(value.strip()))
    return refs


class Word(str):
    """A word of an Exec line as systemd runs it (after `${VAR}`/`$VAR` expansion), with what made it: the Exec line
    (`where`), the variables whose values are in it, and the variables it names that nothing sets."""

    where: str
    label: str
    settings: tuple[EnvSetting, ...]
    unset: tuple[str, ...]

    def __new__(
        cls,
        text: str,
        where: str = "",
        label: str = "ExecStart",
        settings: tuple[EnvSetting, ...] = (),
        unset: tuple[str, ...] = (),
    ) -> Word:
        word = super().__new__(cls, text)
        word.where, word.label, word.settings, word.unset = where, label, settings, unset
        return word

    def __reduce__(self) -> tuple[Any, ...]:  # a copy (pickle, deepcopy) keeps where the word came from
        return Word, (str(self), self.where, self.label, self.settings, self.unset)

    @property
    def exec_line(self) -> str:
        return f"{self.label} ({self.where})" if self.where else self.label


def origin_of(word: str) -> str:
    """Where a served word came from, for findings: the env file line or `Environment=` line that set the variable
    in it (and the Exec line that names it), else the Exec line it is written in."""
    if not isinstance(word, Word):
        return ""
    parts = [s.describe() for s in word.settings]
    parts += [
        f"`${{{name}}}` is set by no Environment= or EnvironmentFile=, so systemd expands it to nothing"
        for name in word.unset
    ]
    if not parts:
        return f"written in {word.exec_line}"
    return "; ".join(parts) + f", expanded in {word.exec_line}"


def edit_place(word: str, default: str) -> str:
    """Where to edit so that this served word changes: the variable's line, else its Exec line, else `default`."""
    if not isinstance(word, Word):
        return default
    if word.settings:
        return ", ".join(s.edit() for s in word.settings)
    if word.unset:
        return (
            f"an `Environment={word.unset[0]}=…` line (or the unit's EnvironmentFile=) to set "
            f"{', '.join(word.unset)}, or the value itself in {word.exec_line}"
        )
    return word.exec_line if word.where else default


def _replace_env(word: str, env: dict[str, EnvSetting]) -> tuple[str, list[EnvSetting], list[str]]:
    """systemd's replace_env_full() with no flags (src/basic/env-util.c): `${NAME}` anywhere in a word is replaced
    by the value (nothing when unset, or when NAME is not a valid name), `$$` is one `$`, a bare `$NAME` inside a word
    and `${NAME:-x}` stay as written. Returns the word, the settings used and the valid names found unset."""
    WORD, CURLY, VARIABLE = range(3)
    state, start = WORD, 0
    out: list[str] = []
    used: list[EnvSetting] = []
    unset: list[str] = []
    for i, c in enumerate(word):
        if state == WORD:
            if c == "$":
                state = CURLY
        elif state == CURLY:
            if c == "{":
                out.append(word[start : i - 1])
                start, state = i - 1, VARIABLE
            elif c == "$":
                out.append(word[start:i])
                start, state = i + 1, WORD
            else:
                state = WORD
        elif state == VARIABLE:
            if c == "}":
                name = word[start + 2 : i]
                if name in env:
                    out.append(env[name].value)
                    used.append(env[name])
                elif env_name_is_valid(name):
                    unset.append(name)
                start, state = i + 1, WORD
            elif c == ":":  # ${NAME:-default} is not supported on command lines: left as written
                state = WORD
    out.append(word[start:])
    return "".join(out), used, unset


def expand_argv(
    argv: list[str], env: dict[str, EnvSetting], where: str = "", label: str = "ExecStart"
) -> tuple[list[Word], list[str]]:
    """An Exec line's words as systemd runs them: systemd.service(5), "Command lines", done as replace_env_argv()
    (src/basic/env-util.c; src/core/execute.c calls it before exec): a word that is `$NAME` becomes the value split
    at whitespace (quotes in the value group and are removed; unset: no word at all), any other word has each
    `${NAME}` replaced in place (one word, even with spaces in the value), `$$` is a literal `$`. Returns the words
    and the variables named that nothing sets (systemd expands them to nothing)."""
    words: list[Word] = []
    unset: list[str] = []
    for arg in argv:
        if arg.startswith("$") and arg[1:2] not in ("{", "$"):
            name = arg[1:]
            if name in env:
                split, _ = extract_words(env[name].value, relax=True)
                words.extend(Word(w, where, label, (env[name],)) for w in split)
            elif env_name_is_valid(name):
                unset.append(name)
            continue
        text, used, missing = _replace_env(arg, env)
        words.append(Word(text, where, label, tuple(used), tuple(missing)))
        unset.extend(missing)
    return words, list(dict.fromkeys(unset))
