"""Benchmark: how much CPU each client and the server use while a client measures (issue 28 item 2).

    .venv/bin/python bench/client_cpu.py [--levels 1 8] [--rounds 2] [--prompt-tokens 40] [--output-tokens 128]
                                         [--requests 64] [--out bench/results/client-cpu.json]

On a small machine a client that takes the server's cores slows what it measures. One reference station; per level
and round, golive's sweep (one level: warm-up, one measured batch) and `vllm bench serve` (the testbed's command, the
same prompts and answer length, greedy, no warm-up) each run in a process of their own, and a thread here reads
/proc/PID/stat (utime + stime, every thread) of that process and of every process of the station every 5 ms. Over each
client's measured window (golive: its batch's wall time, ending when its sweep returned; vLLM: the first request's
start to the last one's end, from `--save-detailed`) the CPU each used ÷ the window is the cores it kept busy.
CLOCK_MONOTONIC (time.perf_counter) is one clock for every process on Linux, so the windows and the samples line up.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from vs_vllm_bench import REPO, Prompts, golive_sentences, vllm_command

from golive.endpoint.load_request import Workload
from golive_testbed.reference.launcher import ReferenceStation
from golive_testbed.reference.model import SERVED_NAME

TICKS = os.sysconf("SC_CLK_TCK")

# golive's sweep in its own process: prints its measured batch's window and numbers
GOLIVE = r"""
import asyncio, json, sys, time
from golive.endpoint.load import SweepPlan, sweep_async
from golive.endpoint.load_request import Workload
from golive.endpoint.target import EndpointTarget
url, model, level, requests, prompt, output = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
plan = SweepPlan((level,), repeats=1, warmup=1, max_duration_s=3600, min_requests=requests)
row = asyncio.run(sweep_async(EndpointTarget(url), Workload(model, prompt, output), plan)).levels[0]
ended = time.perf_counter()
print(json.dumps({"start": ended - row.duration_s, "end": ended, "tok_s": row.aggregate_tok_s}))
"""


def cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def group_of(pid: int) -> list[int]:
    group, found = os.getpgid(pid), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == group:
                    found.append(int(entry.name))
            except ProcessLookupError:
                pass
    return found


def measured(command: list[str], server: list[int]) -> tuple[str, list[tuple[float, float, float]]]:
    """Run `command`; (its stdout, samples of (time, its CPU s, the server's CPU s))."""
    samples: list[tuple[float, float, float]] = []
    done = threading.Event()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def sample() -> None:
        while not done.is_set():
            now, mine = time.perf_counter(), cpu_s(child.pid)
            if mine is not None:
                samples.append((now, mine, sum(filter(None, (cpu_s(p) for p in server)))))
            time.sleep(0.005)

    thread = threading.Thread(target=sample)
    thread.start()
    out = child.communicate()[0]
    done.set()
    thread.join()
    if child.returncode:
        raise SystemExit(f"{command[:4]} exited {child.returncode}")
    return out, samples


def cores(samples: list[tuple[float, float, float]], start: float, end: float) -> tuple[float, float]:
    """(client cores, server cores) busy over [start, end]: the samples just outside it, their difference ÷ time."""
    before = [s for s in samples if s[0] <= start] or samples[:1]
    after = [s for s in samples if s[0] >= end] or samples[-1:]
    (t0, c0, s0), (t1, c1, s1) = before[-1], after[0]
    return (c1 - c0) / (t1 - t0), (s1 - s0) / (t1 - t0)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8798)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--prompt-tokens", type=int, default=40)
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--out", type=Path, default=REPO / "bench/results/client-cpu.json")
    args = parser.parse_args()
    rows = []
    with ReferenceStation(port=args.port) as station:
        root = station.base_url.removesuffix("/v1")
        workload = Workload(SERVED_NAME, args.prompt_tokens, args.output_tokens)
        prompts = Prompts("golive", golive_sentences(root, workload), 0)
        server = group_of(station.pid)
        for round_ in range(args.rounds):
            for level in args.levels:
                requests = max(args.requests, level)
                sizes = [str(level), str(requests), str(args.prompt_tokens), str(args.output_tokens)]
                out, samples = measured([sys.executable, "-c", GOLIVE, station.base_url, SERVED_NAME, *sizes], server)
                golive = json.loads(out.strip().splitlines()[-1])
                row = {"round": round_, "level": level, "golive": {"tok_s": golive["tok_s"]}}
                row["golive"]["client_cores"], row["golive"]["server_cores"] = cores(
                    samples, golive["start"], golive["end"]
                )
                with tempfile.TemporaryDirectory(prefix="client-cpu-") as folder:
                    sizes_vllm = (level, requests, args.output_tokens)
                    command = vllm_command(station.port, station.model_dir, *sizes_vllm, prompts, Path(folder), False)
                    _, samples = measured(command, server)
                    result = json.loads((Path(folder) / "result.json").read_text())
                start = min(result["start_times"])
                end = max(s + lat for s, lat in zip(result["start_times"], result["latencies"], strict=True))
                row["vllm"] = {"tok_s": result["output_throughput"]}
                row["vllm"]["client_cores"], row["vllm"]["server_cores"] = cores(samples, start, end)
                rows.append(row)
                print(
                    f"round {round_} c={level}: "
                    + " | ".join(
                        f"{c} {row[c]['tok_s']:.0f} tok/s, client {row[c]['client_cores']:.3f} cores, "
                        f"server {row[c]['server_cores']:.3f} cores"
                        for c in ("golive", "vllm")
                    ),
                    flush=True,
                )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
