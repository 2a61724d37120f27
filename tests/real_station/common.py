"""What the real station's tests share: the station's name, its timings, and how a run's checks are read."""

from __future__ import annotations

from typing import Any

from golive_run import Run, check_name

NAME = "golive-selftest"
TIMINGS: dict[str, float] = {}  # printed by test_down_leaves_nothing: what the station cost this session
DEMO: dict[str, Any] = {}  # the session's `golive demo` that brought the station up: its process ("proc") and "out"


def outcomes(run: Run, layer: str) -> dict[str, dict]:
    return {check_name(c): c for c in run.checks if c["layer"] == layer}


def assert_go(run: Run, layers: tuple[str, ...]) -> None:
    assert run.code == 0 and run.results.get("verdict") == "pass", run.output[-6000:]
    for layer in layers:
        checks = outcomes(run, layer)
        assert checks, f"no {layer} check ran:\n{run.output[-3000:]}"
        odd = {name: c["outcome"] for name, c in checks.items() if c["outcome"] not in ("passed", "not_applicable")}
        assert not odd, odd
        unexplained = [name for name, c in checks.items() if c["outcome"] == "not_applicable" and not c["message"]]
        assert not unexplained, unexplained
