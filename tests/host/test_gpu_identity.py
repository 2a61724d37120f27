"""Say what the station is: a station whose GPUs are not the profile's says what it has and that the profile does not
fit it; a station whose serving GPU did not come up keeps the driver advice; provenance names the GPUs present."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from golive_testbed.targets import build_station_trees

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="station trees are reached through chroot, which needs root")


@pytest.fixture(scope="module")
def trees():
    return build_station_trees()


def gpu_presence(inventory: str, out: Path) -> tuple[int, dict, dict]:
    """`golive run INVENTORY -m host -k serving_gpu_present`: (exit, the check, the station's provenance)."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "golive.cli",
            "run",
            str(REPO / "fixtures/inventories" / inventory),
            "-o",
            str(out),
            "-m",
            "host",
            "-q",
            "-k",
            "serving_gpu_present",
            "-p",
            "no:cacheprovider",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    results = json.loads((out / "results.json").read_text())
    [check] = results["checks"]
    [station] = results["stations"]
    return result.returncode, check, station["provenance"]


def test_gb300_station_with_the_gb300_profile_passes(trees, tmp_path):
    code, check, provenance = gpu_presence("gb300-healthy.yaml", tmp_path)
    assert code == 0 and check["outcome"] == "passed", check
    assert provenance["gpu"] == "NVIDIA GB300"
    assert provenance["gpus"] == "1 × NVIDIA GB300, 1 × NVIDIA RTX PRO 2000 Blackwell"


def test_h200_station_with_the_gb300_profile_says_the_profile_does_not_fit(trees, tmp_path):
    """The recorded real H200 host: nvidia-smi lists an H200 (brand NVIDIA, a data-centre GPU), no GB300."""
    code, check, provenance = gpu_presence("h200-device.yaml", tmp_path)
    assert code == 1 and check["outcome"] == "failed", check
    message = check["message"]
    assert "this station has 1 × NVIDIA H200, no GB300" in message, message
    assert "profile glm-5.3-flash-gb300 is written for 1 × GB300 per station" in message, message
    assert "Do: this profile does not fit this hardware" in message and "golive profile list" in message, message
    assert "reinstall the driver" not in message, message
    assert provenance["gpu"] == "NVIDIA H200" and provenance["gpus"] == "1 × NVIDIA H200", provenance
    md = (tmp_path / "go-live.md").read_text()
    assert "| gpu | NVIDIA H200 |" in md, md


def test_gb300_station_whose_gb300_is_not_listed_keeps_the_driver_advice(trees, tmp_path):
    """Only the display GPU (brand NVIDIA RTX) is listed: the GB300 is there but did not come up."""
    code, check, provenance = gpu_presence("gpu-missing.yaml", tmp_path)
    assert code == 1 and check["outcome"] == "failed", check
    message = check["message"]
    assert "nvidia-smi lists NVIDIA RTX PRO 2000 Blackwell" in message, message
    assert "reseat/reboot or reinstall the driver until the GB300 is listed" in message, message
    assert "does not fit" not in message, message
    assert provenance["gpus"] == "1 × NVIDIA RTX PRO 2000 Blackwell", provenance


GPU_CHECKS = (
    "test_serving_gpu_present",
    "test_gpu_compute_processes_belong_to_serving_container",
    "test_idle_hbm_below_ceiling_before_start",
)
SELECTED = " or ".join((*GPU_CHECKS, "test_unit_restarts_on_failure_after_delay"))


def gpu_checks(out: Path, *args: str) -> tuple[int, dict[str, dict], str]:
    """The GPU checks (and one that passes) on the station whose GB300 did not come up (phase pre-start):
    (exit, check name -> result, the run's output)."""
    inventory = REPO / "fixtures/inventories/gpu-missing.yaml"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "golive.cli",
            "run",
            str(inventory),
            "-o",
            str(out),
            "-m",
            "host",
            "-q",
            "-k",
            SELECTED,
            "-p",
            "no:cacheprovider",
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    results = json.loads((out / "results.json").read_text())
    checks = {c["nodeid"].split("::")[-1].split("[")[0]: c for c in results["checks"]}
    return result.returncode, checks, result.stdout + result.stderr


def test_gpu_checks_on_a_station_without_its_gpu_fail_or_are_not_checked(trees, tmp_path):
    """The recipe expects a GB300: its absence fails the presence check, and the ownership check that cannot run
    without it is not checked (a plain skip), never not applicable."""
    code, checks, output = gpu_checks(tmp_path)
    assert code == 1, output
    assert checks["test_serving_gpu_present"]["outcome"] == "failed", checks
    assert checks["test_gpu_compute_processes_belong_to_serving_container"]["outcome"] == "not_checked", checks
    assert "no GB300 visible" in checks["test_gpu_compute_processes_belong_to_serving_container"]["message"]


def test_ownership_skip_without_the_gpu_makes_the_run_incomplete(trees, tmp_path):
    code, checks, output = gpu_checks(tmp_path, "--deselect", "suites/host/test_gpu.py::test_serving_gpu_present")
    assert code == 2 and "INCOMPLETE" in output, output
    assert checks["test_gpu_compute_processes_belong_to_serving_container"]["outcome"] == "not_checked", checks


def test_a_profile_without_gpus_makes_every_gpu_check_not_applicable_and_the_run_go(trees, tmp_path):
    """gpu.per_station: 0 (a station that serves without GPUs, as the testbed's real station): the GPU checks are
    not applicable with the reason and where the profile says it; the run is GO, not INCOMPLETE."""
    site = tmp_path / "no-gpu.yaml"
    site.write_text(
        f"extends: {REPO / 'fixtures/profiles/gb300-site.yaml'}\ngpu:\n  name_contains: GB300\n  per_station: 0\n"
    )
    code, checks, output = gpu_checks(tmp_path / "out", "--profile", str(site))
    assert code == 0 and "GO" in output, output
    assert checks["test_unit_restarts_on_failure_after_delay"]["outcome"] == "passed", checks
    for name in GPU_CHECKS:
        assert checks[name]["outcome"] == "not_applicable", checks[name]
        assert checks[name]["message"] == (
            "the profile expects no serving GPU on this station (gpu.per_station: 0 "
            f"[site profile {site}:4 gpu.per_station])"
        ), checks[name]
