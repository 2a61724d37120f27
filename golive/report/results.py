"""One record per check, the verdict, and results.json (the contract other tools read).

schema 2 (golive 0.2): outcomes are passed | failed | waived | not_applicable | not_checked (schema 1 had error and
skipped, which hid "not applicable" and "did not run" in one word); a failed check carries `finding`
{found, recipe, fix, sources}; `metrics` is a list, each metric with its station, check and bound (schema 1 keyed
them by name alone, so two stations overwrote each other); `verdict_rules` states the rules the verdict followed.
Added within schema 2 (optional for readers): a check's `waiver`, each station's `provenance` (what the checks
learned: served args, parsers, image, vLLM version) and `baseline` (the post-upgrade diff, golive.report.baseline).

Added within schema 3: `estimate` {expected_s, upper_s, parts, actual_s}: the time estimate said before the first
check ran (golive.run.estimate) and the run's actual time. The gate level's `sweep` row: `scaling_rounds` and
`per_user_rounds`, one ratio per ratio round (a 1-user batch and a gate-level batch back to back; the ratio gates read
their median), and `engine_samples`, [running, waiting] from vLLM's /metrics a poll during those batches.

schema 3 (golive 0.3): the concurrency sweep is its own list, `sweep`, one row per station and level
({station, concurrency, requests, failures, aggregate_tok_s, …}: golive.endpoint.levels.LevelResult's fields); the
schema 2 metrics `load_c<C>_<name>` (the sweep spelled as metric names) are gone from `metrics`. `metrics` keeps its
shape (golive.report.results.Metric).
"""

from __future__ import annotations

import datetime as dt
import json
import platform
import socket
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import pytest

from golive.core.secrets import hide_password
from golive.core.verdict import (
    FAILED,
    GO,
    INCOMPLETE,
    NO_GO,
    NOT_APPLICABLE,
    NOT_CHECKED,
    OUTCOMES,
    PASSED,
    RECIPES,
    VERDICT_RULES,
)
from golive.core.verdict import verdict as verdict_of
from golive.endpoint.levels import LevelResult
from golive.inventory.loader import LoadedInventory
from golive.report import keys

SCHEMA = 3


@dataclass
class CheckRecord:
    nodeid: str
    layer: str
    rule: str
    station: str
    outcome: str = PASSED
    message: str = ""
    duration_s: float = 0.0
    finding: dict | None = None
    note: str = ""
    waiver: dict | None = None


@dataclass(kw_only=True)
class Metric:
    """One measured value a check recorded (golive.run.fixtures.record_metric) and its bound: a row of `metrics`."""

    station: str = ""  # filled in by the Recorder, which knows the check's station
    check: str = ""
    name: str
    value: float
    unit: str
    floor: float | None = None
    ceiling: float | None = None
    passed: bool = True
    interval: list[float] | None = None  # 95 % [low, high] (golive.endpoint.uncertainty); None: a single reading
    requests: int | None = None  # how many requests the value and its interval stand on

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SweepPoint:
    """One station's one concurrency level: a row of `sweep`."""

    station: str
    level: LevelResult

    def as_dict(self) -> dict[str, Any]:
        return {"station": self.station, **self.level.as_dict()}


_LEVEL_FIELDS = {f.name for f in fields(LevelResult)}


def level_of(data: dict[str, Any]) -> LevelResult:
    """A LevelResult from its plain data (a report key, or a row of results.json `sweep`); unknown keys ignored."""
    return LevelResult(**{k: v for k, v in data.items() if k in _LEVEL_FIELDS})


def sweep_of(results: dict) -> list[SweepPoint]:
    """results.json's `sweep` list as typed rows ([] for a run without one, or a schema 2 file)."""
    return [SweepPoint(str(row.get("station", "")), level_of(row)) for row in results.get("sweep") or []]


