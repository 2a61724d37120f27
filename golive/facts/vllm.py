"""vLLM: the served flags, from the arguments a container was started with."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from golive.facts import FactError
from golive.facts.vllm_options import CHOICES, OPTIONS, SHORT

# vLLM 0.32.0, vllm/utils/argparse_utils.py `human_readable_int`: lowercase suffixes are decimal and take decimals
# (truncated), uppercase are binary and take whole numbers only; no suffix is Python's int().
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
AUTO = -1  # `--max-model-len auto` / `-1`: vLLM fits the context to the GPU memory it finds

# vLLM 0.32.0's boolean flags (argparse.BooleanOptionalAction: `--x` / `--no-x`, no value), its store_true flags
# (`--x` only), its nargs="+" flags (every word up to the next option is theirs) and its one append flag (given
# twice, it keeps both; every other flag keeps the last one given): from its own parser (golive.facts.vllm_options)
BOOLEAN_FLAGS = frozenset(n for n, kind in OPTIONS.items() if kind == "switch")
STORE_TRUE_FLAGS = frozenset(n for n, kind in OPTIONS.items() if kind == "flag")
MULTI_VALUE_FLAGS = frozenset(n for n, kind in OPTIONS.items() if kind == "many")
APPEND_FLAGS = frozenset(n for n, kind in OPTIONS.items() if kind == "append")


class RejectedValue(FactError):
    """A value vLLM's own argument parser refuses: `vllm serve` exits before serving."""


def parse_human_int(text: str) -> int:
    """vLLM's `human_readable_int` (`--max-num-batched-tokens` …): `1k` = 1,000, `1K` = 1,024, `10.2k` = 10,200,
    `1.5K` refused; anything else goes through int(), as vLLM does."""
    value = text.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        if "." in number:
            raise RejectedValue(
                f"Decimals are not allowed with binary suffixes like {suffix}. Did you mean to use "
                f"{number}{suffix.lower()} instead?"
            )
        return int(number) * _BINARY[suffix]
    try:
        return int(value)
    except ValueError:
        raise RejectedValue(f"invalid human_readable_int value: {text!r}") from None


def parse_max_model_len(text: str) -> int:
    """vLLM's `human_readable_int_or_auto` (`--max-model-len`): `-1` and `auto` (any case) give -1, else
    human_readable_int."""
    value = text.strip()
    if value == "-1" or value.lower() == "auto":
        return AUTO
    return parse_human_int(value)


def describe_tokens(text: str, value: int) -> str:
    """How vLLM reads a token count, for findings: `1m = 1,000,000 tokens`, `auto (vLLM fits it to GPU memory)`."""
    if value == AUTO:
        return f"{text} (vLLM fits the context to the GPU memory it finds)"
    return f"{value:,} tokens" if text.strip() == str(value) else f"{text} = {value:,} tokens"


# The value types vLLM 0.32 gives the flags golive compares (argparse `type=`): what it would refuse to start with.
VALUE_TYPES: dict[str, Callable[[str], float]] = {
    "max-model-len": parse_max_model_len,
    "max-num-batched-tokens": parse_human_int,
    "max-num-seqs": int,
    "port": int,
    "tensor-parallel-size": int,
    "pipeline-parallel-size": int,
    "gpu-memory-utilization": float,
}


@dataclass(frozen=True)
class FlagUse:
    """One place a flag is given: its value as vLLM reads that occurrence, and which of the arguments hold it."""

    name: str  # as vLLM names it: "max-model-len" (the positional model: "model")
    value: str | bool
    at: int  # the flag's word in the arguments
    value_at: tuple[int, ...] = ()  # the words of its value (none for a switch, or `--flag=value`)

    @property
    def words(self) -> tuple[int, ...]:
        """The words that decide the value: the value's own, else the flag's (`--x=v`, a switch)."""
        return self.value_at or (self.at,)


@dataclass(frozen=True)
class Refusal:
    """What `vllm serve` would refuse, and the words it is about (to say where they came from)."""

    flag: str | None
    words: tuple[int, ...]
    text: str


