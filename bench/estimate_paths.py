"""Benchmark: the time estimate against the run it estimates, on the reference station directly and through paths
that add a delay to every request (tests/faults/proxy.py's FaultProxy), in one run on this machine.

    .venv/bin/python bench/estimate_paths.py [--delays 0,0.04,0.3] [--out bench/results/estimate-paths.json]

For each path, the whole endpoint layer (`golive run -m endpoint`, the shipped reference-cpu profile): the estimate's
expected and upper figures, the actual time, actual ÷ expected (issue 41.4's goal: within 2× on each path), and the
probe's decode speed beside the sweep's own single-user speed through the same path. Ratios in one run, not absolute
promises: the machine is shared and noisy, and a probe taken during another process's burst reads that burst.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from golive_testbed.reference.launcher import ReferenceStation

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the fault proxy the tests use

from faults.proxy import FaultProxy  # noqa: E402


def one_path(port: int, delay_s: float, folder: Path) -> dict:
    with FaultProxy(port, delay_s=delay_s) as proxy:
        inventory = folder / "inventory.yaml"
        station = f"  - {{name: reference, endpoint: '{proxy.base_url}'}}\n"
        inventory.write_text(f"profile: reference-cpu\nstations:\n{station}")
        started = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-m", "golive.cli", "run", str(inventory), "-o", str(folder / "out"), "-m", "endpoint"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        wall = time.perf_counter() - started
    results = json.loads((folder / "out/results.json").read_text())
    estimate = results["estimate"]
    (probe,) = estimate["probes"]
    (one_user,) = [row for row in results["sweep"] if row["concurrency"] == 1]
    return {
        "delay_s": delay_s,
        "exit": run.returncode,
        "wall_s": round(wall, 1),
        "expected_s": estimate["expected_s"],
        "upper_s": estimate["upper_s"],
        "actual_s": estimate["actual_s"],
        "actual_over_expected": round(estimate["actual_s"] / estimate["expected_s"], 2),
        "probe_decode_tok_s": probe["decode_tok_s"],
        "probe_decode_from": probe["decode_from"],
        "sweep_single_user_tok_s": round(one_user["per_user_tok_s_p50"], 1),
        "probe_over_sweep": round(probe["decode_tok_s"] / one_user["per_user_tok_s_p50"], 2),
        "parts_expected_s": {part: value["expected_s"] for part, value in estimate["parts"].items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delays", default="0,0.04,0.3", help="seconds added to every request, comma-separated")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args()
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="golive-estimate-paths-") as tmp,
        ReferenceStation(port=18793, log_path=Path(tmp) / "reference.log") as station,
    ):
        for delay in (float(d) for d in args.delays.split(",")):
            folder = Path(tmp) / f"delay-{delay:g}"
            folder.mkdir()
            rows.append(one_path(station.port, delay, folder))
            print(json.dumps(rows[-1]), flush=True)
    report = {
        "machine": f"{platform.node()}: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end",
        "paths": rows,
    }
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
