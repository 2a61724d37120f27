"""Benchmark: a fleet of N real stations checked in one `golive run INVENTORY -m host -n W` over ssh, one report.

    .venv/bin/python bench/fleet.py [--sizes 1 4 6 8] [--workers 0 1 2 4 8] [--repeats 3] [--state-dir /tmp/fleet-state]
                                    [--gib-per-station 2.5] [--out bench/results/fleet.json]

Each station is a real one (golive_testbed.realstation `up`): its own copy of the cached root file system, its own
systemd 252 as PID 1 under systemd-nspawn, sshd on a loopback port with its own key, its own dockerd and registry, the
recipe's unit starting vLLM's CPU build in its own container. The fleet grows through the sizes in one invocation
(stations fleet-1 … fleet-N: the first size's stations come up, are checked; the next size's are added to them, all N
are checked …), so the ratios are of one run on one machine. Each size is checked by ONE `golive run` of ONE inventory
listing every station (its ssh:// host and endpoint, its own site profile and ssh_config: each station has its own
key, known host key, image digest and ports) with pytest-xdist workers, into one report; the run must say GO and every
station must have its checks in it. Timed: each station's `up` and `down`, each `golive run`'s wall (Python start-up
included) and the sum of its checks' own durations, --repeats times per xdist worker count (medians); each station's
memory (PSS of its process tree). Before a size, what it adds must fit in memory: MemAvailable must cover the added
stations (at --gib-per-station until one is measured, then 1.25 × the largest station's PSS) plus --reserve-gib; a
size that does not fit is refused with one line, recorded, and the larger ones are not tried. Every station is taken
down at the end, whatever happened (and checked to have left nothing: realstation.leftovers). Needs root and the
packages of realstation.APT_LINE.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from golive.core.verdict import GO
from golive_testbed import realstation
from golive_testbed.realstation import Record, StationError

REPO = Path(__file__).resolve().parents[1]
GIB = 1024**3
# measured here (2026-12): vLLM's EngineCore ~2.0 GB RSS + its API server ~0.7 GB (pages of the same libraries shared),
# the station's dockerd, containerd and registry ~0.2 GB; one station took 1.8 GB of MemAvailable
GIB_PER_STATION = 2.5
RESERVE_GIB = 3.0  # golive run and its xdist workers, and room for others' work (another station) on a shared machine


def meminfo(path: Path = Path("/proc/meminfo")) -> dict[str, int]:
    """/proc/meminfo in bytes."""
    out = {}
    for line in path.read_text().splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if fields:
            out[key] = int(fields[0]) * (1024 if fields[1:] == ["kB"] else 1)
    return out


def refusal(n: int, adding: int, available: int, gib_per_station: float, reserve_gib: float) -> str | None:
    """One line when adding `adding` stations (to reach N=`n`) does not fit in `available` bytes; None when it does."""
    need = adding * gib_per_station + reserve_gib
    if need * GIB <= available:
        return None
    return (
        f"fleet: N={n} does not fit here: {adding} more station(s) × {gib_per_station:.1f} GiB + "
        f"{reserve_gib:.1f} GiB reserve = {need:.1f} GiB, but {available / GIB:.1f} GiB is available (MemAvailable); "
        f"N={n} not run"
    )


def write_inventory(records: Sequence[Record], path: Path) -> Path:
    """ONE inventory for the fleet: every station with its ssh:// host, its endpoint, its own site profile and its
    own ssh_config (absolute paths: the inventory lives apart from the stations' scratch directories). All the
    stations listen on 127.0.0.1, on their own ports, with their own keys and known host keys: ssh_config's `Host`
    cannot tell them apart by port, so each keeps the ssh_config `up` wrote (golive: a station's `ssh_config:`)."""
    if not records:
        raise ValueError("a fleet inventory needs at least one station")
    lines = [
        f"# written by bench/fleet.py: {len(records)} real station(s), one `golive run` for all",
        f"profile: {records[0].dir / 'site-profile.yaml'}",
        "stations:",
    ]
    for r in records:
        lines.append(
            f"  - {{name: {r.name}, role: a, host: '{r.host}', endpoint: '{r.endpoint}', phase: serving, "
            f"profile: '{r.dir / 'site-profile.yaml'}', ssh_config: '{r.ssh_config}'}}"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def check_fleet(inventory: Path, out: Path, workers: int, names: Sequence[str]) -> dict[str, Any]:
    """`golive run INVENTORY -m host -n WORKERS` as an operator starts it; GO, and every station in the report."""
    shutil.rmtree(out, ignore_errors=True)  # a run that writes no report must not be read as the last one's
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "golive.cli", "run", str(inventory), "-o", str(out), "-m", "host", "-n", str(workers)]
        + ["-q", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        cwd=out.parent,
    )
    wall = time.perf_counter() - started
    try:
        results = json.loads((out / "results.json").read_text())
    except (OSError, ValueError):
        raise AssertionError(
            f"golive run wrote no results.json (exit {done.returncode}): {(done.stdout + done.stderr)[-2000:]}"
        ) from None
    checks = results["checks"]
    per_station: dict[str, dict[str, int]] = {}
    for c in checks:
        counts = per_station.setdefault(c["station"], {})
        counts[c["outcome"]] = counts.get(c["outcome"], 0) + 1
    missing = [n for n in names if not per_station.get(n, {}).get("passed")]
    said = (done.stdout + done.stderr)[-3000:]
    assert done.returncode == 0 and results["verdict"] == GO, f"fleet not GO (exit {done.returncode}): {said}"
    assert not missing, f"stations with no passed check in the report: {missing}: {said}"
    return {
        "wall_s": round(wall, 2),
        "checks_s": round(sum(c["duration_s"] for c in checks), 2),
        "checks": len(checks),
        "exit": done.returncode,
        "verdict": results["verdict"],
        "per_station": per_station,
    }


def descendants(roots: set[int], parent: dict[int, int]) -> set[int]:
    """`roots` and every process below them (`parent`: pid → ppid)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(roots), list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def station_pss(record: Record) -> int:
    """The station's memory: the PSS (shared pages split between their users) of every process whose command line
    names its scratch directory (nspawn, dockerd, containerd, the shim, the registry) and of all below them (the
    station's systemd, sshd, the unit's `docker run`, vLLM in the container)."""
    parent: dict[int, int] = {}
    roots: set[int] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            parent[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if record.scratch.encode() in (proc / "cmdline").read_bytes():
                roots.add(int(proc.name))
        except (OSError, IndexError, ValueError):
            continue
    total = 0
    for pid in descendants(roots, parent):
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
        except OSError:
            continue
        total += sum(int(line.split()[1]) * 1024 for line in rollup if line.startswith("Pss:"))
    return total


def against_n1(sizes: list[dict[str, Any]]) -> None:
    """Each run's wall against the one-station run of this invocation (the same xdist mode: no xdist against no
    xdist, any -n against -n 1), in all and per station."""
    if not sizes or sizes[0]["n"] != 1:
        return
    base = {r["workers"]: r["wall_s"] for r in sizes[0]["runs"]}
    for row in sizes:
        for run in row["runs"]:
            one = base.get(0 if run["workers"] == 0 else 1)
            if one:
                run["wall_vs_n1"] = round(run["wall_s"] / one, 2)
                run["per_station_vs_n1"] = round(run["wall_s"] / row["n"] / one, 2)


def machine_now() -> dict[str, Any]:
    mem = meminfo()
    return {
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "mem_available_gib": round(mem["MemAvailable"] / GIB, 2),
        "mem_free_gib": round(mem["MemFree"] / GIB, 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    sizes = sorted(set(args.sizes))
    try:
        realstation.preflight()
    except StationError as exc:
        print(f"fleet: no real station here: {exc}", file=sys.stderr)
        return 2
    state: Path = args.state_dir
    state.mkdir(parents=True, exist_ok=True)
    up: list[Record] = []
    report = _new_report(args.reserve_gib)
    failed = False
    per_station = float(args.gib_per_station)
    try:
        for n in sizes:
            names = [f"fleet-{i}" for i in range(1, n + 1)]
            adding = [x for x in names if x not in {r.name for r in up}]
            now = machine_now()
            mem = meminfo()["MemAvailable"]
            line = refusal(n, len(adding), mem, per_station, args.reserve_gib)
            if line:
                print(line, file=sys.stderr, flush=True)
                report["refused"] = [
                    {"n": m, "at_start": now, "why": refusal(m, m - len(up), mem, per_station, args.reserve_gib)}
                    for m in sizes
                    if m >= n
                ]
                break
            print(f"fleet: N={n}: adding {len(adding)} station(s); {now}", file=sys.stderr, flush=True)
            up_wall = _bring_up(adding, up, state, args.up_parallel)
            records = sorted(up, key=lambda r: int(r.name.rsplit("-", 1)[1]))
            pss = {r.name: station_pss(r) for r in records}
            report["pss_gib"][f"N={n}"] = {k: round(v / GIB, 2) for k, v in pss.items()}
            measured = 1.25 * max(pss.values(), default=0) / GIB
            per_station = measured if measured > 0.5 else per_station  # a reading that missed vLLM is no estimate
            inventory = write_inventory(records, state / f"fleet-{n}" / "inventory.yaml")
            runs = _worker_runs(inventory, state / f"fleet-{n}", n, names, args.workers, args.repeats)
            row = {
                "n": n,
                "at_start": now,
                "added": len(adding),
                "up_wall_s": round(up_wall, 1),
                "up_s_each": [round(r.timings["up_s"], 1) for r in records if r.name in adding],
                "pss_gib_mean": round(sum(pss.values()) / len(pss) / GIB, 2),
                "runs": runs,
            }
            report["sizes"].append(row)
    except (StationError, AssertionError) as exc:
        failed = True
        print(f"fleet: {exc}", file=sys.stderr, flush=True)
        report["error"] = str(exc)
    finally:
        for r in up:
            report["up"][r.name] = {k: round(v, 1) for k, v in r.timings.items()}
        _take_down(up, state, report, args.up_parallel)
    against_n1(report["sizes"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in ("sizes", "refused", "down", "leftovers")}, indent=2))
    if report["leftovers"]:
        print(f"fleet: stations left something behind: {report['leftovers']}", file=sys.stderr)
        return 1
    return 1 if failed else 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 6, 8], help="fleet sizes, grown in this order")
    parser.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[0, 1, 2, 4, 8],
        help="xdist workers: one run each (at most N; 0: no xdist)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="`golive run`s per worker count and size (median)")
    parser.add_argument("--up-parallel", type=int, default=4, help="stations brought up at once (the first alone)")
    parser.add_argument("--state-dir", type=Path, default=Path("/tmp/fleet-state"))
    parser.add_argument(
        "--gib-per-station",
        type=float,
        default=GIB_PER_STATION,
        help="memory a station needs before one is measured; then 1.25 × the largest station's PSS",
    )
    parser.add_argument("--reserve-gib", type=float, default=RESERVE_GIB)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "fleet.json")
    return parser


def _new_report(reserve_gib: float) -> dict[str, Any]:
    """The report's frame: the machine, then each size's rows as they are measured."""
    report: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": platform.node(),
        "cpus": os.cpu_count(),
        "mem_total_gib": round(meminfo()["MemTotal"] / GIB, 1),
        "reserve_gib": reserve_gib,
        "sizes": [],
        "refused": [],
        "up": {},
        "down": {},
        "pss_gib": {},
    }
    return report


def _bring_up(adding: list[str], up: list[Record], state: Path, parallel: int) -> float:
    """These stations brought up (`parallel` at once), each added to `up` as it comes; the wall time it took."""
    lock = threading.Lock()

    def bring_up(name: str) -> Record:
        def say(text: str) -> None:
            print(f"fleet: {name}: {text}", file=sys.stderr, flush=True)

        record = realstation.up(name, state_dir=state, say=say, timeout=900)
        with lock:
            up.append(record)
        print(f"fleet: {name} up in {record.timings['up_s']:.0f} s", file=sys.stderr, flush=True)
        return record

    started = time.perf_counter()
    first = adding[:1] if not up else []  # the first station alone: it makes the nspawn runtime mount
    for name in first:
        bring_up(name)
    rest = adding[len(first) :]
    if rest:
        with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
            list(pool.map(bring_up, rest))
    return time.perf_counter() - started


def _worker_runs(
    inventory: Path, reports: Path, n: int, names: list[str], workers: list[int], repeats: int
) -> list[dict[str, Any]]:
    """`repeats` `golive run`s of the fleet at each worker count (at most n), and each count's medians."""
    rounds: dict[int, list[dict[str, Any]]] = {w: [] for w in sorted({min(w, n) for w in workers})}
    for i in range(repeats):  # the worker counts alternate, so that a noisy minute hits them all
        for count, done in rounds.items():
            load_before = [round(x, 2) for x in os.getloadavg()]
            run = check_fleet(inventory, reports / f"reports-w{count}", count, names)
            done.append(run | {"load_before": load_before})
            print(f"fleet: N={n} -n {count} round {i + 1}: {json.dumps(run)}", file=sys.stderr, flush=True)
    runs = [
        {
            "workers": count,
            "wall_s": statistics.median(r["wall_s"] for r in done),
            "checks_s": statistics.median(r["checks_s"] for r in done),
            "wall_per_station_s": round(statistics.median(r["wall_s"] for r in done) / n, 2),
            "walls_s": [r["wall_s"] for r in done],
            "load_before": [r["load_before"][0] for r in done],
            "checks": done[-1]["checks"],
            "per_station": done[-1]["per_station"],
        }
        for count, done in rounds.items()
    ]
    return runs


def _take_down(up: list[Record], state: Path, report: dict[str, Any], parallel: int) -> None:
    """Every station brought up, taken down (`parallel` at once), with the time each took and what it left behind."""
    left: dict[str, list[str]] = {}

    def take_down(r: Record) -> None:
        started = time.perf_counter()
        realstation.down(r.name, state)
        report["down"][r.name] = round(time.perf_counter() - started, 1)
        left[r.name] = realstation.leftovers(r)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        list(pool.map(take_down, up))
    report["down_wall_s"] = round(time.perf_counter() - started, 1)
    report["leftovers"] = {k: v for k, v in left.items() if v}


if __name__ == "__main__":
    sys.exit(main())
