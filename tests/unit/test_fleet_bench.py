"""bench/fleet.py's pure parts, without a station: the ONE inventory it writes for N stations (golive reads every
station with its own host, endpoint, site profile and ssh_config), the memory refusal line, /proc/meminfo's parsing,
a station's process tree."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from golive.site.loader import load_inventory
from golive_testbed import realstation_files as files
from golive_testbed.realstation import Record

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fleet() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_fleet", REPO / "bench" / "fleet.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_fleet", module)
    spec.loader.exec_module(module)
    return module


def _station(tmp_path: Path, i: int) -> Record:
    """A station's scratch directory as `up` leaves it, as far as the inventory needs: site profile and ssh_config."""
    scratch = tmp_path / f"golive-station-fleet-{i}-x"
    scratch.mkdir()
    record = Record(f"fleet-{i}", str(scratch), ssh_port=2200 + i, serve_port=8800 + i, registry_port=5000 + i)
    digest = "sha256:" + f"{i:x}" * 64
    (scratch / "site-profile.yaml").write_text(
        files.site_profile(f"127.0.0.1:{record.registry_port}/{files.IMAGE_NAME}", digest, record.serve_port, 4096)
    )
    record.ssh_config.write_text(f"Host 127.0.0.1\n    IdentityFile {scratch / 'client_key'}\n")
    return record


def test_one_inventory_lists_every_station_with_its_own_host_endpoint_profile_and_ssh_config(fleet, tmp_path):
    records = [_station(tmp_path, i) for i in range(1, 5)]
    path = fleet.write_inventory(records, tmp_path / "fleet-4" / "inventory.yaml")
    loaded = load_inventory(path)
    stations = loaded.inventory.stations
    assert [s.name for s in stations] == ["fleet-1", "fleet-2", "fleet-3", "fleet-4"]
    for record, station in zip(records, stations, strict=True):
        assert station.host == f"ssh://root@127.0.0.1:{record.ssh_port}"
        assert station.endpoint == f"http://127.0.0.1:{record.serve_port}/v1"
        assert loaded.ssh_config_of(station) == str(record.ssh_config)
        profile = loaded.profile_of(station).profile
        assert profile.image.digest == "sha256:" + f"{int(record.name[-1]):x}" * 64  # its own, not fleet-1's
        assert profile.vllm.port == record.serve_port


def test_an_empty_fleet_is_refused(fleet, tmp_path):
    with pytest.raises(ValueError, match="at least one station"):
        fleet.write_inventory([], tmp_path / "inventory.yaml")


def test_a_size_that_does_not_fit_is_one_line_naming_n_need_and_what_is_available(fleet):
    gib = fleet.GIB
    assert fleet.refusal(4, 3, 20 * gib, 2.5, 3.0) is None  # 3 × 2.5 + 3 = 10.5 GiB ≤ 20
    line = fleet.refusal(8, 4, 10 * gib, 2.5, 3.0)
    assert line == (
        "fleet: N=8 does not fit here: 4 more station(s) × 2.5 GiB + 3.0 GiB reserve = 13.0 GiB, but 10.0 GiB is "
        "available (MemAvailable); N=8 not run"
    )
    assert "\n" not in line


def test_meminfo_is_read_in_bytes(fleet, tmp_path):
    sample = tmp_path / "meminfo"
    sample.write_text("MemTotal:       24683520 kB\nMemAvailable:   15000000 kB\nHugePages_Total:       0\n")
    mem = fleet.meminfo(sample)
    assert mem["MemTotal"] == 24683520 * 1024 and mem["MemAvailable"] == 15000000 * 1024
    assert mem["HugePages_Total"] == 0


def test_a_stations_processes_are_its_roots_and_everything_below_them(fleet):
    # 10 nspawn → 11 the station's systemd → 12 sshd; 20 containerd-shim → 21 vLLM → 22 EngineCore; 30 someone else's
    parent = {10: 1, 11: 10, 12: 11, 20: 1, 21: 20, 22: 21, 30: 1, 31: 30}
    assert fleet.descendants({10, 20}, parent) == {10, 11, 12, 20, 21, 22}
    assert fleet.descendants(set(), parent) == set()


def test_each_run_is_set_against_the_one_station_run_of_the_same_xdist_mode(fleet):
    sizes = [
        {"n": 1, "runs": [{"workers": 0, "wall_s": 4.0}, {"workers": 1, "wall_s": 8.0}]},
        {"n": 4, "runs": [{"workers": 0, "wall_s": 12.0}, {"workers": 2, "wall_s": 16.0}]},
    ]
    fleet.against_n1(sizes)
    assert sizes[1]["runs"][0] == {"workers": 0, "wall_s": 12.0, "wall_vs_n1": 3.0, "per_station_vs_n1": 0.75}
    assert sizes[1]["runs"][1]["wall_vs_n1"] == 2.0 and sizes[1]["runs"][1]["per_station_vs_n1"] == 0.5