@dataclass
class Recorder:
    inventory: LoadedInventory | None = None
    checks: dict[str, CheckRecord] = field(default_factory=dict)
    metrics: list[Metric] = field(default_factory=list)
    sweep: list[SweepPoint] = field(default_factory=list)  # per station, levels ascending (keys.SWEEP)
    provenance: dict[str, dict] = field(default_factory=dict)  # per station: what the checks learned (keys.PROVENANCE)
    started: str = field(default_factory=lambda: _now())
    baseline: dict | None = None  # the post-upgrade diff (golive.report.baseline), where the run had a baseline
    estimate: dict | None = None  # golive.run.estimate.Estimate.as_dict(), said before the first check ran
    started_at: float = field(default_factory=time.monotonic)

    def compare_with(self, previous: dict, tolerance_pct: float) -> None:
        """Add the post-upgrade gate: the diff against the last go-live, as data and as one check."""
        from golive.report import baseline

        result = baseline.diff(previous, self.as_dict(), tolerance_pct)
        self.baseline = result.as_dict()
        finding = baseline.gate_finding(result)
        self.checks[baseline.GATE_NODEID] = CheckRecord(
            nodeid=baseline.GATE_NODEID,
            layer="baseline",
            rule=baseline.GATE_RULE,
            station="",
            outcome=FAILED if finding else PASSED,
            message=f"Found: {finding['found']}\nRecipe: {finding['recipe']}\nDo: {finding['fix']}" if finding else "",
            finding=finding,
        )

    def add(self, report: pytest.TestReport) -> None:
        props: list[tuple[str, Any]] = list(report.user_properties)  # (key, value) pairs golive.report.keys names
        first: dict[str, Any] = dict(props)
        record = self.checks.get(report.nodeid)
        if record is None:
            record = self.checks[report.nodeid] = CheckRecord(
                nodeid=report.nodeid,
                layer=first.get(keys.LAYER, ""),
                rule=first.get(keys.RULE, ""),
                station=first.get(keys.STATION, ""),
            )
        record.duration_s = round(record.duration_s + report.duration, 3)
        classified = first.get(keys.OUTCOME)
        if classified is not None and not (report.when == "teardown" and record.outcome != PASSED):
            record.outcome, record.message = classified  # a teardown hiccup keeps the check's own outcome
        for name, value in props:
            if name == keys.FINDING:
                record.finding = value
            elif name == keys.NOTE:
                record.note = value
            elif name == keys.WAIVER:
                record.waiver = value
            elif name == keys.PROVENANCE and record.station:
                self.provenance.setdefault(record.station, {}).update(value)
            elif name == keys.METRIC and report.when == "call":
                self.metrics.append(replace(Metric(**value), station=record.station, check=record.nodeid))
            elif name == keys.SWEEP and report.when == "call":
                kept = [point for point in self.sweep if point.station != record.station]
                self.sweep = kept + [
                    SweepPoint(record.station, level_of(level))
                    for level in sorted(value, key=lambda level: level["concurrency"])
                ]

    def mark_unfinished(self, items: list[pytest.Item], stopped: pytest.Item | None, reason: str) -> None:
        """After an interrupt: the check that was stopped and every check not reached are not checked, saying why
        (the stopped one may have a record already, from a setup that passed)."""
        for item in items:
            record = self.checks.get(item.nodeid)
            if record is not None and item is not stopped:
                continue
            if record is None:
                props = keys.props(item)
                record = self.checks[item.nodeid] = CheckRecord(
                    nodeid=item.nodeid,
                    layer=props.get(keys.LAYER, ""),
                    rule=props.get(keys.RULE, ""),
                    station=props.get(keys.STATION, ""),
                )
            record.outcome = NOT_CHECKED
            record.message = f"not checked because {reason}" + (" while this check ran" if item is stopped else "")

    # --- reading the results ------------------------------------------------------------------------------------------

    def verdict(self, interrupted: bool = False) -> str:
        return verdict_of((r.outcome for r in self.checks.values()), interrupted)

    def of(self, *outcomes: str) -> list[CheckRecord]:
        return [r for r in self.checks.values() if r.outcome in outcomes]

    def by_layer_station(self) -> dict[tuple[str, str], Counter]:
        table: dict[tuple[str, str], Counter] = defaultdict(Counter)
        for record in self.checks.values():
            table[(record.layer or "other", record.station or "-")][record.outcome] += 1
        return dict(sorted(table.items()))

    def summary_lines(self, interrupted: bool = False) -> list[str]:
        verdict = self.verdict(interrupted)
        lines = [f"verdict: {_VERDICT_WORDS[verdict]}" + (" (run interrupted)" if interrupted else "")]
        for (layer, station), counts in self.by_layer_station().items():
            shown = ", ".join(f"{counts[o]} {o.replace('_', ' ')}" for o in OUTCOMES if counts[o])
            lines.append(f"  {layer:<9} {station:<20} {shown}")
        for outcome in (NOT_CHECKED, NOT_APPLICABLE):
            for reason, records in grouped_by_reason(self.of(outcome)).items():
                lines.append(f"  {outcome.replace('_', ' ')} ({len(records)}): {reason}")
        return lines

    def as_dict(self, interrupted: bool = False) -> dict:
        loaded = self.inventory
        profile, stations = {}, []
        if loaded is not None:
            profile = {
                "name": loaded.profile.profile.name,
                "sha256": loaded.profile.sha256,
                "files": [str(p) for p in loaded.profile.files],
            }
            stations = [
                {
                    "name": s.name,
                    "role": s.role,
                    "phase": s.phase,
                    "host": hide_password(loaded.host_spec(s)),
                    "endpoint": hide_password(s.endpoint),
                    "profile": loaded.profile_of(s).profile.name,
                    "profile_sha256": loaded.profile_of(s).sha256,
                    "provenance": self.provenance.get(s.name, {}),
                }
                for s in loaded.inventory.stations
            ]
        from golive import __version__

        return {
            "schema": SCHEMA,
            "verdict": self.verdict(interrupted),
            "verdict_rules": VERDICT_RULES,
            "profile": profile,
            "stations": stations,
            "provenance": {
                "golive": __version__,
                "python": platform.python_version(),
                "runner": socket.gethostname(),
                "inventory": str(loaded.path) if loaded else None,
                "waivers": str(loaded.waivers.path) if loaded and loaded.waivers else None,
                "started": self.started,
                "finished": _now(),
                "interrupted": interrupted,
            },
            "recipes": RECIPES,
            "checks": [asdict(r) for r in self.checks.values()],
            "metrics": [m.as_dict() for m in self.metrics],
            "sweep": [point.as_dict() for point in self.sweep],
            "baseline": self.baseline,
            "estimate": None
            if self.estimate is None
            else {**self.estimate, "actual_s": round(time.monotonic() - self.started_at, 1)},
        }

    def write(self, path: Path, interrupted: bool = False) -> dict:
        """Write results.json; returns what it wrote (the other records are written from the same facts)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        data = self.as_dict(interrupted)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(path)  # readers never see half a file
        return data


_VERDICT_WORDS = {GO: "GO", NO_GO: "NO-GO", INCOMPLETE: "INCOMPLETE"}


def verdict_word(verdict: str) -> str:
    return _VERDICT_WORDS[verdict]


def grouped_by_reason(records: list[CheckRecord]) -> dict[str, list[CheckRecord]]:
    groups: dict[str, list[CheckRecord]] = defaultdict(list)
    for record in records:
        groups[record.message.splitlines()[0] if record.message else "(no reason given)"].append(record)
    return dict(groups)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
