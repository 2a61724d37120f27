"""The go-live summary at the top of the pytest-html report: verdict, layers × stations, what to fix first."""

from __future__ import annotations

from jinja2 import Environment, PackageLoader
from markupsafe import Markup

from golive.core.verdict import FAILED, NOT_APPLICABLE, NOT_CHECKED, OUTCOMES, PASSED, RECIPES, WAIVED, printable
from golive.profile.rules import duration, measured
from golive.report.model import CheckRecord
from golive.report.plots import SWEEP_COLUMNS, sweep_rows, sweep_svg
from golive.report.results import Recorder, basis, grouped_by_reason, judged, layer_rows, sweep_of, verdict_word


def escaped(value: object) -> object:
    """Text as text: control characters escaped (markup is escaped by autoescape; Markup is ours, left alone)."""
    return printable(value) if isinstance(value, str) and not isinstance(value, Markup) else value


# every value is text: a model or a station may answer with markup, or with control characters
_ENV = Environment(loader=PackageLoader("golive.report", "templates"), autoescape=True, finalize=escaped)
_ENV.filters["measured"] = measured  # the one number format of every report (results.json keeps them whole)
_ENV.globals["duration"] = duration


def summary_html(recorder: Recorder, interrupted: bool = False) -> list[str]:
    verdict = recorder.verdict(interrupted)
    data = recorder.results(interrupted)  # the report reads what results.json says

    def of(outcome: str) -> list[CheckRecord]:
        return [c for c in data.checks if c.outcome == outcome]

    sweep = sweep_of(data)
    plot = sweep_svg(sweep)  # our own drawing (matplotlib escapes every label): inlined as markup
    return [
        _ENV.get_template("summary.html.j2").render(
            verdict=verdict,
            verdict_word=verdict_word(verdict),
            table=layer_rows(data.checks),
            basis=basis(data.checks, data.metrics),
            outcomes=OUTCOMES,
            failures=of(FAILED),
            notes=[r for r in of(PASSED) if r.note],
            not_checked=grouped_by_reason(of(NOT_CHECKED)),
            not_applicable=grouped_by_reason(judged(of(NOT_APPLICABLE))),
            profile=data.profile,
            stations=data.stations,
            metrics=data.metrics,
            interrupted=interrupted,
            recipes=RECIPES,
            rules_text=data.verdict_rules,
            waived=of(WAIVED),
            baseline=data.baseline,
            run=data.provenance,
            estimate=data.estimate,
            warnings=data.warnings,
            provenance=any(s.provenance for s in data.stations),
            sweep_plot=Markup(plot) if plot else None,
            sweep=sweep_rows(sweep),
            sweep_columns=SWEEP_COLUMNS,
        )
    ]
