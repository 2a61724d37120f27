"""The facts of one station of a two-station cluster, gathered read-only through its testinfra host.

    facts = ClusterFacts(StationFacts(host, station, profile), profile.cluster)
    facts.interfaces["enp1s0f0np0"].mtu          # `ip -j addr show`
    facts.ping(rail).verdict                      # `timeout 11 ping -M do -s 8972 -c 3 -W 2 -I IF PEER`
    facts.nccl_log.version                        # the serving run's NCCL_DEBUG=INFO log

Checks of both stations at once (image, checkpoint, environment file) get two of these, one per role.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property

from golive.facts import FactError, docker, nccl, net
from golive.profile.schema import Cluster, Rail
from golive.station.host import StationFacts

PING_HEADERS = 28  # IPv4 (20) + ICMP (8): `-s 8972` fills a 9000-byte frame
# ssh's timeout only bounds the connect, and ethtool or ibv_devinfo can hang on a wedged driver: every command here is
# bounded by coreutils `timeout` (which also runs the station's own `ip`/`ping`, never a shell's built-in applet).
BOUND = "timeout 20 "


class NcclLogUnknown(FactError):
    """golive cannot tell which file holds the running engine's NCCL log: the NCCL checks are not checked."""


@dataclass(frozen=True)
class NcclLogSource:
    """Where the running engine's NCCL log is: how golive found it, the files written since the engine started,
    the stale ones beside them (path, modification time), and when the engine started (epoch seconds)."""

    described: str
    fresh: list[str]
    stale: list[tuple[str, float]] = field(default_factory=list)
    started: float | None = None


def _epoch(text: str) -> float | None:
    """Docker's RFC 3339 time (`2026-11-29T13:01:44.123456789Z`) as seconds since the epoch; None if unset."""
    if not text or text.startswith("0001-"):
        return None
    match = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)", text.strip())
    if not match:
        return None
    zone = "+00:00" if match.group(2) == "Z" else match.group(2)
    return datetime.fromisoformat(match.group(1) + zone).timestamp()


def _stamp(when: float | None) -> str:
    return "an unknown time" if when is None else datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True)
class CheckpointManifest:
    """What two stations' checkpoints are compared by: shard names and sizes, sha256 of the small files."""

    shards: dict[str, int]
    hashes: dict[str, str]  # config.json, *.index.json, … → sha256


