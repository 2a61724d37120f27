"""systemd: `systemctl show` output, time spans, and `UnitFacts`, the unit the restart, prestart and start checks read.

`UnitFacts` comes from `systemctl show` or from the unit files and their drop-ins merged as systemd merges them, with
the service's environment (Environment=, EnvironmentFile=) and its Exec lines expanded in it as systemd expands them.

The pieces: unit files and drop-ins, golive.facts.unit_files; the environment, golive.facts.systemd_env; Exec lines
and their expansion, golive.facts.exec_lines."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from golive.facts import FactError, unit_files
from golive.facts.exec_lines import ExecCommand, Word, expand_argv, parse_show_exec, read_unit_exec
from golive.facts.systemd_env import (
    EnvFileRef,
    EnvSetting,
    parse_env_file,
    parse_environment_line,
    parse_show_env_files,
    parse_show_environment,
)
from golive.facts.unit_files import BadSpecifier, Sections, Specifiers, Value

# src/basic/time-util.c extract_multiplier: tried in this order, the first the text starts with wins ("m" is minutes,
# "M" months; "1mins" is "1min" then "s", which is no number: refused)
_SPAN_UNITS = (
    ("seconds", 1.0),
    ("second", 1.0),
    ("sec", 1.0),
    ("s", 1.0),
    ("minutes", 60.0),
    ("minute", 60.0),
    ("min", 60.0),
    ("months", 2629800.0),
    ("month", 2629800.0),
    ("M", 2629800.0),
    ("msec", 1e-3),
    ("ms", 1e-3),
    ("m", 60.0),
    ("hours", 3600.0),
    ("hour", 3600.0),
    ("hr", 3600.0),
    ("h", 3600.0),
    ("days", 86400.0),
    ("day", 86400.0),
    ("d", 86400.0),
    ("weeks", 604800.0),
    ("week", 604800.0),
    ("w", 604800.0),
    ("years", 31557600.0),
    ("year", 31557600.0),
    ("y", 31557600.0),
    ("usec", 1e-6),
    ("us", 1e-6),
    ("\u00b5s", 1e-6),
    ("\u03bcs", 1e-6),
)


def read_timespan(text: str) -> float | None:
    """systemd.time(7) span to seconds as src/basic/time-util.c parse_sec reads it; None where systemd refuses it
    ("Failed to parse sec value, ignoring"). "60", "1min", "1h30m", "1min 30s", ".5s", "infinity"; a number without
    a unit is seconds; a negative number is refused."""
    p = text.strip(" \t\n\r")
    if p == "infinity":
        return float("inf")
    if not p:
        return None
    total, something = 0.0, False
    while True:
        p = p.lstrip(" \t\n\r")
        if not p:
            return total if something else None
        match = re.match(r"\+?(\d*)(\.(\d*))?", p)
        assert match is not None  # the pattern matches the empty string
        whole, dot, fraction = match.group(1), match.group(2), match.group(3) or ""
        if p.startswith("-") or (not whole and not dot):
            return None
        p = p[match.end() :].lstrip(" \t\n\r")
        multiplier = next((m for unit, m in _SPAN_UNITS if p.startswith(unit)), None)
        if multiplier is None:
            multiplier = 1.0
        else:
            p = p[next(len(unit) for unit, m in _SPAN_UNITS if p.startswith(unit)) :]
        total += (int(whole or "0") + (int(fraction) / 10 ** len(fraction) if fraction else 0.0)) * multiplier
        something = True


def parse_timespan(text: str) -> float:
    """read_timespan, for text that must be a span (`systemctl show`'s RestartUSec=): FactError where it is none."""
    value = read_timespan(text)
    if value is None:
        raise FactError(f"not a systemd time span: {text!r}")
    return value


def read_unsigned(text: str) -> int | None:
    """src/basic/parse-util.c safe_atou (config_parse_unsigned): leading blanks and `+` allowed, `0x` hex and a leading
    `0` octal (strtoul base 0), no sign, nothing after the number; None where systemd refuses it."""
    t = text.lstrip(" \t\n\r")
    if t.startswith("-"):
        return None
    t = t.removeprefix("+")
    try:
        value = int(t, 16) if t[:2].lower() == "0x" and len(t) > 2 else int(t, 8) if t[:1] == "0" else int(t, 10)
    except ValueError:
        return None
    if not re.fullmatch(r"(0[xX][0-9a-fA-F]+|[0-9]+)", t):
        return None
    return value if value <= 0xFFFFFFFF else None


def read_boolean(text: str) -> bool | None:
    """src/basic/parse-util.c parse_boolean."""
    word = text.lower()
    return (
        True
        if word in ("1", "yes", "y", "true", "t", "on")
        else False
        if word in ("0", "no", "n", "false", "f", "off")
        else None
    )


RESTART_VALUES = ("no", "on-success", "on-failure", "on-abnormal", "on-watchdog", "on-abort", "always")
SERVICE_TYPES = ("simple", "exec", "forking", "oneshot", "dbus", "notify", "idle")


_SHOW_KEY = re.compile(r"([A-Z][A-Za-z0-9]*)=")


def parse_show(text: str) -> dict[str, list[str]]:
    """`systemctl show UNIT`: Key=value lines; repeated keys (ExecStartPre) keep every value in order. systemd 252
    prints an Exec argument as it is, a newline in it too (`ExecStart=/x 'a\\nb'`): a line that starts no `Key=`
    goes on the value before it."""
    props: dict[str, list[str]] = {}
    last: list[str] | None = None
    for line in text.split("\n"):
        match = _SHOW_KEY.match(line)
        if match:
            last = props.setdefault(match.group(1), [])
            last.append(line[match.end() :])
        elif last is not None and last:
            last[-1] += "\n" + line
    for values in props.values():  # the text's own last newline is no part of the last value
        if values and values[-1].endswith("\n"):
            values[-1] = values[-1].rstrip("\n")
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
    service_type: str = "simple"
    # WorkingDirectory= as systemd holds it: `/path`, `-/path` (a missing folder is no error), `~` (root's home); None:
    # not set, so systemd runs the commands in `/` (systemd.exec(5), WorkingDirectory=)
    working_directory: str | None = None
    # why systemd does not load the unit (LoadState=bad-setting or error), None when it does
    load_error: str | None = None
    ignored: list[str] = field(default_factory=list)  # what systemd ignores in the files, FILE:LINE first
    # after with_environment: why the next start fails before any command runs (an env file without `-` missing, a
    # WorkingDirectory= missing), the `-` env files systemd skips because they do not exist, and where the commands run
    start_refused: list[str] = field(default_factory=list)
    skipped_env_files: list[EnvFileRef] = field(default_factory=list)
    run_directory: str | None = None
    chdir_fails: str | None = None  # WorkingDirectory= does not exist and has no `-`: every command fails (200/CHDIR)

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
            # `systemctl show` of systemd 252 prints argv bare, joined by blanks (`"c d"` shows as `c d`): match on
            # the program and the words joined, and take the words (and `@`'s argv[0]) from the file, which knows
            # where each word ends
            known = {_joined(c): c for c in theirs}
            out = []
            for command in mine:
                found = known.get((command.path, command.shown) if command.shown is not None else _joined(command))
                out.append(
                    replace(command, where=found.where, argv=list(found.written or found.argv), argv0=found.argv0)
                    if found is not None
                    else replace(command, where="")
                )
            return out

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
            ignored=[*self.ignored, *other.ignored],
        )

    def with_environment(
        self,
        read: Callable[[str], str | None],
        glob: Callable[[str], list[str]] | None = None,
        is_dir: Callable[[str], bool] | None = None,
    ) -> UnitFacts:
        """These facts with the environment systemd starts the service with, and every Exec line expanded in it.

        The environment is Environment= (as merged), then each EnvironmentFile= in order, read when the service
        starts; a file's settings override Environment= and a later file's an earlier one's (systemd.exec(5),
        EnvironmentFile=; src/core/execute.c merges `context->environment` before `files_env`). `-/path`: a missing
        file is skipped without a word (`skipped_env_files`); without `-` systemd refuses to start ("Failed to load
        environment files", Result=resources: `start_refused`). A path may be a glob (`glob`: the matching paths,
        sorted). `read(path)` is the file's text, None when it does not exist. With `is_dir`, the folder the commands
        run in (`run_directory`): WorkingDirectory= where it exists, else `/` (systemd's default, and where a `-/path`
        that does not exist leaves them); a WorkingDirectory= without `-` that does not exist fails the start
        (status=200/CHDIR)."""
        env = {s.name: s for s in self.environment}
        notes = list(self.env_notes)
        refused = list(self.start_refused)
        skipped = list(self.skipped_env_files)
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
                said = (
                    f"EnvironmentFile={ref.path} ({ref.where or 'systemctl show'}): {missing[0]} does not "
                    f'exist, so systemd refuses to start the unit ("Failed to load environment files"); '
                    f"prefix the path with `-` if it is optional"
                )
                notes.append(said)
                refused.append(said)
            elif missing:
                skipped.append(ref)
            for path, text in texts:
                if text is None:
                    continue
                settings, ignored = parse_env_file(text, path, via=ref.where)
                notes.extend(ignored)
                env.update((s.name, s) for s in settings)
        if self.working_directory in ("~", "-~") and "HOME" not in env:  # systemd sets $HOME for the home folder
            env["HOME"] = EnvSetting("HOME", "/root", "", "systemd")
        run_directory, chdir_fails = self.run_directory, self.chdir_fails
        if is_dir is not None:
            run_directory, chdir_fails = self._run_directory(is_dir)

        execs: dict[str, Any] = {attr: _expanded(getattr(self, attr), key, env) for key, attr in EXEC_KEYS.items()}
        return replace(
            self,
            env=env,
            env_notes=list(dict.fromkeys(notes)),
            **execs,
            start_refused=list(dict.fromkeys(refused)),
            skipped_env_files=list(dict.fromkeys(skipped)),
            run_directory=run_directory,
            chdir_fails=chdir_fails,
        )

    def start_fails(self) -> str | None:
        """Why the next start fails before the service runs (after with_environment): an env file without `-` that
        does not exist refuses the start; a WorkingDirectory= that does not exist fails every command, and the first
        ExecStartPre=/ExecStart= command without `-` ends the start there. None where neither holds."""
        if self.start_refused:
            return self.start_refused[0]
        if self.chdir_fails:
            stopped = next((c for c in [*self.exec_start_pre, *self.exec_start] if not c.ignore_errors), None)
            if stopped is not None:
                where = f" ({stopped.where})" if stopped.where else ""
                return f"{self.chdir_fails}; so `{stopped.path}`{where} fails and the start with it"
        return None

    def _run_directory(self, is_dir: Callable[[str], bool]) -> tuple[str, str | None]:
        """Where systemd runs the commands, and why the start fails when WorkingDirectory= cannot be entered."""
        wanted = self.working_directory
        if wanted is None:
            return "/", None
        optional = wanted.startswith("-")
        path = wanted.removeprefix("-")
        if path == "~":
            path = "/root"  # the system manager runs as root; WorkingDirectory=~ is root's home
        if is_dir(path):
            return path, None
        if optional:
            return "/", None
        where = self.set_at.get("WorkingDirectory", "systemctl show")
        return "/", (
            f"WorkingDirectory={path} ({where}) does not exist: systemd cannot enter it, and every command fails "
            f"before it runs (status=200/CHDIR); prefix it with `-` if it is optional"
        )


