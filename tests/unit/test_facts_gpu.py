"""GPU and NUMA parsers on real recordings (fixtures/recorded/h200-device, a real H200 host)."""

from pathlib import Path

import pytest

from golive.facts import FactError
from golive.facts.gpu import (
    container_id_in_cgroup,
    normalize_bus_id,
    parse_cgroup,
    parse_cpulist,
    parse_node_meminfo,
    parse_numa_status,
    parse_query_csv,
    parse_smi_q,
)

RECORDED = Path(__file__).resolve().parents[2] / "fixtures/recorded/h200-device"


def test_smi_q_real_h200():
    [gpu] = parse_smi_q((RECORDED / "nvidia-smi-q.txt").read_text())
    assert gpu.product_name == "NVIDIA H200" and gpu.addressing_mode == "None"
    assert gpu.bus_id == "0000:00:06.0" and gpu.fb_total_mib == 143771 and gpu.fb_used_mib == 0


def test_query_gpu_real_h200():
    rows = parse_query_csv(
        (RECORDED / "nvidia-smi-query-gpu.txt").read_text(),
        ["index", "name", "pci.bus_id", "memory.used", "memory.total"],
    )
    assert rows == [
        {
            "index": "0",
            "name": "NVIDIA H200",
            "pci.bus_id": "00000000:00:06.0",
            "memory.used": "0",
            "memory.total": "143771",
        }
    ]


def test_query_wrong_columns():
    with pytest.raises(FactError, match="columns"):
        parse_query_csv("1, 2\n", ["a", "b", "c"])


def test_node_meminfo_real_h200():
    text = (RECORDED / "sysfs-nodes.txt").read_text()
    node0 = text.split("== /sys/devices/system/node/node0")[1]
    values = parse_node_meminfo(node0)
    assert values["FilePages"] == 1040688 and values["MemTotal"] == 4681200


def test_cpulist_and_numa_status():
    assert parse_cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11} and parse_cpulist("\n") == set()
    assert parse_numa_status("Node: 1\nStatus: online\n") == 1
    assert parse_numa_status("Node: -1\n") is None


def test_bus_ids_compare_across_tools():
    assert normalize_bus_id("00000009:01:00.0") == normalize_bus_id("0009:01:00.0") == "0009:01:00.0"


def test_cgroups():
    cid = "b054f115b184595585a561367e4480d69f9a5672da7fc1bc9227c19ce1d6f813"
    assert container_id_in_cgroup(parse_cgroup(f"0::/system.slice/docker-{cid}.scope\n")) == cid
    assert container_id_in_cgroup(parse_cgroup(f"12:memory:/docker/{cid}\n")) == cid
    assert container_id_in_cgroup(parse_cgroup("0::/user.slice/user-1000.slice/session-4.scope")) is None
    # real: this H200 runs in a sandbox whose cgroup is not docker's
    assert container_id_in_cgroup(parse_cgroup((RECORDED / "cgroup.txt").read_text().splitlines()[2])) is None


def test_smi_q_header_gives_driver_and_cuda_version():
    from golive.facts.gpu import parse_smi_versions

    assert parse_smi_versions((RECORDED / "nvidia-smi-q.txt").read_text()) == {"driver": "580.159.04", "cuda": "13.0"}
    assert parse_smi_versions("==============NVSMI LOG==============\n") == {"driver": None, "cuda": None}


def test_product_brand_tells_a_display_gpu_from_a_data_centre_gpu():
    """nvidia-smi -q's `Product Brand` (NVML's nvmlBrandType_t), on the real H200 recording and the GB300 tree's."""
    from golive.facts.gpu import is_workstation_brand, parse_smi_q

    [h200] = parse_smi_q((RECORDED / "nvidia-smi-q.txt").read_text())
    assert (h200.product_name, h200.brand) == ("NVIDIA H200", "NVIDIA") and not is_workstation_brand(h200.brand)
    tree = Path(__file__).resolve().parents[2] / "fixtures/stations/gb300-healthy/opt/golive-recorded/nvidia-smi-q.txt"
    gb300, display = parse_smi_q(tree.read_text())
    assert gb300.brand == "NVIDIA" and not is_workstation_brand(gb300.brand)
    assert display.brand == "NVIDIA RTX" and is_workstation_brand(display.brand)
    assert all(is_workstation_brand(b) for b in ("Quadro", "GeForce RTX", "Titan", "NVS", " quadro rtx "))
    assert not any(is_workstation_brand(b) for b in ("Tesla", "NVIDIA", None, ""))
