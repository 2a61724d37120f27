"""Benchmark: the recipe's needle prompt (968,377 tokens) built through a real server's /tokenize: time and calls.

    .venv/bin/python bench/needle_build.py [--port 8799] [--repeats 3]   # writes bench/results/needle-build.json

A reference station started with a 1,048,576-token context (the model's config stretched to it with --hf-overrides;
the KV cache just big enough for one such sequence, as vLLM requires at start-up) serves /tokenize with its real
tokenizer. Each repeat builds one of the suite's three probes (depth 10/50/90 %, the suite's seeds) with
golive.endpoint.longctx.build over golive's own client, exactly as the check does, and records the build's wall time,
its /tokenize calls (each timed), the verified count and its error vs the target. The 968k chat request itself is not
sent: its prefill on 2 CPU cores would take hours. Issue 7's goal: ≤ 3 s and ≤ 3 calls.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

from golive.endpoint import longctx
from golive.endpoint.client import EndpointClient
from golive.endpoint.target import EndpointTarget
from golive_testbed.reference.launcher import ReferenceStation
from golive_testbed.reference.model import SERVED_NAME

REPO = Path(__file__).resolve().parents[1]

CONTEXT = 1_048_576
TARGET = 968_377  # the recipe's needle [000]
# K and V, 2 layers × 4 heads × 64 dims in bf16: 2 KiB a token, so 2 GiB for one 1M-token sequence, plus headroom
KV_CACHE_GIB = 3


def station_rss_gib(pid: int) -> float:
    """Resident memory of the server and its engine core."""
    try:
        root = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)]) / 2**30
    except psutil.Error:
        return float("nan")


def _one_build(client: EndpointClient, target: int, depth: float) -> dict:
    """One haystack of `target` tokens with its needle at `depth`, built through the station's /tokenize: its time,
    its calls and how far from the target it lands."""
    calls: list[dict] = []

    def tokenize(text: str) -> int:
        t0 = time.perf_counter()
        count = client.tokenize(SERVED_NAME, text)
        calls.append({"chars": len(text), "tokens": count, "s": round(time.perf_counter() - t0, 3)})
        return count

    t0 = time.perf_counter()
    haystack = longctx.build(tokenize, target, depth, seed=int(depth * 100))  # the suite's seeds
    build_s = time.perf_counter() - t0
    run = {
        "depth": depth,
        "build_s": round(build_s, 3),
        "calls": haystack.calls,
        "tokens": haystack.tokens,
        "error_pct": round(100 * haystack.error, 4),
        "prompt_chars": len(haystack.prompt),
        "tokenize_s": round(sum(c["s"] for c in calls), 3),
        "client_s": round(build_s - sum(c["s"] for c in calls), 3),
        "tokenize_calls": calls,
    }
    print(
        f"depth {depth:.0%}: {build_s:.2f} s, {haystack.calls} calls ({run['tokenize_s']:.2f} s in "
        f"/tokenize), {haystack.tokens:,} tokens ({run['error_pct']:+.3f} %), "
        f"{len(haystack.prompt) / 1e6:.1f} MB",
        flush=True,
    )
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8799)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--target", type=int, default=TARGET)
    parser.add_argument("--output", type=Path, default=REPO / "bench/results/needle-build.json")
    ns = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="golive-needle-"))
    station = ReferenceStation(
        port=ns.port,
        model_dir=work / "model",
        log_path=work / "server.log",
        flags={"--max-model-len": str(CONTEXT), "--hf-overrides": json.dumps({"max_position_embeddings": CONTEXT})},
        env={"VLLM_CPU_KVCACHE_SPACE": str(KV_CACHE_GIB)},
    )
    started = time.perf_counter()
    runs = []
    with station:
        startup = time.perf_counter() - started
        assert station.pid is not None  # a started station has its server's pid
        client = EndpointClient(EndpointTarget(station.base_url, request_timeout_s=600))
        served = {m.get("id"): m.get("max_model_len") for m in client.models()}.get(SERVED_NAME)
        print(
            f"station up in {startup:.0f} s, context {served:,}, {station_rss_gib(station.pid):.1f} GiB resident",
            flush=True,
        )
        for i in range(ns.repeats):
            runs.append(_one_build(client, ns.target, (0.1, 0.5, 0.9)[i % 3]))
        rss = station_rss_gib(station.pid)
        client.close()
    times = [r["build_s"] for r in runs]
    summary = {
        "build_s_min": min(times),
        "build_s_median": statistics.median(times),
        "calls_max": max(r["calls"] for r in runs),
        "abs_error_pct_max": max(abs(r["error_pct"]) for r in runs),
    }
    print(
        f"build: min {summary['build_s_min']:.2f} s, median {summary['build_s_median']:.2f} s; at most "
        f"{summary['calls_max']} calls; |error| at most {summary['abs_error_pct_max']:.3f} %; station {rss:.1f} GiB"
    )
    result = {
        "bench": "needle-build",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()),
        "target_tokens": ns.target,
        "context": served,
        "kv_cache_gib": KV_CACHE_GIB,
        "station_startup_s": round(startup, 1),
        "station_rss_gib": round(rss, 2),
        "goal": "<= 3 s, <= 3 /tokenize calls, within ±0.5 %",
        **summary,
        "runs": runs,
    }
    ns.output.parent.mkdir(parents=True, exist_ok=True)
    ns.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {ns.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
