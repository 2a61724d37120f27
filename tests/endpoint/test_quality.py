"""Quality gates against the real reference station: tool_choice modes and site batteries, healthy and broken.

The session's station per variant (tests/conftest.py); the oracle faults (each breaks one tool_choice mode) are the
slow matrix.
"""

import pytest
from golive_run import golive_endpoint

QUALITY = "tool_choice or parallel or site_batteries or agent"
# variant -> (the checks it must fail, fragments of the failure message naming the failing cases)
FAULTS = {
    "fault-tool-under-none": (
        {"test_tool_choice_none_answers_in_text"},
        ["none (non-streamed): ", "none (streamed): "],
    ),
    # a named function is a demanded call too: the broken model ignores both (the grammar then forces junk or nothing)
    "fault-text-under-required": (
        {"test_tool_choice_required_forces_a_call", "test_named_tool_choice_calls_that_function"},
        ["required (non-streamed): ", "required (streamed): no call"],
    ),
    "fault-ignore-tool-result": (
        {"test_agent_battery_meets_floor"},
        ["single-call-then-answer (single, non-streamed): final answer answered 'Done."],
    ),
    "fault-site-answer-wrong": (
        {"test_site_batteries_meet_their_floors"},
        ["example-site 4/5 (80%) < floor 100%; failing: recall-from-prompt: answered '24-robrah-eulb'"],
    ),
}
FAILING_CASES = {
    "healthy": {"battery_failing.agent": [], "battery_failing.example-site": []},
    "fault-site-answer-wrong": {"battery_failing.agent": [], "battery_failing.example-site": ["recall-from-prompt"]},
}


@pytest.mark.parametrize(
    "reference", ["healthy", *(pytest.param(v, marks=pytest.mark.slow) for v in FAULTS)], indirect=True
)
def test_quality_checks_fail_exactly_what_the_station_breaks(reference, tmp_path, request):
    """Healthy: every tool_choice mode is honoured and the example site battery meets its floor (a metric in
    results.json), read from the session's whole-layer run (tests/conftest.py). A fault: exactly the mode it breaks
    fails, naming the failing runs."""
    if reference.variant == "healthy":
        run = request.getfixturevalue("healthy_endpoint_run")
    else:
        run = golive_endpoint(reference, tmp_path, "-k", QUALITY)
    output = run.output
    ran = {name for name, checks in run.by_name().items() if all(c["outcome"] != "not_checked" for c in checks)}
    if reference.variant in FAILING_CASES:  # failing case ids travel for the baseline gate (golive.report.baseline)
        [station] = run.results["stations"]
        assert {k: v for k, v in station["provenance"].items() if k.startswith("battery_failing.")} == FAILING_CASES[
            reference.variant
        ], station["provenance"]
    assert {
        "test_tool_choice_none_answers_in_text",
        "test_site_batteries_meet_their_floors",
        "test_agent_battery_meets_floor",
    } <= ran, output
    if reference.variant == "healthy":
        assert run.code == 0 and not run.failed(), output
        assert run.metric("site_battery.example-site") == 1.0, run.results["metrics"]
        assert run.metric("agent_battery_score") == 1.0, run.results["metrics"]
        battery = run.check("test_site_batteries_meet_their_floors")
        assert "temperature=0.0 (greedy)" in battery["note"], battery
        return
    expected, fragments = FAULTS[reference.variant]
    assert run.failed() == expected, output
    messages = " ".join(run.check(name)["message"] for name in expected)
    assert all(fragment in messages for fragment in fragments), messages


def test_site_battery_floor_above_the_score_fails_naming_cases(reference, tmp_path):
    """A site battery the inventory names, which the station cannot fully answer, floor 1.0: the check fails with
    score vs floor and the case (the profile's example battery, also run, passes)."""
    (tmp_path / "domain.yaml").write_text(
        "name: domain\nfloor: 1.0\ncases:\n"
        "  - {id: product, prompt: 'What is 17 * 23?', expect: {numeric: 391}}\n"
        "  - {id: policy, prompt: 'What is 6 * 7?', expect: {numeric: 43}}\n"
    )
    run = golive_endpoint(
        reference, tmp_path, "-k", "site_batteries", inventory_extra="site_batteries: [domain.yaml]\n"
    )
    assert run.failed() == {"test_site_batteries_meet_their_floors"}, run.output
    check = run.check("test_site_batteries_meet_their_floors")
    assert "domain 1/2 (50%) < floor 100%; failing: policy: answered '42', expected 43" in check["message"]
    assert "example-site" not in check["message"]
    assert run.metric("site_battery.domain") == 0.5 and run.metric("site_battery.example-site") == 1.0
