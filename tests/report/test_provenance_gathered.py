"""Provenance the cluster layer gathers: the NCCL the serving run loaded, read from each station's NCCL log."""

from pathlib import Path

from e2e import needs_chroot
from golive_run import golive_run

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "fixtures" / "cluster-stations"


@needs_chroot
def test_nccl_version_travels_per_station(tmp_path):
    from golive_testbed.targets import build_station_trees

    trees = build_station_trees(SRC, SRC / ".built")
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        f"profile: {REPO}/fixtures/profiles/gb300-rail-site.yaml\nstations:\n"
        f"  - {{name: gb300-a, role: a, host: 'chroot://{trees['a-nccl-2.28.3']}'}}\n"
        f"  - {{name: gb300-b, role: b, host: 'chroot://{trees['gb300-rail-b']}'}}\n"
    )
    run = golive_run(inventory, tmp_path / "out", "-m", "cluster", "-k", "nccl_version", "-q")
    nccl = {s["name"]: s["provenance"].get("nccl_version") for s in run.results["stations"]}
    assert nccl == {"gb300-a": "2.28.3+cuda12.9", "gb300-b": "2.30.7+cuda13.0"}, run.output
    assert "| nccl_version | 2.28.3+cuda12.9 |" in (tmp_path / "out/go-live.md").read_text()