def _joined(command: ExecCommand) -> tuple[str, str]:
    """A command as `systemctl show` prints it: the program, and the words it is given (argv[0] first) joined."""
    argv = list(command.written or command.argv)  # as written: before `$VAR` expansion, as systemd holds it
    words = [command.argv0 if command.argv0 is not None else argv[0] if argv else "", *argv[1:]]
    return (argv[0] if argv else ""), " ".join(words)


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
        service_type=one("Type") or "simple",
        working_directory=_shown_working_directory(one("WorkingDirectory") or ""),
        load_error=_load_error(one("LoadState"), one("LoadError")),
    )


def _shown_working_directory(text: str) -> str | None:
    """`systemctl show`'s WorkingDirectory=: empty (not set), `~`, `/path`, or `!/path` where a missing folder is no
    error (the file's `-/path`)."""
    if not text:
        return None
    return "-" + text[1:] if text.startswith("!") else text


def _load_error(state: str | None, error: str | None) -> str | None:
    """Why systemd did not load the unit (LoadState=bad-setting, error, not-found, masked), in its own words."""
    if state in (None, "", "loaded"):
        return None
    said = (error or "").split(" ", 1)[-1].strip().strip('"')
    return f"LoadState={state}" + (f": {said}" if said else "")


def _expanded(commands: list[ExecCommand], label: str, env: dict[str, EnvSetting]) -> list[ExecCommand]:
    """Exec lines with their `${VAR}`/`$VAR` expanded in the service's environment (a `:` prefix: kept as written)."""
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