@dataclass
class _Read:
    flags: dict[str, str | bool]
    refusals: list[Refusal]
    uses: dict[str, list[FlagUse]]


def parse_serve_args(args: list[str]) -> dict[str, str | bool]:
    """`[ENTRY] [MODEL] --flag value --bool-flag --no-bool-flag …` → {"max-model-len": "1048576", …}, as vLLM's
    FlexibleArgumentParser reads them (ENTRY: what launches vLLM, `served_args_start`): `--max_model_len` =
    `--max-model-len`, `--x=v` = `--x v`, the last of a repeated flag wins, a boolean flag takes no value (`--no-x`
    gives x=False). See `rejected_args` for what it refuses.
    The values are the argument words themselves, so a word that knows where it came from
    (golive.facts.exec_lines.Word) still does.
    """
    return _read_args(args).flags


def flag_uses(args: list[str]) -> dict[str, list[FlagUse]]:
    """Every occurrence of every flag, in order (`--x` and `--no-x` are one flag)."""
    return _read_args(args).uses


def repeated_flags(args: list[str]) -> dict[str, list[FlagUse]]:
    """The flags given more than once, each with every occurrence. vLLM reads them with argparse, where a store
    action keeps the last value given (Python's argparse: `_StoreAction` sets the attribute each time it is seen;
    vLLM 0.32's FlexibleArgumentParser.parse_args only logs "Found duplicate keys --x" and passes them on), so the
    last occurrence is the one served; an append flag (APPEND_FLAGS) keeps them all and is not listed."""
    return {name: uses for name, uses in flag_uses(args).items() if len(uses) > 1 and name not in APPEND_FLAGS}


def rejected_args(args: list[str]) -> list[str]:
    """What `vllm serve` would refuse in these arguments, one line each (it exits before serving)."""
    return [refusal.text for refusal in refused_args(args)]


def refused_args(args: list[str]) -> list[Refusal]:
    """`rejected_args`, with the flag and the words each refusal is about. argparse converts and checks every time a
    flag is given, so a value refused earlier on the line (or in the `--config` file) stops vLLM even where a later one
    would do."""
    read = _read_args(args)
    refusals = list(read.refusals)
    for name, parse in VALUE_TYPES.items():
        for use in read.uses.get(name, []):
            value = use.value
            if not isinstance(value, str):
                continue
            try:
                parse(value)
            except RejectedValue as exc:
                refusals.append(Refusal(name, use.words, f"--{name} {value}: {exc}"))
            except ValueError:
                refusals.append(
                    Refusal(name, use.words, f"--{name} {value}: not {'a number' if parse is float else 'an integer'}")
                )
    for use in read.uses.get("speculative-config", []):  # vLLM reads it as JSON (a mapping)
        if isinstance(use.value, str):
            try:
                json.loads(use.value)
            except ValueError:
                refusals.append(Refusal("speculative-config", use.words, f"--speculative-config {use.value}: not JSON"))
    return refusals


# The modules `python -m` serves vLLM's OpenAI API from: the old entry point and the CLI's (`… main serve`); both parse
# with vLLM 0.32's make_arg_parser (one positional, the model, then the flags).
API_SERVER_MODULES = {"vllm.entrypoints.openai.api_server": (), "vllm.entrypoints.cli.main": ("serve",)}


def served_args_start(words: list[str] | tuple[str, ...]) -> int | None:
    """Where vLLM's own arguments begin in a command line: after the first vLLM entry in it — `vllm serve`
    (`/usr/local/bin/vllm serve`), `python3 [-u …] -m vllm.entrypoints.openai.api_server` (or `-mvllm…`, or
    `-m vllm.entrypoints.cli.main serve`), or a first word `serve` (docker inspect's Args when Path is `vllm`).
    Whatever comes before it is a launcher (numactl, tini, python's own options). None when no entry is named: the
    words are vLLM's arguments already (an image whose ENTRYPOINT is the entry, `docker run IMAGE --flags`)."""
    texts = [str(w) for w in words]
    if texts[:1] == ["serve"]:
        return 1
    for i, word in enumerate(texts):
        if word.rsplit("/", 1)[-1] == "vllm" and texts[i + 1 : i + 2] == ["serve"]:
            return i + 2
        module = texts[i + 1] if word == "-m" and i + 1 < len(texts) else word[2:] if word.startswith("-m") else None
        if module in API_SERVER_MODULES:
            after = i + (2 if word == "-m" else 1)
            subcommand = API_SERVER_MODULES[module]
            if tuple(texts[after : after + len(subcommand)]) == subcommand:
                return after + len(subcommand)
    return None


