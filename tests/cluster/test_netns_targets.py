"""The network-namespace test stations are real hosts to testinfra, and the jumbo ping tells their rails apart."""

import subprocess
from pathlib import Path

import pytest
import testinfra

from golive.facts.net import PingVerdict, parse_ip_route_get, parse_ping

from . import netns

JUMBO = "ping -M do -s 8972 -c 3 -W 1 -i 0.2 -I {ifname} {peer}"


def hosts(pair: netns.StationPair):
    return [testinfra.get_host(s.spec, ssh_config=str(pair.ssh_config)) for s in (pair.a, pair.b)]


@pytest.mark.parametrize("variant", sorted(netns.VARIANTS))
def test_ssh_reaches_both_stations_and_reads_the_rail_mtu(station_pairs, variant):
    pair = station_pairs(variant)
    for host, station in zip(hosts(pair), (pair.a, pair.b), strict=True):
        assert host.backend.get_hostname() == station.name
        assert host.interface(station.ifname).link[0]["mtu"] == station.mtu
    assert netns.VARIANTS[variant].mtu_b == pair.b.mtu


def test_jumbo_ping_passes_on_the_healthy_pair(healthy_pair):
    a, _ = hosts(healthy_pair)
    out = a.run(JUMBO.format(ifname=healthy_pair.a.ifname, peer=healthy_pair.b.address))
    ping = parse_ping(out.stdout + out.stderr, out.rc)
    assert ping.verdict is PingVerdict.OK, out.stdout + out.stderr
    assert (ping.transmitted, ping.received) == (3, 3)


def test_jumbo_ping_fails_where_the_peer_is_at_1500(station_pairs):
    pair = station_pairs("mtu-b-1500")
    a, b = hosts(pair)
    out = a.run(JUMBO.format(ifname=pair.a.ifname, peer=pair.b.address))
    assert parse_ping(out.stdout + out.stderr, out.rc).verdict is PingVerdict.DROPPED, out.stdout + out.stderr
    back = b.run(JUMBO.format(ifname=pair.b.ifname, peer=pair.a.address))  # from the small side: local error
    ping = parse_ping(back.stdout + back.stderr, back.rc)
    assert (ping.verdict, ping.local_mtu) == (PingVerdict.LOCAL_MTU, 1500), back.stdout + back.stderr


def test_missing_rail_address_is_visible_and_unpingable(station_pairs):
    pair = station_pairs("rail-address-missing")
    a, b = hosts(pair)
    assert not [x for x in b.interface(pair.b.ifname).addresses if "." in x]
    out = a.run(JUMBO.format(ifname=pair.a.ifname, peer=pair.b.address))
    assert parse_ping(out.stdout + out.stderr, out.rc).verdict is not PingVerdict.OK


def test_route_via_the_wrong_interface_is_visible(station_pairs, healthy_pair):
    for pair, dev in ((healthy_pair, healthy_pair.a.ifname), (station_pairs("route-wrong-interface"), "mgmt0")):
        a, _ = hosts(pair)
        route = parse_ip_route_get(a.check_output(f"ip -j route get {pair.b.address}"))
        assert route is not None and route.dev == dev


def test_teardown_removes_namespaces_and_sshds_after_a_failure(netns_available):
    with pytest.raises(RuntimeError, match="boom"), netns.station_pair("healthy") as pair:
        pids = [int((pair.workdir / s.name / "sshd.pid").read_text()) for s in (pair.a, pair.b)]
        raise RuntimeError("boom")
    listed = subprocess.run(["ip", "netns", "list"], check=False, capture_output=True, text=True).stdout
    assert pair.a.name not in listed and pair.b.name not in listed
    assert not pair.workdir.exists()
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
