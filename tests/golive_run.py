"""Run golive in a test as the operator runs it (`python -m golive.cli`), and read back what it wrote.

The one way tests start golive: `golive(...)` for any command, `golive_run(inventory, out, ...)` for `golive run`, which
returns a `Run`: the process result, results.json and the checks by name.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def golive(*args: str | Path, cwd: Path = REPO, env: dict[str, str] | None = None,
           timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`golive ARGS` in a clean environment (no PYTEST_* of this run leaks into the inner one) plus `env`."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")} | (env or {})
    return subprocess.run([sys.executable, "-m", "golive.cli", *map(str, args)], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=timeout)


def check_name(check: dict) -> str:
    """test_x[station] → test_x"""
    return check["nodeid"].split("::")[-1].split("[")[0]


@dataclass
class Run:
    """One finished `golive run`: its process, its output folder and results.json ({} when it wrote none)."""

    proc: subprocess.CompletedProcess[str]
    out: Path
    results: dict

    @property
    def code(self) -> int:
        return self.proc.returncode

    @property
    def output(self) -> str:
        return self.proc.stdout + self.proc.stderr

    @property
    def checks(self) -> list[dict]:
        return self.results.get("checks", [])

    def by_name(self) -> dict[str, list[dict]]:
        """check name → its results (one per station)."""
        found: dict[str, list[dict]] = {}
        for check in self.checks:
            found.setdefault(check_name(check), []).append(check)
        return found

    def check(self, name: str, station: str | None = None) -> dict:
        """The one result of check `name` (on `station`); an AssertionError naming what ran if not exactly one."""
        matches = [c for c in self.checks if check_name(c) == name and station in (None, c["station"])]
        assert len(matches) == 1, f"{len(matches)} results for {name} on {station or 'any station'}:\n{self.output}"
        return matches[0]

    def failed(self) -> set[str]:
        """Names of the checks that failed on any station."""
        return {check_name(c) for c in self.checks if c["outcome"] == "failed"}

    def metric(self, name: str) -> float:
        [value] = [m["value"] for m in self.results["metrics"] if m["name"] == name]
        return value


def golive_run(inventory: Path, out: Path, *args: str, cwd: Path = REPO, env: dict[str, str] | None = None,
               timeout: float = 300) -> Run:
    """`golive run INVENTORY -o OUT ARGS`."""
    proc = golive("run", inventory, "-o", out, *args, cwd=cwd, env=env, timeout=timeout)
    path = out / "results.json"
    return Run(proc, out, json.loads(path.read_text()) if path.exists() else {})
