"""The run's records as they arrive (the `Recorder`), the verdict, and the counts every report shows alike.

The Recorder collects a run's checks, metrics and sweep, and `Recorder.results` hands them over as
golive.report.model.Results, the one model every report is written from and every reader reads back (results.json,
the contract other tools read: schema 5 and what changed since 4, golive.report.model). `layer_rows` is the table of
layers and stations the terminal, go-live.html and go-live.md show, a layer out of a station's scope one line.
"""

from __future__ import annotations

import datetime as dt
import platform
import socket
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from golive.checklist import CollectedChecks
from golive.core.secrets import hide_password
from golive.core.verdict import (
    FAILED,
    GO,
    INCOMPLETE,
    NO_GO,
    NOT_APPLICABLE,
    NOT_CHECKED,
    OUT_OF_SCOPE,
    OUTCOMES,
    PASSED,
    RECIPES,
    VERDICT_RULES,
    WAIVED,
    counted,
)
from golive.core.verdict import verdict as verdict_of
from golive.endpoint.levels import LevelResult
from golive.report import keys
from golive.report.causes import tie
from golive.report.model import (
    SCHEMA,
    BaselineDiff,
    CheckRecord,
    EstimateRecord,
    Finding,
    Metric,
    ProfileRecord,
    Results,
    RunRecord,
    StationRecord,
    StoppedBy,
    SweepRow,
    WaiverRecord,
)
from golive.site.loader import LoadedInventory

__all__ = ["SCHEMA", "CheckRecord", "Metric", "Recorder", "Results", "SweepPoint", "sweep_of", "verdict_word"]


@dataclass
class SweepPoint:
    """One station's one concurrency level, typed for the tables and the plot (a row of `sweep`: model.SweepRow)."""

    station: str
    level: LevelResult

    def row(self) -> SweepRow:
        return SweepRow.of(self.station, self.level)


def level_of(data: dict[str, Any]) -> LevelResult:
    """A LevelResult from its plain data (the report key keys.SWEEP), checked by the model's row."""
    return SweepRow.model_validate({"station": "", **data}).level


def sweep_of(results: Results) -> list[SweepPoint]:
    """results.json's `sweep` as typed points ([] for a run without one, or a schema 2 file)."""
    return [SweepPoint(row.station, row.level) for row in results.sweep]


