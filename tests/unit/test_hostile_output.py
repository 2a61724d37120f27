"""Hostile model output (terminal escapes, invalid UTF-8, a 1 MB line, HTML) is shown as text: it cannot drive the
operator's terminal, break a UTF-8 writer or the report's layout."""

import json

import pytest

from golive.core.verdict import TEXT_LIMIT, Finding, require
from golive.report.html import summary_html
from golive.report.markdown import render_markdown
from golive.report.results import CheckRecord, Recorder

CLEAR_SCREEN, SET_TITLE, CSI_8BIT = "\x1b[2J", "\x1b]0;pwned\x07", "\x9b31m"
UNDECODABLE = b"caf\xe9 \xff\xfe".decode("utf-8", "surrogateescape")  # bytes that are not UTF-8, as Python keeps them
HOSTILE = f"{CLEAR_SCREEN}{SET_TITLE}{CSI_8BIT} \u202egnp.exe {UNDECODABLE} <b>bold</b>\r overwritten"
RAW = ("\x1b", "\x07", "\x9b", "\r", "\u202e", "\udce9", "\udcff")


def _finding(found: str) -> Finding:
    with pytest.raises(Finding) as caught:
        require(
            False, found=f"the model answered {found!s}", recipe="plain text [000]", fix="look at the chat template"
        )
    return caught.value


def test_finding_escapes_control_characters_but_keeps_newlines_and_tabs():
    finding = _finding(HOSTILE + "\nsecond line\tafter a tab")
    for part in (finding.found, str(finding.msg)):
        assert not any(char in part for char in RAW)
        assert "\\x1b[2J" in part and "\\x1b]0;pwned\\x07" in part and "\\x9b31m" in part and "\\u202e" in part
        assert "caf\\udce9 \\udcff\\udcfe" in part  # the undecodable bytes, named, not dropped
        assert "\nsecond line\tafter a tab" in part
    str(finding.msg).encode("utf-8")  # writable by any UTF-8 writer (JUnit, HTML, the terminal)
    assert json.loads(json.dumps(finding.as_dict()))["found"] == finding.found
    assert finding.recipe == "plain text [single-station recipe]"  # cited as before


def test_finding_cuts_a_huge_single_line_with_a_marker():
    finding = _finding("A" * 1_000_000)
    assert len(finding.found) < TEXT_LIMIT + 100
    assert finding.found.endswith(f"… [{1_000_000 + len('the model answered ') - TEXT_LIMIT:,} more characters cut]")
    assert len(str(finding.msg)) < 3 * TEXT_LIMIT
    short = _finding("fine")
    assert short.found == "the model answered fine"  # ordinary text is untouched


def _recorder(message: str, finding: dict | None) -> Recorder:
    recorder = Recorder()
    recorder.checks["suites/endpoint/test_chat.py::test_x[a]"] = CheckRecord(
        nodeid="suites/endpoint/test_chat.py::test_x[a]",
        layer="endpoint",
        rule="Chat answers",
        station="a",
        outcome="failed",
        message=message,
        finding=finding,
    )
    recorder.checks["suites/endpoint/test_chat.py::test_y[a]"] = CheckRecord(
        nodeid="suites/endpoint/test_chat.py::test_y[a]",
        layer="endpoint",
        rule="Streams",
        station="a",
        outcome="not_checked",
        message=f"not checked because the server said {HOSTILE}",
    )
    return recorder


def test_reports_show_hostile_text_as_text():
    """A finding, and any other message (a reason quoting a server), render escaped in the HTML summary and
    go-live.md: no control character reaches either, markup stays text, a huge answer stays cut."""
    finding = _finding(HOSTILE + "Z" * 1_000_000)
    recorder = _recorder(str(finding.msg), finding.as_dict())
    html = "".join(summary_html(recorder))
    markdown = render_markdown(recorder.results())
    for page in (html, markdown):
        assert not any(char in page for char in RAW), [c for c in RAW if c in page]
        assert "<b>bold</b>" not in page and "&lt;b&gt;bold&lt;/b&gt;" in page
        assert "x1b" in page and "more characters cut" in page  # shown, as escapes (markdown escapes them again)
        assert len(page) < 40_000
        page.encode("utf-8")
    table_row = next(line for line in markdown.splitlines() if line.startswith("| not checked |"))
    assert table_row.count(" | ") == 3  # the reason stayed in its cell
