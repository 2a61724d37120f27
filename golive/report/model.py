"""results.json as one typed model: `Results`, written with `model_dump_json` and read back with
`Results.model_validate` (`read_results`: a file, or one line saying why not) by every reader
(the post-upgrade gate, `golive watch`, go-live.md, the HTML summary).

>>> results = Results.model_validate_json(Path("reports/results.json").read_text())
>>> [c.id for c in results.checks if c.outcome == "failed"]
['host.vllm.served_flags_match_profile@gb300-a']

`python -m golive.report.model --schema` prints the JSON schema (docs/ci.md shows it; a test keeps the two equal).

schema 5 (issue 39): a check's `id` is the id the check declares where it is written (golive.checklist:
`layer.area.rule`), its parameters and `@station` (golive.checklist.check_id): it no longer depends on the file or
the function the check lives in. `warnings` lists what the run could not match: a waiver, or a check of the baseline,
that matches no check of this run. The estimate says how many checks it left out (`checks`, `not_estimated`: their
station did not answer the probe) and how its probe read the decode speed (`round_trip_s`, `decode_from`). Every other
key and its shape is schema 4's. Files of schema 2, 3 and 4 read into this model: their checks keep (or get, for 2
and 3) the id schema 4 derived from nodeid and station (`legacy_check_id`); the post-upgrade gate pairs those with
this run's checks through that same derivation (golive.report.baseline.in_these_ids).

Added within schema 5 (issue 39): a check's `scoped_out` (not applicable because its whole layer is out of the
station's scope: the reports say these once per station and layer) and a metric's `judged` (false: a smoke floor of
the profile met, measured, not judged; its check is not applicable).

schema 4 (issue 26): every check carries `id`, stable across runs for the same check on one station (`legacy_check_id`):
the nodeid without what depends on where pytest ran (the path up to `suites/`: `golive run` names checks
`suites/host/…`, plain pytest `--pyargs golive.suites` names them from its rootdir) and without the station in its
parameters, then `@station`. The post-upgrade gate and `golive watch` match checks by it, never by nodeid or message
text. A check the run stopped before its end carries `stopped_by` (`time_bound`: `--max-run-time`; `interrupted`:
Ctrl-C or SIGTERM), so a reader tells "not reached" from "could not be checked" without reading the message. Every
other key and its shape is schema 3's (but `profile`, null rather than {} where a run had no inventory). Files of
schema 2 and 3 read into this model: their checks get the id derived from nodeid and station, `stopped_by` is null.

Added within schema 4: a finding's `flags` (the served vLLM flags a check found wrong) and `suspects` (those whose
wrong value would explain what it found); where they meet on one station, `same_cause` (a line) and
`same_cause_checks` (ids) tie the two findings as one root cause (golive.report.causes). `estimate` says how it
was made: `probes` (each station's endpoint timed before the first check: TTFT, decode and prefill tok/s, or why not),
`limit_s` (every budget added up: the hard stop) and each part's `limit_s`; `expected_s` is now this run as the probe
found the stations and `upper_s` the probe's speeds at a pessimistic factor (golive.run.estimate), no longer the
floors' time and the budgets' sum.

schema 3 (golive 0.3): the concurrency sweep is its own list, `sweep`, one row per station and level ({station,
concurrency, requests, failures, aggregate_tok_s, …}: golive.endpoint.levels.LevelResult's fields); the schema 2
metrics `load_c<C>_<name>` (the sweep spelled as metric names) are gone from `metrics`. `metrics` keeps its shape
(golive.report.model.Metric).

Added within schema 3: `estimate` {expected_s, upper_s, parts, actual_s}: the time estimate said before the first
check ran (golive.run.estimate) and the run's actual time. The gate level's `sweep` row: `scaling_rounds` and
`per_user_rounds`, one ratio per ratio round (a 1-user batch and a gate-level batch back to back; the ratio gates read
their median), and `engine_samples`, [running, waiting] from vLLM's /metrics a poll during those batches.

schema 2 (golive 0.2): outcomes are passed | failed | waived | not_applicable | not_checked (schema 1 had error and
skipped, which hid "not applicable" and "did not run" in one word); a failed check carries `finding` {found, recipe,
fix, sources}; `metrics` is a list, each metric with its station, check and bound (schema 1 keyed them by name alone,
so two stations overwrote each other); `verdict_rules` states the rules the verdict followed. Added within schema 2
(optional for readers): a check's `waiver`, each station's `provenance` (what the checks learned: served args,
parsers, image, vLLM version) and `baseline` (the post-upgrade diff, golive.report.baseline).
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from golive.checklist import parameters_of
from golive.core.verdict import EXIT_USAGE, GO, INCOMPLETE, NO_GO, OUTCOMES, counted
from golive.endpoint.levels import LevelResult, catches
from golive.profile.rules import duration

SCHEMA = 5
# 2 → 3 moved the sweep out of `metrics`; 3 → 4 added `id` and `stopped_by`; 4 → 5 made `id` the declared one
READABLE_SCHEMAS = (2, 3, 4, 5)


def _readable(schemas: tuple[int, ...] = READABLE_SCHEMAS) -> str:
    return ", ".join(str(n) for n in schemas[:-1]) + f" or {schemas[-1]}"


def _one_of(allowed: tuple[str, ...]) -> AfterValidator:
    def check(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"{value!r} is none of {', '.join(allowed)}")
        return value

    return AfterValidator(check)


# golive.core.verdict's words (plain str there, so checked here and listed in the JSON schema)
Outcome = Annotated[str, _one_of(OUTCOMES), Field(json_schema_extra={"enum": list(OUTCOMES)})]
Verdict = Annotated[str, _one_of((GO, NO_GO, INCOMPLETE)), Field(json_schema_extra={"enum": [GO, NO_GO, INCOMPLETE]})]
StoppedBy = Literal["time_bound", "interrupted"]


class Record(BaseModel):
    """A part of results.json: unknown keys are errors; Infinity and NaN written as json.dumps writes them."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")


