"""vLLM: the served flags, from the arguments a container was started with."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from golive.facts import FactError

# vLLM 0.32.0, vllm/utils/argparse_utils.py `human_readable_int`: lowercase suffixes are decimal and take decimals
# (truncated), uppercase are binary and take whole numbers only; no suffix is Python's int().
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
AUTO = -1  # `--max-model-len auto` / `-1`: vLLM fits the context to the GPU memory it finds

# vLLM 0.32.0's boolean flags (`vllm serve --help`: argparse.BooleanOptionalAction, so `--x` / `--no-x`, no value), and
# its store_true flags (`--x` only); read from `make_arg_parser(FlexibleArgumentParser())` of that release.
BOOLEAN_FLAGS = frozenset(
    (
        "allow-credentials",
        "allow-deprecated-quantization",
        "async-scheduling",
        "cohere-is-reasoning-model",
        "cudagraph-metrics",
        "data-parallel-external-lb",
        "data-parallel-hybrid-lb",
        "dcp-q-replicate",
        "disable-cascade-attn",
        "disable-chunked-mm-input",
        "disable-custom-all-reduce",
        "disable-fastapi-docs",
        "disable-hybrid-kv-cache-manager",
        "disable-nccl-for-dp-synchronization",
        "disable-sliding-window",
        "disable-uvicorn-access-log",
        "enable-auto-tool-choice",
        "enable-batch-sharded-sampling",
        "enable-chunked-prefill",
        "enable-cumem-allocator",
        "enable-dbo",
        "enable-elastic-ep",
        "enable-ep-weight-filter",
        "enable-eplb",
        "enable-expert-parallel",
        "enable-fault-tolerance",
        "enable-flash-late-interaction",
        "enable-flashinfer-autotune",
        "enable-force-include-usage",
        "enable-hc-sp",
        "enable-layerwise-nvtx-tracing",
        "enable-log-deltas",
        "enable-log-outputs",
        "enable-log-requests",
        "enable-logging-iteration-details",
        "enable-lora",
        "enable-mamba-cache-stochastic-rounding",
        "enable-mamba-shared-prefix-checkpoint",
        "enable-mfu-metrics",
        "enable-mixed-moe-lora-format",
        "enable-mm-embeds",
        "enable-moe-shared-loras",
        "enable-nccl-comm-suspend",
        "enable-offline-docs",
        "enable-per-request-metrics",
        "enable-prefix-caching",
        "enable-prompt-embeds",
        "enable-prompt-tokens-details",
        "enable-request-id-headers",
        "enable-return-routed-experts",
        "enable-scale-out",
        "enable-server-load-tracking",
        "enable-shm-tensor-arena",
        "enable-sleep-mode",
        "enable-ssl-refresh",
        "enable-tokenizer-info-endpoint",
        "enable-tower-connector-lora",
        "enable-trace-replay",
        "enforce-eager",
        "exclude-tools-when-tool-choice-none",
        "fail-on-environ-validation",
        "fully-sharded-loras",
        "interleave-mm-strings",
        "jit-monitor-verbose",
        "kv-cache-metrics",
        "kv-sharing-fast-prefill",
        "language-model-only",
        "log-error-stack",
        "long-prefill-token-threshold-adaptive",
        "mm-device-do-normalize",
        "mm-encoder-only",
        "numa-bind",
        "ray-workers-use-nsight",
        "return-sampling-mask",
        "return-tokens-as-token-ids",
        "scheduler-reserve-full-isl",
        "skip-mm-profiling",
        "skip-tokenizer-init",
        "sleep-mode-offload-cudagraph",
        "specialize-active-lora",
        "swa-bounded-replay",
        "tokens-only",
        "trust-remote-code",
        "trust-request-chat-template",
        "trust-request-mm-kwargs",
        "use-fp64-gumbel",
        "use-replayssm",
        "use-tqdm-on-load",
    )
)
STORE_TRUE_FLAGS = frozenset(
    (
        "aggregate-engine-logging",
        "data-parallel-multi-port-external-lb",
        "disable-log-stats",
        "grpc",
        "headless",
    )
)
# flags with nargs="+": every word up to the next flag is theirs
MULTI_VALUE_FLAGS = frozenset(
    (
        "allowed-media-domains",
        "api-key",
        "collect-detailed-traces",
        "cpu-offload-params",
        "cudagraph-capture-sizes",
        "ignore-patterns",
        "kv-cache-dtype-skip-layers",
        "logits-processors",
        "lora-modules",
        "lora-target-modules",
        "numa-bind-cpus",
        "numa-bind-nodes",
        "offload-params",
        "served-model-name",
        "sleep-preserve-parameter-names",
    )
)


# vLLM 0.32.0's one `action="append"` flag: given twice, it keeps both; every other flag is a store action (store,
# store_true, BooleanOptionalAction), where argparse keeps the last one given.
APPEND_FLAGS = frozenset(("middleware",))


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
    """`rejected_args`, with the flag and the words each refusal is about."""
    read = _read_args(args)
    refusals = list(read.refusals)
    for name, parse in VALUE_TYPES.items():
        value = read.flags.get(name)
        if isinstance(value, str):
            words = read.uses[name][-1].words
            try:
                parse(value)
            except RejectedValue as exc:
                refusals.append(Refusal(name, words, f"--{name} {value}: {exc}"))
            except ValueError:
                refusals.append(
                    Refusal(name, words, f"--{name} {value}: not {'a number' if parse is float else 'an integer'}")
                )
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


def _read_args(args: list[str]) -> _Read:
    flags: dict[str, str | bool] = {}
    refusals: list[Refusal] = []
    uses: dict[str, list[FlagUse]] = {}
    offset = served_args_start(args) or 0
    tokens = list(args)[offset:]

    def use(name: str, value: str | bool, at: int, value_at: tuple[int, ...] = ()) -> None:
        flags[name] = value
        uses.setdefault(name, []).append(FlagUse(name, value, at + offset, tuple(i + offset for i in value_at)))

    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("--"):
            if "model" in flags:  # `vllm serve` has one positional, the model
                refusals.append(
                    Refusal(None, (i + offset,), f"`{token}`: no flag takes this word (vLLM: unrecognized arguments)")
                )
            else:
                use("model", token, i, (i,))
            i += 1
            continue
        name, eq, value = token[2:].partition("=")
        name = name.split(".", 1)[0].replace("_", "-") + ("." + name.split(".", 1)[1] if "." in name else "")
        negated = name.startswith("no-") and name[3:] in BOOLEAN_FLAGS
        if name in BOOLEAN_FLAGS or negated or name in STORE_TRUE_FLAGS:
            if eq:  # argparse: "ignored explicit argument"
                refusals.append(
                    Refusal(
                        name[3:] if negated else name,
                        (i + offset,),
                        f"--{name}={value}: a switch takes no value (write --{name}"
                        + (f" or --no-{name})" if name in BOOLEAN_FLAGS else ")"),
                    )
                )
            use(name[3:] if negated else name, not negated, i)
        elif eq:
            use(name, value, i)
        elif name in MULTI_VALUE_FLAGS:
            first = i
            while i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                i += 1
            words = tokens[first + 1 : i + 1]
            use(name, " ".join(words) if words else True, first, tuple(range(first + 1, i + 1)))
        elif i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            use(name, tokens[i + 1], i, (i + 1,))
            i += 1
        elif name.startswith("no-"):  # a flag this table does not know: read it the way it is spelled
            use(name[3:], False, i)
        else:
            use(name, True, i)
        i += 1
    return _Read(flags, refusals, uses)


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
