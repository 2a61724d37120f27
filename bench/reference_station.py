"""Benchmark: reference station start-up and the endpoint layer's wall time, in one run on this machine.

    .venv/bin/python bench/reference_station.py [--repeats 2] [--out bench/results/reference-station.json]

Measures (issue 3's goals: start-up ≤ 90 s, functional endpoint layer ≤ 60 s on the CI machine):
  - cold start: model build + vLLM launch to GET /health 200 (the first start also fills vLLM's compile cache),
  - warm start: the same again with the caches filled,
  - the functional endpoint layer (`golive run -m endpoint`, long-context needles deselected), and the needles alone.
Ratios in one run, not absolute promises: the machines are shared and noisy.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from golive_testbed.reference.launcher import ReferenceStation

REPO = Path(__file__).resolve().parents[1]


def timed_run(inventory: Path, out: Path, *args: str) -> tuple[float, dict]:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "golive.cli", "run", str(inventory), "-o", str(out), "-m", "endpoint", "-q", *args],
        cwd=REPO,
        capture_output=True,
        timeout=1800,
    )
    elapsed = time.perf_counter() - started
    results = json.loads((out / "results.json").read_text())
    return elapsed, results


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--port", type=int, default=8799)
    parser.add_argument("--out", default=str(REPO / "bench/results/reference-station.json"))
    ns = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="golive-bench-"))
    rows = []
    for attempt in range(ns.repeats):
        station = ReferenceStation(port=ns.port, model_dir=work / "model", log_path=work / f"server-{attempt}.log")
        started = time.perf_counter()
        station.start(timeout=600)
        startup = time.perf_counter() - started
        try:
            inventory = work / "inventory.yaml"
            inventory.write_text(
                f"profile: reference-cpu\nstations:\n  - {{name: ref, endpoint: '{station.base_url}'}}\n"
            )
            functional, results = timed_run(inventory, work / f"functional-{attempt}", "-k", "not needle")
            needles, needle_results = timed_run(inventory, work / f"needles-{attempt}", "-k", "needle")
        finally:
            station.stop()
        rows.append(
            {
                "attempt": attempt,
                "startup_s": round(startup, 1),
                "functional_layer_s": round(functional, 1),
                "functional_verdict": results["verdict"],
                "functional_checks": len(results["checks"]),
                "needles_s": round(needles, 1),
                "needle_verdict": needle_results["verdict"],
                "metrics": needle_results["metrics"] | results["metrics"],
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    report = {"machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()}, "runs": rows}
    Path(ns.out).parent.mkdir(parents=True, exist_ok=True)
    Path(ns.out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