# systemd's defaults when a unit file says nothing (systemd.service(5), systemd.unit(5))
_DEFAULT_RESTART_SEC = 0.1
_DEFAULT_START_LIMIT_BURST = 5
_DEFAULT_START_LIMIT_INTERVAL = 10.0


# Long on purpose: the settings one after another, as load-fragment.c's table lists them, then service_verify
def unit_from_file(
    sections: Sections,
    enabled: bool | None,
    active: str | None,
    cleared: dict[tuple[str, str], str] | None = None,
    files: list[str] | None = None,
    name: str | None = None,
    host: Mapping[str, str] | None = None,
    notes: list[str] | None = None,
) -> UnitFacts:
    """The effective unit from its merged sections, as systemd 252 loads it (src/core/load-fragment.c: each setting's
    parser; src/core/service.c service_verify). `name`: the unit's name, for the `%n`/`%i` … specifiers of its words;
    by default the first file's name where that is a unit's own file (not a template's `x@.service`). `host`: the
    host's specifier values golive read from the station (`%H` …). `notes`: what systemd ignored in the files
    (unit_files.parse_unit_file). A value systemd refuses is ignored, as systemd ignores it: the one before it holds."""
    if name is None and files:
        base = files[0].rsplit("/", 1)[-1]
        name = None if "@." in base else base
    specifiers = Specifiers(name, files[0] if files else None, dict(host or {}))
    unit, service = sections.get("Unit", {}), sections.get("Service", {})
    set_at: dict[str, str] = {}
    emptied: set[str] = set()
    said: list[str] = list(notes or [])
    fatal: list[str] = []

    order = {path: i for i, path in enumerate(files or [])}

    def latest(
        read: Callable[[Value], Any], *spellings: tuple[dict[str, list[Value]], str], empty_resets: bool = False
    ) -> tuple[Any, Value | None]:
        return _latest(read, spellings, order, said, empty_resets)

    def noted(key: str, found: tuple[Any, Value | None]) -> Any:
        value, at = found
        if at is not None and at.line:
            set_at[key] = at.where
        return value

    restart_sec = noted("RestartSec", latest(read_timespan, (service, "RestartSec")))
    # StartLimitInterval= and StartLimitBurst= in [Service] are the pre-230 spellings systemd still accepts
    interval = noted(
        "StartLimitIntervalSec",
        latest(
            read_timespan,
            (unit, "StartLimitIntervalSec"),
            (unit, "StartLimitInterval"),
            (service, "StartLimitInterval"),
        ),
    )
    burst = noted("StartLimitBurst", latest(read_unsigned, (unit, "StartLimitBurst"), (service, "StartLimitBurst")))
    restart = noted("Restart", latest(_one_of(RESTART_VALUES), (service, "Restart")))
    service_type = noted("Type", latest(_one_of(SERVICE_TYPES), (service, "Type")))
    remain = noted("RemainAfterExit", latest(read_boolean, (service, "RemainAfterExit")))
    workdir = noted(
        "WorkingDirectory",
        latest(lambda v: _working_directory(v, specifiers, fatal), (service, "WorkingDirectory"), empty_resets=True),
    )
    environment, env_notes = _environment(service, specifiers)
    env_files = [ref for v in service.get("EnvironmentFile", []) if (ref := _env_file(v, specifiers, said))]
    for key in EXEC_KEYS:
        values = service.get(key)
        if values and values[-1].line:
            set_at[key] = values[-1].where
        elif (cleared or {}).get(("Service", key)):
            set_at[key] = (cleared or {})[("Service", key)]
            emptied.add(key)
    execs: dict[str, Any] = {
        attr: _exec_commands(service, key, specifiers, fatal, said) for key, attr in EXEC_KEYS.items()
    }
    kind = service_type or "simple"
    fatal += _service_refuses(kind, restart or "no", bool(remain), execs["exec_start"], execs["exec_stop"], set_at)
    return UnitFacts(
        source="unit file" if not files or len(files) == 1 else "unit file and drop-ins",
        restart=restart or "no",
        restart_sec_s=restart_sec if restart_sec is not None else _DEFAULT_RESTART_SEC,
        start_limit_burst=burst if burst is not None else _DEFAULT_START_LIMIT_BURST,
        start_limit_interval_s=interval if interval is not None else _DEFAULT_START_LIMIT_INTERVAL,
        **execs,
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
        env_notes=env_notes,
        service_type=kind,
        working_directory=workdir,
        load_error="; ".join(fatal) or None,
        ignored=said,
    )


