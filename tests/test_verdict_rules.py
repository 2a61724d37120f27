"""The verdict rules as an operator meets them: GO only on what was checked (golive/core/verdict.py, README)."""

import socket
from pathlib import Path

import pytest
from e2e import needs_chroot
from golive_run import golive_run

REPO = Path(__file__).resolve().parents[1]


def golive_quiet(inventory: Path, out: Path, *args: str) -> tuple[int, dict, str]:
    run = golive_run(inventory, out, "-q", *args, cwd=inventory.parent)
    return run.code, run.results, run.output


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_dead_reference_station_is_incomplete(tmp_path):
    inventory = write(
        tmp_path / "inv.yaml",
        "profile: reference-cpu\nstations:\n"
        f"  - {{name: reference, endpoint: 'http://127.0.0.1:{closed_port()}/v1'}}\n",
    )
    code, results, output = golive_quiet(inventory, tmp_path / "out", "-m", "endpoint")
    assert code == 2 and results["verdict"] == "incomplete", output
    outcomes = {c["outcome"] for c in results["checks"]}
    assert "not_checked" in outcomes and "passed" not in outcomes, outcomes


def test_endpoint_layer_without_an_endpoint_is_incomplete(tmp_path):
    inventory = write(tmp_path / "inv.yaml", "profile: reference-cpu\nstations:\n  - {name: reference}\n")
    code, results, output = golive_quiet(inventory, tmp_path / "out", "-m", "endpoint")
    assert code == 2 and results["verdict"] == "incomplete", output
    assert results["checks"] and {c["outcome"] for c in results["checks"]} == {"not_checked"}, output


@needs_chroot
def test_not_applicable_is_listed_with_its_reason_and_the_verdict_is_go(tmp_path):
    inventory = REPO / "fixtures/inventories/gb300-healthy.yaml"
    code, results, output = golive_quiet(
        inventory, tmp_path / "out", "-m", "host", "-k", "idle_hbm_below_ceiling or unit_is_enabled"
    )
    assert code == 0 and results["verdict"] == "pass", output
    checks = {c["nodeid"].split("::")[-1].split("[")[0]: c for c in results["checks"]}
    assert checks["test_unit_is_enabled_and_active"]["outcome"] == "passed"
    idle = checks["test_idle_hbm_below_ceiling_before_start"]
    assert idle["outcome"] == "not_applicable" and "serving" in idle["message"], idle


@pytest.mark.parametrize(
    "selection,says",
    [
        (("-k", "no_such_check"), "golive: no check selected"),
        (("-m", "cluster"), "golive: no selected check applies"),  # a one-station profile has no cluster layer
    ],
)
def test_nothing_selected_says_so_in_one_line(tmp_path, selection, says):
    inventory = write(
        tmp_path / "inv.yaml", "profile: glm-5.3-flash-gb300\nstations:\n  - {name: a, host: 'chroot:///nonexistent'}\n"
    )
    code, _, output = golive_quiet(inventory, tmp_path / "out", *selection)
    lines = [line for line in output.splitlines() if line.startswith(says)]
    assert code == 5 and len(lines) == 1, output
    assert "Traceback" not in output


def test_demo_with_a_dead_reference_station_is_incomplete(tmp_path):
    """`golive demo` whose reference station did not start still lists it: INCOMPLETE, never GO on the host layer."""
    from golive_testbed.demo import write_inventory

    with socket.socket() as closed:  # a port nothing listens on: the reference station is not there
        closed.bind(("127.0.0.1", 0))
        inventory = write_inventory(tmp_path, None, f"http://127.0.0.1:{closed.getsockname()[1]}/v1")
        code, results, output = golive_quiet(inventory, tmp_path / "out", "-m", "endpoint")
    assert code == 2 and results["verdict"] == "incomplete", output
    reference = [c for c in results["checks"] if c["station"] == "reference-vllm"]
    assert reference and {c["outcome"] for c in reference} == {"not_checked"}