_NEGATIVE = re.compile(r"^-\d+$|^-\d*\.\d+$")


def _normalised(token: str) -> str:
    """FlexibleArgumentParser.parse_args: in `--a_b.c_d=x` the name up to its first `.` takes `-` for `_`."""
    if not token.startswith("--"):
        return token
    name, eq, value = token.partition("=")
    head, dot, rest = name[2:].partition(".")
    return f"--{head.replace('_', '-')}{dot}{rest}{eq}{value}"


def _is_option(token: str) -> bool:
    """argparse's test: a word that starts with `-` is an option, unless it is a negative number (vLLM has no
    option that looks like one) or `-` alone."""
    return token.startswith("-") and token != "-" and not _NEGATIVE.match(token)


def _option(word: str) -> tuple[str | None, str]:
    """The option a word names (argparse: exact, else the one long option it is a prefix of, `allow_abbrev`), and
    why not where it names none (unknown, or a prefix of several)."""
    if word.startswith("--"):
        name = word[2:]
        if name in OPTIONS or (name.startswith("no-") and name[3:] in BOOLEAN_FLAGS):
            return name, ""
        if "." in name:  # `--compilation-config.level 3`: vLLM folds it into the JSON of its option
            return (name, "") if name.split(".", 1)[0] in OPTIONS else (None, f"`{word}`: no such option")
        matches = [o for o in OPTIONS if o.startswith(name)]
        matches += [f"no-{o}" for o in BOOLEAN_FLAGS if f"no-{o}".startswith(name)]
        if len(matches) == 1:
            return matches[0], ""
        if matches:
            return None, f"`{word}` is ambiguous: it could be --{', --'.join(sorted(matches)[:4])}"
        return None, f"`{word}`: vLLM has no such option (unrecognized arguments)"
    if word[1:] in SHORT:
        return SHORT[word[1:]], ""
    return None, f"`{word}`: vLLM has no such option (unrecognized arguments)"


