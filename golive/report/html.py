"""The go-live summary at the top of the pytest-html report: verdict, layers × stations, what to fix first."""
from __future__ import annotations

from jinja2 import Environment, PackageLoader, select_autoescape

from golive.report.results import OUTCOMES, Recorder

_ENV = Environment(loader=PackageLoader("golive.report", "templates"), autoescape=select_autoescape(["html"]))


def summary_html(recorder: Recorder, interrupted: bool = False) -> list[str]:
    verdict = recorder.verdict(interrupted)
    failures = [r for r in recorder.checks.values() if r.outcome in ("failed", "error")]
    findings = [r for r in recorder.checks.values() if r.outcome == "passed" and r.message]
    data = recorder.as_dict(interrupted)
    return [_ENV.get_template("summary.html.j2").render(
        verdict=verdict, table=recorder.by_layer_station(), outcomes=OUTCOMES, failures=failures, findings=findings,
        profile=data["profile"], stations=data["stations"], metrics=recorder.metrics, interrupted=interrupted)]
