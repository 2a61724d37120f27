"""A fleet in one run: two station trees, `golive run INV -n 2` (pytest-xdist), one report with both stations."""

import re
from pathlib import Path

from e2e import needs_chroot
from golive_run import golive_run

from golive.run.scheduling import station_of

REPO = Path(__file__).resolve().parents[2]


def test_station_of_a_node_id():
    stations = ["gb300-a", "gb300-a-2", "b"]
    assert station_of("suites/host/test_gpu.py::test_serving_gpu_present[gb300-a]", stations) == "gb300-a"
    assert station_of("suites/host/test_gpu.py::test_serving_gpu_present[gb300-a-2]", stations) == "gb300-a-2"
    assert station_of("suites/endpoint/test_battery.py::test_case[gb300-a-q3]", stations) == "gb300-a"
    assert station_of("suites/endpoint/test_battery.py::test_case[q3-b]", stations) == "b"
    assert station_of("golive::post-upgrade-gate", stations) is None
    assert station_of("suites/x.py::test_y[other]", stations) is None


@needs_chroot
def test_two_stations_in_parallel_one_report(tmp_path):
    from golive_testbed.targets import build_station_trees

    trees = build_station_trees()
    inventory = tmp_path / "fleet.yaml"
    inventory.write_text(
        f"profile: {REPO}/fixtures/profiles/gb300-site.yaml\nstations:\n"
        f"  - {{name: gb300-a, role: a, host: 'chroot://{trees['gb300-healthy']}'}}\n"
        f"  - {{name: gb300-b, role: b, host: 'chroot://{trees['tool-parser-wrong']}'}}\n"
    )
    out = tmp_path / "out"
    run = golive_run(inventory, out, "-m", "host", "-n", "2", "-v")
    output, results = run.output, run.results
    assert run.code == 1, output
    assert results["verdict"] == "fail"
    by_station = {name: [c for c in results["checks"] if c["station"] == name] for name in ("gb300-a", "gb300-b")}
    # every host check once a station (20 on 2026-12-05), the two stations' the same
    host_checks = len(by_station["gb300-a"])
    assert host_checks == len(by_station["gb300-b"]) >= 20 and len(results["checks"]) == 2 * host_checks
    failed = [(c["station"], c["nodeid"].split("::")[-1]) for c in results["checks"] if c["outcome"] == "failed"]
    assert failed == [("gb300-b", "test_served_flags_match_profile[gb300-b]")]
    assert all(s["provenance"]["driver"] == "580.159.04" for s in results["stations"])
    # each station's checks ran on one worker, the two stations on two
    workers = {
        station: set(re.findall(rf"^\[(gw\d+)\] .*\[{station}\]", output, flags=re.MULTILINE)) for station in by_station
    }
    assert all(len(w) == 1 for w in workers.values()) and workers["gb300-a"] != workers["gb300-b"], workers
    assert "GO-LIVE: NO-GO" in (out / "go-live.html").read_text()
    record = (out / "go-live.md").read_text()
    assert "### gb300-a" in record and "### gb300-b" in record and record.count("## Fix before go-live (1)") == 1
    assert "| station profiles |" not in record  # one profile: said once
    # xdist's controller collects too: the estimate is made once, before any check, and every report carries it
    assert f"{2 * host_checks} checks should take about" in output, output[:3000]
    assert results["estimate"]["actual_s"] > 0
    assert "| time | took " in record and "golive: took " in output


def test_stations_held_to_different_profiles_say_each_in_the_record(tmp_path):
    """The record's header names the inventory's profile and, where stations differ from it, each station's own."""
    from golive_testbed.targets import build_station_trees

    trees = build_station_trees()
    inventory = tmp_path / "fleet.yaml"
    site = REPO / "fixtures/profiles/gb300-site.yaml"  # extends the recipe under the recipe's name: told by its hash
    inventory.write_text(
        "profile: glm-5.3-flash-gb300\nstations:\n"
        f"  - {{name: gb300-a, host: 'chroot://{trees['gb300-healthy']}', profile: '{site}'}}\n"
        f"  - {{name: gb300-b, host: 'chroot://{trees['gb300-healthy']}'}}\n"
    )
    run = golive_run(inventory, tmp_path / "out", "-m", "host")
    record = (tmp_path / "out" / "go-live.md").read_text()
    [row] = [line for line in record.splitlines() if line.startswith("| station profiles |")]
    own = {s["name"]: s["profile_sha256"] for s in run.results["stations"]}
    assert own["gb300-a"] != run.results["profile"]["sha256"] == own["gb300-b"], own
    assert f"gb300-a: glm-5.3-flash-gb300 (sha256:{own['gb300-a'][:12]})" in row, row
    assert f"gb300-b: glm-5.3-flash-gb300 (sha256:{own['gb300-b'][:12]})" in row, row
