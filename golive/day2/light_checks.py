"""The watcher's light checks: which checks a round runs, the `golive run` subprocess that runs them, and what its
results.json says per station, check by check (read through golive.report.model, matched by the checks' ids).

Why a subprocess: each round runs `golive run INVENTORY` with the light selection below, exactly as an operator would,
so the watcher's verdict per check is the checklist's own (same fixtures, same not-checked rules), and a round starts
from fresh facts (StationFacts and the endpoint client cache per session: a long-lived process would keep the first
round's answers).

Bounded load per station and round (docs/day-2.md): the checks that declare themselves light (golive.checklist: cost
read or light, which puts the `light` marker on them) of the layers the station can be watched on: the host layer's
reads, and the endpoint checks that send a handful of short requests. Never a check whose declared cost is more (the
sweep, the batteries, the needle, the over-long prompt, the tool_choice set, the long prompt beside streams); a
round's checks are cut at 80 % of the interval, at least 60 s (`--max-run-time`); checks it did not reach are left out
of that round's metrics.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from golive.checklist import LIGHT
from golive.core.verdict import NOT_APPLICABLE, PASSED, WAIVED
from golive.profile.inventory import Station
from golive.report.model import CheckRecord, Results, read_results

LIGHT_MARKERS = f"{LIGHT} and (host or endpoint)"  # what a round runs (a station: the layers it can be watched on)
ROUND_SHARE = 0.8  # a round's checks are cut at this share of the interval …
ROUND_FLOOR_S = 60  # … but never below this: on a loaded station the light checks take tens of seconds


def light_args(layers: set[str] | None = None) -> list[str]:
    markers = LIGHT_MARKERS
    if layers is not None and layers != {"host", "endpoint"}:  # only what some station can be watched on
        markers = f"{LIGHT} and ({' or '.join(sorted(layers)) or 'no_layer'})"
    return ["-m", markers]


def watched_layers(station: Station) -> set[str]:
    """What the watcher can see of a station: its host where the inventory gives one, its endpoint likewise. Checks
    of a layer the station has no address for are not news about the station (go-live already said so)."""
    return {layer for layer, where in (("host", station.host), ("endpoint", station.endpoint)) if where}


@dataclass(frozen=True)
class WatchedCheck:
    """One check's state in one round, under its id (golive.checklist.check_id)."""

    name: str  # the `check` label: the id less the station (`endpoint.context.needle_retrieved[depth50]`)
    layer: str
    passed: bool


def check_name(check: CheckRecord) -> str:
    """`host.unit.enabled_and_active@gb300-a` → `host.unit.enabled_and_active`; parameters stay: `…needle[depth50]`
    (`golive run INVENTORY -k NAME` runs that check)."""
    return check.id.removesuffix(f"@{check.station}") if check.station else check.id


def checks_from_results(results: Results) -> dict[str, dict[str, WatchedCheck]]:
    """A round's results → {station: {check id: WatchedCheck}}; not-applicable checks are left out, and so are checks
    the round's time bound stopped (`stopped_by`: no news about them, not a failure); anything else that did not
    pass (failed, not checked because the station did not answer) has passed False."""
    out: dict[str, dict[str, WatchedCheck]] = {}
    for check in results.checks:
        if check.outcome == NOT_APPLICABLE or check.stopped_by == "time_bound":
            continue
        out.setdefault(check.station, {})[check.id] = WatchedCheck(
            check_name(check), check.layer, check.outcome in (PASSED, WAIVED)
        )
    return out


def round_budget_s(every_s: float) -> float:
    return max(ROUND_FLOOR_S, every_s * ROUND_SHARE)


def run_light_checks(inventory: Path, every_s: float, layers: set[str] | None = None) -> tuple[int, Results | None]:
    """One `golive run` of the light selection in a subprocess: its exit code and results.json (None when it wrote
    none, or one this golive cannot read)."""
    with tempfile.TemporaryDirectory(prefix="golive-watch-") as out:
        command = [
            sys.executable,
            "-m",
            "golive.cli",
            "run",
            str(inventory),
            "-o",
            out,
            "-q",
            "--max-run-time",
            f"{round_budget_s(every_s):g}",
            *light_args(layers),
        ]
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=round_budget_s(every_s) + 60)
        except subprocess.TimeoutExpired:
            return 124, None
        path = Path(out) / "results.json"
        if not path.exists():
            return proc.returncode, None
        return proc.returncode, read_results(path)