# Long on purpose: one loop over the words, as argparse's _parse_known_args consumes them, to be read beside it
def _read_args(args: list[str]) -> _Read:
    """The arguments as vLLM 0.32's argparse reads them, option by option (its own table: vllm_options): `-tp 2` is
    `--tensor-parallel-size 2`, `--max-num-seq 4` is `--max-num-seqs 4` (a unique prefix), `-O3` is
    `--optimization-level 3`; a flag that takes a value takes the next word unless it is an option; one positional,
    the model."""
    flags: dict[str, str | bool] = {}
    refusals: list[Refusal] = []
    uses: dict[str, list[FlagUse]] = {}
    offset = served_args_start(args) or 0
    tokens = list(args)[offset:]

    def use(name: str, value: str | bool, at: int, value_at: tuple[int, ...] = ()) -> None:
        flags[name] = value
        uses.setdefault(name, []).append(FlagUse(name, value, at + offset, tuple(i + offset for i in value_at)))

    def refuse(flag: str | None, at: int, text: str) -> None:
        refusals.append(Refusal(flag, (at + offset,), text))

    i = 0
    positional: str | None = None
    while i < len(tokens):
        token = tokens[i]
        if not _is_option(token):
            if positional is not None:  # vLLM has one positional argument, the model
                refuse(None, i, f"`{token}`: no flag takes this word (vLLM: unrecognized arguments)")
            else:
                positional = token
                use("model", token, i, (i,))
            i += 1
            continue
        if token.startswith("-O") and not token.startswith("--"):  # vLLM's own -O3, -O=3, -O 3
            if token == "-O" and i + 1 < len(tokens) and tokens[i + 1] in ("0", "1", "2", "3"):
                use("optimization-level", tokens[i + 1], i, (i + 1,))
                i += 2
                continue
            if token != "-O":
                use("optimization-level", token[3:] if token[2:3] == "=" else token[2:], i)
                i += 1
                continue
        word, eq, value = _normalised(token).partition("=") if token.startswith("--") else token.partition("=")
        name, why = _option(word)
        if name is None:  # refused by vLLM 0.32; read as written all the same (an older vLLM may know it)
            refuse(None, i, why)
            unknown = word[2:] if word.startswith("--") else word[1:]
            if eq:
                use(unknown, value, i)
            elif i + 1 < len(tokens) and not _is_option(tokens[i + 1]):
                use(unknown, tokens[i + 1], i, (i + 1,))
                i += 1
            else:
                use(unknown.removeprefix("no-"), not unknown.startswith("no-"), i)
            i += 1
            continue
        negated = name.startswith("no-") and name[3:] in BOOLEAN_FLAGS
        base = name[3:] if negated else name
        kind = "switch" if negated else OPTIONS.get(base.split(".", 1)[0], "value")
        if kind in ("switch", "flag"):
            if eq:  # argparse: "ignored explicit argument"
                refuse(
                    base,
                    i,
                    f"--{name}={value}: a switch takes no value (write --{base}"
                    + (f" or --no-{base})" if base in BOOLEAN_FLAGS else ")"),
                )
            use(base, not negated, i)
        elif eq:
            use(base, value, i)
        elif kind == "many":
            first = i
            while i + 1 < len(tokens) and not _is_option(tokens[i + 1]):
                i += 1
            words = tokens[first + 1 : i + 1]
            if not words:
                refuse(base, first, f"--{base}: expected at least one argument")
            use(base, " ".join(words) if words else True, first, tuple(range(first + 1, i + 1)))
        elif i + 1 < len(tokens) and not _is_option(tokens[i + 1]):
            use(base, tokens[i + 1], i, (i + 1,))
            i += 1
        elif kind == "optional":
            use(base, True, i)
        else:
            refuse(base, i, f"--{base}: expected one argument")
        i += 1
    if positional is not None:  # the positional model wins over `--model`, wherever each is (model_tag)
        flags["model"] = positional
    _drop_empty_values(flags)
    refusals += _invalid_choices(uses)
    return _Read(flags, refusals, uses)


def _drop_empty_values(flags: dict[str, str | bool]) -> None:
    """vLLM's optional_type: an empty value, or `None`, is no value."""
    for name, held in list(flags.items()):
        if held in ("", "None") and name not in VALUE_TYPES and name not in CHOICES and name != "model":
            del flags[name]


def _invalid_choices(uses: dict[str, list[FlagUse]]) -> list[Refusal]:
    """Every use of a flag with choices whose value is not one (argparse checks each use, not only the last)."""
    return [
        Refusal(name, given.words, f"--{name} {given.value}: invalid choice (vLLM takes {', '.join(allowed)})")
        for name, allowed in CHOICES.items()
        for given in uses.get(name, [])
        if isinstance(given.value, str) and given.value not in allowed
    ]


def speculative_tokens(flags: dict[str, str | bool]) -> int:
    """Draft tokens per step from the served flags; 0 without speculative decoding.

    `--speculative-config '{"method": "mtp", "num_speculative_tokens": 4}'` (vLLM ≥ 0.10), or the older
    `--num-speculative-tokens 4`.
    """
    config = flags.get("speculative-config")
    if isinstance(config, str):
        try:
            data = json.loads(config)
        except json.JSONDecodeError as exc:
            raise FactError(f"--speculative-config is not JSON: {exc.msg}: {config[:80]!r}") from None
        if not isinstance(data, dict):
            raise FactError(f"--speculative-config is not a JSON object: {config[:80]!r}")
        return int(data.get("num_speculative_tokens") or 0)
    count = flags.get("num-speculative-tokens")
    return int(count) if isinstance(count, str) and count.isdigit() else 0


# vLLM's --host default (None) binds every interface
ALL_INTERFACES = "0.0.0.0"


