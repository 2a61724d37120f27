"""Both stations identical: the image, the checkpoint, the pinned environment file; and the optional bandwidth gate
[002]. A mismatched shard or image shows up hours later as an NCCL timeout."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import not_applicable, require

if TYPE_CHECKING:
    from golive.profile.schema import Cluster
    from golive.run.fixtures import RecordMetric
    from golive.station.cluster import ClusterFacts

pytestmark = pytest.mark.cluster


@check("cluster.parity.same_image", Cost.READ)
def test_stations_run_the_same_image(cluster_facts: ClusterFacts, peer: ClusterFacts, cluster: Cluster) -> None:
    """The image {cluster.image_ref} is pulled on both stations with matching architecture and digests [002]."""
    if not cluster.image_ref:
        not_applicable("the profile names no image reference (cluster.image_ref)")
    mine, theirs = cluster_facts.image, peer.image
    a, b = cluster_facts.station.name, peer.station.name
    differs = [
        f"{what}: {a} {x}, {b} {y}"
        for what, x, y in (
            ("image id", mine.id, theirs.id),
            ("RepoDigests", sorted(mine.repo_digests), sorted(theirs.repo_digests)),
            ("architecture", mine.architecture, theirs.architecture),
        )
        if x != y
    ]
    require(
        not differs,
        found=f"{cluster.image_ref}: " + "; ".join(differs),
        recipe="image pulled on both stations and inspected for matching architecture and digests [002]",
        fix=f"pull the same digest on both stations (`docker pull {cluster.image_ref.split(':')[0]}@sha256:…`) and "
        f"run it by digest",
    )


@check("cluster.parity.same_checkpoint", Cost.READ)
def test_stations_hold_the_same_checkpoint(cluster_facts: ClusterFacts, peer: ClusterFacts) -> None:
    """The checkpoint's file lists match on both stations: shard names and sizes, sha256 of config and index files
    [002]."""
    mine, theirs = cluster_facts.checkpoint, peer.checkpoint
    a, b = cluster_facts.station.name, peer.station.name
    differs = []
    for name in sorted(set(mine.shards) | set(theirs.shards)):
        if mine.shards.get(name) != theirs.shards.get(name):
            differs.append(
                f"{name}: {a} {mine.shards.get(name, 'missing')} bytes, {b} {theirs.shards.get(name, 'missing')} bytes"
            )
    for name in sorted(set(mine.hashes) | set(theirs.hashes)):
        if mine.hashes.get(name) != theirs.hashes.get(name):
            differs.append(
                f"{name}: sha256 {a} {(mine.hashes.get(name) or 'missing')[:12]}, {b} "
                f"{(theirs.hashes.get(name) or 'missing')[:12]}"
            )
    require(
        bool(mine.shards) and not differs,
        found=f"{cluster_facts.station_facts.checkpoint_dir}: "
        + (
            "; ".join(differs[:5]) + (f" (+{len(differs) - 5} more)" if len(differs) > 5 else "")
            if differs
            else "no shards on either"
        ),
        recipe="checkpoint downloaded on A, rsync'd to B excluding caches, file lists hashed and compared [002]",
        fix=f"re-sync from {a}: `rsync -a --exclude .cache {cluster_facts.station_facts.checkpoint_dir}/ "
        f"{b}:{peer.station_facts.checkpoint_dir}/`, then re-run",
    )


@check("cluster.parity.same_env_file", Cost.READ)
def test_stations_share_the_env_file(cluster_facts: ClusterFacts, peer: ClusterFacts, cluster: Cluster) -> None:
    """The pinned environment file, {cluster.env_file}, is the same on both stations, byte for byte [002]."""
    if not cluster.env_file:
        not_applicable("the profile names no environment file (cluster.env_file)")
    mine, theirs = cluster_facts.env_bytes, peer.env_bytes
    a, b = cluster_facts.station.name, peer.station.name
    diff = [
        line
        for line in difflib.unified_diff(
            mine.decode(errors="replace").splitlines(),
            theirs.decode(errors="replace").splitlines(),
            a,
            b,
            lineterm="",
            n=0,
        )
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    require(
        mine == theirs,
        found=f"{cluster.env_file} differs: "
        + ("; ".join(f"`{line}`" for line in diff[:6]) or "only in whitespace or line endings"),
        recipe="rail interface, RDMA device and both IPv4 addresses pinned in one environment file, the same on "
        "both stations [002]",
        fix=f"copy {cluster.env_file} from the station that is right to the other one, then restart the serving "
        f"run on both",
    )


@check("cluster.nccl.all_reduce_bus_bandwidth_floor", Cost.READ)
def test_all_reduce_bus_bandwidth_floor(
    cluster_facts: ClusterFacts, peer: ClusterFacts, cluster: Cluster, record_metric: RecordMetric
) -> None:
    """nccl-tests all_reduce_perf across both stations reaches the profile's bus bandwidth floor,
    {cluster.busbw_floor_gbs} GB/s [002]."""
    if cluster.busbw_floor_gbs is None or not cluster.all_reduce_perf:
        not_applicable(
            "the profile sets no all-reduce bandwidth gate (cluster.busbw_floor_gbs, cluster.all_reduce_perf)"
        )
    perf = cluster_facts.perf
    ok = record_metric("all_reduce_busbw", perf.avg_busbw, "GB/s", floor=cluster.busbw_floor_gbs)
    peak = max((r.busbw for r in perf.rows), default=0.0)
    require(
        ok and not perf.out_of_bounds,
        found=f"{cluster.all_reduce_perf}: average bus bandwidth {perf.avg_busbw:g} GB/s (peak {peak:g} GB/s), "
        f"{perf.out_of_bounds or 0} values out of bounds",
        recipe=f"all-reduce bus bandwidth at least {cluster.busbw_floor_gbs:g} GB/s across both stations",
        fix="check every rail's speed and MTU and that NCCL uses GDRDMA on both rails (the checks above), then "
        "re-run all_reduce_perf",
    )