def _latest(
    read: Callable[[Value], Any],
    spellings: tuple[tuple[dict[str, list[Value]], str], ...],
    order: dict[str, int],
    said: list[str],
    empty_resets: bool = False,
) -> tuple[Any, Value | None]:
    """A setting's value: the last assignment systemd reads that its parser accepts (`read` gives None where it
    refuses: said in `said`), under any of its names (StartLimitBurst= in [Unit], its legacy alias in [Service]: each
    stores into the same field, so the one read last wins; `order`: each file's place, the unit file first); with
    `empty_resets`, an empty value returns to the default. Returns the value and the assignment that set it."""
    values = sorted(
        (v for section, key in spellings for v in section.get(key, [])),
        key=lambda v: (order.get(v.path, 0), v.line),
    )
    found: tuple[Any, Value | None] = (None, None)
    for value in values:
        if value == "" and empty_resets:
            found = (None, None)
            continue
        parsed = read(value)
        if parsed is None:
            said.append(f"{value.where}: `{value}` is not a value systemd accepts here: it ignores the line")
            continue
        found = (parsed, value)
    return found


def _one_of(values: tuple[str, ...]) -> Callable[[str], str | None]:
    """The parser of a setting that takes one of these words (None: systemd refuses the value)."""
    return lambda text: text if text in values else None


