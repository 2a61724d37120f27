"""vLLM: the served flags, from the arguments a container was started with."""
from __future__ import annotations

import json
import re

from golive.facts import FactError

_SUFFIX = {"k": 1000, "m": 1000**2, "g": 1000**3, "K": 1024, "M": 1024**2, "G": 1024**3}


def parse_human_int(text: str) -> int:
    """vLLM accepts `1048576`, `1m` (10^6) and `1M` (2^20) for token counts."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kmgKMG]?)", text.strip())
    if not match:
        raise FactError(f"not a token count: {text!r}")
    number, suffix = match.groups()
    return int(float(number) * _SUFFIX.get(suffix, 1))


def parse_serve_args(args: list[str]) -> dict[str, str | bool]:
    """`[serve] [MODEL] --flag value --bool-flag --no-bool-flag …` → {"max-model-len": "1048576", …}.

    Keys lose their leading dashes and use dashes (vLLM accepts `--max_model_len` too); `--no-x` gives x=False.
    """
    flags: dict[str, str | bool] = {}
    tokens = list(args)
    if tokens[:1] == ["serve"] or tokens[:2] == ["vllm", "serve"]:
        tokens = tokens[tokens.index("serve") + 1:]
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("--"):
            flags.setdefault("model", token)  # the positional model of `vllm serve MODEL`
            i += 1
            continue
        name, eq, value = token[2:].partition("=")
        name = name.replace("_", "-")
        if eq:
            flags[name] = value
        elif i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            flags[name] = tokens[i + 1]
            i += 1
        elif name.startswith("no-"):
            flags[name[3:]] = False
        else:
            flags[name] = True
        i += 1
    return flags


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
