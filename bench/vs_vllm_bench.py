"""Benchmark: golive's load generator against `vllm bench serve`, interleaved, on the reference station (issue 28
item 2).

    .venv/bin/python bench/vs_vllm_bench.py [--rounds 6] [--prompts golive|random] [--prompt-tokens N]
                                            [--output-tokens N] [--min-requests N] [--vllm-warmups] [--out FILE]

One reference station, started once, held to the reference profile's workload (golive/profile/profiles/
reference-cpu.yaml `load`: every level of `concurrency`, `output_tokens` with ignore_eos, `repeats` × C requests a
level and at least `min_requests`, `warmup` × C warm-up requests before each); `--prompt-tokens`, `--output-tokens`
and `--min-requests` change the sizes, for both clients alike. Each round runs every level with both clients back to
back, the client order alternating and the level order reversing between rounds, so neither client always meets the
machine first. golive runs its own sweep for one level (golive.endpoint.load.sweep_async: warm-up, one measured
batch); vLLM's client runs as vLLM documents it, `vllm bench serve`, through the testbed's command
(`python -m golive_testbed.vllm_cli bench serve`), with the same number of prompts, by default without its warm-up
and ready check: both send the first prompt of its dataset, which its measured run then sends again, a prefix-cache
hit that changed its first batch (docs/metrics.md); `--vllm-warmups` keeps them.

The same workload: by default vLLM's client sends golive's own prompts (a `custom` dataset of load_request.prompt
texts, each with a fresh salt, sent as the user message), greedy (`--temperature 0`, as golive's requests; vLLM's
client otherwise leaves the temperature to the server), the same answer length with ignore_eos, the same concurrency.
`--prompts random` sends vLLM's random token ids instead, sized so the server counts as many prompt tokens as for
golive's (usage.prompt_tokens; both clients' counts are recorded).

Reported per level and metric (output tok/s; TTFT p50): each client's median over the rounds, golive ÷ vLLM, and
whether golive's interval (the order-statistic 95 % interval of its rounds' median, as the gates read it:
golive.endpoint.uncertainty.Rounds) contains vLLM's median. The goals: the ratio within ±5 % at every level, and
containment in ≥ 90 % of the cases.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx

from golive.endpoint.load import SweepPlan, sweep_async
from golive.endpoint.load_request import Workload, prompt, sentences_for
from golive.endpoint.target import EndpointTarget
from golive.endpoint.uncertainty import Rounds
from golive.site.loader import load_profile
from golive_testbed.reference.launcher import ReferenceStation
from golive_testbed.reference.model import SERVED_NAME

REPO = Path(__file__).resolve().parents[1]
METRICS = ("aggregate_tok_s", "ttft_p50_s")


def template_tokens(root: str) -> int:
    """The chat template's own tokens around an empty user message (/tokenize)."""
    response = httpx.post(
        root + "/tokenize",
        json={"model": SERVED_NAME, "messages": [{"role": "user", "content": ""}], "add_generation_prompt": True},
    )
    return int(response.json()["count"])


def golive_sentences(root: str, workload: Workload) -> int:
    """The filler sentences golive's own sweep puts in each prompt (load_request.sentences_for)."""

    async def ask() -> int:
        async with httpx.AsyncClient() as client:
            return await sentences_for(client, root, workload, {})

    return asyncio.run(ask())


def golive_level(base_url: str, workload: Workload, level: int, requests: int, warmup: int) -> dict:
    plan = SweepPlan((level,), repeats=1, warmup=warmup, max_duration_s=3600, min_requests=requests)
    row = asyncio.run(sweep_async(EndpointTarget(base_url), workload, plan)).levels[0]
    return {
        "aggregate_tok_s": row.aggregate_tok_s,
        "ttft_p50_s": row.ttft_p50_s,
        "requests": row.requests,
        "failures": row.failures,
        "prompt_tokens_p50": row.prompt_tokens_p50,
        "duration_s": row.duration_s,
    }


