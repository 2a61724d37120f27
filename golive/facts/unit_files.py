"""systemd unit files: [Section] Key=value with every value's file and line, the drop-ins that apply to a unit merged
in the order systemd applies them, and the unit-name specifiers (`%n`, `%i` …) of a unit file's words."""

from __future__ import annotations

import re

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
