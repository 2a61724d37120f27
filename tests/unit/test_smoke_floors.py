"""Smoke floors (load.smoke): a floor set so far below what the station does that a broken station meets it too is
measured, not judged: met, its check is not applicable with the profile's why and its metric says `judged: false`;
missed, it still fails. A floor is smoke only with the number of the profile that said so."""

from __future__ import annotations

from pathlib import Path

import pytest

from golive.core.verdict import Finding, NotApplicable
from golive.endpoint.gates import Gate
from golive.profile.schema import GATE_NAMES, Load
from golive.profile.yamlfile import ConfigError
from golive.site.loader import load_profile
from golive.suites.endpoint import test_throughput as throughput

JUDGED_HERE = {"scaling_ratio", "per_user_ratio"}  # what reference-cpu's own comments say judges there


def _site(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "site.yaml"
    path.write_text(text)
    return path


def test_reference_cpu_marks_every_absolute_floor_smoke_and_no_ratio():
    load = load_profile("reference-cpu").profile.load
    assert load is not None and load.smoke is not None
    assert set(load.smoke.floors) == set(GATE_NAMES) - JUDGED_HERE
    assert "scaling ratio and the batch check" in load.smoke.why


def test_a_site_that_sets_its_own_number_judges_that_floor(tmp_path):
    site = _site(tmp_path, "extends: reference-cpu\nload:\n  floors: {aggregate_tok_s: 1500}\n  slo: {ttft_s: 1}\n")
    load = load_profile(site).profile.load
    assert load is not None and load.smoke is not None
    assert "aggregate_tok_s" not in load.smoke.floors and "goodput_share" not in load.smoke.floors
    assert "peak_tok_s" in load.smoke.floors  # the numbers it did not set stay smoke
    restated = _site(tmp_path, "extends: reference-cpu\nload:\n  floors: {aggregate_tok_s: 1500}\n  smoke: null\n")
    assert load_profile(restated).profile.load.smoke is None  # type: ignore[union-attr]


def test_a_misspelt_smoke_floor_is_one_line_with_its_place(tmp_path):
    site = _site(tmp_path, "extends: reference-cpu\nload:\n  smoke:\n    floors: [aggregate_toks]\n    why: x\n")
    with pytest.raises(ConfigError) as refused:
        load_profile(site)
    said = str(refused.value)
    assert "\n" not in said and "site.yaml:4" in said and "aggregate_toks" in said, said


def _load(smoke: bool) -> Load:
    smoke_section = {"smoke": {"floors": ["aggregate_tok_s"], "why": "far below this machine"}} if smoke else {}
    return Load.model_validate({"concurrency": [1, 8], "floors": {"aggregate_tok_s": 10.0}, **smoke_section})


def _judged(load: Load, interval: tuple[float, float]) -> tuple[BaseException | None, dict]:
    gate = Gate("aggregate_tok_s", 8, (interval[0] + interval[1]) / 2, interval, 10.0, requests=24)
    recorded: dict = {}

    def record_metric(name: str, value: float, unit: str, **kwargs: object) -> bool:
        recorded.update(kwargs, name=name, value=value)
        return True

    try:
        throughput._judge(
            gate, load, record_metric, "aggregate_tok_s_at_8", "tok/s", "aggregate", found="f", recipe="r", fix="d"
        )  # type: ignore[arg-type]
    except (NotApplicable, Finding) as ended:
        return ended, recorded
    return None, recorded


def test_a_smoke_floor_met_is_measured_not_judged():
    ended, recorded = _judged(_load(smoke=True), (1500.0, 1700.0))
    assert isinstance(ended, NotApplicable), ended
    assert str(ended.msg) == "measured, not judged: a smoke floor of the profile (load.smoke): far below this machine"
    assert recorded["judged"] is False and recorded["passed"] is True and recorded["value"] == 1600.0


def test_a_smoke_floor_missed_still_fails():
    ended, recorded = _judged(_load(smoke=True), (2.0, 4.0))
    assert isinstance(ended, Finding) and recorded["judged"] is True and recorded["passed"] is False


def test_a_floor_not_smoke_passes_as_a_gate():
    ended, recorded = _judged(_load(smoke=False), (1500.0, 1700.0))
    assert ended is None and recorded["judged"] is True and recorded["passed"] is True


def test_the_reports_show_a_smoke_floor_as_measured_not_judged(tmp_path):
    from golive.report.html import summary_html
    from golive.report.markdown import render_markdown
    from golive.report.results import Metric, Recorder

    recorder = Recorder()
    for judged in (False, True):
        name = "aggregate_tok_s_at_8" if not judged else "scaling_ratio_at_8"
        recorder.metrics.append(Metric(station="a", check="c", name=name, value=2.0, unit="", floor=1.0, judged=judged))
    markdown = render_markdown(recorder.write(tmp_path / "results.json"))
    assert "| a | aggregate_tok_s_at_8 | 2  | >= 1 | measured, not judged (smoke floor) |" in markdown, markdown
    assert "| a | scaling_ratio_at_8 | 2  | >= 1 | yes |" in markdown, markdown
    html = summary_html(recorder)[0].split('id="golive-metrics"', 1)[1]
    assert html.count("measured, not judged (smoke floor)") == 1 and "<td>yes</td>" in html, html
