"""The post-upgrade gate: a diff of two results.json files shows exactly what changed; an unannounced flag fails."""

import copy
import json

import pytest

from golive.checklist import Collected, CollectedChecks
from golive.report import baseline
from golive.report.baseline import gate_finding, load_baseline
from golive.report.model import Results, legacy_check_id

SERVED = {
    "served-model-name": "glm-5.3-flash",
    "max-model-len": "1M",
    "max-num-seqs": "256",
    "tool-call-parser": "glm47",
    "reasoning-parser": "glm45",
    "max-num-batched-tokens": "8192",
}


def results() -> dict:
    """A results.json as plain data, schema 3's shape (no check ids: read into the model, they are derived)."""
    return {
        "schema": 3,
        "verdict": "pass",
        "verdict_rules": "…",
        "profile": {"name": "glm-5.3-flash-gb300", "sha256": "ab" * 32},
        "stations": [
            {
                "name": "gb300-a",
                "role": "a",
                "phase": "serving",
                "host": "ssh://gb300-a",
                "endpoint": "http://gb300-a:8888/v1",
                "profile": "glm-5.3-flash-gb300",
                "profile_sha256": "ab" * 32,
                "provenance": {
                    "served_args": dict(SERVED),
                    "image": "vllm/vllm-openai@sha256:" + "a" * 64,
                    "image_digest": "sha256:" + "a" * 64,
                    "vllm_version": "0.32.0",
                    "pinned_flags": {"tool-call-parser": "glm47", "max-num-seqs": 256},
                },
            }
        ],
        "checks": [
            {
                "nodeid": f"suites/host/test_x.py::test_{n}[gb300-a]",
                "layer": "host",
                "rule": f"the {n} is the recipe's",
                "station": "gb300-a",
                "outcome": "passed",
            }
            for n in ("unit", "image", "flags")
        ],
        "metrics": [
            {"station": "gb300-a", "check": "c1", "name": "tokens_per_s", "value": 100.0, "unit": "tok/s"},
            {"station": "gb300-a", "check": "c2", "name": "ttft_p50", "value": 0.50, "unit": "s"},
        ],
    }


def diff(before: dict, after: dict, tolerance_pct: float = 10.0) -> baseline.BaselineDiff:
    """The gate between two results.json as they are read: through the model."""
    return baseline.diff(Results.model_validate(before), Results.model_validate(after), tolerance_pct)


def test_identical_results_have_no_changes():
    assert diff(results(), results()).changes == []


def test_exactly_one_check_one_metric_one_flag_appear_and_the_flag_fails_the_gate():
    before, after = results(), results()
    after["checks"][1]["outcome"] = "failed"
    after["metrics"][0]["value"] = 80.0  # -20 %: beyond the 10 % tolerance
    after["metrics"][1]["value"] = 0.53  # +6 %: within it, not listed
    after["stations"][0]["provenance"]["served_args"]["max-num-batched-tokens"] = "2048"  # not pinned: unannounced
    result = diff(before, after, tolerance_pct=10)
    shown = [(c.kind, c.name, c.before, c.after, c.failing) for c in result.changes]
    assert shown == [
        ("check", "host/test_x.py::test_image@gb300-a", "passed", "failed", False),
        ("metric", "tokens_per_s", 100.0, 80.0, False),
        ("flag", "--max-num-batched-tokens", "8192", "2048", True),
    ]
    assert result.changes[1].why == "moved 20.0% (tolerance 10%)"
    assert result.passed is False and result.model_dump(mode="json")["passed"] is False
    finding = gate_finding(result)
    assert finding is not None
    assert "gb300-a: flag --max-num-batched-tokens: '8192' → '2048' (unannounced" in finding.found
    assert "pin the new value in the site profile" in finding.fix


def test_a_flag_change_the_new_profile_pins_is_announced():
    before, after = results(), results()
    after["stations"][0]["provenance"]["served_args"]["max-num-seqs"] = "128"
    after["stations"][0]["provenance"]["pinned_flags"]["max-num-seqs"] = 128
    result = diff(before, after)
    assert [(c.name, c.failing) for c in result.changes] == [("--max-num-seqs", False)]
    assert gate_finding(result) is None


def test_parser_and_image_and_vllm_changes_are_listed():
    before, after = results(), copy.deepcopy(results())
    prov = after["stations"][0]["provenance"]
    prov["served_args"]["reasoning-parser"] = "deepseek_r1"  # not pinned by this profile: unannounced
    prov["image_digest"] = "sha256:" + "b" * 64
    prov["vllm_version"] = "0.33.0"
    result = diff(before, after)
    assert {(c.kind, c.name, c.failing) for c in result.changes} == {
        ("provenance", "image_digest", False),
        ("provenance", "vllm_version", False),
        ("flag", "--reasoning-parser", True),
    }