@dataclass
class Recorder:
    inventory: LoadedInventory | None = None
    checks: dict[str, CheckRecord] = field(default_factory=dict)
    metrics: list[Metric] = field(default_factory=list)
    sweep: list[SweepPoint] = field(default_factory=list)  # per station, levels ascending (keys.SWEEP)
    provenance: dict[str, dict] = field(default_factory=dict)  # per station: what the checks learned (keys.PROVENANCE)
    started: str = field(default_factory=lambda: _now())
    baseline: BaselineDiff | None = None  # the post-upgrade diff (golive.report.baseline), where the run had one
    estimate: dict[str, Any] | None = None  # golive.run.estimate.Estimate.as_dict(), said before the first check ran
    started_at: float = field(default_factory=time.monotonic)
    finished_at: float | None = None  # the checks are over (stop_clock): every report shows the same actual time
    collected: CollectedChecks | None = None  # every check the run collected (`match`)
    warnings: list[str] = field(default_factory=list)  # a waiver or a baseline check that matches no check id

    def match(self, collected: CollectedChecks, previous: Results | None) -> None:
        """What this run collected (golive.run.session.collected), before -m/-k chose: each waiver, and each check of
        the baseline `previous`, that matches none of it is a warning (said as the run starts, and in every report)."""
        from golive.report import baseline

        self.collected = collected
        loaded = self.inventory
        self.warnings = []
        if loaded is not None and loaded.waivers is not None:
            self.warnings += loaded.waivers.unmatched(collected, {s.name for s in loaded.inventory.stations})
        if previous is not None:
            self.warnings += baseline.unmatched(previous, collected)

    def stop_clock(self) -> None:
        """The run's checks are over: its actual time, the same in every report written after."""
        if self.finished_at is None:
            self.finished_at = time.monotonic()

    def compare_with(self, previous: Results, tolerance_pct: float) -> None:
        """Add the post-upgrade gate: the diff against the last go-live, as data and as one check."""
        from golive.report import baseline

        if self.collected is not None:
            previous = baseline.in_these_ids(previous, self.collected)
        self.baseline = result = baseline.diff(previous, self.results(), tolerance_pct)
        finding = baseline.gate_finding(result)
        self.checks[baseline.GATE_NODEID] = CheckRecord(
            nodeid=baseline.GATE_NODEID,
            layer="baseline",
            rule=baseline.GATE_RULE,
            station="",
            outcome=FAILED if finding else PASSED,
            message=f"Found: {finding.found}\nRecipe: {finding.recipe}\nDo: {finding.fix}" if finding else "",
            finding=finding,
        )

    def add(self, report: pytest.TestReport) -> None:
        props: list[tuple[str, Any]] = list(report.user_properties)  # (key, value) pairs golive.report.keys names
        first: dict[str, Any] = dict(props)
        record = self.checks.get(report.nodeid)
        if record is None:
            record = self.checks[report.nodeid] = CheckRecord(
                id=first.get(keys.ID, ""),
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
                record.finding = Finding.model_validate(value)
            elif name == keys.SCOPED_OUT:
                record.scoped_out = bool(value)
            elif name == keys.NOTE:
                record.note = value
            elif name == keys.WAIVER:
                record.waiver = WaiverRecord.model_validate(value)
            elif name == keys.PROVENANCE and record.station:
                self.provenance.setdefault(record.station, {}).update(value)
            elif name == keys.METRIC and report.when == "call":
                self.metrics.append(Metric.model_validate({**value, "station": record.station, "check": record.nodeid}))
            elif name == keys.SWEEP and report.when == "call":
                kept = [point for point in self.sweep if point.station != record.station]
                self.sweep = kept + [
                    SweepPoint(record.station, level_of(level))
                    for level in sorted(value, key=lambda level: level["concurrency"])
                ]

    def mark_unfinished(
        self, items: list[pytest.Item], stopped: pytest.Item | None, reason: str, stopped_by: StoppedBy = "interrupted"
    ) -> None:
        """After an interrupt: the check that was stopped and every check not reached are not checked, saying why
        (the stopped one may have a record already, from a setup that passed); `stopped_by` says it as data."""
        for item in items:
            record = self.checks.get(item.nodeid)
            if record is not None and item is not stopped:
                continue
            if record is None:
                props = keys.props(item)
                record = self.checks[item.nodeid] = CheckRecord(
                    id=props.get(keys.ID, ""),
                    nodeid=item.nodeid,
                    layer=props.get(keys.LAYER, ""),
                    rule=props.get(keys.RULE, ""),
                    station=props.get(keys.STATION, ""),
                )
            record.outcome = NOT_CHECKED
            record.message = f"not checked because {reason}" + (" while this check ran" if item is stopped else "")
            record.stopped_by = stopped_by

    # --- reading the results ------------------------------------------------------------------------------------------

    def verdict(self, interrupted: bool = False) -> str:
        return verdict_of((r.outcome for r in self.checks.values()), interrupted)

    def of(self, *outcomes: str) -> list[CheckRecord]:
        return [r for r in self.checks.values() if r.outcome in outcomes]

    def summary_lines(self, interrupted: bool = False) -> list[str]:
        verdict = self.verdict(interrupted)
        lines = [f"verdict: {_VERDICT_WORDS[verdict]}" + (" (run interrupted)" if interrupted else "")]
        lines.append(f"  {basis(list(self.checks.values()), self.metrics)}")
        for row in layer_rows(list(self.checks.values())):
            shown = [f"{row.counts[o]} {o.replace('_', ' ')}" for o in OUTCOMES if row.counts[o]]
            lines.append(
                f"  {row.layer:<9} {row.station:<20} {', '.join(shown + [row.scoped_out] * bool(row.scoped_out))}"
            )
        for outcome in (NOT_CHECKED, NOT_APPLICABLE):
            for reason, records in grouped_by_reason(judged(self.of(outcome))).items():
                lines.append(f"  {outcome.replace('_', ' ')} ({len(records)}): {reason}")
        lines += [f"  {cause.line()}" for cause in tie([c.model_copy(deep=True) for c in self.checks.values()])]
        return lines + [f"  warning: {warning}" for warning in self.warnings]

    def results(self, interrupted: bool = False) -> Results:
        """The run as results.json's model (golive.report.model.Results)."""
        loaded = self.inventory
        profile, stations = None, []
        if loaded is not None:
            profile = ProfileRecord(
                name=loaded.profile.profile.name,
                sha256=loaded.profile.sha256,
                files=[str(p) for p in loaded.profile.files],
            )
            stations = [
                StationRecord(
                    name=s.name,
                    role=s.role,
                    phase=s.phase,
                    host=hide_password(loaded.host_spec(s)),
                    endpoint=hide_password(s.endpoint),
                    profile=loaded.profile_of(s).profile.name,
                    profile_sha256=loaded.profile_of(s).sha256,
                    provenance=self.provenance.get(s.name, {}),
                )
                for s in loaded.inventory.stations
            ]
        from golive import __version__

        return Results(
            verdict=self.verdict(interrupted),
            verdict_rules=VERDICT_RULES,
            profile=profile,
            stations=stations,
            provenance=RunRecord(
                golive=__version__,
                python=platform.python_version(),
                runner=socket.gethostname(),
                inventory=str(loaded.path) if loaded else None,
                waivers=str(loaded.waivers.path) if loaded and loaded.waivers else None,
                started=self.started,
                finished=_now(),
                interrupted=interrupted,
            ),
            recipes=RECIPES,
            checks=tied([record.model_copy(deep=True) for record in self.checks.values()]),
            metrics=[metric.model_copy() for metric in self.metrics],
            sweep=[point.row() for point in self.sweep],
            baseline=self.baseline,
            estimate=None
            if self.estimate is None
            else EstimateRecord.model_validate(
                {**self.estimate, "actual_s": round((self.finished_at or time.monotonic()) - self.started_at, 1)}
            ),
            warnings=list(self.warnings),
        )

    def as_dict(self, interrupted: bool = False) -> dict[str, Any]:
        """results.json as plain data (what a JSON reader sees)."""
        return self.results(interrupted).model_dump(mode="json", by_alias=True)

    def write(self, path: Path, interrupted: bool = False) -> Results:
        """Write results.json; returns what it wrote (the other records are written from the same facts)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        results = self.results(interrupted)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(results.as_json())
        tmp.replace(path)  # readers never see half a file
        return results


_VERDICT_WORDS = {GO: "GO", NO_GO: "NO-GO", INCOMPLETE: "INCOMPLETE"}


def verdict_word(verdict: str) -> str:
    return _VERDICT_WORDS[verdict]


@dataclass(frozen=True)
class ScopedOut:
    """The checks of one layer that one station's scope leaves out (CheckRecord.scoped_out), said as one line."""

    layer: str
    station: str
    count: int
    reason: str

    def said(self) -> str:
        """ "43 out of scope (the inventory scopes station gb300-tree to layers: [host])": every report's words."""
        return f"{self.count} {OUT_OF_SCOPE} ({self.reason})"


def judged(records: list[CheckRecord]) -> list[CheckRecord]:
    """The records a report lists one by one: all but those out of their station's scope (`scoped_out`)."""
    return [record for record in records if not record.scoped_out]


def by_layer_station(records: list[CheckRecord]) -> dict[tuple[str, str], Counter]:
    """Each layer and station's outcomes counted, the checks out of the station's scope left to `scoped_out`."""
    table: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for record in judged(records):
        table[(record.layer or "other", record.station or "-")][record.outcome] += 1
    return dict(sorted(table.items()))


def scoped_out(records: list[CheckRecord]) -> list[ScopedOut]:
    """One ScopedOut per layer and station whose checks the scope left out, with the scope's reason."""
    groups: dict[tuple[str, str], list[CheckRecord]] = defaultdict(list)
    for record in records:
        if record.scoped_out:
            groups[(record.layer or "other", record.station or "-")].append(record)
    return [
        ScopedOut(layer, station, len(group), group[0].message.splitlines()[0] if group[0].message else "")
        for (layer, station), group in sorted(groups.items())
    ]


@dataclass(frozen=True)
class LayerRow:
    """A row of the reports' layers-and-stations table: its outcomes counted, and what its scope left out, said."""

    layer: str
    station: str
    counts: Counter
    scoped_out: str  # "" or ScopedOut.said()


def layer_rows(records: list[CheckRecord]) -> list[LayerRow]:
    """The terminal's, go-live.html's and go-live.md's table of layers and stations, from the same records."""
    table = by_layer_station(records)
    scoped = {(s.layer, s.station): s.said() for s in scoped_out(records)}
    rows = [
        LayerRow(layer, station, table.get((layer, station), Counter()), scoped.get((layer, station), ""))
        for layer, station in sorted({*table, *scoped})
    ]
    return sorted(rows, key=lambda row: not row.counts)  # what was judged first, what the scope left out after


def basis(records: list[CheckRecord], metrics: list[Metric]) -> str:
    """What a verdict stands on, in one line every report shows under it: the checks judged (and on how many
    stations), then what was not: not applicable (smoke floors among them: measured, not judged), out of scope, not
    checked. "judged: 69 passed on 2 stations; not judged: 16 not applicable (7 of them smoke floors, measured), …"."""
    counts = Counter(record.outcome for record in judged(records))
    stations = {r.station for r in records if r.outcome in (PASSED, FAILED, WAIVED) and r.station}
    judged_part = ", ".join(f"{counts[o]:,} {o}" for o in (PASSED, FAILED, WAIVED) if counts[o]) or "no check"
    if stations:
        judged_part += f" on {counted(len(stations), 'station')}"
    smoke = sum(not metric.judged for metric in metrics)
    scoped = sum(record.scoped_out for record in records)
    left = [
        f"{counts[NOT_APPLICABLE]:,} not applicable" * bool(counts[NOT_APPLICABLE])
        + f" ({smoke:,} of them smoke floors, measured)" * bool(smoke),
        f"{scoped:,} {OUT_OF_SCOPE}" * bool(scoped),
        f"{counts[NOT_CHECKED]:,} not checked" * bool(counts[NOT_CHECKED]),
    ]
    said = "; ".join(part for part in left if part)
    return f"judged: {judged_part}" + (f"; not judged: {said}" if said else "")


def grouped_by_reason(records: list[CheckRecord]) -> dict[str, list[CheckRecord]]:
    groups: dict[str, list[CheckRecord]] = defaultdict(list)
    for record in records:
        groups[record.message.splitlines()[0] if record.message else "(no reason given)"].append(record)
    return dict(groups)


def tied(checks: list[CheckRecord]) -> list[CheckRecord]:
    """The checks with one root cause tied in their findings (golive.report.causes)."""
    tie(checks)
    return checks


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
