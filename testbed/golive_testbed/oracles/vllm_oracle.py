"""vLLM's own argument parser as the oracle of golive's reading of the served flags: generated command lines (the
flags golive compares, spelled every way vLLM takes them: `--a_b`, `--a=b`, `-tp 2`, a unique prefix, `-O3`, switches
and `--no-`, several values, a flag given twice, stray words, values vLLM refuses), with and without a `--config FILE`
YAML file (flat keys, underscores, booleans, lists, mappings, a key also on the command line: command line over file
over defaults), parsed by `make_arg_parser(FlexibleArgumentParser())` of the installed vLLM and by golive
(golive.facts.vllm: parse_serve_args, refused_args, with_config). They must agree on whether vLLM starts with them,
and, where it does, on the value of every flag golive compares.

    report = run(count=2000, seed=5)
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from golive.facts import vllm
from golive_testbed.oracles.reduce import Agreement, Disagreement, reduce_parts

# the flags golive compares with a profile (golive.profile.recipe.pinned_flags and the served-flags check)
COMPARED = (
    "model",
    "max-model-len",
    "max-num-seqs",
    "max-num-batched-tokens",
    "gpu-memory-utilization",
    "tensor-parallel-size",
    "pipeline-parallel-size",
    "port",
    "host",
    "served-model-name",
    "tool-call-parser",
    "reasoning-parser",
    "enable-prefix-caching",
    "enable-chunked-prefill",
    "enable-auto-tool-choice",
    "enforce-eager",
    "speculative-config",
    "dtype",
    "disable-log-stats",
)


@dataclass(frozen=True)
class ArgsCase:
    """A command line and, where it names one, its `--config` file's text."""

    args: tuple[str, ...]
    config: str | None = None
    config_name: str = "serve.yaml"

    def text(self) -> str:
        shown = " ".join(json.dumps(a) if (" " in a or not a) else a for a in self.args)
        return shown + (f"\n--- {self.config_name}\n{self.config}" if self.config is not None else "")

    def parts(self) -> list[tuple[int, str]]:
        words = [(0, a) for a in self.args]
        return words + ([(1, line) for line in self.config.split("\n")] if self.config is not None else [])

    def rebuilt(self, parts: list[tuple[int, str]]) -> ArgsCase:
        args = tuple(a for k, a in parts if k == 0)
        config = "\n".join(a for k, a in parts if k == 1) if self.config is not None else None
        if config is not None and "--config" not in args:
            args = (*args, "--config", self.config_name)
        return ArgsCase(args, config, self.config_name)


# --- the generator -------------------------------------------------------------------------------------------------

VALUES: dict[str, tuple[str, ...]] = {
    "max-model-len": ("1048576", "1m", "1M", "1.5M", "auto", "-1", "16k", "16K", "1.5k", "abc", "0x10"),
    "max-num-seqs": ("256", "16", "1", "8.0", "-1", "1k"),
    "max-num-batched-tokens": ("8192", "8k", "8K", "2.5K", "x"),
    "gpu-memory-utilization": ("0.94", ".9", "1", "90%", "1e-1"),
    "tensor-parallel-size": ("1", "2", "1.0"),
    "pipeline-parallel-size": ("1", "2"),
    "port": ("8888", "80", "65536", "8000", "http"),
    "host": ("0.0.0.0", "127.0.0.1", "::", ""),
    "served-model-name": ("glm-5.3-flash", "a b"),
    "tool-call-parser": ("glm47", "hermes", "bogus"),
    "reasoning-parser": ("glm45", "deepseek_r1"),
    "speculative-config": ('{"method": "mtp", "num_speculative_tokens": 4}', "{}"),
    "dtype": ("auto", "bfloat16", "fp4"),
}
SWITCHES = ("enable-prefix-caching", "enable-chunked-prefill", "enable-auto-tool-choice", "enforce-eager")
SHORT = {"tensor-parallel-size": "-tp", "pipeline-parallel-size": "-pp", "speculative-config": "-sc"}


