"""What every run against a hostile target is held to (tests/hostile): its exit code, its wall time and peak RSS as
measured from the process, every report written and well-formed with one verdict everywhere, and no form of a secret
in any output."""

from __future__ import annotations

import base64
import json
import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from urllib.parse import quote

from golive_testbed.hostile import Measured

PEAK_RSS_MIB = 300  # issue 38's goal: peak RSS ≤ 300 MiB for every hostile input
WORDS = {0: "GO", 1: "NO-GO", 2: "INCOMPLETE"}
VERDICTS = {0: "pass", 1: "fail", 2: "incomplete"}
# what no output may carry: a traceback, an object's repr, an SDK's exception, Python's recursion limit
LEAKS = (
    "Traceback",
    " object at 0x",
    "openai.",
    "APIStatusError",
    "NotFoundError",
    "RateLimitError",
    "InternalServerError",
    "APIConnectionError",
    "RecursionError",
    "httpx.",
    "httpcore.",
)
REPORT_FILES = ("go-live.html", "go-live.md", "results.json", "junit.xml")


def secret_forms(secret: str, user: str | None = None) -> list[str]:
    """Every form golive sends `secret` in, or a server may echo it in: as is, URL-encoded, JSON-escaped (with `/`
    escaped too), HTML-escaped quotes; with `user`, HTTP Basic's base64 of `user:secret`."""
    forms = {
        secret,
        quote(secret, safe=""),
        json.dumps(secret)[1:-1],
        json.dumps(secret)[1:-1].replace("/", "\\/"),
    }
    if user is not None:
        forms.add(base64.b64encode(f"{user}:{secret}".encode()).decode())
    return sorted(forms)


def outputs(run: Measured, out: Path) -> dict[str, str]:
    """The terminal and every report written."""
    texts = {"terminal": run.output}
    for name in REPORT_FILES:
        if (out / name).exists():
            texts[name] = (out / name).read_text(errors="replace")
    return texts


def judge(
    run: Measured,
    out: Path,
    *,
    code: int,
    wall_s: float,
    secrets: list[str] = (),  # type: ignore[assignment]
    peak_rss_mib: float = PEAK_RSS_MIB,
) -> dict:
    """`run` ended with `code` within `wall_s` and `peak_rss_mib`; every report written, well-formed, one verdict
    in all of them, in the terminal's verdict line and in the exit code; no leak, no form of any of `secrets` in any
    output; no temporary file left. Returns results.json."""
    where = f"exit {run.code}, {run.wall_s:.1f} s, {run.peak_rss_mib:.0f} MiB\n{run.output[-4000:]}"
    assert run.killed_for is None, f"the harness killed golive: {run.killed_for}\n{where}"
    assert run.code == code, where
    assert run.wall_s <= wall_s, f"took {run.wall_s:.1f} s, more than {wall_s:g} s\n{where}"
    assert run.peak_rss_mib <= peak_rss_mib, f"peak RSS {run.peak_rss_mib:.0f} MiB > {peak_rss_mib} MiB\n{where}"
    results = json.loads((out / "results.json").read_text())
    junit = ElementTree.parse(out / "junit.xml")
    word = WORDS[code]
    assert results["verdict"] == VERDICTS[code], where
    stated = set(re.findall(r"GO-LIVE: (NO-GO|GO|INCOMPLETE)\b", (out / "go-live.html").read_text()))
    assert stated == {word}, f"go-live.html states {stated}"
    assert f"# Go-live record: {word}\n" in (out / "go-live.md").read_text(), "go-live.md states another verdict"
    said = {p.get("value") for p in junit.iter("property") if p.get("name") == "golive_verdict"}
    assert said == {word}, said
    assert f"verdict: {word}" in run.output, f"the terminal's verdict line is not {word}\n{where}"
    for name, text in outputs(run, out).items():
        found = [leak for leak in LEAKS if leak in text]
        assert not found, f"{name} carries {found}\n{where}"
        shown = [form for secret in secrets for form in secret_forms(secret) if form in text]
        assert not shown, f"{name} carries a secret: {shown}"
    left = [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    assert not left, f"temporary files left: {left}"
    return results


def checks_of(results: dict, station: str) -> dict[str, dict]:
    """check name → its result, for one station."""
    return {c["nodeid"].split("::")[-1].split("[")[0]: c for c in results["checks"] if c["station"] == station}
