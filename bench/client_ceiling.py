"""The most streamed tokens per second golive's client ingests with its timings still correct.

The scripted server (bench/scripted_stream.py --script stepped, its own process) acts as a batch engine: every step,
each of the open streams gets one event, and a step's events go out back to back (the kernel coalesces them into
the client's reads, as a busy vLLM's do). Each run paces the steps to offer a token rate; golive's `one_request`
ingests them, C streams in flight. A rate counts as ingested when golive's per-token arrival error (golive's arrival
− the server's send time) stays ≤ 1 ms at p50 and ≤ 10 ms at p99, with 0 failures and every token event counted.
The last run is unpaced (the server as fast as its loop turns).

    .venv/bin/python bench/client_ceiling.py        # writes bench/results/client-ceiling.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from stream_truth import HERE, Server, run_case

P50_LIMIT_MS, P99_LIMIT_MS = 1.0, 10.0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=128, help="tokens per request")
    parser.add_argument(
        "--rates",
        type=int,
        nargs="+",
        default=[12_800, 25_600, 51_200, 76_800, 102_400, 0],
        help="offered tok/s (0: unpaced)",
    )
    parser.add_argument("--tokens-per-event", type=int, default=1)
    parser.add_argument("--transport", choices=("stream", "httpx"), default="stream")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument("--output", type=Path, default=HERE / "results" / "client-ceiling.json")
    args = parser.parse_args(argv)
    runs = []
    for rate in args.rates:
        # one step = one event per stream: steps/s = rate / (streams × tokens per event)
        step_ms = 0.0 if rate == 0 else 1000 * args.streams * args.tokens_per_event / rate
        with Server(
            "--script", "stepped", "--step-ms", str(step_ms), "--tokens-per-event", str(args.tokens_per_event)
        ) as server:
            case = run_case(server.url, args.streams, args.streams, args.tokens, args.transport, args.loop)
        arrival = case["error"]["arrival"]
        counted = args.tokens_per_event > 1 or case["client_usage_mismatches"] == 0  # several tokens an event
        correct = (
            case["failures"] == 0
            and counted
            and arrival["abs_p50_ms"] <= P50_LIMIT_MS
            and arrival["abs_p99_ms"] <= P99_LIMIT_MS
        )
        case |= {"offered_tok_s": rate or None, "step_ms": step_ms, "timings_correct": correct}
        runs.append(case)
        print(
            f"offered {rate or 'unpaced':>7} tok/s: ingested {case['aggregate_tok_s']:>9,.0f} tok/s, per-token "
            f"error p50 {arrival['p50_ms']:.3f} ms p99 {arrival['p99_ms']:.3f} ms, failures {case['failures']}, "
            f"mismatches {case['client_usage_mismatches']} -> {'correct' if correct else 'NOT correct'}",
            flush=True,
        )
    good = [r["aggregate_tok_s"] for r in runs if r["timings_correct"]]
    ceiling = max(good) if good else None
    print(f"ceiling (timings correct): {ceiling:,.0f} tok/s" if ceiling else "no run kept its timings correct")
    result = {
        "bench": "client-ceiling",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()),
        "streams": args.streams,
        "tokens_per_event": args.tokens_per_event,
        "transport": args.transport,
        "loop": args.loop,
        "correct_means": f"|per-token error| p50 <= {P50_LIMIT_MS} ms, p99 <= {P99_LIMIT_MS} ms, 0 failures, "
        f"0 client/usage mismatches",
        "ceiling_tok_s": ceiling,
        "runs": runs,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