@dataclass
class Prompts:
    """What vLLM's client sends. `golive`: golive's own prompts (load_request.prompt: a fresh salt first, the same
    filler sentences), as a `custom` dataset sent as the user message (`--skip-chat-template`): the same text the
    server templates and counts for golive's requests. `random`: vLLM's random token ids, `input_len` of them before the
    template, sized to golive's count."""

    kind: str
    sentences: int
    input_len: int

    def dataset(self, path: Path, requests: int, output_len: int) -> list[str]:
        if self.kind == "random":
            size = [str(self.input_len), "--random-output-len", str(output_len)]
            return ["--dataset-name", "random", "--random-input-len", *size]
        lines = (json.dumps({"prompt": prompt(self.sentences, uuid.uuid4().hex[:12])}) for _ in range(requests))
        path.write_text("\n".join(lines) + "\n")
        dataset = ["--dataset-name", "custom", "--dataset-path", str(path), "--skip-chat-template"]
        return [*dataset, "--custom-output-len", str(output_len)]


def vllm_command(
    port: int, model_dir: Path, level: int, requests: int, output_len: int, prompts: Prompts, out: Path, warmups: bool
) -> list[str]:
    """`vllm bench serve` as vLLM documents it (the testbed's command), one level, greedy as golive's requests are,
    its result (`--save-detailed`: each request's times too) saved as out/result.json; with `warmups`, its ready check
    and C warm-ups as well. Without them by default: both send the dataset's first prompt, which the measured run then
    sends again, a prefix-cache hit (vllm/benchmarks/serve.py `test_input`); the server is warm from the other
    client's level just before."""
    warm = ["--num-warmups", str(level)] if warmups else ["--num-warmups", "0", "--ready-check-timeout-sec", "0"]
    return [
        *(sys.executable, "-m", "golive_testbed.vllm_cli", "bench", "serve"),
        *("--backend", "openai-chat", "--endpoint", "/v1/chat/completions"),
        *("--host", "127.0.0.1", "--port", str(port), "--model", SERVED_NAME, "--tokenizer", str(model_dir)),
        *prompts.dataset(out / "prompts.jsonl", requests, output_len),
        *("--ignore-eos", "--temperature", "0"),
        *("--num-prompts", str(requests), "--max-concurrency", str(level), "--request-rate", "inf"),
        *warm,
        *("--seed", str(int(time.time()))),
        *("--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50", "--disable-tqdm"),
        *("--save-result", "--save-detailed", "--result-dir", str(out), "--result-filename", "result.json"),
    ]


def vllm_level(
    port: int, model_dir: Path, level: int, requests: int, output_len: int, prompts: Prompts, warmups: bool = False
) -> dict:
    """One level of `vllm bench serve` (vllm_command), its numbers."""
    with tempfile.TemporaryDirectory(prefix="vllm-bench-") as out:
        command = vllm_command(port, model_dir, level, requests, output_len, prompts, Path(out), warmups)
        subprocess.run(command, check=True, stdout=sys.stderr, stderr=sys.stderr, timeout=900)
        result = json.loads((Path(out) / "result.json").read_text())
    return {
        "aggregate_tok_s": result["output_throughput"],
        "ttft_p50_s": result["median_ttft_ms"] / 1000,
        "requests": result["completed"] + result["failed"],
        "failures": result["failed"],
        "prompt_tokens_p50": result["total_input_tokens"] / max(result["completed"], 1),
        "duration_s": result["duration"],
    }


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def summary(rows: list[dict], levels: list[int]) -> dict:
    """Per level and metric: each client's median over the rounds, golive ÷ vLLM, golive's interval (its rounds'
    order-statistic interval) and whether it contains vLLM's median."""
    out: dict = {}
    for level in levels:
        mine = [r for r in rows if r["level"] == level]
        out[level] = {}
        for metric in METRICS:
            ours = Rounds.of([r["golive"][metric] for r in mine])
            theirs = Rounds.of([r["vllm"][metric] for r in mine])
            assert ours is not None and theirs is not None
            interval = ours.interval
            out[level][metric] = {
                "golive_median": ours.median,
                "golive_interval": interval,
                "golive_unstable": ours.instability(",.4g").removeprefix("; "),
                "vllm_median": theirs.median,
                "vllm_rounds": list(theirs.values),
                "golive_rounds": list(ours.values),
                "ratio": ours.median / theirs.median,
                "within_5_percent": abs(ours.median / theirs.median - 1) <= 0.05,
                "contains": None if interval is None else interval[0] <= theirs.median <= interval[1],
            }
    return out


