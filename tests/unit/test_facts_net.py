"""Rail and RDMA parsers on recorded outputs: real ones from network namespaces (fixtures/recorded/netns) and the
device machine (h200x2-device), and the GB300 rail's formats (gb300-rail, values reconstructed: see PROVENANCE.md)."""

from ipaddress import IPv4Interface
from pathlib import Path

import pytest

from golive.facts import FactError
from golive.facts.net import (
    PingVerdict,
    parse_env_file,
    parse_ethtool,
    parse_ibv_devinfo,
    parse_ip_addr,
    parse_ip_route_get,
    parse_ping,
    parse_sys_speed,
    parse_sysfs_gid,
)

RECORDED = Path(__file__).resolve().parents[2] / "fixtures/recorded"
RAIL = RECORDED / "gb300-rail"


def recorded(path: str) -> tuple[str, int]:
    """A recording's output without its `# command:` / `# host:` header and `# rc=N` trailer, and that rc."""
    lines = (RECORDED / path).read_text().splitlines()
    assert lines[0].startswith("# command: ") and lines[1].startswith("# host: ") and lines[-1].startswith("# rc=")
    return "\n".join(lines[2:-1]) + "\n", int(lines[-1][5:])


def test_ip_addr_real_netns():
    interfaces = parse_ip_addr(recorded("netns/ip-addr.txt")[0])
    assert interfaces["va"].up and interfaces["va"].mtu == 9000
    assert interfaces["va"].ipv4 == (IPv4Interface("10.213.0.1/24"),)
    assert interfaces["lo"].operstate == "UNKNOWN"


def test_ip_link_real_netns_mtu_and_down():
    assert parse_ip_addr(recorded("netns/ip-link-1500.txt")[0])["va"].mtu == 1500
    down = parse_ip_addr(recorded("netns/ip-link-down.txt")[0])["va"]
    assert not down.up and down.operstate == "DOWN" and down.ipv4 == ()


def test_ip_addr_gb300_rails_and_missing_address():
    healthy = parse_ip_addr(recorded("gb300-rail/ip-addr.txt")[0])
    assert [str(i.ipv4[0]) for i in (healthy["enp1s0f0np0"], healthy["enp1s0f1np1"])] == [
        "192.168.100.1/24",
        "192.168.101.1/24",
    ]
    missing = parse_ip_addr(recorded("gb300-rail/ip-addr-rail-missing.txt")[0])
    assert missing["enp1s0f1np1"].up and missing["enp1s0f1np1"].ipv4 == ()
    assert parse_ip_addr(recorded("gb300-rail/ip-link-mtu1500.txt")[0])["enp1s0f0np0"].mtu == 1500


def test_route_get_real_and_unreachable():
    route = parse_ip_route_get(recorded("netns/ip-route-get.txt")[0])
    assert (route.dev, route.src, route.gateway) == ("va", "10.213.0.1", None)
    assert parse_ip_route_get(recorded("netns/ip-route-get-unreachable.txt")[0]) is None
    wrong = parse_ip_route_get(recorded("gb300-rail/ip-route-get-wrong-dev.txt")[0])
    assert (wrong.dev, wrong.gateway) == ("enP7s7", "10.20.0.1")


@pytest.mark.parametrize("text", ["", "not json", '{"dev": "x"}', "[]"])
def test_ip_garbage(text):
    with pytest.raises(FactError):
        parse_ip_route_get(text)
    if text != "[]":
        with pytest.raises(FactError):
            parse_ip_addr(text)


def test_ethtool_real_veth_and_gb300():
    veth = parse_ethtool(recorded("netns/ethtool-veth.txt")[0])
    assert (veth.name, veth.speed_mbps, veth.duplex, veth.link_detected) == ("va", 10000, "Full", True)
    assert parse_ethtool(recorded("netns/ethtool-veth-down.txt")[0]).link_detected is False
    rail = parse_ethtool(recorded("gb300-rail/ethtool-enp1s0f0np0.txt")[0])
    assert (rail.speed_mbps, rail.link_detected) == (400000, True)
    assert parse_ethtool(recorded("gb300-rail/ethtool-200g.txt")[0]).speed_mbps == 200000
    down = parse_ethtool(recorded("gb300-rail/ethtool-link-down.txt")[0])
    assert (down.speed_mbps, down.duplex, down.link_detected) == (None, None, False)


def test_ethtool_no_device_real():
    with pytest.raises(FactError, match="Settings for"):
        parse_ethtool(recorded("netns/ethtool-no-device.txt")[0])


def test_sys_speed():
    assert parse_sys_speed("400000\n") == 400000
    assert parse_sys_speed("-1\n") is None  # the device machine's virtio eth0 (h200x2-device/sys-class-net.txt)
    assert "eth0 speed=-1" in recorded("h200x2-device/sys-class-net.txt")[0]
    with pytest.raises(FactError):
        parse_sys_speed(recorded("netns/sys-speed-down.txt")[0])  # `cat: …: Invalid argument` on a down veth


