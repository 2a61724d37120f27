"""The post-upgrade gate: what changed between the last go-live's results.json and this one (pure functions).

Four kinds of change: checks whose outcome flipped, metrics that moved more than the tolerance, battery cases that
flipped (each battery's failing case ids), and provenance the stations reported (served args, parsers, image, vLLM
version, GPU, driver, CUDA, NCCL, checkpoint hashes). A served flag or parser that changed without the new profile
pinning its new value is unannounced: that fails the gate. Everything else is listed for the operator to read.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

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


@dataclass
class Change:
    kind: str  # check | metric | flag | provenance | battery
    station: str
    name: str  # nodeid, metric name, --flag, provenance field, or battery name
    before: object
    after: object
    failing: bool = False
    why: str = ""

    def line(self) -> str:
        shown = f"{self.station}: {self.kind} {self.name}: {self.before!r} → {self.after!r}"
        return shown + (f" ({self.why})" if self.why else "")


@dataclass
class BaselineDiff:
    baseline_profile: str
    tolerance_pct: float
    changes: list[Change] = field(default_factory=list)

    @property
    def failing(self) -> list[Change]:
        return [c for c in self.changes if c.failing]

    def as_dict(self) -> dict:
        return {
            "baseline_profile": self.baseline_profile,
            "tolerance_pct": self.tolerance_pct,
            "passed": not self.failing,
            "changes": [asdict(c) for c in self.changes],
        }


def diff(previous: dict, current: dict, tolerance_pct: float = 10.0) -> BaselineDiff:
    result = BaselineDiff(baseline_profile=(previous.get("profile") or {}).get("name", ""), tolerance_pct=tolerance_pct)
    result.changes += flipped_checks(previous, current)
    result.changes += moved_metrics(previous, current, tolerance_pct)
    result.changes += provenance_changes(previous, current)
    result.changes += flipped_cases(previous, current)
    return result


def flipped_checks(previous: dict, current: dict) -> list[Change]:
    before = {c["nodeid"]: c for c in previous.get("checks", [])}
    changes = []
    for check in current.get("checks", []):
        old = before.get(check["nodeid"])
        if old is not None and old["outcome"] != check["outcome"]:
            changes.append(Change("check", check.get("station", ""), check["nodeid"], old["outcome"], check["outcome"]))
    return changes


def moved_metrics(previous: dict, current: dict, tolerance_pct: float) -> list[Change]:
    def key(m: dict) -> tuple:
        return m.get("station", ""), m.get("check", ""), m["name"]

    before = {key(m): m for m in previous.get("metrics", [])}
    changes = []
    for metric in current.get("metrics", []):
        old = before.get(key(metric))
        if old is None or not isinstance(old.get("value"), (int, float)):
            continue
        moved = _moved_pct(old["value"], metric["value"])
        if moved > tolerance_pct:
            changes.append(
                Change(
                    "metric",
                    metric.get("station", ""),
                    metric["name"],
                    old["value"],
                    metric["value"],
                    why=f"moved {moved:.1f}% (tolerance {tolerance_pct:g}%)",
                )
            )
    return changes


def _moved_pct(before: float, after: float) -> float:
    if before == after:
        return 0.0
    return abs(after - before) / abs(before) * 100 if before else float("inf")


def provenance_changes(previous: dict, current: dict) -> list[Change]:
    before = {s["name"]: s.get("provenance") or {} for s in previous.get("stations", [])}
    changes = []
    for station in current.get("stations", []):
        name, now = station["name"], station.get("provenance") or {}
        old = before.get(name)
        if not old:
            continue
        for fact in PROVENANCE_FIELDS:
            if fact in old and fact in now and old[fact] != now[fact]:
                changes.append(Change("provenance", name, fact, old[fact], now[fact]))
        if "served_args" in old and "served_args" in now:
            changes += _flag_changes(name, old["served_args"], now["served_args"], now.get("pinned_flags") or {})
    return changes


BATTERY_FAILING = "battery_failing."  # provenance key prefix: a battery's failing case ids, sorted


def flipped_cases(previous: dict, current: dict) -> list[Change]:
    """Battery cases that flipped between the two go-lives (listed: the battery's own check fails on its floor)."""
    before = {s["name"]: s.get("provenance") or {} for s in previous.get("stations", [])}
    changes = []
    for station in current.get("stations", []):
        name, now = station["name"], station.get("provenance") or {}
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
                    Change("battery", name, fact.removeprefix(BATTERY_FAILING), old[fact], now[fact], why=why)
                )
    return changes


def _flag_changes(station: str, old: dict, now: dict, pinned: dict) -> list[Change]:
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
            Change("flag", station, f"--{flag}", old.get(flag), now.get(flag), failing=not announced, why=why)
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


def load_baseline(path: str | Path, profile_name: str) -> dict[str, Any]:
    """The previous results.json; ValueError with one line when it cannot be the baseline of this run."""
    import json
    from pathlib import Path

    try:
        previous = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ValueError(f"{path}: baseline results file not found") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable results.json ({exc})") from None
    if not isinstance(previous, dict) or previous.get("schema") not in (2, 3):  # 2 → 3 kept `metrics` as it was
        raise ValueError(
            f"{path}: not a golive results.json of schema 2 or 3 (got schema {previous.get('schema')!r})"
            if isinstance(previous, dict)
            else f"{path}: not a golive results.json"
        )
    was = (previous.get("profile") or {}).get("name")
    if was != profile_name:
        raise ValueError(
            f"{path}: the baseline is a go-live of profile '{was}', this run checks '{profile_name}': "
            f"compare go-lives of the same profile"
        )
    return previous


def gate_finding(result: BaselineDiff) -> dict | None:
    """The gate's failure as a finding (found / recipe / do), None when nothing changed unannounced."""
    failing = result.failing
    if not failing:
        return None
    return {
        "found": "; ".join(c.line() for c in failing),
        "recipe": "after an upgrade, served flags and parsers are the ones the profile pins; a change nobody "
        "announced is how tool calls break silently",
        "fix": "revert the flag in the service's ExecStart, or, if the change is meant, pin the new value in the "
        "site profile and re-run the go-live",
        "sources": [],
    }
