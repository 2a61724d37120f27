"""RDMA ports and NCCL as the serving run loads them: RoCE v2 on an active Ethernet port, the pinned GID index,
the profile's NCCL with GPU Direct RDMA, never sockets, no warnings [002].

The NCCL log is evidence: each check judges the lines the log holds and quotes one that supports its finding. A log
cut short (no `Init COMPLETE`, no death line: see golive.facts.nccl) is said to be partial once, by the topology check;
a check that needs a line the log lacks is not checked, naming that line."""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import counted, not_applicable, require
from golive.facts.nccl import Channel, Line, NcclLog
from golive.profile.inventory import Station
from golive.profile.schema import Cluster
from golive.station.cluster import NcclLogUnknown

if TYPE_CHECKING:
    from golive.facts.net import IbPort
    from golive.profile.schema import Profile, Rail
    from golive.run.fixtures import RecordProvenance
    from golive.station.cluster import ClusterFacts

pytestmark = pytest.mark.cluster

GID_INDEX = "NCCL_IB_GID_INDEX"
TOPOLOGY_CHECK = "test_nccl_log_matches_declared_topology"
# The lines a check may need, as NCCL prints them (github NVIDIA/nccl src/init.cc: showVersion, the comm summary of
# initTransportsRank, `… - Init COMPLETE` at the end of ncclCommInitRankFunc; src/transport/net.cc: one `Channel` line
# per connection; with NCCL_RUNTIME_CONNECT=1, the default, channels connect at the first collective, after
# `Init COMPLETE`; with 0, inside init, before it).
VERSION_LINE = "`NCCL version 2.30.7+cuda13.0` line (printed first, as the process loads NCCL)"
COMM_LINE = "`comm 0x… rank 0 nRanks 2 nNodes 2 …` line (nRanks and nNodes, printed during init)"
COMPLETE_LINE = "`… nranks 2 … - Init COMPLETE` line (printed when the communicator is ready)"
CHANNEL_LINES = "`Channel 00/0 : 0[0] -> 1[0] [send] via NET/…` lines (one per channel as it connects)"


def _log(cluster_facts: ClusterFacts) -> NcclLog:
    """The running engine's NCCL log; not checked where golive cannot tell which file that is (a stale one only,
    NCCL_DEBUG_FILE in a container folder no mount holds): what it holds is not evidence for this run."""
    try:
        return cluster_facts.nccl_log
    except NcclLogUnknown as exc:
        pytest.skip(f"not checked: {exc}")


def _serving_log(cluster_facts: ClusterFacts, cluster: Cluster, needs_init: bool = True) -> NcclLog:
    """The NCCL log, when it is the serving run's log of the declared topology (and, with `needs_init`, of a run that
    did not die at init); otherwise the reading check ends not checked, pointing at the one check that fails for it."""
    log = _log(cluster_facts)
    problems = cluster_facts.nccl_topology_problems
    if problems:
        pytest.skip(
            f"not checked: {cluster_facts.nccl_log_name} is not the serving run's log of this topology "
            f"({problems[0]}): see {TOPOLOGY_CHECK}"
        )
    died = log.died_at_init
    if needs_init and died is not None:
        pytest.skip(
            f"not checked: the run died before NCCL finished init (line {died.number}: `{died.text}`): see "
            f"{TOPOLOGY_CHECK}"
        )
    return log


def _lacks(log: NcclLog, cluster_facts: ClusterFacts, station: Station, needs: str) -> NoReturn:
    """End the check not checked: it needs a line the log does not hold. A missing line is no evidence either way."""
    died = log.died_at_init
    if died is not None and (log.first is None or died.number <= log.first.number or needs == VERSION_LINE):
        why = f"the run died at line {died.number} (`{died.text}`) before NCCL printed it"
    elif log.partial:
        why = f"it was cut (see {TOPOLOGY_CHECK})" + (f"; it starts with {log.holed()}" if log.hole else "")
    elif needs == CHANNEL_LINES and log.complete is not None and log.last is not None:
        why = (
            f"NCCL prints them when the first collective connects the channels, after `Init COMPLETE` (line "
            f"{log.complete.number}), and the log ends before (line {log.last.number}): take it after the serving "
            f"run answered a request"
        )
    elif log.first is not None:
        why = f"the log starts after it (its first NCCL line, line {log.first.number}: `{log.first.text}`)" + (
            f"; it starts with {log.holed()}" if log.hole else ""
        )
    else:
        why = "it holds no NCCL line"
    pytest.skip(
        f"not checked: needs NCCL's {needs}, which {cluster_facts.nccl_log_name} on {station.name} does not hold: {why}"
    )


