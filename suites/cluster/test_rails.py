"""Every rail on every station: up, addressed, at the profile's MTU and speed, the route to the peer by that rail;
jumbo frames end to end [002]. If either station drops off the rail, the model stops answering."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import not_applicable, require
from golive.facts.net import PingVerdict

if TYPE_CHECKING:
    from golive.profile.inventory import Station
    from golive.profile.schema import Cluster, Rail
    from golive.station.cluster import ClusterFacts

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="session")
def rails(cluster: Cluster) -> list[Rail]:
    if not cluster.rails:
        not_applicable(
            "the profile declares no rails (cluster.rails: []): both ranks share one host and talk over "
            "P2P/NVLink, no network"
        )
    return cluster.rails


def _present(cluster_facts: ClusterFacts, rails: list[Rail]) -> list[Rail]:
    """The rails whose interface exists; a missing one fails test_rail_link_up and is not checked again."""
    found = [r for r in rails if r.interface in cluster_facts.interfaces]
    if not found:
        pytest.skip("no rail interface exists on this station: see test_rail_link_up")
    return found


@check("cluster.rails.link_up", Cost.READ)
def test_rail_link_up(cluster_facts: ClusterFacts, rails: list[Rail], station: Station) -> None:
    """Every rail interface exists and is UP [002]."""
    interfaces = cluster_facts.interfaces
    bad = [
        f"{r.interface} "
        + (f"is {interfaces[r.interface].operstate}" if r.interface in interfaces else "does not exist")
        for r in rails
        if r.interface not in interfaces or not interfaces[r.interface].up
    ]
    require(
        not bad,
        found=f"on {station.name}: " + "; ".join(bad) + f" (ip -j addr show lists {', '.join(interfaces)})",
        recipe=f"both stations stay on every rail ({', '.join(r.interface for r in rails)}): if either drops off, "
        f"the model stops answering [002]",
        fix="check the cable and the switch port, then `ip link set IF up`; a renamed interface means the "
        "profile's rail names no longer match this station",
    )


@check("cluster.rails.holds_its_address", Cost.READ)
def test_rail_holds_its_address(cluster_facts: ClusterFacts, rails: list[Rail], station: Station) -> None:
    """Every rail holds the station's pinned IPv4 address [002]."""
    bad = []
    for rail in _present(cluster_facts, rails):
        held = [str(a.ip) for a in cluster_facts.interfaces[rail.interface].ipv4]
        if cluster_facts.local_address(rail) not in held:
            bad.append(
                f"{rail.interface} holds {', '.join(held) or 'no IPv4 address'}, not "
                f"{cluster_facts.local_address(rail)}"
            )
    require(
        not bad,
        found=f"on {station.name}: " + "; ".join(bad),
        recipe="rail interface, RDMA device and both IPv4 addresses pinned in an environment file [002]",
        fix=f"add the address on {station.name} (`ip addr add ADDR/24 dev IF`) and make it persistent in the "
        f"station's network configuration (netplan / systemd-networkd)",
    )


@check("cluster.rails.mtu", Cost.READ)
def test_rail_mtu(cluster_facts: ClusterFacts, rails: list[Rail], cluster: Cluster, station: Station) -> None:
    """Every rail runs MTU {cluster.mtu} [002]."""
    bad = [
        f"{r.interface} MTU {cluster_facts.interfaces[r.interface].mtu}"
        for r in _present(cluster_facts, rails)
        if cluster_facts.interfaces[r.interface].mtu != cluster.mtu
    ]
    require(
        not bad,
        found=f"on {station.name}: " + "; ".join(bad),
        recipe=f"MTU {cluster.mtu} on every rail [002]",
        fix=f"`ip link set IF mtu {cluster.mtu}` on {station.name} and in its persistent network configuration; "
        f"the switch ports of the rail need jumbo frames too",
    )


