"""The post-upgrade gate: what changed between the last go-live's results.json and this one (pure functions).

Four kinds of change: checks whose outcome flipped, metrics that moved more than the tolerance, battery cases that
flipped (each battery's failing case ids), and provenance the stations reported (served args, parsers, image, vLLM
version, GPU, driver, CUDA, NCCL, checkpoint hashes). A served flag or parser that changed without the new profile
pinning its new value is unannounced: that fails the gate. Everything else is listed for the operator to read.

Checks pair by id (golive.checklist.check_id). A baseline written before schema 5 names its checks by the ids schema 4
derived from file and function (golive.report.model.legacy_check_id): they are renamed to this run's ids through that
same derivation (`in_these_ids`). A check of the baseline that matches no check of this run (renamed, removed, or its
station gone) is not compared: a warning says which (`unmatched`), never silence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from golive.checklist import CollectedChecks
from golive.core.verdict import counted
from golive.report.model import BaselineDiff, Change, Finding, Results, read_results

__all__ = ["BaselineDiff", "Change", "diff", "gate_finding", "in_these_ids", "load_baseline", "unmatched"]

SHOWN = 5  # the unmatched checks a warning names; the rest are counted

# compared as they are (listed, not failing: an upgrade changes them on purpose); served args flag by flag
PROVENANCE_FIELDS = (
    "image",
    "image_digest",
    "vllm_version",
    "gpu",
    "driver",
    "cuda",
    "nccl_version",
    "checkpoint_manifest_sha256",
    "checkpoint_config_sha256",
    "checkpoint_index_sha256",
)


def diff(previous: Results, current: Results, tolerance_pct: float = 10.0) -> BaselineDiff:
    changes = [
        *flipped_checks(previous, current),
        *moved_metrics(previous, current, tolerance_pct),
        *provenance_changes(previous, current),
        *flipped_cases(previous, current),
    ]
    return BaselineDiff(
        baseline_profile=previous.profile.name if previous.profile else "",
        tolerance_pct=tolerance_pct,
        passed=not any(c.failing for c in changes),
        changes=changes,
    )


def in_these_ids(previous: Results, collected: CollectedChecks) -> Results:
    """The baseline with its checks under this run's ids: a file of schema 5 or later as it is; an older one's checks
    renamed from the id schema 4 derived (file and function) to the id the same check declares now."""
    if previous.schema_version >= 5:
        return previous
    renamed = {c.legacy_id: c.id for c in collected.cases}
    checks = [c.model_copy(update={"id": renamed.get(c.id, c.id)}) for c in previous.checks]
    return previous.model_copy(update={"checks": checks})


def unmatched(previous: Results, collected: CollectedChecks) -> list[str]:
    """One line naming the checks of the baseline that match no check this run collected (of the layers it
    collected: `-m host` says nothing of the endpoint's), [] when every one matches."""
    known = {c.id for c in collected.cases}
    lost = [c.id for c in in_these_ids(previous, collected).checks if c.layer in collected.layers and c.id not in known]
    if not lost:
        return []
    if len(lost) == 1:
        which = f"check {lost[0]} matches"
    else:
        named = lost[:SHOWN] + ([f"{len(lost) - SHOWN} more"] if len(lost) > SHOWN else [])
        which = f"{counted(len(lost), 'check')} {', '.join(named[:-1])} and {named[-1]} match"
    return [f"the baseline's {which} no check of this run (renamed or removed, or the station is gone): not compared"]


def flipped_checks(previous: Results, current: Results) -> list[Change]:
    """Checks whose outcome changed, matched by their stable id (golive.report.model.check_id)."""
    before = {c.id: c for c in previous.checks}
    changes = []
    for check in current.checks:
        old = before.get(check.id)
        if old is not None and old.outcome != check.outcome:
            changes.append(
                Change(kind="check", station=check.station, name=check.id, before=old.outcome, after=check.outcome)
            )
    return changes


def moved_metrics(previous: Results, current: Results, tolerance_pct: float) -> list[Change]:
    """Metrics that moved beyond the tolerance, matched by station, the check's id and name."""
    before_ids = {c.nodeid: c.id for c in previous.checks}
    now_ids = {c.nodeid: c.id for c in current.checks}
    before = {(m.station, before_ids.get(m.check, m.check), m.name): m for m in previous.metrics}
    changes = []
    for metric in current.metrics:
        old = before.get((metric.station, now_ids.get(metric.check, metric.check), metric.name))
        if old is None:
            continue
        moved = _moved_pct(old.value, metric.value)
        if moved > tolerance_pct:
            changes.append(
                Change(
                    kind="metric",
                    station=metric.station,
                    name=metric.name,
                    before=old.value,
                    after=metric.value,
                    why=f"moved {moved:.1f}% (tolerance {tolerance_pct:g}%)",
                )
            )
    return changes


def _moved_pct(before: float, after: float) -> float:
    if before == after:
        return 0.0
    return abs(after - before) / abs(before) * 100 if before else float("inf")


def provenance_changes(previous: Results, current: Results) -> list[Change]:
    before = {s.name: s.provenance for s in previous.stations}
    changes = []
    for station in current.stations:
        name, now = station.name, station.provenance
        old = before.get(name)
        if not old:
            continue
        for fact in PROVENANCE_FIELDS:
            if fact in old and fact in now and old[fact] != now[fact]:
                changes.append(Change(kind="provenance", station=name, name=fact, before=old[fact], after=now[fact]))
        if "served_args" in old and "served_args" in now:
            changes += _flag_changes(name, old["served_args"], now["served_args"], now.get("pinned_flags") or {})
    return changes


BATTERY_FAILING = "battery_failing."  # provenance key prefix: a battery's failing case ids, sorted


def flipped_cases(previous: Results, current: Results) -> list[Change]:
    """Battery cases that flipped between the two go-lives (listed: the battery's own check fails on its floor)."""
    before = {s.name: s.provenance for s in previous.stations}
    changes = []
    for station in current.stations:
        name, now = station.name, station.provenance
        old = before.get(name) or {}
        for fact in sorted(k for k in now if k.startswith(BATTERY_FAILING) and k in old):
            broke = sorted(set(now[fact]) - set(old[fact]))
            fixed = sorted(set(old[fact]) - set(now[fact]))
            if broke or fixed:
                why = "; ".join(
                    part
                    for part in (
                        f"now failing: {', '.join(broke)}" if broke else "",
                        f"now passing: {', '.join(fixed)}" if fixed else "",
                    )
                    if part
                )
                changes.append(
                    Change(
                        kind="battery",
                        station=name,
                        name=fact.removeprefix(BATTERY_FAILING),
                        before=old[fact],
                        after=now[fact],
                        why=why,
                    )
                )
    return changes


def _flag_changes(station: str, old: dict[str, Any], now: dict[str, Any], pinned: dict[str, Any]) -> list[Change]:
    changes = []
    for flag in sorted(set(old) | set(now)):
        if old.get(flag) == now.get(flag):
            continue
        announced = flag in pinned and _same_value(pinned[flag], now.get(flag))
        if announced:
            why = "the new profile pins this value"
        elif flag in pinned:
            why = f"unannounced: the profile pins {pinned[flag]!r}, not this value"
        else:
            why = "unannounced: the profile does not pin this flag; pin it in the site profile if the change is meant"
        changes.append(
            Change(
                kind="flag",
                station=station,
                name=f"--{flag}",
                before=old.get(flag),
                after=now.get(flag),
                failing=not announced,
                why=why,
            )
        )
    return changes


def _same_value(pinned: object, served: object) -> bool:
    if isinstance(pinned, bool) or served is None or isinstance(served, bool):
        return pinned == served or (pinned is False and served is None)
    as_number = _as_float(pinned)
    return str(pinned) == str(served) or (as_number is not None and as_number == _as_float(served))


def _as_float(value: object) -> float | None:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


GATE_NODEID = "golive::post-upgrade-gate"
GATE_RULE = "Nothing changed unannounced since the last go-live of this profile (--golive-baseline)"


def load_baseline(path: str | Path, profile_name: str) -> Results:
    """The previous results.json (schema 2, 3 or 4: golive.report.model); ValueError with one line when it cannot be
    the baseline of this run."""
    try:
        previous = read_results(path)
    except ValueError as exc:
        raise ValueError(str(exc).replace(": results file not found", ": baseline results file not found")) from None
    was = previous.profile.name if previous.profile else None
    if was != profile_name:
        raise ValueError(
            f"{path}: the baseline is a go-live of profile '{was}', this run checks '{profile_name}': "
            f"compare go-lives of the same profile"
        )
    return previous


def gate_finding(result: BaselineDiff) -> Finding | None:
    """The gate's failure as a finding (found / recipe / do), None when nothing changed unannounced."""
    failing = result.failing
    if not failing:
        return None
    return Finding(
        found="; ".join(c.line() for c in failing),
        recipe="after an upgrade, served flags and parsers are the ones the profile pins; a change nobody "
        "announced is how tool calls break silently",
        fix="revert the flag in the service's ExecStart, or, if the change is meant, pin the new value in the "
        "site profile and re-run the go-live",
    )