@pytest.mark.parametrize(
    "name, rc, verdict, tx, rx",
    [
        ("ping-jumbo-ok", 0, PingVerdict.OK, 3, 3),
        ("ping-jumbo-peer-1500", 1, PingVerdict.DROPPED, 3, 0),
        ("ping-jumbo-local-1500", 1, PingVerdict.LOCAL_MTU, 3, 0),
        ("ping-jumbo-no-peer", 1, PingVerdict.DROPPED, 3, 0),
        ("ping-unreachable", 2, PingVerdict.UNREACHABLE, 0, 0),
        ("ping-link-down", 2, PingVerdict.UNREACHABLE, 0, 0),
    ],
)
def test_ping_real_netns(name, rc, verdict, tx, rx):
    text, recorded_rc = recorded(f"netns/{name}.txt")
    assert recorded_rc == rc
    ping = parse_ping(text, rc)
    assert (ping.verdict, ping.transmitted, ping.received) == (verdict, tx, rx)
    assert (ping.message == "") == (verdict is PingVerdict.OK)


def test_ping_messages():
    assert parse_ping(*recorded("netns/ping-jumbo-local-1500.txt")).local_mtu == 1500
    assert parse_ping(*recorded("netns/ping-jumbo-peer-1500.txt")).message == "ping: sendmsg: No buffer space available"
    partial = parse_ping("3 packets transmitted, 2 received, 33.3333% packet loss, time 2003ms\n", 1)
    assert partial.verdict is PingVerdict.DROPPED and partial.message == "1 of 3 replies missing"
    assert parse_ping("ping: sendmsg: Message too long\n", 1).verdict is PingVerdict.LOCAL_MTU


def test_ping_garbage():
    with pytest.raises(FactError):
        parse_ping("hello\n", 0)


def test_ibv_devinfo_v_gb300():
    devices = parse_ibv_devinfo(recorded("gb300-rail/ibv_devinfo-v.txt")[0])
    assert [d.hca_id for d in devices] == ["mlx5_0", "mlx5_1"]
    port = devices[0].ports[1]
    assert devices[0].fw_ver == "28.43.1014" and devices[0].transport == "InfiniBand (0)"
    assert (port.active, port.link_layer, port.active_mtu) == (True, "Ethernet", 4096)
    assert [(g.index, g.type) for g in port.gids] == [(0, "RoCE v1"), (1, "RoCE v2"), (2, "RoCE v1"), (3, "RoCE v2")]
    assert port.gids[3].gid == "::ffff:192.168.100.1" and port.gid_index("192.168.100.1") == 3
    assert port.gids[2].ipv4 == "192.168.100.1"  # RoCE v1 prints the raw form; still IPv4-mapped
    assert devices[1].ports[1].gid_index("192.168.101.1") == 3


def test_ibv_devinfo_broken_forms():
    shifted = parse_ibv_devinfo(recorded("gb300-rail/ibv_devinfo-v-gid-shifted.txt")[0])
    assert shifted[0].ports[1].gid_index("192.168.100.1") == 5
    plain = parse_ibv_devinfo(recorded("gb300-rail/ibv_devinfo-port-down.txt")[0])
    assert [d.ports[1].state for d in plain] == ["PORT_ACTIVE", "PORT_DOWN"] and plain[1].ports[1].gids == ()


def test_ibv_devinfo_no_devices_real():
    assert parse_ibv_devinfo(recorded("netns/ibv-devinfo-none.txt")[0]) == []
    assert parse_ibv_devinfo("No IB devices found\n") == []
    with pytest.raises(FactError, match="hca_id"):
        parse_ibv_devinfo("garbage\n")


@pytest.mark.parametrize("tree, index", [("sysfs-infiniband", 3), ("sysfs-infiniband-gid-shifted", 5)])
def test_sysfs_gid_table(tree, index):
    port = RAIL / tree / "mlx5_0/ports/1"
    gids = []
    for i in range(8):
        kind = port / f"gid_attrs/types/{i}"
        gid = parse_sysfs_gid(i, (port / f"gids/{i}").read_text(), kind.read_text() if kind.exists() else None)
        if gid:
            gids.append(gid)
    roce_v2 = [g.index for g in gids if g.ipv4 == "192.168.100.1" and g.type == "RoCE v2"]
    assert roce_v2 == [index]
    # sysfs and ibv_devinfo -v agree entry for entry
    name = "ibv_devinfo-v.txt" if index == 3 else "ibv_devinfo-v-gid-shifted.txt"
    assert tuple(gids) == parse_ibv_devinfo(recorded(f"gb300-rail/{name}")[0])[0].ports[1].gids


def test_sysfs_gid_zero_and_garbage():
    assert parse_sysfs_gid(7, "0000:0000:0000:0000:0000:0000:0000:0000\n", None) is None
    with pytest.raises(FactError):
        parse_sysfs_gid(0, "nope", "RoCE v2")


def test_env_file():
    env = parse_env_file((RAIL / "rail.env").read_bytes())
    assert env.values["NCCL_IB_HCA"] == "mlx5_0,mlx5_1" and env.values["NCCL_IB_GID_INDEX"] == "3"
    assert env.values["RAIL_IFS"] == "enp1s0f0np0 enp1s0f1np1" and env.values["NCCL_IB_DISABLE"] == "0"
    other = parse_env_file((RAIL / "rail-b-differs.env").read_text())
    assert other.sha256 != env.sha256 and other.values["NCCL_IB_GID_INDEX"] == "5"
    assert parse_env_file((RAIL / "rail.env").read_text()).sha256 == env.sha256


@pytest.mark.parametrize("text", ["JUST_A_WORD\n", "1BAD=x\n", "A='unterminated\n"])
def test_env_file_garbage(text):
    with pytest.raises(FactError, match="line 1"):
        parse_env_file(text)
