"""Two cluster test hosts in network namespaces, joined by a veth "rail", each with its own sshd (golive_testbed.sshd).

    with station_pair("mtu-b-1500") as pair:
        host = testinfra.get_host(pair.a.spec, ssh_config=str(pair.ssh_config))
        host.interface(pair.a.ifname).link[0]["mtu"]   # 9000

testinfra reaches each station as `ssh://NAME` through the written ssh_config: the TCP connection is made inside the
station's own namespace (ProxyCommand `ip netns exec NS busybox nc 127.0.0.1 22`), so addresses from 10.213.0.0/24
exist only inside the namespaces; pair.sshds[NAME] is a station's sshd (stop(), cut()). Needs root, iproute2,
openssh-server (sshd), busybox (nc), iputils-ping.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from golive_testbed.sshd import Sshd, keygen, loopback_sshd

SUBNET = "10.213.0"


@dataclass(frozen=True)
class Variant:
    """One way a two-station rail can be (mis)configured."""

    mtu_a: int = 9000
    mtu_b: int = 9000
    address_b: bool = True  # False: station B's rail has no IPv4 address
    wrong_route: bool = False  # True: station A reaches B's rail address through a second interface


VARIANTS = {
    "healthy": Variant(),
    "mtu-b-1500": Variant(mtu_b=1500),
    "rail-address-missing": Variant(address_b=False),
    "route-wrong-interface": Variant(wrong_route=True),
}


@dataclass(frozen=True)
class Station:
    name: str  # ssh Host alias and namespace name
    ifname: str  # the rail interface inside the namespace
    address: str  # the rail's intended IPv4 address (absent on B in rail-address-missing)
    mtu: int

    @property
    def spec(self) -> str:
        """testinfra host spec; pass the pair's ssh_config too (`--ssh-config` or `ssh_config=`)."""
        return f"ssh://{self.name}"


@dataclass(frozen=True)
class StationPair:
    variant: str
    a: Station
    b: Station
    ssh_config: Path
    workdir: Path
    sshds: dict[str, Sshd] = field(default_factory=dict)  # station name → its sshd

    def run(self, station: Station, *cmd: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """Run a command inside a station's namespace (not over ssh)."""
        return subprocess.run(
            ["ip", "netns", "exec", station.name, *cmd], check=False, capture_output=True, text=True, timeout=timeout
        )


def available() -> str | None:
    """Why the harness cannot run here, or None."""
    if os.geteuid() != 0:
        return "network-namespace test hosts need root (ip netns, sshd)"
    for tool in ("ip", "sshd", "ssh", "ssh-keygen", "busybox", "ping"):
        if not shutil.which(tool):
            return (
                f"`{tool}` is not installed "
                "(scripts/setup.sh installs iproute2, openssh-server, busybox-static, iputils-ping)"
            )
    probe = f"golive-probe-{secrets.token_hex(3)}"
    if subprocess.run(["ip", "netns", "add", probe], check=False, capture_output=True).returncode != 0:
        return "`ip netns add` fails here (no network-namespace support)"
    subprocess.run(["ip", "netns", "del", probe], check=False, capture_output=True)
    return None


def _sh(*cmd: str) -> None:
    result = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {result.stderr.strip()}")


@contextlib.contextmanager
def station_pair(variant: str = "healthy") -> Iterator[StationPair]:
    """Create the two namespaces, the rail, both sshds (listening on 0.0.0.0:22 in their namespace) and the
    ssh_config; always remove them again."""
    v = VARIANTS[variant]
    suffix = secrets.token_hex(3)
    a = Station(f"glA-{suffix}", "rail0", f"{SUBNET}.1", v.mtu_a)
    b = Station(f"glB-{suffix}", "rail0", f"{SUBNET}.2", v.mtu_b)
    workdir = Path(tempfile.mkdtemp(prefix=f"golive-netns-{suffix}-"))
    created: list[str] = []
    stack = contextlib.ExitStack()
    try:
        for station in (a, b):
            _sh("ip", "netns", "add", station.name)
            created.append(station.name)
            _sh("ip", "-n", station.name, "link", "set", "lo", "up")
        _sh(
            "ip",
            "link",
            "add",
            f"gla{suffix}",
            "netns",
            a.name,
            "type",
            "veth",
            "peer",
            "name",
            f"glb{suffix}",
            "netns",
            b.name,
        )
        for station, tmp in ((a, f"gla{suffix}"), (b, f"glb{suffix}")):
            _sh("ip", "-n", station.name, "link", "set", tmp, "name", station.ifname)
            _sh("ip", "-n", station.name, "link", "set", station.ifname, "mtu", str(station.mtu), "up")
        _sh("ip", "-n", a.name, "addr", "add", f"{a.address}/24", "dev", a.ifname)
        if v.address_b:
            _sh("ip", "-n", b.name, "addr", "add", f"{b.address}/24", "dev", b.ifname)
        if v.wrong_route:  # a second link (the "management" port) carries a more specific route to B's rail address
            _sh(
                "ip",
                "link",
                "add",
                f"glm{suffix}",
                "netns",
                a.name,
                "type",
                "veth",
                "peer",
                "name",
                f"gln{suffix}",
                "netns",
                b.name,
            )
            _sh("ip", "-n", a.name, "link", "set", f"glm{suffix}", "name", "mgmt0")
            _sh("ip", "-n", b.name, "link", "set", f"gln{suffix}", "name", "mgmt0")
            _sh("ip", "-n", a.name, "addr", "add", "10.213.0.129/25", "dev", "mgmt0")
            _sh("ip", "-n", b.name, "addr", "add", "10.213.0.130/25", "dev", "mgmt0")
            for station in (a, b):
                _sh("ip", "-n", station.name, "link", "set", "mgmt0", "up")
            _sh("ip", "-n", a.name, "route", "add", f"{b.address}/32", "dev", "mgmt0")
        key = keygen(workdir / "client_key")  # one client key for both stations
        sshds = {
            station.name: stack.enter_context(
                loopback_sshd(
                    22,
                    address="0.0.0.0",
                    netns=station.name,
                    alias=station.name,
                    client_key=key,
                    workdir=workdir / station.name,
                )
            )
            for station in (a, b)
        }
        (workdir / "ssh_config").write_text("\n".join(sshd.host_block for sshd in sshds.values()))
        yield StationPair(variant, a, b, workdir / "ssh_config", workdir, sshds)
    finally:
        stack.close()  # both sshds stopped, their sessions with them
        for name in created:
            # whatever still runs in the namespace (the sshds' sessions went with them)
            pids = subprocess.run(
                ["ip", "netns", "pids", name], check=False, capture_output=True, text=True
            ).stdout.split()
            for pid in pids:
                with contextlib.suppress(OSError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)
        shutil.rmtree(workdir, ignore_errors=True)
