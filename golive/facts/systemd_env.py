"""The service's environment as systemd builds it, and systemd's word splitting.

As systemd.exec(5) ("Environment") says: `Environment=` lines, `EnvironmentFile=` files parsed as
src/basic/env-file.c parses them, `systemctl show`'s Environment= and EnvironmentFiles=, and systemd's word splitting
(extract_first_word, C escapes) that they and Exec lines share."""

from __future__ import annotations

import re
from dataclasses import dataclass

from golive.facts.unit_files import BadSpecifier, Specifiers, unit_specifiers

WHITESPACE = " \t\n\r"
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
    i = 0
    while True:
        word, i, error = extract_first_word(text, i, cunescape=cunescape, relax=relax)
        if error or word is None:
            return words, error
        words.append(word)


def extract_first_word(
    text: str, i: int = 0, *, cunescape: bool = False, relax: bool = False, unescape_relax: bool = False
) -> tuple[str | None, int, str | None]:
    """One step of `extract_words` from text[i:]: the word (None at the end of the text), where the next step starts,
    and the error that stopped it, if any. `unescape_relax` (EXTRACT_UNESCAPE_RELAX) keeps an unknown escape, and an
    unquoted trailing backslash, as written."""
    n = len(text)
    while i < n and text[i] in WHITESPACE:
        i += 1
    if i >= n:
        return None, i, None
    word: list[str] = []
    quote = ""
    while i < n:
        c = text[i]
        if c == "\\":
            if i + 1 >= n:
                if unescape_relax and (not quote or relax):
                    word.append(c)
                    i += 1
                    break
                if relax:
                    i += 1
                    break
                return None, i, "a trailing backslash"
            if cunescape:
                decoded, used = _cunescape_one(text, i + 1)
                if decoded is None and unescape_relax:
                    decoded, used = text[i : i + 2], 1
                if decoded is None:
                    return None, i, f"unknown escape sequence \\{text[i + 1]}"
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
        elif c in WHITESPACE:
            break
        else:
            word.append(c)
            i += 1
    if quote and not relax:
        return None, i, f"unbalanced {quote}"
    return "".join(word), i, None


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


def parse_environment_line(
    value: str, where: str = "", unit: str | Specifiers | None = None
) -> tuple[list[EnvSetting], list[str]]:
    """One `Environment=` value as systemd's config_parse_environ reads it (src/core/load-fragment.c): words by
    extract_first_word(EXTRACT_CUNESCAPE|EXTRACT_UNQUOTE), so `Environment="A=1 2" B=3` and `A="1 2"` both set A to
    `1 2`; `%%` is `%`; an assignment with an invalid name is ignored; a syntax error ignores the rest of the line.
    Returns the assignments and, for findings, what systemd ignores and why."""
    words, error = extract_words(value, cunescape=True)
    settings, notes = [], []
    for word in words:
        try:
            word = unit_specifiers(word, unit)  # config_parse_environ: unit_env_printf on each word
        except BadSpecifier as exc:
            notes.append(f"{where}: `{word[:60]}`: {exc}: systemd ignores it")
            continue
        name, eq, text = word.partition("=")
        if not eq or not env_name_is_valid(name) or not _env_value_is_valid(text):
            notes.append(f"{where}: `{word[:60]}` is not a valid assignment: systemd ignores it")
            continue
        settings.append(EnvSetting(name, text, where, "Environment"))
    if error:
        notes.append(f"{where}: {error} in `Environment={value[:60]}`: systemd ignores the rest of the line")
    return settings, notes


# Long on purpose: one state machine, as systemd's env-file.c is, to be read side by side with it
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
            elif c not in WHITESPACE:
                state, key, value, key_ws, start = KEY, [c], [], -1, pos
        elif state == KEY:
            if c in "\n\r":
                state = PRE_KEY
            elif c == "=":
                state, value_ws = PRE_VALUE, -1
            else:
                if c not in WHITESPACE:
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
            elif c not in WHITESPACE:
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
                if c not in WHITESPACE:
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
        if c in WHITESPACE:
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
