"""RDMA ports and NCCL as the serving run loads them: RoCE v2 on an active Ethernet port, the pinned GID index,
the profile's NCCL with GPU Direct RDMA, never sockets, no warnings [002]."""
import pytest

from golive.core.verdict import not_applicable, require

pytestmark = pytest.mark.cluster

GID_INDEX = "NCCL_IB_GID_INDEX"
TOPOLOGY_CHECK = "test_nccl_log_matches_declared_topology"


def _serving_log(cluster_facts, cluster, needs_init: bool = True):
    """The NCCL log, when it is the serving run's log of the declared topology (and, with `needs_init`, of a run that
    finished init); otherwise the reading check ends not checked, pointing at the one check that fails for it."""
    log = cluster_facts.nccl_log
    problems = cluster_facts.nccl_topology_problems
    if problems:
        pytest.skip(f"not checked: {cluster.nccl_log} is not the serving run's log of this topology ({problems[0]}): "
                    f"see {TOPOLOGY_CHECK}")
    died = log.died_at_init
    if needs_init and died is not None:
        pytest.skip(f"not checked: the run died before NCCL finished init, so no channel was set up (line "
                    f"{died.number}: `{died.text}`): see {TOPOLOGY_CHECK}")
    return log


@pytest.fixture(scope="session")
def rdma_rails(cluster):
    rails = [r for r in cluster.rails if r.rdma_device]
    if not rails:
        not_applicable("the profile declares no rail with an RDMA device: nothing crosses a network over RoCE")
    return rails


def _port(cluster_facts, rail):
    device = cluster_facts.ib_devices.get(rail.rdma_device)
    return device.ports.get(rail.port) if device else None


def test_rdma_port_active_on_ethernet(cluster_facts, rdma_rails, station):
    """Every rail's RDMA port is ACTIVE with link layer Ethernet (RoCE) [002]."""
    devices = cluster_facts.ib_devices
    bad = []
    for rail in rdma_rails:
        port = _port(cluster_facts, rail)
        if port is None:
            bad.append(f"{rail.rdma_device} port {rail.port} not found (ibv_devinfo lists "
                       f"{', '.join(devices) or 'no RDMA device'})")
        elif not port.active or port.link_layer != "Ethernet":
            bad.append(f"{rail.rdma_device} port {rail.port} is {port.state}, link layer {port.link_layer}")
    require(not bad,
            found=f"on {station.name}: " + "; ".join(bad),
            recipe=f"{len(rdma_rails)} RoCEv2 rail(s) ({', '.join(r.rdma_device or '' for r in rdma_rails)}), every "
                   f"port active with link layer Ethernet [002]",
            fix="check the rail's link (`ip link`, cable, switch port); a port in InfiniBand mode needs "
                "`mlxconfig -d DEV set LINK_TYPE_P1=2` (Ethernet) and a reboot")


def test_rdma_roce_v2_gid_is_the_pinned_index(cluster_facts, rdma_rails, cluster, station):
    """Each rail's port has a RoCE v2 GID of its IPv4 address (not all zeros), and the pinned NCCL_IB_GID_INDEX names
    it [002]."""
    pinned = cluster.env.get(GID_INDEX)
    if pinned is None:
        not_applicable(f"the profile does not pin {GID_INDEX}: NCCL picks the GID itself")
    bad = []
    for rail in rdma_rails:
        port = _port(cluster_facts, rail)
        if port is None or not port.active:
            pytest.skip(f"{rail.rdma_device} port {rail.port} is missing or down: see "
                        f"test_rdma_port_active_on_ethernet")
        address = cluster_facts.local_address(rail)
        index = port.gid_index(address, "RoCE v2")
        if index is None:
            bad.append(f"{rail.rdma_device} port {rail.port} has no RoCE v2 GID for {address} (GIDs: "
                       + ", ".join(f"[{g.index}] {g.gid} {g.type or ''}".strip() for g in port.gids) + ")")
        elif str(index) != pinned:
            at = next((g for g in port.gids if str(g.index) == pinned), None)
            bad.append(f"{rail.rdma_device}: the RoCE v2 GID of {address} is index {index}; index {pinned} is "
                       + (f"{at.gid} {at.type or ''}".strip() if at else "unused"))
    require(not bad,
            found=f"on {station.name}: " + "; ".join(bad) + " (ibv_devinfo -v)",
            recipe=f"IB HCA and GID index pinned to the rail: {GID_INDEX}={pinned} names the RoCE v2 GID of the "
                   f"rail's IPv4 address [002]",
            fix="a new address on the rail (often a global IPv6) shifts the GID table: remove it, or pin "
                f"{GID_INDEX} to the index ibv_devinfo -v shows for the rail's ::ffff:IPv4 RoCE v2 GID on both "
                f"stations")