def _environment(service: dict[str, list[Value]], specifiers: Specifiers) -> tuple[dict[str, EnvSetting], list[str]]:
    """The service's Environment= lines, in order (a later setting of a name replaces the earlier one, and moves to
    the end), with what systemd ignored in them."""
    environment: dict[str, EnvSetting] = {}
    env_notes: list[str] = []
    for value in service.get("Environment", []):
        settings, ignored = parse_environment_line(value, value.where, specifiers)
        env_notes.extend(ignored)
        for setting in settings:
            environment.pop(setting.name, None)
            environment[setting.name] = setting
    return environment, env_notes


def _exec_commands(
    service: dict[str, list[Value]], key: str, specifiers: Specifiers, fatal: list[str], said: list[str]
) -> list[ExecCommand]:
    """The commands of one Exec key's lines; a line systemd refuses is said in `fatal` (the unit does not load) or in
    `said` (the line is ignored)."""
    found = []
    for value in service.get(key, []):
        read = read_unit_exec(value, specifiers)
        found += read.commands
        if read.problem:
            (fatal if read.fatal else said).append(f"{key}= at {value.where}: {read.problem}")
    return found


def _working_directory(value: Value, specifiers: Specifiers, fatal: list[str]) -> str | None:
    """WorkingDirectory= as config_parse_working_directory reads it: `-` = a missing folder is no error, `~` = root's
    home; specifiers resolved; a relative or unnormalised path refuses the unit (ignored with `-`). Returns the path
    (`-` kept in front), or None where systemd ignores the line."""
    missing_ok = value.startswith("-")
    path = value[1:] if missing_ok else str(value)
    if path == "~":
        return ("-" if missing_ok else "") + "~"
    try:
        path = specifiers.resolve(path)
    except BadSpecifier as exc:
        problem = f"WorkingDirectory= at {value.where}: {exc}"
    else:
        simple = _simplified(path)
        if simple is not None:
            return ("-" if missing_ok else "") + simple
        problem = f"WorkingDirectory= at {value.where}: `{path}` is not an absolute, normalized path"
    if not missing_ok:
        fatal.append(f"{problem}: systemd refuses the unit (bad-setting)")
    return None


