"""YAML as golive reads every file an operator writes: each key's file:line kept, validation errors as one line.

Profiles, inventories, waivers and batteries all load through here, so a typo anywhere reads
`site.yaml:3: unknown key 'vllm.max_num_seq'; did you mean 'max_num_seqs'?`.

Bounded, as every read of golive is: a file larger than MAX_FILE_BYTES (or one that is not a regular file: a FIFO,
/dev/zero) is refused before it is read; nesting deeper than MAX_DEPTH is refused from the parser's events (no
recursion: a 100,000-level `[[[…` is one line); aliases that expand past MAX_VALUES values (a "billion laughs" file of
a few hundred bytes) are refused while they expand. Each is one line, file:line where there is one, in well under a
second and a few MiB.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from golive.core.verdict import printable

MAX_FILE_BYTES = 2 * 2**20  # a profile, inventory, waivers or battery file: a few KiB; a large battery a few 100 KiB
MAX_DEPTH = 64  # nesting of mappings and lists (golive's own files nest 4 deep)
MAX_VALUES = 100_000  # values once aliases are expanded (a large battery has a few thousand)


class ConfigError(Exception):
    """A bad profile or inventory; str() is the one line the operator sees."""

    def __init__(self, message: str):
        # a key or value quoted from the file may hold a newline or an escape sequence: one line, shown as text
        super().__init__(printable(message.replace("\n", "\\n")))


# --- YAML with positions ---------------------------------------------------------------------------------------------

Path_ = tuple[Any, ...]


@dataclass
class Located:
    """YAML data plus where each key/item came from: {(key, 0, key): (file, line)}; and the comment that ends each
    key's line, where it has one: {("service", "start_limit_burst"): "at most 3 starts per hour … [000]"}."""

    data: Any
    where: dict[Path_, tuple[str, int]] = field(default_factory=dict)
    comments: dict[Path_, str] = field(default_factory=dict)


def read_bounded(
    path: Path, cap: int = MAX_FILE_BYTES, what: str = "a YAML file (profile, inventory, waivers, battery)"
) -> bytes:
    """The bytes of a regular file of at most `cap` bytes; ConfigError (one line) for anything else: a missing file,
    a FIFO or device (`/dev/zero` never ends), a folder, or a larger file (read no further than `cap` + 1)."""
    try:
        with open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NONBLOCK)) as stream:
            info = os.fstat(stream.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ConfigError(f"{path}: not a regular file (a folder, device or FIFO): golive reads {what}")
            if info.st_size > cap:
                raise ConfigError(f"{path}: {info.st_size:,} bytes; golive reads at most {cap:,} bytes of {what}")
            data = stream.read(cap + 1)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    if len(data) > cap:  # it grew while golive read it
        raise ConfigError(f"{path}: golive reads at most {cap:,} bytes of {what}")
    return data


def _depth_problem(text: str, file: str) -> str | None:
    """Where the YAML nests deeper than MAX_DEPTH (file:line and a few words), read from the parser's events: the
    parser keeps a stack of its own, where composing would recurse once a level. The scanner reads a flow collection
    to its end before its first event, once per level: where flow brackets alone could nest too deep, the text up to
    the bracket that would is read first, so a 100,000-level `[[[…` is refused after 65 of them."""
    cut = _flow_cut(text)
    if cut is not None:
        try:
            problem = _events_too_deep(text[:cut], file)
        except yaml.YAMLError:  # the prefix ends mid-collection: only the whole text can tell
            problem = None
        if problem:
            return problem
    return _events_too_deep(text, file)


_QUOTED = re.compile(r"'[^'\n]*'|\"(?:[^\"\\\n]|\\.)*\"")
_FLOW_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _flow_cut(text: str) -> int | None:
    """Just past the first bracket at which flow brackets (quoted text aside) nest deeper than MAX_DEPTH; None where
    they never do. An upper bound on flow nesting: a bracket inside a plain scalar counts too."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return None
    masked = _QUOTED.sub(lambda m: "_" * len(m[0]), text)
    depth = 0
    for at, char in enumerate(masked):
        depth += _FLOW_STEP.get(char, 0)
        if depth > MAX_DEPTH:
            return at + 1
    return None


def _events_too_deep(text: str, file: str) -> str | None:
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark else 1
                return f"{file}:{line}: nested deeper than golive reads ({MAX_DEPTH} levels of mappings and lists)"
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
    return None


def load_yaml(path: Path) -> Located:
    raw = read_bounded(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text (byte {raw[exc.start]:#04x})") from None
    try:
        problem = _depth_problem(text, str(path))
        if problem:
            raise ConfigError(problem)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at_line = f":{mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}{at_line}: YAML syntax error: {exc.problem or exc.context}") from None
    except yaml.reader.ReaderError as exc:  # a control character YAML does not allow
        line = text.count("\n", 0, exc.position) + 1
        raise ConfigError(f"{path}:{line}: YAML syntax error: character {exc.character:#06x} is not allowed") from None
    if node is None:
        raise ConfigError(f"{path}: file is empty")
    _refuse_expansion(node, str(path))
    located = Located(data=None)
    located.data = _construct(node, (), str(path), located.where, located.comments, _Expansion())
    return located


def _refuse_expansion(root: yaml.Node, file: str) -> None:
    """ConfigError where the file's aliases expand to more than MAX_VALUES values (a "billion laughs" file: a few
    hundred bytes, billions of values), counted on the composed graph before anything is built (each node once: an
    alias is the node it names); the line named is the node whose expansion passes the bound and whose parts each
    do not."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        if id(node) not in sizes:
            parts = [p for pair in node.value for p in pair] if isinstance(node, yaml.MappingNode) else node.value
            children = parts if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) else []
            sizes[id(node)] = 1 + sum(size(child) for child in children)  # recursion: at most MAX_DEPTH deep
        return sizes[id(node)]

    node = root
    if size(node) <= MAX_VALUES:
        return
    while True:
        parts = [p for pair in node.value for p in pair] if isinstance(node, yaml.MappingNode) else node.value
        larger = next((child for child in parts if size(child) > MAX_VALUES), None)
        if larger is None:
            break
        node = larger
    raise ConfigError(
        f"{file}:{node.start_mark.line + 1}: expands to {size(node):,} values, more than golive reads "
        f"({MAX_VALUES:,}: aliases that repeat aliases, a YAML bomb)"
    )


