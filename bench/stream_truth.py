"""How far golive's load generator's TTFT/ITL are from the truth: a scripted server (bench/scripted_stream.py, its own
process) records when it put each token on the socket; golive's `one_request` times the same tokens on arrival.

Error of a token = golive's arrival time − the server's send time (same CLOCK_MONOTONIC, both processes). TTFT error
is the first token's; ITL error = golive's gap − the true gap. Reported at p50 and p99 over every token/gap; goal:
|error| ≤ 1 ms at p50.

    .venv/bin/python bench/stream_truth.py          # writes bench/results/stream-truth.json
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from scripted_stream import ITL_PATTERN_MS

from golive.endpoint.load import Workload, lanes, run_level, summarize

HERE = Path(__file__).resolve().parent
class Server:
    def __init__(self, *flags: str):
        self.proc = subprocess.Popen([sys.executable, str(HERE / "scripted_stream.py"), *flags],
                                     stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(10)


async def measured(url: str, concurrency: int, requests: int, tokens: int, pool: str = "lanes",
                   warmup: bool = True) -> tuple:
    """`requests` requests through golive's `run_level`, `concurrency` in flight: [(timing, true send times)], start,
    end. `pool` "lanes" is golive's (a client per request in flight); "shared" one pool of `concurrency` connections."""
    workload = Workload(model="scripted", prompt_tokens=40, output_tokens=tokens, timeout_s=300)
    async with contextlib.AsyncExitStack() as stack:
        if pool == "lanes":
            clients = [await stack.enter_async_context(c) for c in lanes(concurrency, 300)]
        else:
            limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
            clients = [await stack.enter_async_context(httpx.AsyncClient(timeout=300, limits=limits))] * concurrency
        if warmup:  # as golive's sweep does: C requests first, not measured (connections open, code paths warm)
            await run_level(clients, url + "/v1/chat/completions", workload, {}, concurrency, concurrency,
                            deadline=float("inf"), sentences=4)
            await clients[0].get(url + "/truth")  # forget the warm-up's
        timings, started, ended = await run_level(clients, url + "/v1/chat/completions", workload, {}, concurrency,
                                                  requests, deadline=float("inf"), sentences=4)
        truth = (await clients[0].get(url + "/truth")).json()
    return [(timing, truth[timing.salt]) for timing in timings], started, ended


def errors(pairs: list) -> dict:
    """Per-token arrival error, TTFT error and ITL error (seconds), pooled over every request."""
    arrival, ttft, itl = [], [], []
    for timing, sent in pairs:
        assert timing.error is None, timing.error
        assert len(timing.token_times) == len(sent), (len(timing.token_times), len(sent))
        true_times = [t - timing.sent for t in sent]
        arrival += [m - t for m, t in zip(timing.token_times, true_times)]
        ttft.append(timing.ttft - true_times[0])
        itl += [m - t for m, t in zip(timing.itls, [b - a for a, b in zip(true_times, true_times[1:])])]
    return {"arrival": arrival, "ttft": ttft, "itl": itl}


def quantiles_ms(values: list[float]) -> dict:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    absolute = statistics.quantiles([abs(v) for v in values], n=100, method="inclusive")
    return {"n": len(values), "p50_ms": statistics.median(values) * 1e3, "p99_ms": cuts[98] * 1e3,
            "p1_ms": cuts[0] * 1e3, "abs_p50_ms": statistics.median(map(abs, values)) * 1e3,
            "abs_p99_ms": absolute[98] * 1e3, "max_ms": max(values) * 1e3}


def run_case(url: str, concurrency: int, requests: int, tokens: int, pool: str = "lanes") -> dict:
    pairs, started, ended = asyncio.run(measured(url, concurrency, requests, tokens, pool))
    level = summarize(concurrency, [t for t, _ in pairs], started, ended)
    found = errors(pairs)
    return {"pool": pool, "concurrency": concurrency, "requests": requests, "tokens_per_request": tokens,
            "failures": level.failures, "client_usage_mismatches": level.client_usage_mismatches,
            "aggregate_tok_s": level.aggregate_tok_s, "ttft_p50_s": level.ttft_p50_s, "itl_p50_s": level.itl_p50_s,
            "error": {name: quantiles_ms(values) for name, values in found.items()}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 256])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--pools", nargs="+", choices=("lanes", "shared"), default=["lanes", "shared"],
                        help="lanes: golive's client per request in flight; shared: one httpx pool (the old way)")
    parser.add_argument("--scale-above-32", type=float, default=12.0, help="ITL pattern stretch above 32 streams")
    parser.add_argument("--output", type=Path, default=HERE / "results" / "stream-truth.json")
    args = parser.parse_args(argv)
    cases = []
    for concurrency, pool in [(c, p) for c in args.levels for p in args.pools]:
        # per-user speed falls with load: the recipe's 256 users get ~10 tok/s each (2,517 tok/s peak [000]), so the
        # ITL pattern is stretched to that speed above 32 streams (×12: ~95 ms mean gap)
        scale = 1 if concurrency <= 32 else args.scale_above_32
        itl = [str(ms * scale) for ms in ITL_PATTERN_MS]
        with Server("--script", "paced", "--itl-ms", *itl) as server:
            requests = max(concurrency, 16)  # a single stream: 16 requests one after another
            case = run_case(server.url, concurrency, requests, args.tokens, pool)
            case["itl_pattern_ms"] = [ms * scale for ms in ITL_PATTERN_MS]
            cases.append(case)
            e = case["error"]
            print(f"c={concurrency:>4} {pool:>6}: {case['aggregate_tok_s']:,.0f} tok/s, failures {case['failures']}; "
                  f"error ms "
                  f"(golive − truth) TTFT p50 {e['ttft']['p50_ms']:.3f} p99 {e['ttft']['p99_ms']:.3f}, "
                  f"ITL p50 {e['itl']['p50_ms']:.3f} p99 {e['itl']['p99_ms']:.3f}, "
                  f"per-token p50 {e['arrival']['p50_ms']:.3f} p99 {e['arrival']['p99_ms']:.3f}")
    result = {"bench": "stream-truth", "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "python": platform.python_version(), "load_average": list(_loadavg()),
              "server": "bench/scripted_stream.py --script paced (TTFT 30 ms, ITL pattern per case)", "cases": cases}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output}")


def _loadavg() -> tuple[float, ...]:
    try:
        import os
        return os.getloadavg()
    except OSError:
        return ()


if __name__ == "__main__":
    main()
