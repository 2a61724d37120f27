"""go-live.md: the go-live record for the deployment repo, written from results.json's model (golive.report.model:
the same facts, diff-friendly).

Everything a station or a model said is text: control characters escaped (golive.core.verdict.printable), HTML-escaped
(a markdown viewer renders raw HTML) and, in tables, with
`|` and newlines escaped so a cell stays a cell.
"""

from __future__ import annotations

import html
from pathlib import Path

from jinja2 import Environment, PackageLoader

from golive.core.verdict import OUTCOMES, printable
from golive.profile.rules import duration, measured
from golive.report.model import CheckRecord, Results
from golive.report.plots import SWEEP_COLUMNS, sweep_rows
from golive.report.results import basis, judged, layer_rows, sweep_of, verdict_word

_ENV = Environment(
    loader=PackageLoader("golive.report", "templates"),
    autoescape=False,
    keep_trailing_newline=True,
    trim_blocks=True,
    lstrip_blocks=True,
    finalize=lambda value: printable(value) if isinstance(value, str) else value,
)


def text(value: object) -> str:
    """Inline text: no HTML, no markdown markup that could turn into a link or an image."""
    shown = html.escape("" if value is None else str(value), quote=False)
    for char in "\\`*[]|":  # `_` inside words is no emphasis: left as it is, diffs stay readable
        shown = shown.replace(char, "\\" + char)
    return shown


def cell(value: object) -> str:
    return text(value).replace("\r", "").replace("\n", "<br>")


def block(value: object) -> str:
    """A multi-line message as an indented code block: markdown shows it verbatim, HTML inside is never rendered."""
    lines = ("" if value is None else str(value)).splitlines() or [""]
    return "\n".join("    " + line for line in lines)


_ENV.filters.update(text=text, cell=cell, block=block, measured=measured)  # measured: 4 significant digits
_ENV.globals["duration"] = duration


def render_markdown(results: Results) -> str:
    checks = judged(results.checks)  # those out of their station's scope: one line per station and layer
    by_outcome: dict[str, list[CheckRecord]] = {o: [c for c in checks if c.outcome == o] for o in OUTCOMES}
    return _ENV.get_template("go-live.md.j2").render(
        r=results,
        verdict_word=verdict_word(results.verdict),
        outcomes=OUTCOMES,
        table=layer_rows(results.checks),
        basis=basis(results.checks, results.metrics),
        by_outcome=by_outcome,
        sweep=sweep_rows(sweep_of(results)),
        sweep_columns=SWEEP_COLUMNS,
        checks=sorted(checks, key=lambda c: c.nodeid),
    )


def write_markdown(results: Results, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(render_markdown(results))
    tmp.replace(path)