def legacy_check_id(nodeid: str, station: str) -> str:
    """The id schema 4 gave a check (schemas 2 and 3 gave none: it is derived on reading), from where it was written:

    >>> legacy_check_id("suites/endpoint/test_long_context.py::test_needle[depth50-gb300-a]", "gb300-a")
    'endpoint/test_long_context.py::test_needle[depth50]@gb300-a'

    The path up to and including `suites/` is dropped (it depends on where pytest ran), the station leaves the
    parameters and comes last. A check without a station is its nodeid. Since schema 5 a check's id is the one it
    declares (golive.checklist.check_id); this one pairs an older file's checks with this run's."""
    path, sep, name = nodeid.partition("::")
    parts = path.split("/")
    if "suites" in parts:
        path = "/".join(parts[len(parts) - parts[::-1].index("suites") :])
    base = name.partition("[")[0]
    return f"{path}{sep}{base}{parameters_of(nodeid, station)}" + (f"@{station}" if station else "")


class Finding(Record):
    """A failed check as an operator instruction (golive.core.verdict.Finding)."""

    found: str
    recipe: str
    fix: str
    sources: list[str] = Field(default_factory=list, description="the recipes the three lines cite")
    flags: list[str] = Field(default_factory=list, description="the served vLLM flags the check found wrong")
    suspects: list[str] = Field(
        default_factory=list, description="the served vLLM flags whose wrong value would explain what it found"
    )
    same_cause: str = Field(
        default="", description="the failed checks of this station with the same root cause, and which (a line)"
    )
    same_cause_checks: list[str] = Field(
        default_factory=list, description="their ids: a flag one check found wrong explains what the others found"
    )


class WaiverRecord(Record):
    """The waiver that matched a failed check (golive.profile.waivers.Waiver.as_dict)."""

    id: str | None = None
    check: str | None = None
    rule: str | None = None
    station: str | None = None
    justification: str
    owner: str
    expires: dt.date
    name: str
    expired: bool


