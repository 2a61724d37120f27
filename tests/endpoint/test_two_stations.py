"""Two stations in one inventory keep their own metrics in results.json (metrics carry their station)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from golive_testbed.reference.launcher import ReferenceStation

REPO = Path(__file__).resolve().parents[2]
PORT = int(os.environ.get("GOLIVE_TEST_PORT", "8779"))


@pytest.mark.slow  # starts its own reference station (~1 min on 2 cores)
def test_two_stations_keep_separate_metrics(tmp_path):
    with ReferenceStation(port=PORT, log_path=tmp_path / "vllm.log") as station:
        inventory = tmp_path / "inventory.yaml"
        inventory.write_text("profile: reference-cpu\nstations:\n"
                             f"  - {{name: station-a, endpoint: '{station.base_url}'}}\n"
                             f"  - {{name: station-b, endpoint: '{station.base_url}'}}\n")
        result = subprocess.run([sys.executable, "-m", "golive.cli", "run", str(inventory), "-o", str(tmp_path / "out"),
                                 "-m", "endpoint", "-q", "-k", "kv_cache_capacity"],
                                capture_output=True, text=True, cwd=REPO, timeout=600)
    results = json.loads((tmp_path / "out/results.json").read_text())
    kv = [m for m in results["metrics"] if m["name"] == "kv_cache_tokens"]
    assert sorted(m["station"] for m in kv) == ["station-a", "station-b"], result.stdout + result.stderr
    assert all(m["value"] > 0 and m["floor"] is not None for m in kv)