class _Gen:
    def __init__(self, rng: random.Random):
        self.r = rng

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def flag(self) -> list[str]:
        if self.chance(0.3):
            name = self.r.choice(SWITCHES)
            spelled = self.r.choice((f"--{name}", f"--no-{name}", f"--{name.replace('-', '_')}", f"--{name}=true"))
            return [spelled]
        if self.chance(0.04):
            return [self.r.choice(("--disable-log-stats", "-O3", "-O", "--max-num-seq", "--enable-prefix"))]
        name = self.r.choice(list(VALUES))
        value = self.r.choice(VALUES[name])
        if name == "served-model-name" and " " in value:
            return [f"--{name}", *value.split()]
        style = self.r.randrange(6)
        if style == 0:
            return [f"--{name}={value}"]
        if style == 1:
            return [f"--{name.replace('-', '_')}", value]
        if style == 2 and name in SHORT:
            return [SHORT[name], value]
        if style == 3:
            return [f"--{name[: max(6, len(name) - 3)]}", value]  # a prefix: maybe unique, maybe not
        return [f"--{name}", value]

    def config(self) -> str:
        lines = []
        for _ in range(self.r.randrange(1, 5)):
            if self.chance(0.3):
                name = self.r.choice(SWITCHES)
                key = name if self.chance(0.7) else name.replace("-", "_")
                lines.append(f"{key}: {self.r.choice(('true', 'false', 'yes', 'off'))}")
                continue
            name = self.r.choice([n for n in VALUES if n != "speculative-config"])
            key = name if self.chance(0.7) else name.replace("-", "_")
            value = self.r.choice(VALUES[name])
            if name == "served-model-name" and self.chance(0.5):
                lines.append(f"{key}:\n  - {value.split()[0]}\n  - other")
            elif self.chance(0.2):
                lines.append(f'{key}: "{value}"')
            else:
                lines.append(f"{key}: {value}" if value else f"{key}:")
        if self.chance(0.15):
            lines.append("speculative-config:\n  method: mtp\n  num_speculative_tokens: 3")
        if self.chance(0.05):
            lines.append(self.r.choice(("- a list", "bad: [unclosed", "max-num-seqs: 4\nmax-num-seqs: 8")))
        return "\n".join(lines) + "\n"


def generate(count: int, seed: int) -> list[ArgsCase]:
    rng = random.Random(seed)
    gen = _Gen(rng)
    cases = []
    for _ in range(count):
        args: list[str] = []
        if gen.chance(0.7):
            args += ["--model", "/models/GLM-5.3-Flash-NVFP4"] if gen.chance(0.8) else ["/models/m"]
        for _ in range(rng.randrange(1, 8)):
            args += gen.flag()
        if gen.chance(0.04):
            args.append(rng.choice(("stray", "--bogus-flag", "-x")))
        config = None
        name = "serve.yaml"
        if gen.chance(0.45):
            config = gen.config()
            name = rng.choice(("serve.yaml", "serve.yaml", "serve.yml", "serve.json"))
            place = rng.randrange(len(args) + 1)
            spelled = ["--config", name] if gen.chance(0.93) else [f"--config={name}"]
            args[place:place] = spelled
        rng.shuffle(args) if gen.chance(0.02) else None
        cases.append(ArgsCase(tuple(args), config, name))
    return cases


# --- the oracle and golive -----------------------------------------------------------------------------------------


@cache
def _parser() -> Any:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser())


