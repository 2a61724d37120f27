"""A check that crashes (an exception golive did not expect, not a Finding) and a skip reason full of terminal
escapes: the run still writes every report, the crash is one escaped line, the verdict INCOMPLETE."""

import json

from golive_run import golive_run

# A real pytest plugin, loaded with `-p`: a crash inside the health check's call (a golive bug, a library raising
# something new) and a skip whose reason quotes hostile server output.
PLUGIN = """
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    if item.name.startswith("test_health_endpoint_is_ok"):
        raise RuntimeError("station exploded \\x1b[2J\\x1b]0;pwned\\x07\\nsecond line of the crash")

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if item.name.startswith("test_models_lists_served_name"):
        pytest.skip("the server said \\x1b[31mred\\x1b[0m\\r\\u202eevil")
"""


def test_crash_inside_one_check_leaves_every_report_and_one_escaped_line(tmp_path):
    (tmp_path / "crash_plugin.py").write_text(PLUGIN)
    (tmp_path / "inventory.yaml").write_text(
        "profile: glm-5.3-flash-gb300\nstations:\n  - name: s1\n    endpoint: http://127.0.0.1:9\n"
    )
    run = golive_run(
        tmp_path / "inventory.yaml",
        tmp_path / "out",
        "-m",
        "endpoint",
        "-p",
        "no:cacheprovider",
        "-p",
        "crash_plugin",
        "-k",
        "test_health_endpoint_is_ok or test_models_lists_served_name",
        cwd=tmp_path,
        timeout=120,
        env={"PYTHONPATH": str(tmp_path)},
    )
    output, results = run.output, run.results
    assert run.code == 2, output[-3000:]
    assert results["verdict"] == "incomplete"
    by_name = {c["nodeid"].split("::")[-1].split("[")[0]: c for c in results["checks"]}
    crashed, skipped = by_name["test_health_endpoint_is_ok"], by_name["test_models_lists_served_name"]
    assert crashed["outcome"] == "not_checked" and skipped["outcome"] == "not_checked", results["checks"]
    assert crashed["message"] == (
        "the check did not finish: RuntimeError: station exploded \\x1b[2J\\x1b]0;pwned\\x07"
    ), crashed["message"]
    assert skipped["message"] == "the server said \\x1b[31mred\\x1b[0m\\r\\u202eevil", skipped["message"]
    assert "Traceback" not in json.dumps(results) and "second line" not in json.dumps(results)
    html = (tmp_path / "out" / "go-live.html").read_text()
    assert "GO-LIVE: INCOMPLETE" in html and "\x1b" not in html
    verdict = output[output.index("golive verdict") :]
    assert "  not checked (1): the check did not finish: RuntimeError: station exploded \\x1b[2J" in verdict, verdict
    assert "  not checked (1): the server said \\x1b[31mred" in verdict, verdict
    assert not any(c in output for c in "\x1b\x07\r\u202e"), "a terminal control character reached the terminal"