@pytest.fixture(scope="session")
def rdma_rails(cluster: Cluster) -> list[Rail]:
    rails = [r for r in cluster.rails if r.rdma_device]
    if not rails:
        not_applicable("the profile declares no rail with an RDMA device: nothing crosses a network over RoCE")
    return rails


def _port(cluster_facts: ClusterFacts, rail: Rail) -> IbPort | None:
    device = cluster_facts.ib_devices.get(rail.rdma_device) if rail.rdma_device else None
    return device.ports.get(rail.port) if device else None


@check("cluster.rdma.port_active_on_ethernet", Cost.READ)
def test_rdma_port_active_on_ethernet(cluster_facts: ClusterFacts, rdma_rails: list[Rail], station: Station) -> None:
    """Every rail's RDMA port is ACTIVE with link layer Ethernet (RoCE) [002]."""
    devices = cluster_facts.ib_devices
    bad = []
    for rail in rdma_rails:
        port = _port(cluster_facts, rail)
        if port is None:
            bad.append(
                f"{rail.rdma_device} port {rail.port} not found (ibv_devinfo lists "
                f"{', '.join(devices) or 'no RDMA device'})"
            )
        elif not port.active or port.link_layer != "Ethernet":
            bad.append(f"{rail.rdma_device} port {rail.port} is {port.state}, link layer {port.link_layer}")
    require(
        not bad,
        found=f"on {station.name}: " + "; ".join(bad),
        recipe=f"{counted(len(rdma_rails), 'RoCEv2 rail')} "
        f"({', '.join(r.rdma_device or '' for r in rdma_rails)}), every "
        f"port active with link layer Ethernet [002]",
        fix="check the rail's link (`ip link`, cable, switch port); a port in InfiniBand mode needs "
        "`mlxconfig -d DEV set LINK_TYPE_P1=2` (Ethernet) and a reboot",
    )


@check("cluster.rdma.roce_v2_gid_is_the_pinned_index", Cost.READ)
def test_rdma_roce_v2_gid_is_the_pinned_index(
    cluster_facts: ClusterFacts, rdma_rails: list[Rail], cluster: Cluster, station: Station
) -> None:
    """Each rail's port has a RoCE v2 GID of its IPv4 address (not all zeros), and the pinned NCCL_IB_GID_INDEX names
    it [002]."""
    pinned = cluster.env.get(GID_INDEX)
    if pinned is None:
        not_applicable(f"the profile does not pin {GID_INDEX}: NCCL picks the GID itself")
    bad = []
    for rail in rdma_rails:
        port = _port(cluster_facts, rail)
        if port is None or not port.active:
            pytest.skip(
                f"{rail.rdma_device} port {rail.port} is missing or down: see test_rdma_port_active_on_ethernet"
            )
        address = cluster_facts.local_address(rail)
        index = port.gid_index(address, "RoCE v2")
        if index is None:
            bad.append(
                f"{rail.rdma_device} port {rail.port} has no RoCE v2 GID for {address} (GIDs: "
                + ", ".join(f"[{g.index}] {g.gid} {g.type or ''}".strip() for g in port.gids)
                + ")"
            )
        elif str(index) != pinned:
            at = next((g for g in port.gids if str(g.index) == pinned), None)
            bad.append(
                f"{rail.rdma_device}: the RoCE v2 GID of {address} is index {index}; index {pinned} is "
                + (f"{at.gid} {at.type or ''}".strip() if at else "unused")
            )
    require(
        not bad,
        found=f"on {station.name}: " + "; ".join(bad) + " (ibv_devinfo -v)",
        recipe=f"IB HCA and GID index pinned to the rail: {GID_INDEX}={pinned} names the RoCE v2 GID of the "
        f"rail's IPv4 address [002]",
        fix="a new address on the rail (often a global IPv6) shifts the GID table: remove it, or pin "
        f"{GID_INDEX} to the index ibv_devinfo -v shows for the rail's ::ffff:IPv4 RoCE v2 GID on both "
        f"stations",
    )


@check("cluster.nccl.version_matches_profile", Cost.READ)
def test_nccl_version_matches_profile(
    cluster_facts: ClusterFacts, cluster: Cluster, station: Station, record_provenance: RecordProvenance
) -> None:
    """The NCCL the serving run loaded (its `NCCL version` line) is the profile's {cluster.nccl_version} [002]."""
    log = _serving_log(cluster_facts, cluster, needs_init=False)  # printed before the bootstrap: a dead run says it too
    record_provenance(nccl_version=", ".join(log.versions) or None)
    if not log.versions:
        _lacks(log, cluster_facts, station, VERSION_LINE)
    require(
        log.version == cluster.nccl_version,
        found=f"{cluster_facts.nccl_log_name} on {station.name}: `NCCL version {', '.join(log.versions)}`",
        recipe=f"NCCL {cluster.nccl_version} loaded explicitly from the image: older versions deadlock "
        f"cross-node CUDA graph replay over RoCE [002]",
        fix=f"point the serving run at NCCL {cluster.nccl_version} (LD_PRELOAD / VLLM_NCCL_SO_PATH to the image's "
        f"libnccl.so.2) and restart; the pip package list is not what the process maps",
    )