def test_tolerance_is_the_profiles():
    before, after = results(), results()
    after["metrics"][0]["value"] = 80.0
    assert diff(before, after, tolerance_pct=25).changes == []


def test_baseline_must_be_a_go_live_of_the_same_profile(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**results(), "profile": {"name": "glm-5.3-2x-station-tp2", "sha256": "cd" * 32}}))
    with pytest.raises(
        ValueError,
        match="the baseline is a go-live of profile 'glm-5.3-2x-station-tp2', this run "
        "checks 'glm-5.3-flash-gb300': compare go-lives of the same profile",
    ):
        load_baseline(other, "glm-5.3-flash-gb300")
    other.write_text(json.dumps({"schema": 1}))
    with pytest.raises(ValueError, match=r"not a golive results.json of schema 2, 3, 4 or 5 \(got schema 1\)"):
        load_baseline(other, "glm-5.3-flash-gb300")
    with pytest.raises(ValueError, match="baseline results file not found"):
        load_baseline(tmp_path / "missing.json", "glm-5.3-flash-gb300")
    assert load_baseline(_write(tmp_path, results()), "glm-5.3-flash-gb300").verdict == "pass"


def _write(tmp_path, data: dict):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    return path


def test_a_driver_upgrade_is_listed_as_a_provenance_change_not_a_failure():
    before, after = results(), results()
    for data, driver in ((before, "580.159.04"), (after, "590.10.01")):
        data["stations"][0]["provenance"].update(
            gpu="NVIDIA GB300", driver=driver, cuda="13.0", nccl_version="2.30.7+cuda13.0"
        )
    result = diff(before, after)
    assert [(c.kind, c.name, c.before, c.after, c.failing) for c in result.changes] == [
        ("provenance", "driver", "580.159.04", "590.10.01", False)
    ]
    assert gate_finding(result) is None


def test_battery_cases_that_flipped_are_listed_by_id_without_failing_the_gate():
    before, after = results(), copy.deepcopy(results())
    before["stations"][0]["provenance"] |= {
        "battery_failing.agent": [],
        "battery_failing.compliance": ["retention", "owner"],
    }
    after["stations"][0]["provenance"] |= {
        "battery_failing.agent": ["chained-calls"],
        "battery_failing.compliance": ["owner"],
    }
    result = diff(before, after)
    lines = {c.name: (c.kind, c.failing, c.why) for c in result.changes}
    assert lines == {
        "agent": ("battery", False, "now failing: chained-calls"),
        "compliance": ("battery", False, "now passing: retention"),
    }
    assert gate_finding(result) is None  # each battery's own check fails on its floor; the gate lists the flips


def test_a_schema_3_baseline_is_compared_with_a_schema_4_run_check_by_check(tmp_path):
    """The last go-live was written by schema 3 (no ids); this run's checks are named from another rootdir and say
    other things: the same checks still pair up by id, and only the one that flipped is listed."""
    previous = load_baseline(_write(tmp_path, results()), "glm-5.3-flash-gb300")
    assert previous.checks[0].id == "host/test_x.py::test_unit@gb300-a"  # derived on reading
    now = results() | {"schema": 4}
    for check in now["checks"]:
        check["nodeid"] = "golive/" + check["nodeid"]  # plain pytest --pyargs golive.suites
        check["message"] = "a message the last go-live never said"
    now["checks"][2] |= {"outcome": "failed", "id": "host/test_x.py::test_flags@gb300-a"}
    result = baseline.diff(previous, Results.model_validate(now))
    assert [(c.kind, c.name, c.before, c.after) for c in result.changes] == [
        ("check", "host/test_x.py::test_flags@gb300-a", "passed", "failed")
    ]
    now["checks"][2]["nodeid"] = "suites/host/test_y.py::test_flags[gb300-a]"  # another check: nothing to pair with
    now["checks"][2]["id"] = ""
    assert baseline.diff(previous, Results.model_validate(now)).changes == []


@pytest.mark.parametrize(
    "change, line",
    [
        (lambda r: r["checks"][0].update(outcome="ok"), "checks.0.outcome: Value error, 'ok' is none of passed, "),
        (lambda r: r["checks"][1].pop("nodeid"), "checks.1.nodeid: Field required"),
        (lambda r: r["metrics"][0].update(valu=1), "metrics.0.valu: Extra inputs are not permitted"),
        (lambda r: r.update(schema=6), "not a golive results.json of schema 2, 3, 4 or 5 (got schema 6)"),
        (lambda r: r.update(verdict="GO"), "verdict: Value error, 'GO' is none of pass, fail, incomplete"),
    ],
)
def test_a_results_file_the_model_refuses_is_one_line_naming_the_key(tmp_path, change, line):
    data = results()
    change(data)
    with pytest.raises(ValueError) as refused:
        load_baseline(_write(tmp_path, data), "glm-5.3-flash-gb300")
    message = str(refused.value)
    assert message.startswith(f"{tmp_path / 'results.json'}: ") and line in message and "\n" not in message, message