class ClusterFacts:
    """Lazily gathered, cached facts of one station's rails, RDMA ports, NCCL log and pinned files; reads only."""

    def __init__(self, station_facts: StationFacts, cluster: Cluster) -> None:
        self.station_facts, self.cluster = station_facts, cluster
        self.station = station_facts.station
        self.host = station_facts.host
        self._routes: dict[str, net.Route | None] = {}

    def local_address(self, rail: Rail) -> str:
        return str(rail.addresses[self.station.role])

    def peer_address(self, rail: Rail) -> str:
        return str(rail.addresses["b" if self.station.role == "a" else "a"])

    # --- rails --------------------------------------------------------------------------------------------------------

    @cached_property
    def interfaces(self) -> dict[str, net.Interface]:
        return net.parse_ip_addr(self.station_facts.run(BOUND + "ip -j addr show"))

    def route_to(self, address: str) -> net.Route | None:
        if address not in self._routes:
            self._routes[address] = self._route_to(address)
        return self._routes[address]

    def _route_to(self, address: str) -> net.Route | None:
        result = self.host.run(BOUND + "ip -j route get %s", address)
        if result.rc != 0 and "unreachable" not in result.stderr.lower():
            raise FactError(
                f"`ip -j route get {address}` failed on {self.station.name} (exit {result.rc}): {result.stderr.strip()}"
            )
        # the answer is stdout; stderr only says why there is none (`RTNETLINK answers: Network is unreachable`,
        # exit 2): what ssh or a wrapper adds to stderr of a command that succeeded is not part of it
        return net.parse_ip_route_get(result.stdout if result.rc == 0 else result.stderr)

    def rail_ready(self, rail: Rail) -> str | None:
        """Why this station's side of the rail cannot carry the ping (see the rail checks), or None."""
        iface = self.interfaces.get(rail.interface)
        if iface is None or not iface.up:
            return f"{self.station.name}'s {rail.interface} is missing or down: see test_rail_link_up"
        if self.local_address(rail) not in [str(a.ip) for a in iface.ipv4]:
            return f"{self.station.name}'s {rail.interface} lacks its address: see test_rail_holds_its_address"
        route = self.route_to(self.peer_address(rail))
        if route is None or route.dev != rail.interface or route.gateway:
            return (
                f"{self.station.name} routes to {self.peer_address(rail)} off the rail: see "
                f"test_rail_route_to_peer_leaves_by_the_rail"
            )
        return None

    def speed_mbps(self, ifname: str) -> tuple[int | None, str]:
        """The link speed and where it was read: ethtool first, /sys/class/net/IF/speed where ethtool is missing."""
        if self.host.exists("ethtool"):
            ethtool = net.parse_ethtool(self.station_facts.run(BOUND + "ethtool %s", ifname))
            return ethtool.speed_mbps, f"ethtool {ifname}"
        path = f"/sys/class/net/{ifname}/speed"
        text = self.station_facts.run("cat %s 2>/dev/null || echo -1", path)
        return net.parse_sys_speed(text), path

    def ping(self, rail: Rail) -> net.Ping:
        """A jumbo DF ping to the peer's address on this rail, bounded by `timeout` (ssh has no command timeout)."""
        size = self.cluster.mtu - PING_HEADERS
        count = self.cluster.ping_count
        result = self.host.run(
            f"timeout {count * 2 + 5} ping -M do -s {size} -c {count} -W 2 -I %s %s",
            rail.interface,
            self.peer_address(rail),
        )
        if result.rc in (124, 127) or (
            result.rc == 2 and "ping:" not in result.stdout + result.stderr and "statistics" not in result.stdout
        ):
            raise FactError(
                f"ping did not run on {self.station.name} (exit {result.rc}): {result.stderr.strip()[:200]}",
                fix="install iputils-ping on the station (golive uses `ping -M do`, which busybox lacks)",
            )
        return net.parse_ping(result.stdout + result.stderr, result.rc)

    # --- RDMA ---------------------------------------------------------------------------------------------------------

    @cached_property
    def ib_devices(self) -> dict[str, net.IbDevice]:
        if not self.host.exists("ibv_devinfo"):
            raise FactError(
                f"ibv_devinfo is not installed on {self.station.name}",
                fix="install rdma-core's ibverbs-utils (apt-get install ibverbs-utils)",
            )
        result = self.host.run(BOUND + "ibv_devinfo -v")
        return {d.hca_id: d for d in net.parse_ibv_devinfo(result.stdout + result.stderr)}

    # --- NCCL and the pinned environment ------------------------------------------------------------------------------

    @cached_property
    def engine(self) -> docker.ContainerFacts | None:
        """The serving run's container: the profile's service container, else the running container of the image the
        launch script runs (`docker ps --filter ancestor=cluster.image_ref`); None where neither is found."""
        if self.station_facts.profile.service is not None:
            return self.station_facts.container
        ref = self.cluster.image_ref
        if not ref:
            return None
        listing = self.station_facts.run(BOUND + "docker ps --filter ancestor=%s --format {{.ID}}", ref, ok_rcs=(0, 1))
        ids = listing.split()
        if not ids:
            return None
        return docker.parse_container_inspect(self.station_facts.run(BOUND + "docker inspect %s", ids[0]))

    @cached_property
    def nccl_debug_file(self) -> tuple[str, str] | None:
        """NCCL_DEBUG_FILE as the serving run has it, and where that was read: the engine container's environment,
        else the pinned environment file; None where neither sets it (the run logs to its stdout)."""
        engine = self.engine
        if engine is not None and engine.env.get("NCCL_DEBUG_FILE"):
            return engine.env["NCCL_DEBUG_FILE"], f"the environment of container {engine.name} (docker inspect)"
        if self.cluster.env_file:
            try:
                values = self.env_file.values
            except FactError:
                return None
            if values.get("NCCL_DEBUG_FILE"):
                return values["NCCL_DEBUG_FILE"], f"{self.cluster.env_file}"
        return None

    @cached_property
    def nccl_log_source(self) -> NcclLogSource:
        """Which files hold the running engine's NCCL log, and which beside them are stale (written before the engine
        started: another run's). NCCL writes where NCCL_DEBUG_FILE says (`%h` the host name, `%p` each process's id,
        src/debug.cc), inside the engine's container where it runs in one; else the profile's cluster.nccl_log."""
        engine = self.engine
        started = _epoch(engine.started_at) if engine is not None and engine.running else None
        found = self.nccl_debug_file
        if found is not None:
            pattern, said = found
            hostname = engine.hostname if engine is not None and engine.hostname else self._hostname
            name = nccl.debug_file_name(pattern, hostname)
            where = f"NCCL_DEBUG_FILE={pattern} ({said})"
            if not name.startswith("/"):
                raise NcclLogUnknown(f"{where} is a relative path: golive does not know the run's directory")
            folder, _, base = name.rpartition("/")
            host_folder = folder or "/"
            if engine is not None and engine.running:
                mapped = engine.host_path(folder or "/")
                if mapped is None:
                    raise NcclLogUnknown(
                        f"{where}: NCCL writes {name} inside container {engine.name}, and no bind mount holds "
                        f"{folder}: golive does not read inside containers (mount the folder from the station)"
                    )
                host_folder = mapped
            regex = nccl.debug_file_regex(base, hostname)
            files = [f for f in self._files(host_folder) if regex.fullmatch(f[0].rsplit("/", 1)[-1])]
            described = f"{where}, which NCCL expands to {host_folder.rstrip('/')}/{base.replace('%p', '<pid>')}"
        else:
            path = self.cluster.nccl_log
            if not path:
                raise FactError(
                    "the profile gives no cluster.nccl_log, and the serving run sets no NCCL_DEBUG_FILE",
                    fix="set `cluster.nccl_log` (where each station keeps the serving run's NCCL_DEBUG=INFO "
                    "log) in your site profile, or NCCL_DEBUG_FILE in the serving run's environment",
                )
            files = self._files(path.rsplit("/", 1)[0] or "/")
            files = [f for f in files if f[0] == path]
            described = f"the profile's cluster.nccl_log {path}"
            if not files:
                raise FactError(
                    f"{path} does not exist on {self.station.name}",
                    fix=f"start the serving run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV "
                    f"NCCL_DEBUG_FILE={path} (or tee its output there)",
                )
        if not files:
            raise NcclLogUnknown(f"{described}: no such file on {self.station.name} (has the run initialised NCCL?)")
        fresh = [f for f in files if started is None or f[1] >= started]
        stale = [f for f in files if started is not None and f[1] < started]
        return NcclLogSource(described, [f[0] for f in fresh], [(p, t) for p, t in stale], started)

    @cached_property
    def _hostname(self) -> str:
        return (self.station_facts.read("/proc/sys/kernel/hostname") or "").strip()

    def _files(self, folder: str) -> list[tuple[str, float]]:
        """The files in `folder` with their modification time (seconds since the epoch), by name. `folder` may be a
        link (a log folder moved to a larger disk): `-H` follows it."""
        text = self.station_facts.run(
            "find -H %s -maxdepth 1 -type f -exec stat -c '%%n|%%Y' {} + 2>/dev/null", folder, ok_rcs=(0, 1)
        )
        found = []
        for line in text.splitlines():
            path, _, when = line.rpartition("|")
            if path and when.isdigit():
                found.append((path, float(when)))
        return sorted(found)

    @cached_property
    def nccl_log_text(self) -> str:
        """The running engine's NCCL log: the fresh files of nccl_log_source (one a process), one after the other.
        Where only stale files are there, the log of this run is not known: NcclLogUnknown names them."""
        source = self.nccl_log_source
        if not source.fresh:
            raise NcclLogUnknown(
                f"{source.described}: only stale files there, written before the engine started at "
                f"{_stamp(source.started)}: "
                + ", ".join(f"{p} (last written {_stamp(t)})" for p, t in source.stale)
                + ": another run's log, not evidence for this one"
            )
        texts = []
        for path in source.fresh:
            text = self.station_facts.read(path)
            if text is not None:
                texts.append(text if text.endswith("\n") or path == source.fresh[-1] else text + "\n")
        return "".join(texts)

    @property
    def nccl_log_name(self) -> str:
        """The log as messages name it: the file(s) read, and the stale ones left aside."""
        source = self.nccl_log_source
        named = ", ".join(source.fresh)
        if source.stale:
            named += " (the running engine's; stale beside it, not read: " + ", ".join(p for p, _ in source.stale) + ")"
        return named

    @cached_property
    def nccl_log(self) -> nccl.NcclLog:
        return nccl.parse_nccl_log(self.nccl_log_text)

    def log_line(self, number: int) -> str:
        """Line `number` of the NCCL log as NCCL wrote it (colours and CR removed)."""
        return self.nccl_log.text_of(number)

    @cached_property
    def nccl_topology_problems(self) -> list[str]:
        """How the NCCL log's topology differs from the profile's, on what the log shows: `nNodes` (2 where rails join
        two stations; without rails not compared: NCCL counts each rank as a node when P2P and SHM are off on one host),
        `nRanks` (the tensor-parallel size) and whether any channel crosses a network. A fact the log does not hold (a
        partial capture without the `comm … nRanks … nNodes …` line) is no problem: the topology check says which line
        it needs. [] when it matches, and for a run that died before init (see `NcclLog.died_at_init`)."""
        log = self.nccl_log
        if log.died_at_init is not None:
            return []
        tp = self.station_facts.profile.vllm.tensor_parallel_size
        at = f" (line {log.topology.number}: `{self.log_line(log.topology.number)}`)" if log.topology else ""
        shown = ", ".join(sorted(log.transports)) or "no channel"
        problems = []
        if self.cluster.rails:
            if log.nodes is None:
                if log.channels and not log.net_transports:  # without nNodes, the channels it holds still say
                    first = log.channels[0].number
                    problems.append(
                        f"no channel crosses a network ({shown} only, from line {first}: "
                        f"`{self.log_line(first)}`): a one-host run's log"
                    )
            elif log.one_host:
                problems.append(
                    f"this log comes from a one-host run: nNodes 1, nRanks {log.ranks}, {shown} channels only{at}"
                )
            elif log.nodes != 2:
                problems.append(f"nNodes {log.nodes}{at}, where the profile declares two stations")
            elif log.channels and not log.net_transports:
                problems.append(f"no channel crosses a network ({shown} only), although nNodes is 2{at}")
        if log.ranks is not None and log.ranks != tp:
            problems.append(
                f"nRanks {log.ranks}{'' if problems else at}, where the profile serves tensor parallel {tp}"
            )
        return problems

    @cached_property
    def env_bytes(self) -> bytes:
        path = self.cluster.env_file
        if not path:
            raise FactError(
                "the profile gives no cluster.env_file",
                fix="set `cluster.env_file` (the pinned environment file on each station) in your site profile",
            )
        f = self.host.file(path)
        if not (f.exists and f.is_file):
            raise FactError(
                f"{path} does not exist on {self.station.name}",
                fix=f"write the pinned rail environment to {path} on both stations (the same file)",
            )
        return f.content

    @cached_property
    def env_file(self) -> net.EnvFile:
        return net.parse_env_file(self.env_bytes)

    @cached_property
    def perf(self) -> nccl.PerfResult:
        if not self.cluster.all_reduce_perf:
            raise FactError(
                "the profile gives no cluster.all_reduce_perf",
                fix="set `cluster.all_reduce_perf` (where station a keeps the all_reduce_perf output)",
            )
        text = self.station_facts.read(self.cluster.all_reduce_perf)
        if text is None:
            raise FactError(
                f"{self.cluster.all_reduce_perf} does not exist on {self.station.name}",
                fix="run nccl-tests `all_reduce_perf -b 8 -e 8G -f 2 -g 1` across both stations and save "
                "its output there",
            )
        return nccl.parse_perf(text)

    # --- what must be identical on both stations ----------------------------------------------------------------------

    @cached_property
    def image(self) -> docker.ImageFacts:
        ref = self.cluster.image_ref
        if not ref:
            raise FactError(
                "the profile gives no cluster.image_ref",
                fix="set `cluster.image_ref` (the image reference the launch script runs) in the profile",
            )
        result = self.host.run(BOUND + "docker image inspect %s", ref)
        if result.rc != 0:
            raise FactError(
                f"`docker image inspect {ref}` failed on {self.station.name} (exit {result.rc}): "
                f"{result.stderr.strip()[:200]}",
                fix=f"`docker pull {ref}` on {self.station.name}",
            )
        return docker.parse_image_inspect(result.stdout)

    @cached_property
    def checkpoint(self) -> CheckpointManifest:
        folder = self.station_facts.checkpoint_dir
        shards = {s.name: s.size for s in self.station_facts.shards}
        listing = self.station_facts.run(
            "find %s -maxdepth 1 -type f -name '*.json' -exec sha256sum {} +", folder, ok_rcs=(0, 1)
        )
        hashes = {}
        for line in listing.splitlines():
            digest, _, path = line.partition("  ")
            if path:
                hashes[path.rsplit("/", 1)[-1]] = digest
        return CheckpointManifest(shards, hashes)