@check("cluster.nccl.environment_is_pinned", Cost.READ)
def test_nccl_environment_is_pinned(cluster_facts: ClusterFacts, cluster: Cluster, station: Station) -> None:
    """The environment file {cluster.env_file} pins every variable of the profile's cluster.env (NCCL HCA, GID index,
    socket interface, all-reduce switches), value for value [002]."""
    if not cluster.env_file:
        not_applicable("the profile names no environment file (cluster.env_file)")
    values = cluster_facts.env_file.values
    bad = [
        f"{k}={values[k]!r} (want {v!r})" if k in values else f"{k} missing"
        for k, v in cluster.env.items()
        if values.get(k) != v
    ]
    require(
        not bad,
        found=f"{cluster.env_file} on {station.name}: " + "; ".join(bad),
        recipe="rail, RDMA device, NCCL HCA and GID index, custom and FlashInfer all-reduce off and the "
        "distributed timeout pinned in an environment file [002]",
        fix=f"set {', '.join(f'{k}={v}' for k, v in cluster.env.items())} in {cluster.env_file} on both "
        f"stations, then restart the serving run",
    )


def _socket_lines(log: NcclLog, cluster: Cluster) -> list[Channel] | list[Line]:
    """Channels over NET/Socket. NCCL initialises its socket plugin even where every channel is P2P (`NET/Socket :
    Using eth0` on one host), so that line counts only in a log that shows no channel at all, and only where the
    profile's rails join two stations: their traffic crosses the network NCCL chose (`Using network Socket`)."""
    if log.channels:
        return [c for c in log.channels if c.transport == "NET/Socket"]
    if not cluster.rails:
        return []
    return [n for n in log.networks if n.text.startswith(("NET/Socket : Using", "Using network Socket"))]


@check("cluster.nccl.log_matches_declared_topology", Cost.READ)
def test_nccl_log_matches_declared_topology(
    cluster_facts: ClusterFacts, cluster: Cluster, station: Station, profile: Profile
) -> None:
    """The NCCL log is the serving run's, of the topology the profile declares: NCCL finished init, `nNodes` counts
    one node per station where rails are declared, `nRanks` is the tensor-parallel size ({vllm.tensor_parallel_size}),
    and channels cross the rails [002]."""
    log = _log(cluster_facts)
    died = log.died_at_init
    require(
        died is None,
        found=f"{cluster_facts.nccl_log_name} on {station.name}: the run died before NCCL finished init: NCCL said "
        f"so at "
        f"line {died.number if died else 0}: `{died.text if died else ''}`",
        recipe="the serving run's NCCL communicator comes up over the rails, one rank per station [002]",
        fix="read that line: a bootstrap that cannot connect is NCCL_SOCKET_IFNAME on the wrong interface, a "
        "firewall on the bootstrap port, or the other station not started; fix it, restart the serving run on "
        "both stations and check its new log",
    )
    problems = cluster_facts.nccl_topology_problems
    stations = "two stations, one rank on each, over the rails" if cluster.rails else "one host"
    require(
        not problems,
        found=f"{cluster_facts.nccl_log_name} on {station.name}: " + "; ".join(problems),
        recipe=f"the recipe serves tensor parallel {profile.vllm.tensor_parallel_size} on {stations}: the serving "
        f"run's log shows "
        + ("nNodes 2, " if cluster.rails else "")
        + f"nRanks {profile.vllm.tensor_parallel_size}"
        + (" and NET/IB channels" if cluster.rails else "")
        + " [002]",
        fix=(
            "the two-station recipe needs the serving run's log: point cluster.nccl_log at the file the serving "
            "run on this station writes (NCCL_DEBUG=INFO NCCL_DEBUG_FILE=… in its environment, or the container's "
            "log), not a one-host test; take it after the run printed `Init COMPLETE`"
        )
        if cluster.rails
        else "point cluster.nccl_log at this host's serving run's log, or declare the rails in the profile",
    )
    if log.partial:  # said here once; the other NCCL checks judge the lines it holds
        needs = ([COMM_LINE] if log.topology is None else []) + [COMPLETE_LINE]
        went_on = log.outlived(log.deaths[-1]) if log.deaths else None
        if went_on is not None:
            outlived = (
                f"init goes on after its last error line (line {log.deaths[-1].number}), at line {went_on.number}: "
                f"`{went_on.text}`, so the run went on"
            )
        elif log.warnings:
            outlived = (
                f"its NCCL WARN says NCCL carries on (line {log.warnings[-1].number}: `{log.warnings[-1].text}`), "
                f"so the run went on"
            )
        else:
            outlived = "no line NCCL prints when it dies (WARN, NCCL error, abort)"
        pytest.skip(
            f"not checked: {cluster_facts.nccl_log_name} on {station.name} is a partial capture: no `Init "
            f"COMPLETE`, and "
            f"{outlived}: the log was cut (an excerpt, or rotation), not the run; it holds {log.extent()}; "
            f"the NCCL checks judge what it shows. This one needs NCCL's {' and '.join(needs)}, which it "
            f"does not hold: take the whole log of the serving "
            f"run (from its start, through `Init COMPLETE`)"
        )
    if log.topology is None:
        _lacks(log, cluster_facts, station, COMM_LINE)