def vllm_reading(case: ArgsCase, folder: Path) -> dict[str, Any] | str:
    """The namespace vLLM's parser gives (the compared flags), or why it refused the arguments."""
    args = [str(folder / a) if a == case.config_name else a for a in case.args]
    args = [f"--config={folder / case.config_name}" if a == f"--config={case.config_name}" else a for a in args]
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            ns = _parser().parse_args(args)
    except (SystemExit, Exception) as exc:  # noqa: BLE001 - any refusal ends `vllm serve` before it serves
        return f"refused: {type(exc).__name__}: {str(exc)[:120]}"
    out: dict[str, Any] = {}
    for name in COMPARED:
        if name == "model":
            out[name] = getattr(ns, "model_tag", None) or ns.model
        else:
            out[name] = getattr(ns, name.replace("-", "_"))
    return out


@cache
def _defaults() -> dict[str, Any]:
    ns = _parser().parse_args([])
    return {
        n: (getattr(ns, "model_tag", None) or ns.model) if n == "model" else getattr(ns, n.replace("-", "_"))
        for n in COMPARED
    }


def golive_reading(case: ArgsCase) -> dict[str, Any] | str:
    """What golive reads the arguments as (the served-flags checks: parse_serve_args after the `--config` file), or
    why it says vLLM refuses them."""
    args = list(case.args)
    if vllm.config_file(args) is not None:
        if args.count("--config") > 1:
            return "refused: more than one --config"
        try:
            args = vllm.with_config(args, case.config or "", vllm.config_file(args) or "")
        except vllm.RejectedValue as exc:
            return f"refused: {exc}"
    refused = vllm.rejected_args(args)
    if refused:
        return "refused: " + "; ".join(refused)
    flags = vllm.parse_serve_args(args)
    uses = vllm.flag_uses(args)
    out: dict[str, Any] = {}
    defaults = _defaults()
    for name in COMPARED:
        got = flags.get(name)
        if got is None:
            out[name] = defaults[name]
        elif name in vllm.VALUE_TYPES and isinstance(got, str):
            out[name] = vllm.VALUE_TYPES[name](got)
        elif name == "served-model-name" and isinstance(got, str):  # its words, as golive holds where each is
            out[name] = [args[i] for i in uses[name][-1].value_at] or [got]
        elif name == "speculative-config" and isinstance(got, str):
            out[name] = json.loads(got)
        else:
            out[name] = got
    return out


def compare(case: ArgsCase) -> Disagreement[ArgsCase] | None:
    with tempfile.TemporaryDirectory(prefix="golive-vllm-oracle-") as where:
        folder = Path(where)
        if case.config is not None:
            (folder / case.config_name).write_text(case.config)
        tool = vllm_reading(case, folder)
    mine = golive_reading(case)
    if isinstance(tool, str) or isinstance(mine, str):
        if isinstance(tool, str) != isinstance(mine, str):
            return Disagreement("whether vLLM starts with these arguments", str(mine)[:200], str(tool)[:200], case)
        return None
    for name in COMPARED:
        a, b = mine[name], tool[name]
        if isinstance(b, dict) and not isinstance(a, dict):
            a = json.loads(a) if isinstance(a, str) else a
        if a != b and not (isinstance(a, float) and isinstance(b, float) and abs(a - b) < 1e-12):
            return Disagreement(f"--{name}", repr(a), repr(b), case)
    return None


def _still(found: Disagreement[ArgsCase]) -> Callable[[list[ArgsCase]], list[bool]]:
    def judge(candidates: list[ArgsCase]) -> list[bool]:
        return [(d := compare(c)) is not None and d.what == found.what for c in candidates]

    return judge


def run(count: int, seed: int, reduce: bool = True) -> Agreement[ArgsCase]:
    started = time.monotonic()
    _parser()
    report: Agreement[ArgsCase] = Agreement("golive's reading of the served flags", "vLLM's own argument parser")
    for case in generate(count, seed):
        report.record(compare(case))
    if reduce:
        for found in report.disagreements[:5]:
            found.reduced = found.case.rebuilt(reduce_parts(found.case.parts(), found.case.rebuilt, _still(found)))
    report.seconds = time.monotonic() - started
    return report
