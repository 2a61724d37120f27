"""Benchmark: the host layer over ssh to loopback against the same layer without ssh, in one run on this machine.

    .venv/bin/python bench/ssh_host_layer.py [--repeats 3] [--port 8821] [--out bench/results/ssh-host-layer.json]

A real sshd on 127.0.0.1 (golive_testbed.sshd, its own config, keys and log) serves two pairs, run alternately:
  - the machine itself: `ssh://` to loopback against `local://` (issue 16 measured 24–26 s against 2.4 s),
  - the healthy GB300 station tree: `ssh://` into the tree (sshd's ForceCommand chroots every command into it) against
    `chroot://TREE`, so both runs see the same station and say GO; and, for the "before" column, the same ssh run
    with golive's multiplexing switched off (one ssh connection per command, as before issue 16).
Each run is `golive run INVENTORY -m host` as an operator starts it (wall time, Python start-up included), with the
sum of the checks' own durations beside it; sshd's log counts the ssh connections each run opened. Goal (issue 16):
ssh within 2× of local. Ratios in one run, not absolute promises: the machines are shared and noisy. Needs root.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from golive_testbed.sshd import available, loopback_sshd  # noqa: E402
from golive_testbed.targets import build_station_trees  # noqa: E402

PROFILE = REPO / "fixtures" / "profiles" / "gb300-site.yaml"


def inventory(work: Path, name: str, host: str, ssh_config: Path | None) -> Path:
    path = work / f"{name}.yaml"
    station = f'  - {{name: gb300-a, host: "{host}", phase: serving}}\n'
    if ssh_config is not None:  # per station, as issue 16 asks for
        station = f'  - {{name: gb300-a, host: "{host}", phase: serving, ssh_config: "{ssh_config}"}}\n'
    path.write_text(f"profile: {PROFILE}\nstations:\n{station}")
    return path


# golive as before issue 16 (no ControlPath: testinfra's ssh backend opens one connection per command), for the
# "before" column of the same run
WITHOUT_MUX = "import sys, golive.station.host as s, golive.cli as c; s.MUX_SCHEMES = (); sys.exit(c.main())"


def timed_run(inv: Path, out: Path, commands: Path, multiplexed: bool = True) -> dict:
    commands.unlink(missing_ok=True)
    golive = ["-m", "golive.cli"] if multiplexed else ["-c", WITHOUT_MUX]
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, *golive, "run", str(inv), "-o", str(out), "-m", "host", "-q", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        cwd=out.parent,
        env={**os.environ, "GOLIVE_COMMAND_LOG": str(commands)},
    )
    wall = time.perf_counter() - started
    results = json.loads((out / "results.json").read_text())
    return {
        "wall_s": round(wall, 2),
        "checks_s": round(sum(c["duration_s"] for c in results["checks"]), 2),
        "exit": result.returncode,
        "verdict": results["verdict"],
        "commands": len(commands.read_text().splitlines()) if commands.exists() else 0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--port", type=int, default=int(os.environ.get("GOLIVE_TEST_PORT", "8821")))
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "ssh-host-layer.json")
    args = parser.parse_args()
    reason = available()
    if reason:
        print(f"bench: {reason}", file=sys.stderr)
        return 2
    tree = build_station_trees()["gb300-healthy"]
    runs: dict[str, list[dict]] = {
        "local": [],
        "ssh-loopback": [],
        "chroot-tree": [],
        "ssh-tree": [],
        "ssh-tree-without-multiplexing": [],
    }
    connections: dict[str, list[int]] = {"ssh-loopback": [], "ssh-tree": [], "ssh-tree-without-multiplexing": []}
    with tempfile.TemporaryDirectory(prefix="golive-bench-ssh-") as tmp:
        work = Path(tmp)
        for pair, chrooted in (("loopback", None), ("tree", tree)):
            with loopback_sshd(args.port, tree=chrooted) as sshd:
                plain = "local" if chrooted is None else "chroot-tree"
                plain_inv = inventory(work, plain, "local://" if chrooted is None else f"chroot://{tree}", None)
                ssh_inv = inventory(work, f"ssh-{pair}", sshd.spec, sshd.ssh_config)
                for i in range(args.repeats):  # alternate, so that a noisy minute hits both
                    runs[plain].append(timed_run(plain_inv, work / f"out-{plain}-{i}", work / "commands.log"))
                    before = sshd.connections()
                    runs[f"ssh-{pair}"].append(timed_run(ssh_inv, work / f"out-ssh-{pair}-{i}", work / "commands.log"))
                    connections[f"ssh-{pair}"].append(sshd.connections() - before)
                    print(
                        f"bench: round {i + 1}/{args.repeats} {pair}: {runs[plain][-1]} vs "
                        f"{runs[f'ssh-{pair}'][-1]}, {connections[f'ssh-{pair}'][-1]} ssh connection(s)",
                        file=sys.stderr,
                    )
                    if chrooted is not None:  # before issue 16, on the station tree
                        before = sshd.connections()
                        runs["ssh-tree-without-multiplexing"].append(
                            timed_run(ssh_inv, work / f"out-ssh-nomux-{i}", work / "commands.log", multiplexed=False)
                        )
                        connections["ssh-tree-without-multiplexing"].append(sshd.connections() - before)
                        print(
                            f"bench: round {i + 1}/{args.repeats} without multiplexing: "
                            f"{runs['ssh-tree-without-multiplexing'][-1]}, "
                            f"{connections['ssh-tree-without-multiplexing'][-1]} ssh connection(s)",
                            file=sys.stderr,
                        )
    median = {
        name: {key: statistics.median(r[key] for r in rs) for key in ("wall_s", "checks_s")}
        for name, rs in runs.items()
    }
    ratios = {
        "ssh-loopback / local (wall)": round(median["ssh-loopback"]["wall_s"] / median["local"]["wall_s"], 2),
        "ssh-tree / chroot-tree (wall)": round(median["ssh-tree"]["wall_s"] / median["chroot-tree"]["wall_s"], 2),
        "ssh-loopback / local (checks)": round(median["ssh-loopback"]["checks_s"] / median["local"]["checks_s"], 2),
        "ssh-tree / chroot-tree (checks)": round(median["ssh-tree"]["checks_s"] / median["chroot-tree"]["checks_s"], 2),
        "ssh-tree without multiplexing / chroot-tree (wall)": round(
            median["ssh-tree-without-multiplexing"]["wall_s"] / median["chroot-tree"]["wall_s"], 2
        ),
    }
    report = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": platform.node(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "repeats": args.repeats,
        "median": median,
        "ratios": ratios,
        "ssh_connections_per_run": connections,
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"median": median, "ratios": ratios, "ssh_connections_per_run": connections}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