def test_nccl_version_matches_profile(cluster_facts, cluster, station, record_provenance):
    """The NCCL the serving run loaded (its `NCCL version` line) is the profile's {cluster.nccl_version} [002]."""
    log = _serving_log(cluster_facts, cluster, needs_init=False)  # printed before the bootstrap: a dead run says it too
    record_provenance(nccl_version=", ".join(log.versions) or None)
    require(log.version == cluster.nccl_version,
            found=f"{cluster.nccl_log} on {station.name}: "
                  + (f"`NCCL version {', '.join(log.versions)}`" if log.versions else "no `NCCL version` line"),
            recipe=f"NCCL {cluster.nccl_version} loaded explicitly from the image: older versions deadlock "
                   f"cross-node CUDA graph replay over RoCE [002]",
            fix=f"point the serving run at NCCL {cluster.nccl_version} (LD_PRELOAD / VLLM_NCCL_SO_PATH to the image's "
                f"libnccl.so.2) and restart; the pip package list is not what the process maps")


def test_nccl_environment_is_pinned(cluster_facts, cluster, station):
    """The environment file {cluster.env_file} pins every variable of the profile's cluster.env (NCCL HCA, GID index,
    socket interface, all-reduce switches), value for value [002]."""
    if not cluster.env_file:
        not_applicable("the profile names no environment file (cluster.env_file)")
    values = cluster_facts.env_file.values
    bad = [f"{k}={values[k]!r} (want {v!r})" if k in values else f"{k} missing" for k, v in cluster.env.items()
           if values.get(k) != v]
    require(not bad,
            found=f"{cluster.env_file} on {station.name}: " + "; ".join(bad),
            recipe="rail, RDMA device, NCCL HCA and GID index, custom and FlashInfer all-reduce off and the "
                   "distributed timeout pinned in an environment file [002]",
            fix=f"set {', '.join(f'{k}={v}' for k, v in cluster.env.items())} in {cluster.env_file} on both "
                f"stations, then restart the serving run")


def _socket_lines(log):
    """Channels over NET/Socket. NCCL initialises its socket plugin even where every channel is P2P (`NET/Socket :
    Using eth0` on one host), so that line counts only in a log that shows no channel at all."""
    if log.channels:
        return [c for c in log.channels if c.transport == "NET/Socket"]
    return [n for n in log.networks if n.text.startswith(("NET/Socket : Using", "Using network Socket"))]


