"""Measured numbers read the same in every report: 4 significant digits, thousands grouped
(golive.profile.rules.number); results.json keeps them whole."""

import json

from level_rows import level_row

from golive.report.html import summary_html
from golive.report.markdown import render_markdown
from golive.report.model import BaselineDiff
from golive.report.results import CheckRecord, Metric, Recorder, SweepPoint

AGGREGATE = 279.37329271811655  # what go-live.md printed before: every digit the float had


def numbers_recorder() -> Recorder:
    recorder = Recorder()
    recorder.checks["t::aggregate[a]"] = CheckRecord(
        nodeid="t::aggregate[a]",
        layer="endpoint",
        station="a",
        rule="At the gate level (4 users) the station delivers at least 8 tok/s.",
    )
    for name, value, unit, floor, ceiling in (
        ("aggregate_tok_s_at_4", AGGREGATE, "tok/s", 250.123456, None),
        ("ttft_p50_s_at_4", 0.0612345, "s", None, 0.06710000001),
        ("kv_cache_tokens", 5933986, "tokens", 100000, None),
        ("peak_tok_s", 12345.678, "tok/s", 2265.3, None),
    ):
        recorder.metrics.append(
            Metric(
                station="a",
                check="t::aggregate[a]",
                name=name,
                value=value,
                unit=unit,
                floor=floor,
                ceiling=ceiling,
                passed=True,
            )
        )
    recorder.sweep.append(
        SweepPoint(
            "a",
            level_row(4, AGGREGATE, requests=12, output_tokens=2794, per_user_tok_s_p50=None, ttft_p50_s=0.0612345),
        )
    )
    recorder.baseline = BaselineDiff.model_validate(
        {
            "baseline_profile": "reference-cpu",
            "tolerance_pct": 10.0,
            "passed": True,
            "changes": [
                {
                    "kind": "metric",
                    "station": "a",
                    "name": "aggregate_tok_s_at_4",
                    "before": 312.98765432,
                    "after": AGGREGATE,
                    "failing": False,
                    "why": "",
                }
            ],
        }
    )
    return recorder


def test_go_live_md_shows_measured_numbers_to_four_significant_digits():
    record = render_markdown(numbers_recorder().results())
    measured = record.split("## Measured\n", 1)[1].split("\n## ", 1)[0]
    assert "| a | aggregate_tok_s_at_4 | 279.4 tok/s | >= 250.1 | yes |" in measured, measured
    assert "| 0.06123 s | <= 0.0671 |" in measured and "| 5,933,986 tokens | >= 100,000 |" in measured
    assert "| 12,346 tok/s | >= 2,265 |" in measured
    sweep = record.split("## Concurrency sweep\n", 1)[1].split("\n## ", 1)[0]
    assert "| a | 4 | 279.4 |" in sweep and "| 0.06123 |" in sweep, sweep
    since = record.split("## Since the last go-live", 1)[1].split("\n## ", 1)[0]
    assert "| 313 | 279.4 |" in since, since
    assert "279.37" not in record and "0.061234" not in record and "312.98" not in record


def test_html_summary_shows_the_same_numbers():
    page = "".join(summary_html(numbers_recorder()))
    assert "279.4 tok/s" in page and "&ge; 250.1" in page and "0.06123 s" in page and "&le; 0.0671" in page
    assert "<td>279.4</td>" in page and "<td>313</td>" in page  # the sweep table and the baseline diff
    assert "279.37" not in page and "312.98" not in page


def test_results_json_keeps_every_digit():
    data = json.loads(json.dumps(numbers_recorder().as_dict()))
    assert [m["value"] for m in data["metrics"]][:2] == [AGGREGATE, 0.0612345]


def test_results_json_states_the_fixed_verdict_rules_and_readme_its_verdict_values():
    from pathlib import Path

    from golive.core.verdict import GO, INCOMPLETE, NO_GO, VERDICT_RULES
    from golive.report.results import verdict_word

    data = numbers_recorder().as_dict()
    assert data["verdict_rules"] == VERDICT_RULES and data["verdict"] == GO
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())
    for value in (GO, NO_GO, INCOMPLETE):
        assert f"`{value}` = {verdict_word(value)}" in readme