def served_host(flags: dict[str, str | bool]) -> str:
    host = flags.get("host")
    return host if isinstance(host, str) and host else ALL_INTERFACES


# --- `--config FILE`: flags from a YAML file (vLLM 0.32, vllm/utils/argparse_utils.py) ------------------------------


class ConfigWord(str):
    """A word vLLM takes from its `--config` YAML file: the file and line of the key that gave it (`where`)."""

    where: str

    def __new__(cls, text: str, where: str = "") -> ConfigWord:
        word = super().__new__(cls, text)
        word.where = where
        return word

    def __reduce__(self) -> tuple[Any, ...]:
        return ConfigWord, (str(self), self.where)


def config_file(args: list[str]) -> str | None:
    """The file vLLM reads flags from: the word after `--config` (FlexibleArgumentParser.parse_args pulls the file
    only where the word is exactly `--config`; `--config=FILE` is stored and never read). None without one."""
    tokens = list(args)[served_args_start(args) or 0 :]
    if "--config" not in tokens:
        return None
    at = tokens.index("--config")
    return tokens[at + 1] if at + 1 < len(tokens) else ""


def config_args(text: str, path: str) -> list[str]:
    """The flags vLLM makes of its `--config` file (FlexibleArgumentParser.load_config_file): the file must end in
    .yaml/.yml and hold a mapping; `key: true` is `--key`, `key: false` is `--no-key` where vLLM has that switch (in
    the key's own spelling) and nothing otherwise, a list is `--key` and its items, a mapping is `--key` and its JSON,
    anything else `--key` and Python's str() of the value (`None` for an empty one). Each word remembers the line of
    its key. A file vLLM refuses raises RejectedValue."""
    extension = path.rsplit(".", 1)[-1]
    if extension not in ("yaml", "yml"):
        raise RejectedValue(
            f'--config {path}: vLLM reads only a .yaml/.yml file ("Config file must be of a yaml/yml type")'
        )
    try:
        values = yaml.safe_load(text)
        lines: dict[object, int] = {}
        node = yaml.compose(text)
        if isinstance(node, yaml.MappingNode):
            for key_node, _ in node.value:
                lines[yaml.safe_load(yaml.serialize(key_node))] = key_node.start_mark.line + 1
    except yaml.YAMLError as exc:
        raise RejectedValue(f"--config {path} is not YAML vLLM can read: {str(exc).splitlines()[0]}") from None
    if not isinstance(values, dict):
        raise RejectedValue(f"--config {path} holds no YAML mapping of flags: vLLM stops ('items')")
    out: list[str] = []
    for key, value in values.items():
        where = f"{path}:{lines.get(key, 0)}" if lines.get(key) else path

        def word(text: str, where: str = where) -> ConfigWord:
            return ConfigWord(text, where)

        name = str(key)
        if isinstance(value, bool):
            if value:
                out.append(word(f"--{name}"))
            elif name in BOOLEAN_FLAGS:
                out.append(word(f"--no-{name}"))
        elif isinstance(value, list):
            if value:
                out += [word(f"--{name}"), *(word(str(item)) for item in value)]
        elif isinstance(value, dict):
            out += [word(f"--{name}"), word(json.dumps(value))]
        else:
            out += [word(f"--{name}"), word(str(value))]
    return out


def with_config(args: list[str], text: str, path: str) -> list[str]:
    """The arguments as vLLM parses them once it read its `--config` file (FlexibleArgumentParser.
    _pull_args_from_config):
    `--config FILE` goes, the file's flags come first, after the model where it is given as the first word, so a
    flag given on the command line wins over the file's (command line over file over defaults)."""
    offset = served_args_start(args) or 0
    head, tokens = list(args[:offset]), list(args[offset:])
    at = tokens.index("--config")
    rest = tokens[:at] + tokens[at + 2 :]
    pulled = config_args(text, path)
    if tokens[0].startswith("-"):  # the line starts with a flag (`--config` itself too): the file's flags first
        return [*head, *pulled, *rest]
    return [*head, rest[0], *pulled, *rest[1:]]  # after the first word (the model, or `serve`)
