"""The cluster's part of a capture: the NCCL version both stations load and the rails' addresses and MTU."""

from __future__ import annotations

from typing import TYPE_CHECKING

from golive.day2.captured import Collector
from golive.day2.host_values import connect_host
from golive.facts import FactError
from golive.profile.inventory import Station

if TYPE_CHECKING:
    from golive.site import loader


def capture_cluster(collect: Collector, loaded: loader.LoadedInventory, stations: list[Station]) -> None:
    """NCCL version from each station's NCCL log and the rails' addresses and MTU, read the way the cluster checks
    read them (golive.station.cluster.ClusterFacts). Rails are written whole when any address differs: a list
    replaces."""
    from golive.station.cluster import ClusterFacts
    from golive.station.host import StationFacts

    recipe = collect.recipe
    cluster = recipe.cluster
    assert cluster is not None
    facts = {s.role: ClusterFacts(StationFacts(connect_host(loaded, s), s, recipe), cluster) for s in stations}
    names = {s.role: s.name for s in stations}
    versions = {}
    for role, cf in facts.items():
        try:
            versions[role] = cf.nccl_log.version
        except FactError as exc:
            collect.capture.cannot_keep.append(f"NCCL version not read on {names[role]}: {exc}")
    if versions and len(set(versions.values())) == 1 and None not in versions.values():
        version = versions["a"] if "a" in versions else next(iter(versions.values()))
        collect.add(
            "cluster",
            "nccl_version",
            version,
            f"`NCCL version` in {cluster.nccl_log} on {' and '.join(names[r] for r in sorted(versions))}",
            said=f"loads NCCL {version}",
        )
    elif len(versions) == 2:
        collect.capture.cannot_keep.append(
            f"the stations load different NCCL versions ({versions['a']} on "
            f"{names['a']}, {versions['b']} on {names['b']}): both must load the same"
        )
    rails, mtus, missing = [], set(), []
    for rail in cluster.rails:
        addresses = {}
        for role, cf in facts.items():
            interface = cf.interfaces.get(rail.interface)
            if interface is None or not interface.ipv4:
                missing.append(f"{rail.interface} on {names[role]}")
                continue
            addresses[role] = str(interface.ipv4[0].ip)
            mtus.add(interface.mtu)
        rails.append(rail.model_dump(mode="json") | {"addresses": addresses})
    if missing:
        collect.capture.cannot_keep.append(
            f"{'a rail interface' if len(missing) == 1 else 'rail interfaces'} missing or without an IPv4 address: "
            f"{', '.join(missing)} — the recipe's rails are not this station's"
        )
        return
    collect.add(
        "cluster",
        "rails",
        rails,
        "`ip -j addr show` on both stations",
        said="has rail addresses "
        + ", ".join(f"{r['interface']} {r['addresses']['a']}/{r['addresses']['b']}" for r in rails),
    )
    if len(mtus) == 1:
        mtu = mtus.pop()
        collect.add("cluster", "mtu", mtu, "`ip -j addr show` on both stations", said=f"runs its rails at MTU {mtu}")