@check("cluster.nccl.uses_gpu_direct_rdma", Cost.READ)
def test_nccl_uses_gpu_direct_rdma(cluster_facts: ClusterFacts, cluster: Cluster, station: Station) -> None:
    """Every network channel in the NCCL log runs GPU Direct RDMA (`GDRDMA`, `GDRDMA(PCI)` on coherent GPUs) [002]."""
    log = _serving_log(cluster_facts, cluster)
    if log.one_host:
        not_applicable(
            f"the profile declares no rail and both ranks share one host "
            f"({', '.join(sorted(log.transports)) or 'no channel'} in {cluster_facts.nccl_log_name}): no network, so "
            f"GPU Direct RDMA does not apply"
        )
    if not cluster.gdrdma_required:
        not_applicable("the profile does not require GPU Direct RDMA (cluster.gdrdma_required: false)")
    if _socket_lines(log, cluster):
        pytest.skip("NCCL runs over sockets: see test_nccl_never_falls_back_to_sockets")
    net = [c for c in log.channels if c.transport.startswith("NET/")]
    if not net:
        _lacks(log, cluster_facts, station, CHANNEL_LINES)
    plain = [c for c in net if not c.gdrdma]
    over = plain[0].transport if plain else ""
    require(
        not plain,
        found=f"{cluster_facts.nccl_log_name} on {station.name}: "
        + ("RDMA" if over == "NET/IB" else over)
        + " without GPU Direct: line "
        f"{plain[0].number if plain else 0}: `{cluster_facts.log_line(plain[0].number) if plain else ''}` "
        f"({len(plain)} channel(s) without GDRDMA, of {len(net)} network channel(s) in the log)",
        recipe="GPU Direct RDMA confirmed by scanning NCCL debug logs for the GDRDMA marker [002]",
        fix="load nvidia-peermem (or use a kernel with dma-buf), keep NCCL_NET_GDR_LEVEL unset, and check that "
        "GPU and NIC share a PCIe switch (`nvidia-smi topo -m`)",
    )


@check("cluster.nccl.never_falls_back_to_sockets", Cost.READ)
def test_nccl_never_falls_back_to_sockets(cluster_facts: ClusterFacts, cluster: Cluster, station: Station) -> None:
    """No `NET/Socket` transport in the NCCL log: RoCE, never sockets [002]."""
    log = _serving_log(cluster_facts, cluster)
    found = _socket_lines(log, cluster)
    if not found and not log.channels:
        _lacks(log, cluster_facts, station, CHANNEL_LINES)
    require(
        not found,
        found=f"{cluster_facts.nccl_log_name} on {station.name} line {found[0].number if found else 0}: "
        f"`{cluster_facts.log_line(found[0].number) if found else ''}`",
        recipe="launch fails on socket fallback [002]",
        fix="NCCL found no usable RDMA device: check NCCL_IB_HCA and NCCL_IB_DISABLE in the env file, that "
        "/dev/infiniband is passed into the container, and the `NET/IB` lines above it in the log",
    )


@check("cluster.nccl.log_has_no_warnings", Cost.READ)
def test_nccl_log_has_no_warnings(cluster_facts: ClusterFacts, cluster: Cluster, station: Station) -> None:
    """No `NCCL WARN` line in the NCCL log [002]."""
    warnings = _serving_log(cluster_facts, cluster).warnings
    require(
        not warnings,
        found=f"{cluster_facts.nccl_log_name} on {station.name}: {len(warnings)} NCCL WARN line(s), first at line "
        f"{warnings[0].number if warnings else 0}: `{warnings[0].text if warnings else ''}`",
        recipe="launch fails on NCCL warnings [002]",
        fix="fix what the warning names (GID index, HCA, firewall on the bootstrap port), then restart the "
        "serving run on both stations",
    )
