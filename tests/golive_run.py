"""Run golive in a test as the operator runs it (`python -m golive.cli`), and read back what it wrote.

The one way tests start golive: `golive(...)` for any command, `golive_run(inventory, out, ...)` for `golive run`, which
returns a `Run` (the process result, results.json and the checks by name), `golive_started(...)` for a run a test
interrupts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _command(args: tuple[str | Path, ...]) -> list[str]:
    return [sys.executable, "-m", "golive.cli", *map(str, args)]


def _environment(env: dict[str, str] | None) -> dict[str, str]:
    """This environment without PYTEST_* (this run's variables must not steer the inner one), plus `env`."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")} | (env or {})


def golive(
    *args: str | Path, cwd: Path = REPO, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """`golive ARGS`, to the end."""
    return subprocess.run(
        _command(args), cwd=cwd, env=_environment(env), capture_output=True, text=True, timeout=timeout
    )


def golive_started(*args: str | Path, cwd: Path = REPO, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`golive ARGS` left running (a test that signals it), stdout and stderr in one pipe. SIGINT at its default in
    golive, as from a terminal: a test run started in the background without job control inherits it ignored."""
    return subprocess.Popen(
        _command(args),
        cwd=cwd,
        env=_environment(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


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


def golive_run(
    inventory: Path, out: Path, *args: str, cwd: Path = REPO, env: dict[str, str] | None = None, timeout: float = 300
) -> Run:
    """`golive run INVENTORY -o OUT ARGS`."""
    proc = golive("run", inventory, "-o", out, *args, cwd=cwd, env=env, timeout=timeout)
    path = out / "results.json"
    return Run(proc, out, json.loads(path.read_text()) if path.exists() else {})


KEY_ENV = "GOLIVE_TEST_REFERENCE_KEY"


def golive_endpoint(
    station, out: Path, *args: str, with_key: bool = False, profile: str = "reference-cpu", inventory_extra: str = ""
) -> Run:
    """`golive run -m endpoint` on one reference station (a ReferenceStation), its key given when `with_key`."""
    inventory = out / "inventory.yaml"
    key_line = f", api_key_env: {KEY_ENV}" if with_key else ""
    inventory.write_text(
        f"profile: {profile}\nstations:\n"
        f"  - {{name: reference, endpoint: '{station.base_url}'{key_line}}}\n{inventory_extra}"
    )
    env = {KEY_ENV: station.api_key or "not-needed"} if with_key else None
    return golive_run(inventory, out, "-m", "endpoint", "-q", *args, env=env, timeout=900)
