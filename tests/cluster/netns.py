"""Two cluster test hosts in network namespaces, joined by a veth "rail", each with its own sshd.

    with station_pair("mtu-b-1500") as pair:
        host = testinfra.get_host(pair.a.spec, ssh_config=str(pair.ssh_config))
        host.interface(pair.a.ifname).link[0]["mtu"]   # 9000

testinfra reaches each station as `ssh://NAME` through the written ssh_config: the TCP connection is made inside the
station's own namespace (ProxyCommand `ip netns exec NS busybox nc 127.0.0.1 22`), so addresses from 10.213.0.0/24
exist only inside the namespaces. Needs root, iproute2, openssh-server (sshd), busybox (nc), iputils-ping.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SUBNET = "10.213.0"


@dataclass(frozen=True)
class Variant:
    """One way a two-station rail can be (mis)configured."""
    mtu_a: int = 9000
    mtu_b: int = 9000
    address_b: bool = True        # False: station B's rail has no IPv4 address
    wrong_route: bool = False     # True: station A reaches B's rail address through a second interface


VARIANTS = {
    "healthy": Variant(),
    "mtu-b-1500": Variant(mtu_b=1500),
    "rail-address-missing": Variant(address_b=False),
    "route-wrong-interface": Variant(wrong_route=True),
}


@dataclass(frozen=True)
class Station:
    name: str          # ssh Host alias and namespace name
    ifname: str        # the rail interface inside the namespace
    address: str       # the rail's intended IPv4 address (absent on B in rail-address-missing)
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

    def run(self, station: Station, *cmd: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """Run a command inside a station's namespace (not over ssh)."""
        return subprocess.run(["ip", "netns", "exec", station.name, *cmd], check=False, capture_output=True, text=True,
                              timeout=timeout)


def available() -> str | None:
    """Why the harness cannot run here, or None."""
    if os.geteuid() != 0:
        return "network-namespace test hosts need root (ip netns, sshd)"
    for tool in ("ip", "sshd", "ssh", "ssh-keygen", "busybox", "ping"):
        if not shutil.which(tool):
            return (f"`{tool}` is not installed "
                    "(scripts/setup.sh installs iproute2, openssh-server, busybox-static, iputils-ping)")
    probe = f"golive-probe-{secrets.token_hex(3)}"
    if subprocess.run(["ip", "netns", "add", probe], check=False, capture_output=True).returncode != 0:
        return "`ip netns add` fails here (no network-namespace support)"
    subprocess.run(["ip", "netns", "del", probe], check=False, capture_output=True)
    return None


def _sh(*cmd: str) -> None:
    result = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {result.stderr.strip()}")


def _wait_for(pidfile: Path, sshd: subprocess.Popen, timeout: float = 10) -> None:
    """sshd writes its PidFile once it listens."""
    deadline = time.monotonic() + timeout
    while not pidfile.exists():
        if sshd.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"sshd in {pidfile.parent.name} did not start (exit status {sshd.poll()})")
        time.sleep(0.05)


SSHD_CONFIG = """\
ListenAddress 0.0.0.0:22
HostKey {dir}/host_key
PidFile {dir}/sshd.pid
AuthorizedKeysFile {dir}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
UsePAM no
StrictModes no
LogLevel ERROR
# root's login shell is bash, which reads ~/.bashrc under sshd: on a host whose ~/.bashrc runs pyenv, every session
# took its rehash lock, and a session cut mid-way (the fault campaign) left it held for the sessions after
SetEnv HOME={dir}
"""

SSH_HOST = """\
Host {name}
    HostName 127.0.0.1
    Port 22
    User root
    IdentityFile {key}
    IdentitiesOnly yes
    ProxyCommand ip netns exec {name} busybox nc 127.0.0.1 22
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
    ConnectTimeout 10
"""


@contextlib.contextmanager
def station_pair(variant: str = "healthy") -> Iterator[StationPair]:
    """Create the two namespaces, the rail, both sshds and the ssh_config; always remove them again."""
    v = VARIANTS[variant]
    suffix = secrets.token_hex(3)
    a = Station(f"glA-{suffix}", "rail0", f"{SUBNET}.1", v.mtu_a)
    b = Station(f"glB-{suffix}", "rail0", f"{SUBNET}.2", v.mtu_b)
    workdir = Path(tempfile.mkdtemp(prefix=f"golive-netns-{suffix}-"))
    created: list[str] = []
    sshds: list[subprocess.Popen] = []
    try:
        for station in (a, b):
            _sh("ip", "netns", "add", station.name)
            created.append(station.name)
            _sh("ip", "-n", station.name, "link", "set", "lo", "up")
        _sh("ip", "link", "add", f"gla{suffix}", "netns", a.name, "type", "veth",
            "peer", "name", f"glb{suffix}", "netns", b.name)
        for station, tmp in ((a, f"gla{suffix}"), (b, f"glb{suffix}")):
            _sh("ip", "-n", station.name, "link", "set", tmp, "name", station.ifname)
            _sh("ip", "-n", station.name, "link", "set", station.ifname, "mtu", str(station.mtu), "up")
        _sh("ip", "-n", a.name, "addr", "add", f"{a.address}/24", "dev", a.ifname)
        if v.address_b:
            _sh("ip", "-n", b.name, "addr", "add", f"{b.address}/24", "dev", b.ifname)
        if v.wrong_route:   # a second link (the "management" port) carries a more specific route to B's rail address
            _sh("ip", "link", "add", f"glm{suffix}", "netns", a.name, "type", "veth",
                "peer", "name", f"gln{suffix}", "netns", b.name)
            _sh("ip", "-n", a.name, "link", "set", f"glm{suffix}", "name", "mgmt0")
            _sh("ip", "-n", b.name, "link", "set", f"gln{suffix}", "name", "mgmt0")
            _sh("ip", "-n", a.name, "addr", "add", "10.213.0.129/25", "dev", "mgmt0")
            _sh("ip", "-n", b.name, "addr", "add", "10.213.0.130/25", "dev", "mgmt0")
            for station in (a, b):
                _sh("ip", "-n", station.name, "link", "set", "mgmt0", "up")
            _sh("ip", "-n", a.name, "route", "add", f"{b.address}/32", "dev", "mgmt0")
        _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(workdir / "client_key"))
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)   # sshd's privilege-separation dir (systemd makes it)
        hosts = []
        for station in (a, b):
            d = workdir / station.name
            d.mkdir()
            _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key"))
            shutil.copy(workdir / "client_key.pub", d / "authorized_keys")
            (d / "sshd_config").write_text(SSHD_CONFIG.format(dir=d))
            sshd_path = shutil.which("sshd") or "sshd"
            sshds.append(subprocess.Popen(["ip", "netns", "exec", station.name, sshd_path, "-D", "-e",
                                           "-f", str(d / "sshd_config")], stderr=subprocess.DEVNULL))
            _wait_for(d / "sshd.pid", sshds[-1])
            hosts.append(SSH_HOST.format(name=station.name, key=workdir / "client_key"))
        (workdir / "ssh_config").write_text("\n".join(hosts))
        yield StationPair(variant, a, b, workdir / "ssh_config", workdir)
    finally:
        for sshd in sshds:
            sshd.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                sshd.wait(timeout=5)
        for name in created:
            # sshd session processes that outlive the listener
            pids = subprocess.run(["ip", "netns", "pids", name], check=False, capture_output=True,
                                  text=True).stdout.split()
            for pid in pids:
                with contextlib.suppress(OSError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)
        shutil.rmtree(workdir, ignore_errors=True)
