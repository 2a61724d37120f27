"""Two stations in one inventory keep their own metrics in results.json (metrics carry their station)."""

import pytest
from golive_run import golive_run


@pytest.mark.slow
def test_two_stations_keep_separate_metrics(reference, tmp_path):
    """The session's healthy station (tests/conftest.py), listed twice under two names."""
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        "profile: reference-cpu\nstations:\n"
        f"  - {{name: station-a, endpoint: '{reference.base_url}'}}\n"
        f"  - {{name: station-b, endpoint: '{reference.base_url}'}}\n"
    )
    run = golive_run(inventory, tmp_path / "out", "-m", "endpoint", "-q", "-k", "kv_cache_capacity", timeout=600)
    kv = [m for m in run.results["metrics"] if m["name"] == "kv_cache_tokens"]
    assert sorted(m["station"] for m in kv) == ["station-a", "station-b"], run.output
    assert all(m["value"] > 0 and m["floor"] is not None for m in kv)