def test_nccl_log_matches_declared_topology(cluster_facts, cluster, station, profile):
    """The NCCL log is the serving run's, of the topology the profile declares: NCCL finished init, `nNodes` counts
    one node per station where rails are declared, `nRanks` is the tensor-parallel size ({vllm.tensor_parallel_size}),
    and channels cross the rails [002]."""
    log = cluster_facts.nccl_log
    died = log.died_at_init
    require(died is None,
            found=f"{cluster.nccl_log} on {station.name}: the run died before NCCL finished init (no `Init COMPLETE`); "
                  f"the line that says so, line {died.number if died else 0}: `{died.text if died else ''}`",
            recipe="the serving run's NCCL communicator comes up over the rails, one rank per station [002]",
            fix="read that line: a bootstrap that cannot connect is NCCL_SOCKET_IFNAME on the wrong interface, a "
                "firewall on the bootstrap port, or the other station not started; fix it, restart the serving run on "
                "both stations and check its new log")
    problems = cluster_facts.nccl_topology_problems
    stations = "two stations, one rank on each, over the rails" if cluster.rails else "one host"
    require(not problems,
            found=f"{cluster.nccl_log} on {station.name}: " + "; ".join(problems),
            recipe=f"the recipe serves tensor parallel {profile.vllm.tensor_parallel_size} on {stations}: the serving "
                   f"run's log shows " + ("nNodes 2, " if cluster.rails else "")
                   + f"nRanks {profile.vllm.tensor_parallel_size}" + (" and NET/IB channels" if cluster.rails else "")
                   + " [002]",
            fix=("the two-station recipe needs the serving run's log: point cluster.nccl_log at the file the serving "
                 "run on this station writes (NCCL_DEBUG=INFO NCCL_DEBUG_FILE=… in its environment, or the container's "
                 "log), not a one-host test; take it after the run printed `Init COMPLETE`") if cluster.rails else
                "point cluster.nccl_log at this host's serving run's log, or declare the rails in the profile")


def test_nccl_uses_gpu_direct_rdma(cluster_facts, cluster, station):
    """Every network channel in the NCCL log runs GPU Direct RDMA (`GDRDMA`, `GDRDMA(PCI)` on coherent GPUs) [002]."""
    log = _serving_log(cluster_facts, cluster)
    if log.one_host:
        not_applicable(f"the profile declares no rail and both ranks share one host "
                       f"({', '.join(sorted(log.transports)) or 'no channel'} in {cluster.nccl_log}): no network, so "
                       f"GPU Direct RDMA does not apply")
    if not cluster.gdrdma_required:
        not_applicable("the profile does not require GPU Direct RDMA (cluster.gdrdma_required: false)")
    if _socket_lines(log):
        pytest.skip("NCCL runs over sockets: see test_nccl_never_falls_back_to_sockets")
    plain = [c for c in log.channels if c.transport.startswith("NET/") and not c.gdrdma]
    require(not plain,
            found=f"{cluster.nccl_log} line {plain[0].number if plain else 0}: "
                  f"`{cluster_facts.log_line(plain[0].number) if plain else ''}` ({len(plain)} channel(s) without "
                  f"GDRDMA)",
            recipe="GPU Direct RDMA confirmed by scanning NCCL debug logs for the GDRDMA marker [002]",
            fix="load nvidia-peermem (or use a kernel with dma-buf), keep NCCL_NET_GDR_LEVEL unset, and check that "
                "GPU and NIC share a PCIe switch (`nvidia-smi topo -m`)")


def test_nccl_never_falls_back_to_sockets(cluster_facts, cluster, station):
    """No `NET/Socket` transport in the NCCL log: RoCE, never sockets [002]."""
    found = _socket_lines(_serving_log(cluster_facts, cluster))
    require(not found,
            found=f"{cluster.nccl_log} on {station.name} line {found[0].number if found else 0}: "
                  f"`{cluster_facts.log_line(found[0].number) if found else ''}`",
            recipe="launch fails on socket fallback [002]",
            fix="NCCL found no usable RDMA device: check NCCL_IB_HCA and NCCL_IB_DISABLE in the env file, that "
                "/dev/infiniband is passed into the container, and the `NET/IB` lines above it in the log")


def test_nccl_log_has_no_warnings(cluster_facts, cluster, station):
    """No `NCCL WARN` line in the NCCL log [002]."""
    warnings = _serving_log(cluster_facts, cluster).warnings
    require(not warnings,
            found=f"{cluster.nccl_log} on {station.name}: {len(warnings)} NCCL WARN line(s), first at line "
                  f"{warnings[0].number if warnings else 0}: `{warnings[0].text if warnings else ''}`",
            recipe="launch fails on NCCL warnings [002]",
            fix="fix what the warning names (GID index, HCA, firewall on the bootstrap port), then restart the "
                "serving run on both stations")