class CheckRecord(Record):
    """One check: a row of `checks`."""

    id: str = Field(
        default="",
        description="the check's declared id, its parameters and @station (golive.checklist.check_id): stable "
        "across runs for this check on this station; never empty",
    )
    nodeid: str
    layer: str
    rule: str = Field(description="the docstring's rule with the station's profile's numbers")
    station: str
    outcome: Outcome = "passed"
    message: str = ""
    duration_s: float = 0.0
    finding: Finding | None = None
    note: str = Field(default="", description="a passed check the operator must still read")
    waiver: WaiverRecord | None = None
    stopped_by: StoppedBy | None = Field(default=None, description="the run stopped before this check ended, and why")
    scoped_out: bool = Field(
        default=False,
        description="not applicable because the profile or the inventory takes this check's whole layer out of the "
        "station's scope (golive.run.scope.layer_scope): the reports say these once per station and layer ('43 out "
        "of scope'), not as a row each",
    )

    @model_validator(mode="after")
    def _has_its_id(self) -> CheckRecord:
        if not self.id:  # a check of a schema 2 or 3 file, or one that declares no id (not golive's checklist)
            self.id = legacy_check_id(self.nodeid, self.station)
        return self


class Metric(Record):
    """One measured value a check recorded (golive.run.fixtures.record_metric) and its bound: a row of `metrics`."""

    station: str = ""  # filled in by the Recorder, which knows the check's station
    check: str = ""
    name: str
    value: float
    unit: str
    floor: float | None = None
    ceiling: float | None = None
    passed: bool = True
    interval: list[float] | None = Field(default=None, description="95 % [low, high]; null: a single reading")
    requests: int | None = Field(default=None, description="how many requests the value and its interval stand on")
    rounds: int | None = Field(
        default=None, description="how many rounds the value is the median of; its interval is theirs (null: none)"
    )
    unstable: str | None = Field(
        default=None, description="where the rounds disagree (pyperf's check): their range and spread; else null"
    )
    detectable: float | None = Field(
        default=None,
        description="the smallest degradation this run would have caught with 95 %, from its own rounds' spread: a "
        "station this many times beyond the profile's number (slower, below a floor; above a ceiling) fails the gate "
        "in 95 % of runs (golive.endpoint.gates.Gate.detectable); null: no interval",
    )
    judged: bool = Field(
        default=True,
        description="false: the value met a smoke floor (the profile's load.smoke: a floor so far below what the "
        "station does that a broken station meets it too), so it was measured, not judged; its check is not applicable",
    )

    @property
    def catches(self) -> str:
        """ "would catch a station 1.3× slower than the floor" (empty without a detectable degradation)."""
        return catches(self.detectable, self.ceiling is not None and self.floor is None)

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class SweepRow(LevelResult):
    """One station's one concurrency level: a row of `sweep`, the load generator's own row
    (golive.endpoint.levels.LevelResult, declared once) and the station it was measured on."""

    station: str

    @classmethod
    def of(cls, station: str, level: LevelResult) -> SweepRow:
        return cls.model_validate({**level.as_dict(), "station": station})

    @property
    def level(self) -> LevelResult:
        return LevelResult.model_validate(self.model_dump(exclude={"station"}))


class Change(Record):
    """One thing that changed since the last go-live (golive.report.baseline)."""

    kind: Literal["check", "metric", "flag", "provenance", "battery"]
    station: str
    name: str = Field(description="check id, metric name, --flag, provenance field, or battery name")
    before: Any
    after: Any
    failing: bool = False
    why: str = ""

    def line(self) -> str:
        shown = f"{self.station}: {self.kind} {self.name}: {self.before!r} → {self.after!r}"
        return shown + (f" ({self.why})" if self.why else "")


class BaselineDiff(Record):
    """The post-upgrade diff against the last go-live's results.json: `baseline`."""

    baseline_profile: str
    tolerance_pct: float
    passed: bool = Field(default=True, description="no change fails the gate")
    changes: list[Change] = Field(default_factory=list)

    @property
    def failing(self) -> list[Change]:
        return [c for c in self.changes if c.failing]


class ProfileRecord(Record):
    name: str
    sha256: str
    files: list[str] = Field(default_factory=list)


class StationRecord(Record):
    name: str
    role: Literal["a", "b"]
    phase: Literal["serving", "pre-start"]
    host: str | None = Field(description="the host spec, password hidden")
    endpoint: str | None = Field(description="the endpoint URL, password hidden")
    profile: str
    profile_sha256: str
    provenance: dict[str, Any] = Field(
        default_factory=dict, description="what the checks learned: served args, parsers, image, vLLM version, …"
    )


