"""Waivers and the post-upgrade gate, end to end: `golive run` on station trees (host layer, chroot backend).

The tool-parser-wrong tree serves --tool-call-parser hermes; the healthy tree serves the recipe's glm47. Runs are cut
to the served-flags check (-k) so each takes seconds.
"""

import html
import json
from pathlib import Path

import pytest
from e2e import needs_chroot
from golive_run import golive_run

from golive.report.model import legacy_check_id

REPO = Path(__file__).resolve().parents[2]
INVENTORIES = REPO / "fixtures/inventories"
FLAGS = "test_served_flags_match_profile"

pytestmark = needs_chroot


@pytest.fixture(scope="module", autouse=True)
def trees():
    from golive_testbed.targets import build_station_trees

    return build_station_trees()


def golive_flags(inventory: str, out: Path, *args: str) -> tuple[int, dict, str]:
    run = golive_run(INVENTORIES / inventory, out, "-m", "host", "-q", "-k", FLAGS, *args)
    return run.code, run.results, run.output


def the_check(results: dict) -> dict:
    (check,) = [c for c in results["checks"] if FLAGS in c["nodeid"]]
    return check


def test_active_waiver_waives_the_failure_and_the_run_passes(tmp_path):
    code, results, output = golive_flags("waiver-accepted.yaml", tmp_path)
    assert code == 0, output
    check = the_check(results)
    assert check["outcome"] == "waived" and results["verdict"] == "pass"
    assert "--tool-call-parser: hermes, recipe glm47" in check["finding"]["found"]  # the original finding is kept
    assert check["waiver"]["name"] == "hermes-until-parser-fix" and check["waiver"]["owner"] == "platform-oncall"
    assert check["message"].startswith("Waived by 'hermes-until-parser-fix' (owner platform-oncall, until 2099-12-31)")
    junit = (tmp_path / "junit.xml").read_text()
    assert 'failures="0"' in junit and 'skipped="1"' in junit and "hermes-until-parser-fix" in junit
    record = (tmp_path / "go-live.md").read_text()
    assert "# Go-live record: GO" in record and "## Waived (1)" in record and "platform-oncall" in record


def test_expired_waiver_fails_the_run_naming_the_waiver(tmp_path):
    code, results, output = golive_flags("waiver-expired.yaml", tmp_path)
    assert code == 1, output
    check = the_check(results)
    assert check["outcome"] == "failed" and check["waiver"]["expired"] is True
    expected = "Waiver 'hermes-until-parser-fix' (owner platform-oncall) expired on 2020-01-31"
    assert check["message"].startswith(expected) and expected in output
    assert "--tool-call-parser: hermes, recipe glm47" in check["message"]


def test_typo_in_waiver_file_is_a_config_error_with_file_and_line(tmp_path):
    code, results, output = golive_flags("waiver-typo.yaml", tmp_path)
    assert code == 4 and results == {}
    assert "typo.yaml:7: unknown key 'waivers.0.expiry'; did you mean 'expires'?" in output
    assert "Traceback" not in output


def test_baseline_gate_fails_on_an_unannounced_parser_change(tmp_path):
    code, before, output = golive_flags("gb300-healthy.yaml", tmp_path / "before")
    assert code == 0, output
    served = before["stations"][0]["provenance"]["served_args"]
    assert served["tool-call-parser"] == "glm47" and before["baseline"] is None
    code, after, output = golive_flags(
        "tool-parser-wrong.yaml", tmp_path / "after", "--baseline", str(tmp_path / "before/results.json")
    )
    assert code == 1, output
    changes = [(c["kind"], c["name"], c["before"], c["after"], c["failing"]) for c in after["baseline"]["changes"]]
    assert changes == [
        ("check", the_check(after)["id"], "passed", "failed", False),  # matched by the stable id
        ("flag", "--tool-call-parser", "glm47", "hermes", True),
    ]
    (gate,) = [c for c in after["checks"] if c["nodeid"] == "golive::post-upgrade-gate"]
    assert gate["outcome"] == "failed"
    assert "--tool-call-parser: 'glm47' → 'hermes' (unannounced: the profile pins 'glm47'" in gate["message"]
    assert "## Since the last go-live (tolerance 10%)" in (tmp_path / "after/go-live.md").read_text()


def test_a_waiver_that_matches_no_check_is_a_warning_in_the_run_and_every_report(tmp_path):
    """A waiver written for golive 0.2 (a function name, not the check's id) waives nothing: the failure stands, and
    the run says so as it starts, naming the id it most likely means; results.json, go-live.md and go-live.html keep
    the same line."""
    waivers = tmp_path / "waivers.yaml"
    waivers.write_text(
        (REPO / "fixtures/waivers/hermes-accepted.yaml")
        .read_text()
        .replace("check: host.vllm.served_flags_match_profile", "check: test_served_flags_match_profile")
    )
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        f"profile: {REPO}/fixtures/profiles/gb300-site.yaml\nwaivers: {waivers}\nstations:\n"
        f"  - {{name: gb300-a, host: 'chroot://{REPO}/fixtures/stations/.built/tool-parser-wrong'}}\n"
    )
    run = golive_run(inventory, tmp_path / "out", "-m", "host", "-q", "-k", FLAGS)
    assert run.code == 1 and the_check(run.results)["outcome"] == "failed", run.output
    said = (
        "waiver 'hermes-until-parser-fix': check 'test_served_flags_match_profile' matches no check id; did you mean "
        f"host.vllm.served_flags_match_profile? (every id: docs/ci.md, Check ids) ({waivers})"
    )
    assert run.results["warnings"] == [said]
    assert run.output.count(f"golive: warning: {said}") == 1 and f"  warning: {said}" in run.output, run.output
    assert run.output.index("golive: warning:") < run.output.index("golive verdict"), run.output
    assert "## Warnings (1)" in (tmp_path / "out/go-live.md").read_text()
    page = html.unescape((tmp_path / "out/go-live.html").read_text())
    assert "Warnings (1)</h3>" in page and f"<li>{said}</li>" in page


def test_a_schema_4_baseline_pairs_by_the_ids_it_derived_and_a_lost_check_is_a_warning(tmp_path):
    """The last go-live was written by golive 0.2 (schema 4: ids from file and function): its checks pair with this
    run's declared ids, the flip is listed under the declared id; a check of it this run has no more is a warning."""
    code, before, output = golive_flags("gb300-healthy.yaml", tmp_path / "before")
    assert code == 0, output
    older = dict(before, schema=4)
    older.pop("warnings")
    older["checks"] = [dict(c, id=legacy_check_id(c["nodeid"], c["station"])) for c in before["checks"]]
    older["checks"].append(dict(older["checks"][0], id="host/test_container.py::test_gone@gb300-a"))
    for estimate_key in ("checks", "not_estimated"):
        older["estimate"].pop(estimate_key)
    (tmp_path / "older.json").write_text(json.dumps(older))
    code, after, output = golive_flags(
        "tool-parser-wrong.yaml", tmp_path / "after", "--baseline", str(tmp_path / "older.json")
    )
    assert code == 1, output
    checks = [(c["name"], c["before"], c["after"]) for c in after["baseline"]["changes"] if c["kind"] == "check"]
    assert checks == [("host.vllm.served_flags_match_profile@gb300-a", "passed", "failed")]
    said = (
        "the baseline's check host/test_container.py::test_gone@gb300-a matches no check of this run (renamed or "
        "removed, or the station is gone): not compared"
    )
    assert after["warnings"] == [said] and f"golive: warning: {said}" in output, output
