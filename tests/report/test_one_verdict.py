"""One verdict in every output, whoever starts the run: plain pytest writes the same four reports as `golive run`, and
a JUnit consumer sees an INCOMPLETE or NO-GO run as not green."""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from golive_testbed.targets import build_station_trees

REPO = Path(__file__).resolve().parents[2]
HEALTHY = REPO / "fixtures" / "inventories" / "gb300-healthy.yaml"
REPORTS = ("go-live.html", "go-live.md", "results.json", "junit.xml")


@pytest.fixture(scope="module")
def station_trees():
    return build_station_trees()


def plain_pytest(inventory: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--pyargs",
            "golive.suites",
            f"--golive-inventory={inventory}",
            f"--golive-output={out}",
            "-p",
            "no:cacheprovider",
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=out.parent,
        timeout=300,
    )


def golive_run(inventory: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "golive", "run", str(inventory), "-o", str(out), *args],
        capture_output=True,
        text=True,
        cwd=out.parent,
        timeout=300,
    )


def junit_suite(path: Path) -> ET.Element:
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None, f"{path} has no <testsuite>"
    return suite


def test_plain_pytest_writes_the_same_reports_as_golive_run(tmp_path, station_trees):
    plain = plain_pytest(HEALTHY, tmp_path / "plain", "-m", "host")
    ran = golive_run(HEALTHY, tmp_path / "run", "-m", "host")
    assert plain.returncode == ran.returncode == 0, plain.stdout + ran.stdout
    for name in REPORTS:
        assert (tmp_path / "plain" / name).is_file() and (tmp_path / "run" / name).is_file(), name
    a, b = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("plain", "run"))
    assert a["verdict"] == b["verdict"] == "pass"
    assert {c["nodeid"].split("::", 1)[1]: c["outcome"] for c in a["checks"]} == {
        c["nodeid"].split("::", 1)[1]: c["outcome"] for c in b["checks"]
    }
    for out in ("plain", "run"):
        props = {p.get("name"): p.get("value") for p in junit_suite(tmp_path / out / "junit.xml").iter("property")}
        assert props["golive_verdict"] == "GO"
        assert "GO" in (tmp_path / out / "go-live.md").read_text()


def test_incomplete_run_is_red_in_junit_with_the_verdict(tmp_path):
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        "profile: glm-5.3-flash-gb300\nstations:\n  - {name: gone, host: 'chroot://no-such-tree', phase: serving}\n"
    )
    result = golive_run(inventory, tmp_path / "out", "-m", "host")
    assert result.returncode == 2, result.stdout + result.stderr
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    not_checked = [c for c in results["checks"] if c["outcome"] == "not_checked"]
    assert results["verdict"] == "incomplete" and not_checked
    suite = junit_suite(tmp_path / "out" / "junit.xml")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["golive_verdict"] == "INCOMPLETE"
    assert int(suite.get("errors", "")) == len(not_checked) and int(suite.get("failures", "")) == 0
    messages = [
        error.get("message", "") for case in suite.iter("testcase") if (error := case.find("error")) is not None
    ]
    assert len(messages) == len(not_checked)
    assert all(m.startswith("not checked: ") and "does not exist" in m for m in messages)


def test_a_layer_out_of_scope_is_one_line_in_every_output(tmp_path, station_trees):
    """A station scoped to `layers: [host]`: its endpoint checks (and the cluster checks its one-station profile has
    no layer for) are said once per station and layer, "43 out of scope (…)", in the terminal, go-live.md and
    go-live.html, never as a verdict row each; results.json keeps every record (`scoped_out`) and every output
    counts them alike (JUnit: skipped, with the count as the property golive_out_of_scope)."""
    inventory = tmp_path / "scoped.yaml"
    inventory.write_text(
        f"profile: {REPO / 'fixtures/profiles/gb300-site.yaml'}\nstations:\n"
        f"  - {{name: tree, layers: [host], host: 'chroot://{station_trees['gb300-healthy']}', phase: serving}}\n"
    )
    ran = golive_run(inventory, tmp_path / "out")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = tmp_path / "out"
    checks = json.loads((out / "results.json").read_text())["checks"]
    scoped = [c for c in checks if c["scoped_out"]]
    by_layer = {layer: sum(c["layer"] == layer for c in scoped) for layer in ("endpoint", "cluster")}
    assert by_layer["endpoint"] > 0 and by_layer["cluster"] > 0 and len(scoped) == sum(by_layer.values())
    assert {c["outcome"] for c in scoped} == {"not_applicable"} and not any(c["layer"] == "host" for c in scoped)
    passed = sum(c["outcome"] == "passed" for c in checks)
    not_applicable = sum(c["outcome"] == "not_applicable" and not c["scoped_out"] for c in checks)
    said = f"{by_layer['endpoint']} out of scope (the inventory scopes station tree to `layers: [host]`)"
    basis = (
        f"judged: {passed} passed on 1 station; not judged: {not_applicable} not applicable; {len(scoped)} out of scope"
    )

    terminal = ran.stdout
    assert f"  endpoint  tree                 {said}" in terminal, terminal
    assert f"{passed} passed, {len(scoped)} out of scope, {not_applicable} not applicable in" in terminal, terminal
    assert f"not applicable ({by_layer['endpoint']})" not in terminal  # no reason list of its own
    assert f"  {basis}\n" in terminal, terminal  # what the verdict stands on, under it, the same in every report

    markdown = (out / "go-live.md").read_text()
    assert f"- endpoint on tree: {said}".replace("`", "\\`").replace("[", "\\[").replace("]", "\\]") in markdown
    assert "| endpoint | tree |" not in markdown and "suites/endpoint/" not in markdown, markdown
    assert f"## Not applicable ({not_applicable})" in markdown
    assert f"| on what | {basis} |" in markdown, markdown

    page = (out / "go-live.html").read_text()
    assert f'<p id="golive-basis"><b>{basis}</b></p>' in page
    layers = page.split('id="golive-layers"', 1)[1].split("</table>", 1)[0]
    assert said.replace("`", "&#96;") in layers or said in layers, layers
    assert f"{passed} Passed" in page and f"{not_applicable} Skipped" in page  # pytest-html's own table: no such row
    not_applicable_list = page.split('id="golive-not-applicable"', 1)[1].split("</ul>", 1)[0]
    assert "scopes station" not in not_applicable_list and "has no cluster layer" not in not_applicable_list

    suite = junit_suite(out / "junit.xml")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["golive_verdict"] == "GO" and props["golive_out_of_scope"] == str(len(scoped))
    assert int(suite.get("skipped", "")) == len(scoped) + not_applicable
    assert int(suite.get("tests", "")) == len(checks)