def _collected(*checks: tuple[str, str], layers: frozenset[str] = frozenset({"host"})) -> CollectedChecks:
    """This run's checks: (declared id, nodeid) on gb300-a."""
    return CollectedChecks(
        tuple(
            Collected(
                id=f"{declared}@gb300-a",
                declared=declared,
                legacy_id=legacy_check_id(nodeid, "gb300-a"),
                name=nodeid.split("::")[1].partition("[")[0],
                layer=declared.split(".")[0],
                station="gb300-a",
                rule="",
            )
            for declared, nodeid in checks
        ),
        layers,
    )


RENAMED = _collected(
    ("host.unit.runs_as_pinned", "suites/host/test_x.py::test_unit[gb300-a]"),
    ("host.image.pinned_by_digest", "suites/host/test_x.py::test_image[gb300-a]"),
    ("host.vllm.served_flags_match_profile", "suites/host/test_x.py::test_flags[gb300-a]"),
)


def _now(flipped: str = "") -> Results:
    """This run (schema 5): the checks of `RENAMED`, `flipped` failed."""
    data = results() | {"schema": 5}
    for check, case in zip(data["checks"], RENAMED.cases, strict=True):
        check["id"] = case.id
        check["outcome"] = "failed" if case.declared == flipped else "passed"
    return Results.model_validate(data)


@pytest.mark.parametrize("schema", [3, 4])
def test_an_older_baseline_pairs_with_the_declared_ids_through_the_ids_it_derived(tmp_path, schema):
    """A baseline of schema 3 or 4 names checks by file and function; this run by their declared ids: the same checks
    pair up (the derivation of the older id, done on this run's checks, renames the baseline's), the flip is listed
    under the declared id, and nothing is left unmatched."""
    data = results() | {"schema": schema}
    if schema == 4:
        for check in data["checks"]:
            check["id"] = legacy_check_id(check["nodeid"], check["station"])
    previous = load_baseline(_write(tmp_path, data), "glm-5.3-flash-gb300")
    assert previous.checks[0].id == "host/test_x.py::test_unit@gb300-a"  # as the file named it (or derived)
    renamed = baseline.in_these_ids(previous, RENAMED)
    assert [c.id for c in renamed.checks] == [c.id for c in RENAMED.cases]
    result = baseline.diff(renamed, _now(flipped="host.vllm.served_flags_match_profile"))
    assert [(c.kind, c.name, c.before, c.after) for c in result.changes] == [
        ("check", "host.vllm.served_flags_match_profile@gb300-a", "passed", "failed")
    ]
    assert baseline.unmatched(previous, RENAMED) == []


def test_a_schema_5_baseline_is_paired_by_its_ids_as_they_are(tmp_path):
    previous = load_baseline(_write(tmp_path, _now().model_dump(mode="json", by_alias=True)), "glm-5.3-flash-gb300")
    assert baseline.in_these_ids(previous, RENAMED) is previous
    result = baseline.diff(previous, _now(flipped="host.image.pinned_by_digest"))
    assert [(c.name, c.after) for c in result.changes] == [("host.image.pinned_by_digest@gb300-a", "failed")]


@pytest.mark.parametrize(
    "kept, layers, said",
    [
        (3, {"host"}, None),  # every check of the baseline is in this run
        (
            2,
            {"host"},
            "the baseline's check host.vllm.served_flags_match_profile@gb300-a matches no check of this run "
            "(renamed or removed, or the station is gone): not compared",
        ),
        (
            0,
            {"host"},
            "the baseline's 3 checks host.unit.runs_as_pinned@gb300-a, host.image.pinned_by_digest@gb300-a and "
            "host.vllm.served_flags_match_profile@gb300-a match no check of this run (renamed or removed, or the "
            "station is gone): not compared",
        ),
        (0, {"endpoint"}, None),  # `-m endpoint`: the host layer's suite was not collected, its checks are no news
    ],
    ids=["all-matched", "one-lost", "all-lost", "layer-not-collected"],
)
def test_a_baseline_check_that_matches_no_check_of_the_run_is_a_warning(tmp_path, kept, layers, said):
    previous = Results.model_validate(_now().model_dump(mode="json", by_alias=True))
    collected = CollectedChecks(RENAMED.cases[:kept], frozenset(layers))
    assert baseline.unmatched(previous, collected) == ([said] if said else [])


def test_a_long_list_of_unmatched_checks_is_cut_and_counted():
    data = _now().model_dump(mode="json", by_alias=True)
    data["checks"] = [dict(data["checks"][0], id=f"host.unit.gone_{n}@gb300-a") for n in range(8)]
    (line,) = baseline.unmatched(Results.model_validate(data), RENAMED)
    assert line.startswith("the baseline's 8 checks host.unit.gone_0@gb300-a, ") and " and 3 more match " in line