def _env_file(value: Value, specifiers: Specifiers, said: list[str]) -> EnvFileRef | None:
    """One EnvironmentFile= as config_parse_unit_env_file reads it: specifiers resolved, `-` kept apart, the path
    simplified (`//` is `/`); a relative or unnormalised path (`..`) is ignored at load, with a warning."""
    optional = value.startswith("-")
    try:
        path = specifiers.resolve(value[1:] if optional else str(value))
    except BadSpecifier as exc:
        said.append(f"EnvironmentFile= at {value.where}: {exc}: systemd ignores the line")
        return None
    simple = _simplified(path)
    if simple is None:
        said.append(f"EnvironmentFile={value} ({value.where}) is not an absolute, normalized path: systemd ignores it")
        return None
    return EnvFileRef(simple, optional, value.where)


def _simplified(path: str) -> str | None:
    """src/basic/path-util.c path_simplify_and_warn(PATH_CHECK_ABSOLUTE): `//` and `/./` collapse, a trailing `/`
    goes; None for a relative path or one with `..` (systemd: "not normalized")."""
    if not path.startswith("/"):
        return None
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        return None
    return "/" + "/".join(parts)


def _service_refuses(
    kind: str,
    restart: str,
    remain: bool,
    start: list[ExecCommand],
    stop: list[ExecCommand],
    set_at: dict[str, str],
) -> list[str]:
    """What src/core/service.c service_verify refuses (the unit is not loaded: LoadState=bad-setting)."""
    at = f" ({set_at['ExecStart']})" if "ExecStart" in set_at else ""
    if not start and not stop:
        return [f"the service has no ExecStart= (nor ExecStop=){at}: systemd refuses the unit (bad-setting)"]
    if kind != "oneshot" and not start:
        return [f"the service has no ExecStart={at}, which only Type=oneshot allows: systemd refuses the unit"]
    if not remain and not start:
        return [f"the service has no ExecStart={at} and no RemainAfterExit=yes: systemd refuses the unit"]
    if kind != "oneshot" and len(start) > 1:
        return [
            f"Type={kind} with {len(start)} ExecStart= commands{at}: only Type=oneshot may have more than one, so "
            f"systemd refuses the unit (bad-setting)"
        ]
    if kind == "oneshot" and restart in ("always", "on-success"):
        return [f"Type=oneshot with Restart={restart}: systemd refuses the unit (bad-setting)"]
    return []


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


# uname(2)'s machine → systemd's architecture name (src/basic/architecture.c), for `%a`
_ARCHITECTURES = {
    "x86_64": "x86-64",
    "i686": "x86",
    "i586": "x86",
    "i386": "x86",
    "aarch64": "arm64",
    "aarch64_be": "arm64-be",
    "armv7l": "arm",
    "ppc64le": "ppc64-le",
    "ppc64": "ppc64",
    "s390x": "s390x",
    "riscv64": "riscv64",
    "loongarch64": "loongarch64",
}
HOST_SPECIFIER_RE = re.compile(r"%[aAbBhHlmMoqsvwW]")


def host_specifiers(read: Callable[[str], str | None], machine: str) -> dict[str, str]:
    """The host's specifier values as systemd 252 gives a system unit (src/shared/specifier.c), read from the
    station's files: `%H` the host name, `%l` its first label, `%q` the pretty one (/etc/machine-info), `%m` the
    machine id, `%b` the boot id, `%v` the kernel release, `%a` the architecture (`machine`: `uname -m`), `%o %w %W %B
    %M %A` from os-release (empty where it has no such field), `%h %s` root's home and shell (/etc/passwd)."""
    host = (read("/proc/sys/kernel/hostname") or "").strip()
    values = {"H": host, "l": host.split(".", 1)[0]}
    pretty = _key_values(read("/etc/machine-info") or "").get("PRETTY_HOSTNAME")
    values["q"] = pretty or host
    values["m"] = (read("/etc/machine-id") or "").strip()
    values["b"] = (read("/proc/sys/kernel/random/boot_id") or "").strip().replace("-", "")
    values["v"] = (read("/proc/sys/kernel/osrelease") or "").strip()
    values["a"] = _ARCHITECTURES.get(machine.strip(), machine.strip())
    release = _key_values(read("/etc/os-release") or read("/usr/lib/os-release") or "")
    for letter, key in (("o", "ID"), ("w", "VERSION_ID"), ("W", "VARIANT_ID"), ("B", "BUILD_ID")):
        values[letter] = release.get(key, "")
    values["M"], values["A"] = release.get("IMAGE_ID", ""), release.get("IMAGE_VERSION", "")
    for line in (read("/etc/passwd") or "").splitlines():
        fields = line.split(":")
        if fields[0] == "root" and len(fields) >= 7:
            values["h"], values["s"] = fields[5], fields[6]
            break
    return {k: v for k, v in values.items() if v or k in "wWBMA"}


