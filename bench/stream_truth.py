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
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
from httpx_lane import HttpxLane, httpx_send
from scripted_stream import ITL_PATTERN_MS

import golive.endpoint.load_batch as load_batch
from golive.endpoint.load_batch import lanes, run_level, summarize
from golive.endpoint.load_request import Workload

HERE = Path(__file__).resolve().parent


class Server:
    def __init__(self, *flags: str):
        # BENCH_SERVER_CPUS=2,3 pins the server away from the client (run the client under `taskset -c 0,1`):
        # on a box with cores to spare that measures the client alone, not the client and the server sharing cores
        cpus = os.environ.get("BENCH_SERVER_CPUS")
        pin = (lambda: os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})) if cpus else None
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "scripted_stream.py"), *flags],
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=pin,
        )
        self.port = int(self.proc.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(10)


async def measured(
    url: str, concurrency: int, requests: int, tokens: int, transport: str = "stream", warmup: bool = True
) -> tuple:
    """`requests` requests through golive's `run_level`, `concurrency` in flight: [(timing, true send times)], start,
    end. `transport` "stream" is golive's (golive.endpoint.timed_http); "httpx" the one it replaced
    (bench/httpx_lane.py)."""
    workload = Workload(model="scripted", prompt_tokens=40, output_tokens=tokens)
    chat = url + "/v1/chat/completions"
    if transport == "stream":
        clients = lanes(chat, concurrency, 300)
    else:
        clients = [HttpxLane(chat, 300) for _ in range(concurrency)]
        # run_level calls these by module name; the httpx reader parses as it reads (as golive 0.2.0 did)
        load_batch.send, load_batch.read_timeline = httpx_send, lambda timing, workload: timing
    try:
        async with httpx.AsyncClient() as light:
            if warmup:  # as golive's sweep does: C requests first, not measured (connections open, code paths warm)
                await run_level(clients, workload, {}, concurrency, concurrency, deadline=float("inf"), sentences=4)
                await light.get(url + "/truth")  # forget the warm-up's
            timings, started, ended = await run_level(
                clients, workload, {}, concurrency, requests, deadline=float("inf"), sentences=4
            )
            truth = (await light.get(url + "/truth")).json()
    finally:
        load_batch.send, load_batch.read_timeline = SEND, READ_TIMELINE
        for client in clients:
            await client.aclose()
    return [(timing, truth[timing.salt]) for timing in timings], started, ended


SEND, READ_TIMELINE = load_batch.send, load_batch.read_timeline


def errors(pairs: list) -> dict:
    """Per-token arrival error, TTFT error and ITL error (seconds), pooled over every request."""
    arrival, ttft, itl = [], [], []
    for timing, sent in pairs:
        assert timing.error is None, timing.error
        assert len(timing.token_times) == len(sent), (len(timing.token_times), len(sent))
        true_times = [t - timing.sent for t in sent]
        arrival += [m - t for m, t in zip(timing.token_times, true_times, strict=True)]  # lengths asserted above
        ttft.append(timing.ttft - true_times[0])
        true_gaps = [b - a for a, b in itertools.pairwise(true_times)]
        itl += [m - t for m, t in zip(timing.itls, true_gaps, strict=True)]
    return {"arrival": arrival, "ttft": ttft, "itl": itl}


def quantiles_ms(values: list[float]) -> dict:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    absolute = statistics.quantiles([abs(v) for v in values], n=100, method="inclusive")
    return {
        "n": len(values),
        "p50_ms": statistics.median(values) * 1e3,
        "p99_ms": cuts[98] * 1e3,
        "p1_ms": cuts[0] * 1e3,
        "abs_p50_ms": statistics.median(map(abs, values)) * 1e3,
        "abs_p99_ms": absolute[98] * 1e3,
        "max_ms": max(values) * 1e3,
    }


def run(coroutine, loop: str = "uvloop"):
    """asyncio.run, on uvloop where asked and installed (`--loop`): golive itself runs on asyncio's loop, and the
    two measured alike once parsing left the read path (docs/performance.md)."""
    factory = None
    if loop == "uvloop":
        try:
            import uvloop

            factory = uvloop.new_event_loop
        except ImportError:
            pass
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coroutine)


def run_case(
    url: str, concurrency: int, requests: int, tokens: int, transport: str = "stream", loop: str = "uvloop"
) -> dict:
    pairs, started, ended = run(measured(url, concurrency, requests, tokens, transport), loop)
    level = summarize(concurrency, [t for t, _ in pairs], started, ended)
    found = errors(pairs)
    return {
        "transport": transport,
        "loop": loop,
        "concurrency": concurrency,
        "requests": requests,
        "tokens_per_request": tokens,
        "failures": level.failures,
        "client_usage_mismatches": level.client_usage_mismatches,
        "aggregate_tok_s": level.aggregate_tok_s,
        "ttft_p50_s": level.ttft_p50_s,
        "itl_p50_s": level.itl_p50_s,
        "error": {name: quantiles_ms(values) for name, values in found.items()},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 256])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument(
        "--transports",
        nargs="+",
        choices=("stream", "httpx"),
        default=["stream", "httpx"],
        help="stream: golive's (golive.endpoint.timed_http); httpx: the transport it replaced",
    )
    parser.add_argument("--scale-above-32", type=float, default=12.0, help="ITL pattern stretch above 32 streams")
    parser.add_argument("--output", type=Path, default=HERE / "results" / "stream-truth.json")
    args = parser.parse_args(argv)
    cases = []
    for concurrency, transport in [(c, t) for c in args.levels for t in args.transports]:
        # per-user speed falls with load: the recipe's 256 users get ~10 tok/s each (2,517 tok/s peak [000]), so the
        # ITL pattern is stretched to that speed above 32 streams (×12: ~95 ms mean gap)
        scale = 1 if concurrency <= 32 else args.scale_above_32
        itl = [str(ms * scale) for ms in ITL_PATTERN_MS]
        with Server("--script", "paced", "--itl-ms", *itl) as server:
            requests = max(concurrency, 16)  # a single stream: 16 requests one after another
            case = run_case(server.url, concurrency, requests, args.tokens, transport)
            case["itl_pattern_ms"] = [ms * scale for ms in ITL_PATTERN_MS]
            cases.append(case)
            e = case["error"]
            print(
                f"c={concurrency:>4} {transport:>6}: {case['aggregate_tok_s']:,.0f} tok/s, "
                f"failures {case['failures']}; error ms "
                f"(golive − truth) TTFT p50 {e['ttft']['p50_ms']:.3f} p99 {e['ttft']['p99_ms']:.3f}, "
                f"ITL p50 {e['itl']['p50_ms']:.3f} p99 {e['itl']['p99_ms']:.3f}, "
                f"per-token p50 {e['arrival']['p50_ms']:.3f} p99 {e['arrival']['p99_ms']:.3f}"
            )
    result = {
        "bench": "stream-truth",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "load_average": list(_loadavg()),
        "server": "bench/scripted_stream.py --script paced (TTFT 30 ms, ITL pattern per case)",
        "cases": cases,
    }
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