def main() -> int:
    args = _parser().parse_args()
    load = load_profile(args.profile).profile.load
    assert load is not None
    prompt_tokens = args.prompt_tokens or load.prompt_tokens
    output_tokens = args.output_tokens or load.output_tokens
    min_requests = args.min_requests or load.min_requests
    levels = sorted(set(load.concurrency))
    started, load_before = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), load_average()
    rows: list[dict] = []
    with ReferenceStation(port=args.port) as station:
        root = station.base_url.removesuffix("/v1")
        workload = Workload(model=SERVED_NAME, prompt_tokens=prompt_tokens, output_tokens=output_tokens)
        # golive's prompt as the server counts it; vLLM's client gets the same prompts, or random ones of that count
        probe = golive_level(station.base_url, workload, 1, 4, 1)
        counted = round(probe["prompt_tokens_p50"] or prompt_tokens)
        prompts = Prompts(args.prompts, golive_sentences(root, workload), max(counted - template_tokens(root), 1))
        print(f"golive's prompt: {counted} tokens counted by the server; vLLM's client: {prompts}", flush=True)
        loads = [load_average()]
        for round_ in range(args.rounds):
            order = ["golive", "vllm"] if round_ % 2 == 0 else ["vllm", "golive"]
            for level in levels if round_ % 2 == 0 else list(reversed(levels)):
                requests = max(load.repeats * level, min_requests)
                row: dict = {"round": round_, "level": level, "order": order}
                for client in order:
                    if client == "golive":
                        row[client] = golive_level(station.base_url, workload, level, requests, load.warmup)
                    else:
                        row[client] = vllm_level(
                            station.port, station.model_dir, level, requests, output_tokens, prompts, args.vllm_warmups
                        )
                rows.append(row)
                print(
                    f"round {round_} c={level}: golive {row['golive']['aggregate_tok_s']:.1f} tok/s "
                    f"TTFT {row['golive']['ttft_p50_s'] * 1e3:.1f} ms (prompt {row['golive']['prompt_tokens_p50']}) | "
                    f"vllm {row['vllm']['aggregate_tok_s']:.1f} tok/s TTFT {row['vllm']['ttft_p50_s'] * 1e3:.1f} ms "
                    f"(prompt {row['vllm']['prompt_tokens_p50']:.1f}) | load {load_average()}",
                    flush=True,
                )
            loads.append(load_average())
    table = summary(rows, levels)
    cases = [m["contains"] for lv in table.values() for m in lv.values()]
    result = {
        "started": started,
        "ended": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "load_average_before": load_before,
        "load_average_per_round": loads,
        "workload": {
            "levels": levels,
            "output_tokens": output_tokens,
            "requests_per_level": {level: max(load.repeats * level, min_requests) for level in levels},
            "prompt_tokens_counted": counted,
            "vllm_prompts": args.prompts,
            "golive_filler_sentences": prompts.sentences,
            "vllm_random_input_len": prompts.input_len if args.prompts == "random" else None,
            "temperature": 0,
            "vllm_warmups": args.vllm_warmups,
        },
        "rounds": args.rounds,
        "summary": table,
        "contained": f"{sum(c is True for c in cases)} of {len(cases)}",
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=str))
    for level, metrics in table.items():
        for metric, m in metrics.items():
            print(
                f"c={level} {metric}: golive {m['golive_median']:.4g} {m['golive_interval']} vllm "
                f"{m['vllm_median']:.4g}: ratio {m['ratio']:.3f}, contains {m['contains']} {m['golive_unstable']}"
            )
    print(f"golive's interval contains vLLM's median: {result['contained']}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8796)
    parser.add_argument("--rounds", type=int, default=6, help="≥ 6: an interval of golive's median needs 6 rounds")
    parser.add_argument("--profile", default="reference-cpu")
    parser.add_argument("--out", type=Path, default=REPO / "bench/results/vs-vllm-bench.json")
    parser.add_argument("--prompt-tokens", type=int, help="the prompt as the server counts it (default: the profile's)")
    parser.add_argument("--output-tokens", type=int, help="answer length, ignore_eos (default: the profile's)")
    parser.add_argument(
        "--min-requests", type=int, help="measured requests a level, at least (default: the profile's min_requests)"
    )
    parser.add_argument(
        "--prompts",
        choices=("golive", "random"),
        default="golive",
        help="what vLLM's client sends: golive's own prompts (the same text), or vLLM's random ids sized to golive's",
    )
    parser.add_argument(
        "--vllm-warmups",
        action="store_true",
        help="vLLM's client with its ready check and C warm-ups (they cache its first measured prompt; without them "
        "its first requests open their connections inside the measured run)",
    )
    return parser


if __name__ == "__main__":
    sys.exit(main())
