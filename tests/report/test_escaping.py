"""Model and station output is text in every report: HTML summary and markdown record, never markup that runs."""

import shutil
import subprocess

import pytest

from golive.report.html import summary_html
from golive.report.markdown import render_markdown
from golive.report.results import CheckRecord, Metric, Recorder

HOSTILE = "<script>document.title='pwned'</script> <img src=x onerror=\"document.title='pwned'\"> </td> a|b"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def hostile_recorder() -> Recorder:
    recorder = Recorder()
    finding = {"found": f"model answered {HOSTILE}", "recipe": "a tool call", "fix": "fix the parser", "sources": []}
    recorder.checks["suites/endpoint/test_tools.py::test_x[a]"] = CheckRecord(
        nodeid="suites/endpoint/test_tools.py::test_x[a]",
        layer="endpoint",
        rule="Tools are called",
        station="a",
        outcome="failed",
        message=f"Found: model answered {HOSTILE}",
        finding=finding,
    )
    recorder.checks["suites/endpoint/test_chat.py::test_y[a]"] = CheckRecord(
        nodeid="suites/endpoint/test_chat.py::test_y[a]",
        layer="endpoint",
        rule="Chat",
        station="a",
        outcome="not_checked",
        message=HOSTILE,
    )
    recorder.metrics.append(Metric(station="a", check="c", name=HOSTILE, value=1, unit="x"))
    return recorder


def test_markdown_shows_hostile_output_as_text():
    from markdown_it import MarkdownIt

    record = render_markdown(hostile_recorder().results())
    assert "<script" not in record and "<img" not in record and "</td>" not in record
    assert "&lt;script&gt;" in record and "a\\|b" in record
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(record)  # raw HTML on, like GitHub
    assert "<script" not in rendered and "<img" not in rendered
    assert "&lt;script&gt;document.title=" in rendered
    table_row = next(line for line in record.splitlines() if line.startswith("| not checked |"))
    assert table_row.count(" | ") == 3  # `|` in the text did not split the cell


def test_html_summary_shows_hostile_output_as_text():
    html = "".join(summary_html(hostile_recorder()))
    assert "<script>document" not in html and "<img src=x" not in html
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in html


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/setup.sh installs it)")
def test_hostile_output_never_runs_in_chromium(tmp_path):
    assert CHROMIUM is not None  # skipped above without it
    page = tmp_path / "summary.html"
    page.write_text(
        "<!DOCTYPE html><html><head><title>golive</title></head><body>"
        + "".join(summary_html(hostile_recorder()))
        + "</body></html>"
    )
    result = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'chromium'}",
            "--virtual-time-budget=1000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "<title>golive</title>" in result.stdout and "pwned</title>" not in result.stdout
    assert "<img" not in result.stdout and "&lt;script&gt;document.title" in result.stdout
