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
    result = subprocess.run([sys.executable, "-m", "golive.cli", "run", str(REPO / "fixtures/inventories" / inventory),
                             "-o", str(out), "-m", "host", "-q", "-k", "serving_gpu_present", "-p", "no:cacheprovider"],
                            capture_output=True, text=True, cwd=REPO, timeout=300)
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
