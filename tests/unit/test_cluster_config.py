"""The two-station profile's cluster section and the inventory's ssh_config."""

from ipaddress import IPv4Address
from pathlib import Path

import pytest

from golive.site.loader import ConfigError, load_inventory, load_profile


def test_two_station_profile_pins_both_rails_and_nccl():
    cluster = load_profile("glm-5.3-2x-station-tp2").profile.cluster
    assert cluster is not None
    assert [(r.interface, r.rdma_device, r.addresses["a"], r.addresses["b"]) for r in cluster.rails] == [
        ("enp1s0f0np0", "mlx5_0", IPv4Address("192.168.100.1"), IPv4Address("192.168.100.2")),
        ("enp1s0f1np1", "mlx5_1", IPv4Address("192.168.101.1"), IPv4Address("192.168.101.2")),
    ]
    assert (cluster.mtu, cluster.speed_gbps, cluster.nccl_version, cluster.gdrdma_required) == (
        9000,
        400,
        "2.30.7",
        True,
    )
    assert cluster.env["NCCL_IB_GID_INDEX"] == "3" and cluster.env["VLLM_ALLREDUCE_USE_FLASHINFER"] == "0"
    assert cluster.env["VLLM_DISTRIBUTED_TIMEOUT_SECONDS"] == "1800" and cluster.busbw_floor_gbs is None


def test_a_site_replaces_the_rails_and_keeps_the_rest(tmp_path: Path):
    site = tmp_path / "site.yaml"
    site.write_text("extends: glm-5.3-2x-station-tp2\ncluster:\n  rails: []\n  nccl_log: /tmp/nccl.log\n")
    cluster = load_profile(site).profile.cluster
    assert cluster is not None
    assert cluster.rails == [] and cluster.nccl_log == "/tmp/nccl.log" and cluster.nccl_version == "2.30.7"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "  rails:\n    - {interface: r0, addresses: {a: 10.0.0.1, c: 10.0.0.2}}\n",
            "site.yaml:5: 'cluster.rails.0.addresses.c': input should be 'a' or 'b'",
        ),
        (
            "  rails:\n    - {interface: r0, addresses: {a: 10.0.0.300, b: 10.0.0.2}}\n",
            "site.yaml:5: 'cluster.rails.0.addresses.a': input is not a valid IPv4 address",
        ),
        ("  mtus: 9000\n", "site.yaml:4: unknown key 'cluster.mtus'"),
    ],
)
def test_a_bad_cluster_section_is_one_line_with_its_place(tmp_path: Path, text, error):
    site = tmp_path / "site.yaml"
    site.write_text("extends: glm-5.3-2x-station-tp2\n# a site\ncluster:\n" + text)
    with pytest.raises(ConfigError) as info:
        load_profile(site)
    assert str(info.value).startswith(f"{tmp_path}/{error}") and "\n" not in str(info.value), str(info.value)


def test_inventory_ssh_config_is_relative_to_the_inventory(tmp_path: Path):
    (tmp_path / "inv").mkdir()
    inventory = tmp_path / "inv" / "inventory.yaml"
    inventory.write_text(
        "profile: glm-5.3-2x-station-tp2\nssh_config: ../ssh/config\n"
        "stations:\n  - {name: a, role: a, host: 'ssh://a'}\n  - {name: b, role: b, host: 'ssh://b'}\n"
    )
    assert load_inventory(inventory).ssh_config == str(tmp_path / "ssh" / "config")
