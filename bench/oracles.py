"""Benchmark: the deep run of golive's readers against the tools themselves (issue 40), ≥ 10,000 inputs a reader.

    .venv/bin/python bench/oracles.py [--readers systemd,bash,vllm,nccl] [--count 10000] [--seed 1] [--jobs 2]
        [--station NAME] [--out bench/results/oracles.json]

Each reader meets its oracle (testbed/golive_testbed/oracles): golive's unit reader against systemd 252 in the real
station (`--station NAME`: one `golive station up --name NAME` brought up; without it the systemd reader is skipped and
said so), golive's prestart reader against bash, its reading of the served flags against vLLM's own argument parser,
its NCCL log reader against NCCL's log grammar. The figure is agreements out of inputs; every disagreement is printed
reduced to its smallest input (the first five a reader) and written to --out with the figures (a reader not run
keeps the figures --out had), so each is a named gap (docs/performance.md, "golive's readers against the tools") or a
bug to fix. The bash reader's inputs are split over --jobs processes. The machine is shared: the seconds are this
run's, not a promise.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from golive_testbed.oracles import bash_oracle, nccl_oracle, vllm_oracle  # noqa: E402
from golive_testbed.oracles.bash_cases import ScriptCase  # noqa: E402
from golive_testbed.oracles.reduce import Agreement, Disagreement  # noqa: E402
from golive_testbed.oracles.systemd_cases import UnitCase  # noqa: E402
from golive_testbed.oracles.vllm_oracle import ArgsCase  # noqa: E402


def _bash_share(share: tuple[int, int, int]) -> Agreement[ScriptCase]:
    """One process's share of the bash cases (not reduced: the first five of all shares are, after)."""
    count, seed, part = share
    return bash_oracle.run(count, seed * 1000 + part, reduce=False)


def bash_deep(count: int, seed: int, jobs: int) -> dict[str, Any]:
    started = time.monotonic()
    shares = [(count // jobs + (1 if i < count % jobs else 0), seed, i) for i in range(jobs)]
    with ProcessPoolExecutor(jobs) as pool:
        results = list(pool.map(_bash_share, shares))
    report: Agreement[ScriptCase] = Agreement(results[0].reader, results[0].tool)
    for share in results:
        report.inputs += share.inputs
        report.agreed += share.agreed
        report.abstained += share.abstained
        report.disagreements += share.disagreements
    for found in report.disagreements[:5]:
        found.reduced = bash_oracle.reduced(found)
    report.seconds = time.monotonic() - started
    return _with(report, ScriptCase.text)


def _figures(report: Agreement[Any]) -> dict[str, Any]:
    return {
        "reader": report.reader,
        "tool": report.tool,
        "inputs": report.inputs,
        "agreed": report.agreed,
        "share": round(report.share, 6),
        "not_checked_by_golive": report.abstained,
        "seconds": round(report.seconds, 1),
        "line": report.line(),
    }


def _with(report: Agreement[Any], show: Any) -> dict[str, Any]:
    def one(d: Disagreement[Any]) -> dict[str, str]:
        return {"what": d.what, "golive": d.golive, "tool": d.tool, "input": show(d.reduced or d.case)}

    return _figures(report) | {"disagreements": [one(d) for d in report.disagreements]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readers", default="systemd,bash,vllm,nccl")
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--station", help="a real station up (golive station up --name NAME) for the systemd oracle")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "oracles.json"))
    ns = parser.parse_args()
    readers = ns.readers.split(",")
    # each reader's figures keep the command and machine that gave them: a later run of some readers leaves the
    # others' figures in --out as they were
    out = Path(ns.out)
    results: dict[str, Any] = {"readers": {}}
    if out.exists():
        try:
            results["readers"] = dict(json.loads(out.read_text()).get("readers", {}))
        except (ValueError, AttributeError):
            pass
    run = {"command": " ".join(sys.argv), "machine": f"{platform.node()} ({platform.machine()}, shared)"}
    for reader in readers:
        print(f"[oracles] {reader}: {ns.count:,} inputs …", flush=True)
        if reader == "systemd":
            if not ns.station:
                print("[oracles] systemd: skipped (no --station: bring one up with `golive station up --name X`)")
                continue
            from golive_testbed import realstation
            from golive_testbed.oracles.systemd_oracle import SystemdOracle

            record = realstation.load(ns.station)
            if record is None:
                print(f"[oracles] systemd: no station {ns.station} is up")
                return 2
            with SystemdOracle(record, batch=250) as oracle:
                figures = _with(oracle.run(ns.count, ns.seed, tag="deep"), UnitCase.text)
        elif reader == "bash":
            figures = bash_deep(ns.count, ns.seed, ns.jobs)
        elif reader == "vllm":
            figures = _with(vllm_oracle.run(ns.count, ns.seed), ArgsCase.text)
        elif reader == "nccl":
            figures = _with(nccl_oracle.run(ns.count, ns.seed), nccl_oracle.LogCase.describe)
        else:
            parser.error(f"unknown reader {reader!r}")
        results["readers"][reader] = figures | run
        print(f"[oracles] {figures['line']}", flush=True)
        for d in figures["disagreements"][:5]:
            print(
                f"  {d['what']}: golive {d['golive']}, the tool {d['tool']}\n    " + d["input"].replace("\n", "\n    ")
            )
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"[oracles] written {ns.out}")
    return 0 if all(not results["readers"][r]["disagreements"] for r in readers if r in results["readers"]) else 1


if __name__ == "__main__":
    sys.exit(main())
