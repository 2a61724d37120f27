"""One record per check, the verdict, and results.json (schema 1, the contract other tools read)."""
from __future__ import annotations

import datetime as dt
import json
import platform
import socket
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

SCHEMA = 1
OUTCOMES = ("passed", "failed", "error", "skipped", "waived")


@dataclass
class CheckRecord:
    nodeid: str
    layer: str
    rule: str
    station: str
    outcome: str = "passed"
    message: str = ""
    duration_s: float = 0.0


@dataclass
class Recorder:
    inventory: object | None = None  # LoadedInventory
    checks: dict[str, CheckRecord] = field(default_factory=dict)
    metrics: dict[str, dict] = field(default_factory=dict)
    started: str = field(default_factory=lambda: _now())

    def add(self, report) -> None:
        props = dict(report.user_properties)
        record = self.checks.get(report.nodeid)
        if record is None:
            record = self.checks[report.nodeid] = CheckRecord(
                nodeid=report.nodeid, layer=props.get("golive_layer", ""), rule=props.get("golive_rule", ""),
                station=props.get("golive_station", ""))
        record.duration_s = round(record.duration_s + report.duration, 3)
        if (report.when == "call" or report.outcome != "passed") and not (
                report.when == "teardown" and record.outcome != "passed"):  # a teardown hiccup keeps the outcome
            record.outcome, record.message = _outcome(report)
        for name, value in report.user_properties:
            if name == "golive_metric":
                self.metrics[value["name"]] = {k: v for k, v in value.items() if k != "name"}
            elif name == "golive_finding" and record.outcome == "passed":
                record.message = value  # passed, but the operator must read this (e.g. an open endpoint)

    # --- reading the results -------------------------------------------------------------------------------------------

    def verdict(self, interrupted: bool = False) -> str:
        outcomes = Counter(r.outcome for r in self.checks.values())
        if outcomes["failed"] or outcomes["error"]:
            return "fail"
        if interrupted or not (outcomes["passed"] + outcomes["waived"]):
            return "incomplete"
        return "pass"

    def by_layer_station(self) -> dict[tuple[str, str], Counter]:
        table: dict[tuple[str, str], Counter] = defaultdict(Counter)
        for record in self.checks.values():
            table[(record.layer or "other", record.station or "-")][record.outcome] += 1
        return dict(sorted(table.items()))

    def summary_lines(self, interrupted: bool = False) -> list[str]:
        lines = [f"verdict: {self.verdict(interrupted).upper()}"]
        for (layer, station), counts in self.by_layer_station().items():
            shown = ", ".join(f"{counts[o]} {o}" for o in OUTCOMES if counts[o])
            lines.append(f"  {layer:<9} {station:<20} {shown}")
        return lines

    def as_dict(self, interrupted: bool = False) -> dict:
        loaded = self.inventory
        profile, stations = {}, []
        if loaded is not None:
            profile = {"name": loaded.profile.profile.name, "sha256": loaded.profile.sha256,
                       "files": [str(p) for p in loaded.profile.files]}
            stations = [{"name": s.name, "role": s.role, "phase": s.phase, "host": loaded.host_spec(s),
                         "endpoint": s.endpoint, "profile": loaded.profile_of(s).profile.name}
                        for s in loaded.inventory.stations]
        from golive import __version__

        return {
            "schema": SCHEMA,
            "verdict": self.verdict(interrupted),
            "profile": profile,
            "stations": stations,
            "provenance": {
                "golive": __version__, "python": platform.python_version(), "runner": socket.gethostname(),
                "inventory": str(loaded.path) if loaded else None, "started": self.started, "finished": _now(),
                "interrupted": interrupted,
            },
            "checks": [asdict(r) for r in self.checks.values()],
            "metrics": self.metrics,
        }

    def write(self, path: Path, interrupted: bool = False) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.as_dict(interrupted), indent=2) + "\n")
        tmp.replace(path)  # readers never see half a file


def _outcome(report) -> tuple[str, str]:
    if report.outcome == "skipped":
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        return "skipped", reason.removeprefix("Skipped: ")
    if report.outcome == "failed":
        return ("failed" if report.when == "call" else "error"), report.longreprtext.strip()
    return "passed", ""


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