def _key_values(text: str) -> dict[str, str]:
    """os-release(5) / machine-info(5): KEY=value lines, the value maybe quoted."""
    found, _ = parse_env_file(text, "os-release")
    return {s.name: s.value for s in found}


def read_unit(
    texts: list[tuple[str, str]],
    enabled: bool | None = None,
    active: str | None = None,
    name: str | None = None,
    host: Mapping[str, str] | None = None,
) -> UnitFacts:
    """The effective unit of a fragment and its drop-ins (`[(path, text)]`, fragment first, drop-ins in systemd's
    order) as systemd 252 loads it: merged (unit_files.merge_unit_files), then read (unit_from_file). A setting
    systemd cannot take in a drop-in (an Exec line or WorkingDirectory= it refuses, a broken section header) ends that
    drop-in there: systemd stops reading the file at that line and keeps what came before it, and the unit still
    loads (read back from systemd 252); in the unit file itself it refuses the unit (bad-setting, or LoadState=error
    for a header: FactError)."""
    if name is None and texts:
        base = texts[0][0].rsplit("/", 1)[-1]
        name = None if "@." in base else base
    specifiers = Specifiers(name, texts[0][0] if texts else None, dict(host or {}))
    cut: list[tuple[str, str]] = [texts[0]] if texts else []
    notes: list[str] = []
    refused: list[str] = []
    if texts and texts[0][1] == "":  # systemd.unit(5): an empty unit file (or a link to /dev/null) masks the unit
        refused.append(
            f"{texts[0][0]} is empty: systemd treats the unit as masked (LoadState=masked) and never starts it"
        )
    elif texts:
        stop = _first_refused_line(*texts[0], specifiers)
        if stop is not None:  # in the unit file itself: systemd refuses the unit, whatever a drop-in says later
            refused.append(f"{texts[0][0]}:{stop[0]}: {stop[1]}: systemd refuses the unit (LoadState=bad-setting)")
    for path, text in texts[1:]:
        stop = _first_refused_line(path, text, specifiers)
        if stop is not None:
            line, why, kept = stop
            notes.append(f"{path}:{line}: {why}: systemd stops reading {path} there (what follows is not applied)")
            text = unit_files.read_up_to(text, line, kept)
        cut.append((path, text))
    sections, cleared = unit_files.merge_unit_files(cut, notes)
    unit = unit_from_file(sections, enabled, active, cleared, [p for p, _ in texts], name=name, host=host, notes=notes)
    if refused:
        return replace(unit, load_error="; ".join([*refused, *([unit.load_error] if unit.load_error else [])]))
    return unit


def _first_refused_line(path: str, text: str, specifiers: Specifiers) -> tuple[int, str, str] | None:
    """Where systemd stops reading a drop-in: its first setting that ends config_parse with an error (an Exec line
    refused without `-`, a WorkingDirectory= refused without `-`, a broken section header), why, and the part of that
    line systemd kept (`ExecStartPre=/x a` of `ExecStartPre=/x a ; rel/y`: the commands before the refused one)."""
    every: list[tuple[str, str, Value]] = []
    try:
        unit_files.parse_unit_file(text, path, every=every)
    except FactError as exc:
        line = re.search(rf"{re.escape(path)}:(\d+):", str(exc))
        return (int(line.group(1)), "a broken section header", "") if line else (1, str(exc), "")
    refuses = ": systemd refuses the unit (bad-setting)"
    for section, key, value in every:  # systemd stops at the first, whatever a later line of the file resets
        if section != "Service" or not value:
            continue
        if key in EXEC_KEYS:
            read = read_unit_exec(value, specifiers)
            if read.fatal:
                kept = f"{key}={read.kept}" if read.commands else ""
                return value.line, f"{key}= {(read.problem or '').removesuffix(refuses)}", kept
        elif key == "WorkingDirectory":
            fatal: list[str] = []
            if _working_directory(value, specifiers, fatal) is None and fatal:
                return value.line, fatal[0].removesuffix(refuses), ""
    return None