@check("cluster.rails.speed", Cost.READ)
def test_rail_speed(cluster_facts: ClusterFacts, rails: list[Rail], cluster: Cluster, station: Station) -> None:
    """Every rail links at {cluster.speed_gbps} Gb/s [002]."""
    want = round(cluster.speed_gbps * 1000)
    bad = []
    for rail in _present(cluster_facts, rails):
        speed, source = cluster_facts.speed_mbps(rail.interface)
        if speed != want:
            bad.append(
                f"{rail.interface} at {'an unknown speed' if speed is None else f'{speed / 1000:g} Gb/s'} ({source})"
            )
    require(
        not bad,
        found=f"on {station.name}: " + "; ".join(bad),
        recipe=f"expected {cluster.speed_gbps:g} Gb/s on every rail [002]",
        fix="reseat or replace the cable/transceiver and check the switch port's speed; a link that trained down "
        "(half the speed) halves the all-reduce bandwidth",
    )


@check("cluster.rails.route_to_peer_leaves_by_the_rail", Cost.READ)
def test_rail_route_to_peer_leaves_by_the_rail(
    cluster_facts: ClusterFacts, rails: list[Rail], station: Station
) -> None:
    """The route to the peer's rail address leaves by that rail, without a gateway [002]."""
    bad = []
    for rail in _present(cluster_facts, rails):
        held = [str(a.ip) for a in cluster_facts.interfaces[rail.interface].ipv4]
        if cluster_facts.local_address(rail) not in held:
            pytest.skip(f"{rail.interface} lacks its address: see test_rail_holds_its_address")
        peer = cluster_facts.peer_address(rail)
        route = cluster_facts.route_to(peer)
        if route is None:
            bad.append(f"no route to {peer}")
        elif route.dev != rail.interface or route.gateway:
            bad.append(
                f"{peer} is reached via {route.dev}" + (f" and gateway {route.gateway}" if route.gateway else "")
            )
    require(
        not bad,
        found=f"on {station.name}: " + "; ".join(bad) + " (ip -j route get)",
        recipe="each rail reaches the peer's address on that rail directly: NCCL's bootstrap and RoCE traffic "
        "follow the route [002]",
        fix="remove the more specific route that wins (`ip route show`; often a /32 or a default route on the "
        "management port) and keep the rail's connected /24",
    )


@check("cluster.rails.jumbo_frames_cross_both_ways", Cost.READ)
def test_jumbo_frames_cross_every_rail_both_ways(
    rails: list[Rail], cluster_facts: ClusterFacts, peer: ClusterFacts, cluster: Cluster, station: Station
) -> None:
    """Jumbo frames end to end: a don't-fragment ping filling the {cluster.mtu}-byte MTU (`ping -M do`) reaches the
    peer on every rail, from each side [002]."""
    for side in (cluster_facts, peer):  # one root cause, one failure: a rail the checks above fail is not pinged
        for rail in rails:
            if why := side.rail_ready(rail):
                pytest.skip(why)
    bad = []
    for side in (cluster_facts, peer):
        for rail in rails:
            ping = side.ping(rail)
            if ping.verdict is not PingVerdict.OK:
                why = {
                    PingVerdict.LOCAL_MTU: f"local MTU too small ({side.station.name}'s {rail.interface} MTU "
                    f"{ping.local_mtu or side.interfaces[rail.interface].mtu})",
                    PingVerdict.DROPPED: "dropped on the path (the peer, or a switch between, is at a smaller MTU)",
                    PingVerdict.UNREACHABLE: "unreachable",
                }[ping.verdict]
                bad.append(
                    f"{side.station.name} → {side.peer_address(rail)} on {rail.interface}: {why}; "
                    f"{ping.received}/{ping.transmitted} replies" + (f", `{ping.message}`" if ping.message else "")
                )
    require(
        not bad,
        found="; ".join(bad),
        recipe=f"link validated with jumbo-frame pings of {cluster.mtu - 28} bytes (don't fragment) before "
        f"anything else [002]",
        fix=f"local MTU too small: `ip link set IF mtu {cluster.mtu}` on that station; dropped on the path: raise "
        f"the peer's rail and every switch port between to MTU {cluster.mtu}",
    )