class RunRecord(Record):
    """Who ran golive, where and when: `provenance`."""

    golive: str
    python: str
    runner: str
    inventory: str | None
    waivers: str | None
    started: str
    finished: str
    interrupted: bool


class EstimatePart(Record):
    expected_s: float
    upper_s: float
    limit_s: float | None = Field(default=None, description="the part's budgets; null in files before the probe")


class ProbeRecord(Record):
    """One station's endpoint timed before the first check (golive.run.probe.probe_endpoint)."""

    station: str
    ttft_s: float | None = Field(default=None, description="a short streamed answer's first token")
    round_trip_s: float | None = Field(
        default=None, description="a one-token answer's whole time: the path and the station's first token"
    )
    decode_tok_s: float | None = Field(default=None, description="one user's decode speed; null: not measured")
    decode_from: Literal["gaps", "whole answers"] | None = Field(
        default=None,
        description="gaps: the time between an answer's tokens; whole answers: its tokens came in too few reads to "
        "time their gaps, so its whole time less the one-token answer's",
    )
    prefill_tok_s: float | None = Field(default=None, description="a few thousand prompt tokens ÷ their first token")
    prefill_points: list[list[float]] = Field(
        default_factory=list, description="[prompt tokens, seconds to the first token] of each prefill prompt"
    )
    took_s: float = 0.0
    problem: str | None = Field(default=None, description="why it measured nothing (or not everything)")

    @property
    def failed(self) -> bool:
        """Nothing measured: the checks that wait on this station's speed are not estimated."""
        return self.decode_tok_s is None and self.problem is not None

    def said(self) -> str:
        """>>> ProbeRecord(station="a", ttft_s=0.05, decode_tok_s=312, took_s=1.2).said()
        'a decodes 312 tok/s, first token 0.05 s (probe 1.2 s)'"""
        if self.decode_tok_s is None:
            return f"{self.station}: {self.problem or 'not probed'}"
        shown = f"{self.station} decodes {self.decode_tok_s:,.0f} tok/s"
        if self.decode_from == "whole answers":
            shown += " (its answers arrived whole: their time less a one-token answer's)"
        shown += f", first token {self.ttft_s or 0:.2f} s"
        if self.prefill_tok_s is not None:
            shown += f", prefill {self.prefill_tok_s:,.0f} tok/s"
        return shown + f" (probe {self.took_s:.1f} s)"


class EstimateRecord(Record):
    """The time said before the first check ran (golive.run.estimate: what each figure means) and the run's actual
    time, from the start of the run to its last check."""

    expected_s: float = Field(description="this run as the probe found the stations (the floors where not probed)")
    upper_s: float = Field(description="the probe's speeds at a pessimistic factor, each part capped by its budget")
    limit_s: float | None = Field(default=None, description="every budget added up: golive's own hard stop")
    parts: dict[str, EstimatePart] = Field(default_factory=dict)
    probes: list[ProbeRecord] = Field(default_factory=list)
    actual_s: float | None = None
    checks: int | None = Field(default=None, description="the checks the estimate was made for; null in older files")
    not_estimated: int = Field(
        default=0,
        description="of them, those left out of every figure: their station did not answer the probe, so nothing "
        "says how long they wait",
    )

    def summary(self) -> str:
        """The one sentence every report shows (terminal, go-live.md, HTML): actual, then what was estimated."""
        took = f"took {duration(self.actual_s)}; " if self.actual_s is not None else ""
        limit = f"; golive's own limits stop a run by {duration(self.limit_s)}" if self.limit_s else ""
        if self.not_estimated:
            failed = "; ".join(p.said() for p in self.probes if p.failed)
            measured = "; ".join(p.said() for p in self.probes if not p.failed)
            others = (self.checks or self.not_estimated) - self.not_estimated
            head = f"{took}{not_estimated(self.not_estimated, self.checks)} ({failed})"
            if others:
                head += f"; {the_others(others)} estimated {duration(self.expected_s)}, at most "
                head += f"{duration(self.upper_s)}"
            return head + (f"; measured: {measured}" if measured else "")
        measured = "; ".join(p.said() for p in self.probes) or "nothing probed: the profile's floors"
        ratio = (
            f" (actual ÷ expected {self.actual_s / self.expected_s:.2f})" if self.actual_s and self.expected_s else ""
        )
        return (
            f"{took}estimated {duration(self.expected_s)}, at most {duration(self.upper_s)}{ratio}; "
            f"measured: {measured}{limit}"
        )


