"""Exec lines (ExecStartPre=, ExecStart=, ExecStartPost=) as systemd runs them, each word with the line that made it.

Read from `systemctl show` or from a unit file (config_parse_exec: prefixes, words, specifiers), then expanded in the
service's environment (systemd.service(5), "Command lines"), each word remembering the line and the variables that
made it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from golive.facts import FactError
from golive.facts.systemd_env import WHITESPACE, EnvSetting, env_name_is_valid, extract_first_word, extract_words
from golive.facts.unit_files import BadSpecifier, Specifiers, Value, specifiers_of


@dataclass(frozen=True)
class ExecCommand:
    # the program systemd executes, then its arguments; after UnitFacts.with_environment, the words as systemd runs
    # them (Word: each knows where it came from)
    argv: list[str]
    ignore_errors: bool = False
    where: str = ""  # the unit file (or drop-in) and line that set it, where known
    expand_env: bool = True  # False for the `:` prefix (ExecStartEx `flags=no-env-expand`): no $VAR substitution
    written: tuple[str, ...] | None = None  # the words as written, before the expansion (None: not expanded)
    unset: tuple[str, ...] = ()  # variables the line names that nothing sets: systemd expands them to nothing
    argv0: str | None = None  # `@`: the argv[0] the program is given, when it is not the program's path
    shown: str | None = None  # read from `systemctl show`: its argv[] text as printed (252: the words joined bare)

    @property
    def path(self) -> str:
        return self.argv[0] if self.argv else ""


# `ignore_errors=` in Exec*, `flags=` in the Exec*Ex variants (systemd ≥ 243); src/systemctl/systemctl-show.c prints
# "{ path=%s ; argv[]=%s ; ignore_errors=%s ; start_time=…", argv[] being the words joined by one blank each
_SHOW_EXEC = re.compile(
    r"\{\s*path=(?P<path>.*?) ; argv\[\]=(?P<argv>.*?) ;\s*"
    r"(?:ignore_errors=(?P<ign>\w+)|flags=(?P<flags>[^;]*))",
    re.DOTALL,
)


def parse_show_exec(value: str) -> list[ExecCommand]:
    """An Exec* property of `systemctl show`: `{ path=… ; argv[]=… ; ignore_errors=… ; … }`, possibly several. The
    program is path=; argv[] starts with the argv[0] it is given: the program as written in the unit (systemd
    simplifies the path it runs: `//` is `/`), or `@`'s own. The words are split at blanks: the unit files say where
    a word with blanks in it ends (UnitFacts.with_origins, matching on `shown`)."""
    commands = []
    for match in _SHOW_EXEC.finditer(value):
        ignore = match["ign"] == "yes" or "ignore-failure" in (match["flags"] or "")
        shown, path = match["argv"], match["path"]
        if shown == path or shown.startswith(path + " "):  # argv[0] is the program as systemd holds it
            argv, argv0 = [path, *_split_argv(shown[len(path) :])], None
        else:
            words = _split_argv(shown)
            argv, argv0 = [path, *words[1:]], words[0] if words else ""
        commands.append(
            ExecCommand(
                argv=argv,
                ignore_errors=ignore,
                expand_env="no-env-expand" not in (match["flags"] or ""),
                argv0=argv0,
                shown=shown,
            )
        )
    if value.strip() and not commands:
        raise FactError(f"unrecognised Exec property format: {value[:120]!r}")
    return commands


def _split_argv(text: str) -> list[str]:
    """systemd 252 prints argv bare, joined by one blank each: split at blanks (a word with blanks in it, or an
    empty one, is told apart by the unit files, not here)."""
    return text.split()


@dataclass(frozen=True)
class ExecRead:
    """An Exec line as systemd's config_parse_exec reads it: the commands it keeps, and what it refused (`problem`);
    `fatal`: systemd refuses the whole unit for it (LoadState=bad-setting), else it ignores the rest of the line."""

    commands: list[ExecCommand]
    problem: str | None = None
    fatal: bool = False
    kept: str = ""  # the line's text before the command systemd refused: the commands systemd kept of it


def parse_unit_exec(value: str, unit: str | Specifiers | None = None) -> list[ExecCommand]:
    """The commands systemd keeps of an Exec line (read_unit_exec)."""
    return read_unit_exec(value, unit).commands


def read_unit_exec(value: str, unit: str | Specifiers | None = None) -> ExecRead:
    """An Exec line of a unit file as systemd 252's src/core/load-fragment.c config_parse_exec reads it: one or more
    commands, a word `;` alone (unquoted, or first of a command) ending one and starting the next, and a word `\\;`
    alone being a literal `;` (as `find -exec` wants). Each command: leading `-@:+!` prefixes of its first word are
    flags, not the program (`-`: failure ignored, `:`: no $VAR expansion, `@`: the next word is argv[0], not the
    program); words by extract_first_word_and_warn(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE) (`"a\\tb"` is a, tab, b; an
    unknown escape such as grep's `\\d` is kept as written, with systemd's warning "Ignoring unknown escape
    sequences"), each with its specifiers resolved (`unit_specifiers`; `unit`: the unit's name or its Specifiers).

    What systemd refuses: a first word it cannot read ends the line (the commands before it stay); an argument it
    cannot read (an unbalanced quote), an unknown specifier, an empty program or argv[0], a program that is neither an
    absolute path nor a file name: the command and the rest of the line are ignored where the command has the `-`
    prefix, else systemd refuses the unit (bad-setting)."""
    where = value.where if isinstance(value, Value) else ""
    specifiers = specifiers_of(unit)
    commands: list[ExecCommand] = []
    i, n = 0, len(value)
    while i < n:
        start = i
        first, i, error = extract_first_word(value, i, cunescape=True, unescape_relax=True)
        if error:
            return ExecRead(commands, f"{error} in the program's word: systemd ignores the rest of the line")
        if first is None:
            break
        if first == ";":  # an empty command: `;` first, or twice in a row
            continue
        prefix = _prefixes(first)
        ignore = "-" in prefix

        def refused(why: str, start: int = start, ignore: bool = ignore) -> ExecRead:
            if ignore:
                return ExecRead(commands, f"{why}: the `-` prefix makes systemd ignore the rest of the line")
            return ExecRead(
                commands, f"{why}: systemd refuses the unit (bad-setting)", fatal=True, kept=value[:start].rstrip()
            )

        words = [first[len(prefix) :]]
        while True:
            while i < n and value[i] in WHITESPACE:
                i += 1
            if i >= n:
                break
            if value[i] == ";" and value[i + 1 : i + 2] in ("", *WHITESPACE):
                i += 1
                break
            if value[i : i + 2] == "\\;" and value[i + 2 : i + 3] in ("", *WHITESPACE):
                words.append(";")
                i += 2
                continue
            word, i, error = extract_first_word(value, i, cunescape=True, unescape_relax=True)
            if error:
                return refused(f"{error} in an argument of `{words[0]}`")
            if word is None:
                break
            words.append(word)
        try:
            resolved = [specifiers.resolve(w) for w in words]
        except BadSpecifier as exc:
            return refused(str(exc))
        argv0 = None
        if "@" in prefix:  # the program, then the argv[0] it is given
            argv0 = resolved.pop(1) if len(resolved) > 1 else ""
        program = resolved[0]
        if program.startswith("/") and _simplified_path(program) != program:  # unit_path_printf + path_simplify
            argv0 = program if argv0 is None else argv0  # argv[0] stays as written
            program = resolved[0] = _simplified_path(program)
        if not program or ("@" in prefix and not argv0):
            return refused(f"an empty program or argv[0] in `{value[:60]}`")
        if any(ord(c) < 0x20 or ord(c) == 0x7F or c in "\"'\\" for c in program):
            return refused(f"the program `{program[:60]}` has characters systemd does not allow in it")
        if program.endswith(("/", "/.", "/..")) or program in (".", ".."):
            return refused(f"the program `{program[:60]}` is a directory")
        if not program.startswith("/") and ("/" in program or len(program) > 255):
            return refused(f"the program `{program[:60]}` is neither an absolute path nor a file name")
        commands.append(
            ExecCommand(argv=resolved, ignore_errors=ignore, where=where, expand_env=":" not in prefix, argv0=argv0)
        )
    return ExecRead(commands)


def _simplified_path(path: str) -> str:
    """src/basic/path-util.c path_simplify: `//` and `/./` collapse and a trailing `/` goes (`..` stays)."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    return "/" + "/".join(parts)


def _prefixes(first: str) -> str:
    """The prefixes config_parse_exec reads off a command's first word: `-` `@` `:` each at most once, and one of `+`,
    `!` or `!!` (the `!`s need not be adjacent), in any order; the first character that is none of these (or one it
    does not take again) starts the program, as written."""
    privileges = ""  # "", "+", "!", "!!"
    for i, c in enumerate(first):
        if c in "-@:" and c not in first[:i]:
            continue
        if c == "+" and not privileges:
            privileges = "+"
        elif c == "!" and privileges in ("", "!"):
            privileges += "!"
        else:
            return first[:i]
    return first


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