class _Expansion:
    """What building one file's values shares: one constructor for its scalars (a new one each costs ~15 µs)."""

    def __init__(self) -> None:
        self.scalars = yaml.SafeLoader("")


_REST_OF_LINE = re.compile(r"[^\n\r\x85\u2028\u2029\x00]*")  # YAML's line breaks, and the reader's end


def _line_comment(key_node: yaml.Node, value_node: yaml.Node) -> str | None:
    """The comment after a key's value on the key's own line (`restart_sec_s: 60  # [000]` → "[000]"), or after the
    key itself where the value starts below it (`service:  # …`); None where the line has none."""
    same_line = value_node.end_mark.line == key_node.start_mark.line
    mark = value_node.end_mark if same_line else key_node.end_mark
    if mark.buffer is None:
        return None
    match = _REST_OF_LINE.match(mark.buffer, mark.pointer)
    rest = match.group() if match else ""
    rest = rest.lstrip() if same_line else rest.lstrip().removeprefix(":").lstrip()
    return rest[1:].strip() if rest.startswith("#") else None


def _construct(
    node: yaml.Node, at: Path_, file: str, where: dict, comments: dict[Path_, str], expansion: _Expansion
) -> Any:
    where[at] = (file, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise ConfigError(
                    f"{file}:{key_node.start_mark.line + 1}: a key must be a plain word, not a list or a mapping"
                )
            key = key_node.value
            if key in out:
                raise ConfigError(f"{file}:{key_node.start_mark.line + 1}: duplicate key '{key}'")
            out[key] = _construct(value_node, at + (key,), file, where, comments, expansion)
            where[at + (key,)] = (file, key_node.start_mark.line + 1)
            comment = _line_comment(key_node, value_node)
            if comment:
                comments[at + (key,)] = comment
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(item, at + (i,), file, where, comments, expansion) for i, item in enumerate(node.value)]
    try:
        return expansion.scalars.construct_object(node, deep=True)
    except yaml.constructor.ConstructorError as exc:  # a tag (!python/…, !foo) golive does not read
        raise ConfigError(f"{file}:{node.start_mark.line + 1}: {exc.problem}") from None


# --- validation ----------------------------------------------------------------------------------------------------


Model = TypeVar("Model", bound=BaseModel)


def validate(model: type[Model], located: Located, what: str, fallback_file: str) -> Model:
    if not isinstance(located.data, dict):
        raise ConfigError(f"{fallback_file}:1: a {what} must be a mapping of keys to values")
    try:
        return model.model_validate(located.data)
    except ValidationError as exc:
        errors = exc.errors()  # a misspelt key also leaves its real key missing: name the misspelling
        first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        raise ConfigError(_one_line(model, first, located, fallback_file)) from None


def _one_line(model: type[BaseModel], error: ErrorDetails, located: Located, fallback_file: str) -> str:
    loc = tuple(part for part in error["loc"] if not _is_union_tag(part))
    if error["type"] == "extra_forbidden":  # the last part is the operator's key, whatever it looks like ("[", "int")
        loc = tuple(part for part in error["loc"][:-1] if not _is_union_tag(part)) + error["loc"][-1:]
    file, line = _nearest(located.where, loc, fallback_file)
    dotted = ".".join(str(p) for p in loc) or "(top level)"
    kind = error["type"]
    if kind == "extra_forbidden":
        valid = _fields_at(model, loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), valid, n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else f"; valid keys: {', '.join(valid)}"
        return f"{file}:{line}: unknown key '{dotted}'{hint}"
    if kind == "missing":
        return f"{file}:{line}: missing required key '{dotted}'"
    got = error.get("input")
    shown = f" (got {got!r})" if not isinstance(got, (dict, list)) else ""
    return f"{file}:{line}: '{dotted}': {_expected(error)}{shown}"


def _is_union_tag(part: Any) -> bool:
    # pydantic inserts the union member's type name into loc ("int", "function-after[...]")
    return isinstance(part, str) and ("[" in part or part in {"int", "float", "str", "bool", "list", "dict"})


def _expected(error: ErrorDetails) -> str:
    kind, msg = error["type"], error["msg"]
    names = {
        "int_type": "integer",
        "int_parsing": "integer",
        "float_type": "number",
        "float_parsing": "number",
        "bool_type": "true or false",
        "bool_parsing": "true or false",
        "string_type": "text",
        "list_type": "a list",
        "dict_type": "a mapping",
        "model_type": "a mapping",
    }
    if kind in names:
        return f"expected {names[kind]}"
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    return msg[0].lower() + msg[1:]


def _nearest(where: dict[Path_, tuple[str, int]], loc: Path_, fallback_file: str) -> tuple[str, int]:
    for cut in range(len(loc), -1, -1):
        if loc[:cut] in where:
            return where[loc[:cut]]
    return fallback_file, 1


def _fields_at(model: type[BaseModel], loc: Path_) -> list[str]:
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        info = current.model_fields.get(part)
        if info is None:
            return []
        current = model_in(info.annotation)
        if current is None:
            return []
    return list(current.model_fields)


def model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = model_in(arg)
        if found:
            return found
    return None