def the_others(n: int) -> str:
    """`the other check`, `the other 17 checks`."""
    return "the other check" if n == 1 else f"the other {counted(n, 'check')}"


def not_estimated(left_out: int, checks: int | None) -> str:
    """`3 of 57 checks not estimated`, `no check estimated` (all of them), `1 check not estimated`."""
    if checks is not None and left_out >= checks:
        return "no check estimated" if checks != 1 else "the check not estimated"
    of = f" of {checks:,}" if checks is not None else ""
    return f"{left_out:,}{of} {'check' if (checks or left_out) == 1 else 'checks'} not estimated"


class Results(Record):
    """results.json: the contract other tools read."""

    model_config = ConfigDict(populate_by_name=True, title="golive results.json")

    schema_version: int = Field(
        default=SCHEMA, alias="schema", description=f"{SCHEMA}; a reader also reads {_readable(READABLE_SCHEMAS[:-1])}"
    )
    verdict: Verdict
    verdict_rules: str = Field(description="the rules the verdict followed (golive.core.verdict.VERDICT_RULES)")
    profile: ProfileRecord | None = None
    stations: list[StationRecord] = Field(default_factory=list)
    provenance: RunRecord | None = None
    recipes: dict[str, str] = Field(default_factory=dict)
    checks: list[CheckRecord] = Field(default_factory=list)
    metrics: list[Metric] = Field(default_factory=list)
    sweep: list[SweepRow] = Field(default_factory=list)
    baseline: BaselineDiff | None = None
    estimate: EstimateRecord | None = None
    warnings: list[str] = Field(
        default_factory=list,
        description="what the run could not match: a waiver, or a check of the baseline, that matches no check id",
    )

    @model_validator(mode="before")
    @classmethod
    def _a_schema_golive_reads(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("schema", SCHEMA) not in READABLE_SCHEMAS:
            raise ValueError(f"schema {data.get('schema')!r}: this golive reads schema {_readable()}")
        return data

    def as_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2) + "\n"


RESULTS_MAX_BYTES = 64 * 2**20  # a results.json golive reads back (--baseline, watch): a large run's is a few MiB
RESULTS_MAX_DEPTH = 64


def read_results(path: str | Path) -> Results:
    """A results.json; ValueError with one line (`PATH: …`) when it is not one this golive reads."""
    from golive.endpoint.bounded import loads
    from golive.profile.yamlfile import ConfigError, read_bounded

    if not Path(path).exists():
        raise ValueError(f"{path}: results file not found")
    try:  # an input like any other: bounded in size (a regular file) and depth
        data = loads(read_bounded(Path(path), RESULTS_MAX_BYTES, "a results.json"), RESULTS_MAX_DEPTH, None)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable results.json ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") not in READABLE_SCHEMAS:
        got = f" (got schema {data.get('schema')!r})" if isinstance(data, dict) else ""
        raise ValueError(f"{path}: not a golive results.json of schema {_readable()}{got}")
    try:
        return Results.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "the file"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ValueError(
            f"{path}: not a golive results.json of schema {data['schema']}: {where}: {error['msg']}{more}"
        ) from None


def schema_text() -> str:
    """The JSON schema of results.json, as docs/ci.md shows it: JSON, indented, and what fits on a line on one."""
    return _compact(Results.model_json_schema(by_alias=True), "") + "\n"


def _compact(value: Any, indent: str, width: int = 116) -> str:
    flat = json.dumps(value, ensure_ascii=False)
    if len(indent) + len(flat) <= width or not isinstance(value, (dict, list)) or not value:
        return flat
    inner = indent + "  "
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k)}: {_compact(v, inner, width - len(k) - 4)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    return "[\n" + ",\n".join(f"{inner}{_compact(v, inner, width)}" for v in value) + f"\n{indent}]"


def main(argv: list[str]) -> int:
    if argv != ["--schema"]:
        print("usage: python -m golive.report.model --schema", file=sys.stderr)
        return EXIT_USAGE
    print(schema_text(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
