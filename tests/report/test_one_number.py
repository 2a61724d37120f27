"""One number per quantity per level (issue 39 item 3): the load generator's level row (the median of its rounds), the
gate's value, the terminal's line, the HTML tables, go-live.md and results.json all say the same number."""

from __future__ import annotations

import json

from golive.endpoint import gates
from golive.endpoint.load import SweepPlan, run_plan
from golive.endpoint.load_request import RequestTiming
from golive.profile.rules import number
from golive.profile.schema import Load
from golive.report.html import summary_html
from golive.report.markdown import render_markdown
from golive.report.results import Metric, Recorder, SweepPoint

LOAD = Load(
    concurrency=[1, 8],
    gate_concurrency=8,
    repeats=3,
    warmup=0,
    ratio_rounds=6,
    tolerance=0,
    floors={"aggregate_tok_s": 100.0, "scaling_ratio": 1.5},
)


def sweep_with_rounds():
    """A sweep through golive's own rules whose batches differ (so a pooled number and the rounds' median differ)."""
    clock = [0.0]
    batches = [0]

    async def run(kind, concurrency, count, round_, deadline):
        batches[0] += 1
        step = 0.01 * (1 + 0.37 * (batches[0] % 5))  # each batch its own pace
        timings = []
        for i in range(count):
            wave = i // concurrency
            sent = clock[0] + wave * 32 * step
            timings.append(RequestTiming(sent=sent, token_times=[step], end=32 * step, completion_tokens=32))
        started = clock[0]
        clock[0] += (count // concurrency) * 32 * step
        return timings, started, clock[0]

    lines: list[str] = []
    coroutine = run_plan(SweepPlan.of(LOAD, LOAD.concurrency), run, lambda: clock[0], lines.append)
    try:
        coroutine.send(None)
    except StopIteration as done:
        rows, _ = done.value
    return rows, lines


def test_every_output_shows_the_levels_one_number(tmp_path):
    rows, terminal = sweep_with_rounds()
    level = next(r for r in rows if r.concurrency == 8)
    assert level.batches > 1 and level.aggregate_tok_s_rounds
    pooled = level.output_tokens / level.duration_s
    shown = number(level.aggregate_tok_s)
    assert shown != number(pooled)  # the pooled requests would have said another number
    gate = gates.gate(LOAD, rows, "aggregate_tok_s")
    assert gate is not None and gate.value == level.aggregate_tok_s

    recorder = Recorder()
    recorder.sweep = [SweepPoint("a", row) for row in rows]
    recorder.metrics.append(
        Metric(
            station="a",
            check="c",
            name="aggregate_tok_s_at_8",
            value=gate.value,
            unit="tok/s",
            floor=gate.bound,
            interval=list(gate.interval) if gate.interval else None,
            rounds=gate.rounds,
            detectable=gate.detectable,
        )
    )
    written = recorder.write(tmp_path / "results.json")
    data = json.loads((tmp_path / "results.json").read_text())
    at_8 = next(row for row in data["sweep"] if row["concurrency"] == 8)
    assert at_8["aggregate_tok_s"] == data["metrics"][0]["value"] == level.aggregate_tok_s

    final = [line for line in terminal if line.startswith("load:    8 in flight") and "first batch" not in line]
    assert len(final) == 1 and f"{shown} tok/s aggregate" in final[0], terminal

    markdown = render_markdown(written)
    sweep_md = markdown.split("## Concurrency sweep\n", 1)[1].split("\n## ", 1)[0]
    measured_md = markdown.split("## Measured\n", 1)[1].split("\n## ", 1)[0]
    assert f"| a | 8 | {shown} (" in sweep_md, sweep_md
    assert f"| aggregate_tok_s_at_8 | {shown} tok/s" in measured_md, measured_md
    assert "this run would catch a station" in measured_md

    html = summary_html(recorder)[0]
    sweep_html = html.split('id="golive-sweep-table"', 1)[1].split("</table>", 1)[0]
    measured_html = html.split('id="golive-metrics"', 1)[1].split("</table>", 1)[0]
    assert f"<td>8</td><td>{shown} (" in sweep_html, sweep_html
    assert f"<td>aggregate_tok_s_at_8</td><td>{shown} tok/s" in measured_html, measured_html
