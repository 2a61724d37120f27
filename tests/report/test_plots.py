"""The concurrency sweep in the report: an inline SVG plot and a table, in HTML (rendered by Chromium) and markdown."""

import json
import re
import xml.etree.ElementTree as ET

import pytest
from level_rows import level_row

from golive.endpoint.levels import LevelResult
from golive.report.html import summary_html
from golive.report.markdown import render_markdown
from golive.report.model import SCHEMA, Results
from golive.report.plots import sweep_rows, sweep_svg
from golive.report.results import CheckRecord, Metric, Recorder, SweepPoint, sweep_of
from tests.report.test_report import CHROMIUM, chromium_dom

SVG = "{http://www.w3.org/2000/svg}"
STATIONS = ("gb300-a", "station <b>&amp; b")  # a station name with markup stays text in the plot


def level(users: int, tok_s: float, ttft: float) -> LevelResult:
    return level_row(
        users,
        tok_s,
        requests=users * 2,
        per_user_tok_s_p50=None,
        ttft_p50_s=ttft,
        aggregate_tok_s_ci=[tok_s * 0.95, tok_s * 1.05],
        ttft_p50_s_ci=[ttft * 0.9, ttft * 1.2],
    )


def sweep_points() -> list[SweepPoint]:
    return [
        SweepPoint(station, level(users, tok_s * scale, ttft / scale))
        for station, scale in zip(STATIONS, (1.0, 0.8), strict=True)
        for users, tok_s, ttft in ((256, 9100.0, 1.9), (1, 180.0, 0.08), (32, 2900.0, 0.35))
    ]  # any order


def test_sweep_svg_is_valid_xml_with_one_line_per_station():
    svg = sweep_svg(sweep_points())
    root = ET.fromstring(svg)  # parses: well-formed, and the station's markup was escaped
    assert root.tag == f"{SVG}svg" and float(root.get("width", "").removesuffix("pt")) > 0
    texts = {"".join(t.itertext()) for t in root.iter(f"{SVG}text")}
    assert set(STATIONS) <= texts  # both series' legend labels, as text (svg.fonttype none)
    assert {"Aggregate throughput vs concurrent users (95 % CI)", "TTFT p50 vs concurrent users (95 % CI)"} <= texts
    assert not svg.startswith("<?xml") and "<script" not in svg
    assert re.findall(r'(?:href|src)="(?!#)[^"]*"', svg) == []  # links only within the SVG: nothing to fetch
    assert sweep_svg(sweep_points()) == svg  # the same sweep draws the same file (diff-friendly)
    caps = [line for line in root.iter(f"{SVG}g") if (line.get("id") or "").startswith("LineCollection")]
    assert len(caps) == 8  # error bars: one collection per station and panel, and again in each legend


def test_no_sweep_no_plot():
    assert sweep_svg([]) is None and sweep_rows([]) == []
    assert "## Concurrency sweep" not in render_markdown(Recorder().results())


def test_sweep_rows_per_station_and_users():
    rows = sweep_rows(sweep_points())
    assert [(r["station"], r["users"]) for r in rows] == [(s, u) for s in sorted(STATIONS) for u in (1, 32, 256)]
    assert rows[2]["aggregate_tok_s"] == 9100.0 and rows[2]["failures"] == 0 and rows[2]["itl_mean_s"] is None


def sweep_recorder() -> Recorder:
    recorder = Recorder()
    recorder.checks["t::sweep"] = CheckRecord(
        nodeid="t::sweep", layer="endpoint", rule="The sweep runs", station="gb300-a"
    )
    recorder.sweep.extend(sweep_points())
    recorder.metrics.append(
        Metric(
            station="gb300-a",
            check="x",
            name="peak_tok_s",
            value=9100.0,
            unit="tok/s",
            floor=8000,
            interval=[8800.0, 9400.0],
            requests=24,
        )
    )
    return recorder


def test_results_json_carries_the_sweep_as_rows_that_read_back():
    data = json.loads(json.dumps(sweep_recorder().as_dict()))  # as written to and read from results.json
    assert data["schema"] == SCHEMA and len(data["sweep"]) == 6
    assert data["sweep"][0]["station"] == "gb300-a" and data["sweep"][0]["concurrency"] == 256
    assert sweep_of(Results.model_validate(data)) == sweep_points()
    assert [m["name"] for m in data["metrics"]] == ["peak_tok_s"]  # the sweep is not spelled as metric names
    assert set(data["metrics"][0]) == {
        "station",
        "check",
        "name",
        "value",
        "unit",
        "floor",
        "ceiling",
        "passed",
        "interval",
        "requests",
        "rounds",
        "unstable",
        "detectable",
        "judged",
    }  # schema 2's fields, the interval it stands on, the rounds it is the median of (issue 28), the
    # degradation those rounds would have caught (issue 42), and whether it was judged (a smoke floor met: issue 39)


def test_markdown_has_the_sweep_table():
    record = render_markdown(sweep_recorder().results())
    section = record.split("## Concurrency sweep\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| station | users | aggregate tok/s |") and len(rows) == 2 + 6
    assert "| gb300-a | 256 | 9,100 (8,645–9,555) |  | 1.9 (1.71–2.28) |" in section  # values with their interval
    assert "| station &lt;b&gt;&amp;amp; b | 1 | 144 (136.8–151.2) |" in section
    assert "| requests | failures |" in rows[0] and "| 512 | 0 |" in section  # the request count of each level
    measured = record.split("## Measured\n", 1)[1]
    assert "tok/s (95 % CI 8,800–9,400), 24 requests |" in measured


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/setup.sh installs it)")
def test_sweep_plot_is_visible_in_chromium(tmp_path):
    """The summary as an operator opens it: the plot renders inline, with a size, and the page fetches nothing."""
    page = tmp_path / "summary.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>golive</title></head><body>"
        + "".join(summary_html(sweep_recorder()))
        + "</body></html>"
    )
    # the size as laid out, written into the DOM by the page itself so that --dump-dom carries it
    page.write_text(
        page.read_text().replace(
            "</body>",
            """<script>
const box = document.querySelector("#golive-sweep-plot svg").getBoundingClientRect();
document.body.dataset.plotSize = `${Math.round(box.width)}x${Math.round(box.height)}`;</script></body>""",
        )
    )
    dom = chromium_dom(page, tmp_path)
    width, height = map(int, dom.split('data-plot-size="', 1)[1].split('"', 1)[0].split("x"))
    assert width > 300 and height > 100
    assert dom.count("<svg") == 1 and 'id="golive-sweep-table"' in dom
    assert "gb300-a" in dom.split('id="golive-sweep-plot"', 1)[1].split("</figure>", 1)[0]
