"""systemd unit files: [Section] Key=value with every value's file and line, the drop-ins that apply to a unit merged
in the order systemd applies them, and the unit-name specifiers (`%n`, `%i` …) of a unit file's words."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from golive.facts import FactError


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


# The sections a service's unit file may hold (src/core/load-fragment.c; unit_load_fragment passes these to
# config_parse): any other section is ignored, with systemd's "Unknown section '…'. Ignoring." (`X-` ones silently).
SERVICE_SECTIONS = ("Unit", "Service", "Install")
_WS = " \t\n\r"  # systemd's WHITESPACE
# settings holding one value, whose parser decides what an empty assignment does (keep the previous value, or reset
# to the default); an empty assignment of any other setting golive reads empties its list (`ExecStartPre=`)
SCALAR_KEYS = frozenset(
    (
        "Restart",
        "RestartSec",
        "StartLimitBurst",
        "StartLimitIntervalSec",
        "StartLimitInterval",
        "Type",
        "RemainAfterExit",
        "WorkingDirectory",
    )
)
_EOL = re.compile(r"\r\n|[\r\n\0]")  # read_line(): a line ends at \n, \r, \r\n or NUL


def _physical_lines(text: str) -> list[str]:
    lines = _EOL.split(text)
    return lines[:-1] if lines and lines[-1] == "" else lines


def read_up_to(text: str, line: int, kept: str = "") -> str:
    """A unit file as systemd applied it when it stopped reading at `line` (1-based): the lines before it, then the
    part of that line it kept (`kept`, may be empty)."""
    return "\n".join([*_physical_lines(text)[: line - 1], *([kept] if kept else [])])


# Long on purpose: conf-parser.c's config_parse with its parse_line inside, to be read side by side with them
def parse_unit_file(
    text: str,
    path: str = "unit file",
    into: Sections | None = None,
    cleared: dict[tuple[str, str], str] | None = None,
    notes: list[str] | None = None,
    every: list[tuple[str, str, Value]] | None = None,
) -> Sections:
    """A unit file as systemd 252 reads it (src/shared/conf-parser.c config_parse, parse_line): every value remembers
    its file and the line its key is on. With `into`, the file's assignments are applied on top of those already
    there, as systemd applies a drop-in to the unit file before it.

    - A line whose first non-blank character is `#` or `;` is a comment, also inside a `\\` continuation: it is
      skipped and the continuation goes on with the next line.
    - A line ending in an unescaped backslash continues: the backslash becomes a space and the next line is appended
      as it is (its blanks too: inside quotes they are part of the word); `\\\\` at the end is no continuation, nor is
      a backslash followed by a blank. An empty line ends a continuation.
    - `[Section]`: a header without its `]` makes systemd refuse the unit ("Invalid section header", LoadState=error):
      FactError. A section systemd does not know for a service (SERVICE_SECTIONS) is ignored, with its settings.
    - `Key=value`, both stripped of blanks; a line without `=` (or with nothing before it), or an assignment before
      any section, is ignored, as systemd ignores it (said in `notes`).
    An empty assignment (`ExecStartPre=`) resets the list, as systemd does; `cleared` records where. An empty value
    of a one-value setting (SCALAR_KEYS) is kept: its parser decides. `every` gets each assignment in order, resets
    or not (what systemd's parser meets line by line)."""
    sections: Sections = {} if into is None else into
    current: dict[str, list[Value]] | None = None
    ignored_section = False
    pending: str | None = None  # the continuation so far
    first = 0

    def note(number: int, text: str) -> None:
        if notes is not None:
            notes.append(f"{path}:{number}: {text}")

    def logical(line: str, number: int) -> None:
        nonlocal current, ignored_section
        line = line.strip(_WS)
        if not line or line[0] in "#;":
            return
        if line[0] == "[":
            if line[-1] != "]":
                raise FactError(
                    f"{path}:{number}: invalid section header {line[:80]!r}: systemd refuses to load the unit "
                    f'(LoadState=error, "Bad message")',
                    fix=f"close the header with `]` at {path}:{number}, then `systemctl daemon-reload`",
                )
            name = line[1:-1]
            if name in SERVICE_SECTIONS:
                current, ignored_section = sections.setdefault(name, {}), False
            else:
                current, ignored_section = None, True
                if not name.startswith("X-"):
                    note(number, f"unknown section [{name}]: systemd ignores it and every setting in it")
            return
        if current is None:
            if not ignored_section:
                note(number, f"`{line[:60]}` is before any [Section]: systemd ignores it")
            return
        key, eq, value = line.partition("=")
        key, value = key.strip(_WS), value.strip(_WS)
        if not eq or not key:
            note(number, f"`{line[:60]}` has no `Key=`: systemd ignores the line")
            return
        if every is not None:  # each assignment in the order systemd reads it, before any reset applies
            section = next(name for name, body in sections.items() if body is current)
            every.append((section, key, Value(value, path, number)))
        if value == "" and key in SCALAR_KEYS:  # the setting's own parser decides what an empty value does
            current.setdefault(key, []).append(Value("", path, number))
        elif value == "":
            current[key] = []
            if cleared is not None:
                section = next(name for name, body in sections.items() if body is current)
                cleared[(section, key)] = f"{path}:{number}"
        else:
            current.setdefault(key, []).append(Value(value, path, number))

    for number, raw in enumerate(_physical_lines(text), 1):
        if number == 1 and raw.startswith("\ufeff"):
            raw = raw[1:]
        if raw.lstrip(_WS)[:1] in ("#", ";"):
            continue  # a comment, inside a continuation too
        joined = raw if pending is None else pending + raw
        if pending is None:
            first = number
        escaped = False
        for c in joined:
            escaped = not escaped and c == "\\"
        if escaped:
            pending = joined[:-1] + " "
            continue
        pending = None
        logical(joined, first)
    if pending is not None:
        logical(pending, first)
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


def merge_unit_files(
    files: list[tuple[str, str]], notes: list[str] | None = None
) -> tuple[Sections, dict[tuple[str, str], str]]:
    """The effective unit of a fragment and its drop-ins (`[(path, text)]`, fragment first, drop-ins in order);
    `notes`: the lines systemd ignores (parse_unit_file)."""
    sections: Sections = {}
    cleared: dict[tuple[str, str], str] = {}
    for path, text in files:
        parse_unit_file(text, path, into=sections, cleared=cleared, notes=notes)
    return sections, cleared


# The specifiers of a system unit (systemd.unit(5), "Specifiers"; src/core/unit-printf.c, src/shared/specifier.c) that
# are the same on every station: the system manager's directories and its user, root. The letters systemd knows and
# golive reads from the station (the host's: name, ids, kernel, os-release, root's passwd entry) are HOST_SPECIFIERS.
CONSTANT_SPECIFIERS = {
    "C": "/var/cache",
    "E": "/etc",
    "g": "root",
    "G": "0",
    "L": "/var/log",
    "S": "/var/lib",
    "t": "/run",
    "T": "/tmp",
    "u": "root",
    "U": "0",
    "V": "/var/tmp",
}
HOST_SPECIFIERS = frozenset("aAbBhHlmMoqsvwW")
UNIT_SPECIFIERS = frozenset("dfiIjJnNpPyY")
KNOWN_SPECIFIERS = frozenset(CONSTANT_SPECIFIERS) | HOST_SPECIFIERS | UNIT_SPECIFIERS | {"%"}


class BadSpecifier(ValueError):
    """A `%X` systemd does not know: it refuses the word ("Failed to resolve unit specifiers … Invalid slot")."""


@dataclass(frozen=True)
class Specifiers:
    """What a unit file's `%X` specifiers resolve to: the unit's name (`%n`, `%i` …), its fragment's path (`%y`, `%Y`),
    and the host's values golive read from the station (`%H` → its host name …, HOST_SPECIFIERS); a host letter
    without a value stays as written."""

    unit: str | None = None
    fragment: str | None = None
    host: Mapping[str, str] = field(default_factory=dict)

    def resolve(self, text: str) -> str:
        """src/shared/specifier.c specifier_printf: `%%` is `%`, a known letter its value, an unknown one refuses the
        word (BadSpecifier), a `%` at the very end stays."""
        values: dict[str, str] = {"%": "%", **CONSTANT_SPECIFIERS}
        unit = self.unit
        if unit and "." in unit:
            name = unit.rsplit(".", 1)[0]
            prefix, at, instance = name.partition("@")
            last = prefix.rsplit("-", 1)[-1]
            values |= {"n": unit, "N": name, "p": prefix, "i": instance, "j": last}
            values |= {"P": _unescape(prefix), "I": _unescape(instance), "J": _unescape(last)}
            values["f"] = "/" + (_unescape(instance) if at else _unescape(prefix)).lstrip("/")
            values["d"] = f"/run/credentials/{unit}"
        if self.fragment:
            values |= {"y": self.fragment, "Y": self.fragment.rsplit("/", 1)[0] or "/"}
        values |= {k: v for k, v in self.host.items() if k in HOST_SPECIFIERS}

        def one(m: re.Match[str]) -> str:
            letter = m.group(1)
            if letter not in KNOWN_SPECIFIERS:
                raise BadSpecifier(f"`%{letter}` is no specifier systemd knows")
            return values.get(letter, m.group(0))

        return re.sub(r"%(.)", one, text, flags=re.DOTALL)


def specifiers_of(unit: str | Specifiers | None) -> Specifiers:
    return unit if isinstance(unit, Specifiers) else Specifiers(unit)


def unit_specifiers(text: str, unit: str | Specifiers | None) -> str:
    """A unit file word with its specifiers resolved, as src/core/unit-printf.c unit_full_printf() does for every
    word of an Exec line (src/core/load-fragment.c config_parse_exec, after extract_first_word): `%%` is `%`; with the
    unit's name (`glm53@a-b.service`): `%n` the name, `%N` without its type, `%p` the prefix (before `@`), `%i` the
    instance, `%j` the prefix's last `-` part, and `%P` `%I` `%J` `%f` those unescaped (`-` is `/`, `\\xNN` a byte:
    unit_name_unescape); the system manager's constants (`%t` /run, `%u` root …); the host's (`%H`, `%m` …) where
    golive read them (Specifiers.host), else kept as written. An unknown letter raises BadSpecifier."""
    return specifiers_of(unit).resolve(text)


def _unescape(text: str) -> str:
    """src/basic/unit-name.c unit_name_unescape: `-` is `/`, `\\xNN` the byte NN."""
    return re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), text.replace("-", "/"))
