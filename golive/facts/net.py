"""Network rails and RDMA ports: `ip -j`, ethtool, /sys/class/net, jumbo DF ping, ibv_devinfo, sysfs GIDs, env files."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import shlex
from dataclasses import dataclass, field
from enum import StrEnum

from golive.facts import FactError


def _json(text: str, command: str) -> list[dict]:
    try:
        data = json.loads(text)
    except ValueError:
        raise FactError(f"`{command}` did not print JSON: {text.strip()[:80]!r}") from None
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise FactError(f"`{command}` printed JSON that is not a list of objects")
    return data


@dataclass(frozen=True)
class Interface:
    name: str
    operstate: str  # UP, DOWN, UNKNOWN (loopback, some virtual links), LOWERLAYERDOWN …
    mtu: int
    flags: tuple[str, ...]
    ipv4: tuple[ipaddress.IPv4Interface, ...] = ()  # address/prefix; empty for `ip link`

    @property
    def up(self) -> bool:
        return self.operstate == "UP"


def parse_ip_addr(text: str) -> dict[str, Interface]:
    """`ip -j addr show` (or `ip -j link show`, which has no addresses) → {"enp1s0f0np0": Interface, …}.

    >>> parse_ip_addr(out)["enp1s0f0np0"].ipv4[0]
    IPv4Interface('10.0.0.1/24')
    """
    interfaces = {}
    for item in _json(text, "ip -j addr"):
        try:
            ipv4 = tuple(
                ipaddress.IPv4Interface(f"{a['local']}/{a['prefixlen']}")
                for a in item.get("addr_info", [])
                if a.get("family") == "inet"
            )
            interfaces[item["ifname"]] = Interface(
                item["ifname"], item["operstate"], int(item["mtu"]), tuple(item.get("flags", [])), ipv4
            )
        except (KeyError, ValueError) as exc:
            raise FactError(f"`ip -j addr` entry without {exc}: {str(item)[:80]}") from None
    return interfaces


@dataclass(frozen=True)
class Route:
    dst: str
    dev: str
    src: str | None  # the source address the kernel picks (prefsrc)
    gateway: str | None


def parse_ip_route_get(text: str) -> Route | None:
    """`ip -j route get ADDR` → the interface and source address that reach ADDR; None when there is no route
    (`RTNETLINK answers: Network is unreachable`)."""
    if "Network is unreachable" in text or "No route to host" in text:
        return None
    routes = _json(text, "ip -j route get")
    if not routes or "dev" not in routes[0]:
        raise FactError("`ip -j route get` printed no route with a `dev`")
    r = routes[0]
    return Route(r.get("dst", ""), r["dev"], r.get("prefsrc"), r.get("gateway"))


@dataclass(frozen=True)
class EthtoolLink:
    name: str
    speed_mbps: int | None  # None: "Unknown!" (link down, or the driver does not say)
    duplex: str | None
    link_detected: bool | None


def parse_ethtool(text: str) -> EthtoolLink:
    """`ethtool IF`: "Speed: 400000Mb/s" → 400000, "Speed: Unknown!" → None; "Link detected: yes"."""
    name = re.search(r"^Settings for (\S+?):\s*$", text, flags=re.MULTILINE)
    if not name:
        raise FactError(f"ethtool output has no `Settings for IF:` line: {text.strip()[:80]!r}")

    def field_(key: str) -> str | None:
        match = re.search(rf"^\s+{key}:\s*(.*?)\s*$", text, flags=re.MULTILINE)
        return match.group(1) if match else None

    speed, duplex, link = field_("Speed"), field_("Duplex"), field_("Link detected")
    speed_match = re.fullmatch(r"(\d+)Mb/s", speed or "")
    if speed is not None and not speed_match and not speed.startswith("Unknown"):
        raise FactError(f"ethtool Speed {speed!r} is neither NMb/s nor Unknown!")
    return EthtoolLink(
        name.group(1),
        int(speed_match.group(1)) if speed_match else None,
        None if duplex in (None, "") or duplex.startswith("Unknown") else duplex,
        None if link is None else link == "yes",
    )


def parse_sys_speed(text: str) -> int | None:
    """/sys/class/net/IF/speed: Mb/s; -1 (or reading it failing on a down link) → unknown."""
    value = text.strip()
    if not re.fullmatch(r"-?\d+", value):
        raise FactError(f"/sys/class/net/*/speed is not an integer: {value[:80]!r}")
    return int(value) if int(value) >= 0 else None


class PingVerdict(StrEnum):
    OK = "ok"
    LOCAL_MTU = "local MTU too small"
    DROPPED = "dropped on the path"
    UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class Ping:
    transmitted: int
    received: int
    loss_percent: float
    errors: int
    verdict: PingVerdict
    message: str  # the first line that says why (ping's own words), "" when ok
    local_mtu: int | None  # from `message too long, mtu=1500`


def parse_ping(text: str, rc: int) -> Ping:
    """`ping -M do -s 8972 -c N -I IF PEER` output and exit status → counts and a verdict.

    Message too long (`ping: local error: message too long, mtu=1500`, or `sendmsg: Message too long`) means THIS
    side's MTU is too small; `sendmsg: No buffer space available`, or silence with 100 % loss, means a frame of that
    size was dropped further on (a peer or switch at a smaller MTU); `Network is unreachable` / `Destination Host
    Unreachable` means no path at all.
    """
    stats = re.search(
        r"(\d+) packets transmitted, (\d+) (?:packets )?received(?:, \+(\d+) errors)?"
        r".*?, ([\d.]+)% packet loss",
        text,
    )
    errors = [
        line.strip()
        for line in text.splitlines()
        if line.startswith("ping:") or "Unreachable" in line or "Frag needed" in line
    ]
    if not stats and not errors:
        raise FactError(f"ping output has neither statistics nor an error line: {text.strip()[:80]!r}")
    tx, rx = (int(stats.group(1)), int(stats.group(2))) if stats else (0, 0)
    loss = float(stats.group(4)) if stats else 100.0
    mtu = re.search(r"mtu\s*=\s*(\d+)", text)
    joined = "\n".join(errors)
    if rc == 0 and stats and rx == tx and tx > 0:
        verdict = PingVerdict.OK
    elif "essage too long" in joined:
        verdict = PingVerdict.LOCAL_MTU
    elif "unreachable" in joined.lower():
        verdict = PingVerdict.UNREACHABLE
    else:  # No buffer space available, Frag needed, silent loss, partial loss
        verdict = PingVerdict.DROPPED
    message = "" if verdict is PingVerdict.OK else (errors[0] if errors else f"{tx - rx} of {tx} replies missing")
    return Ping(
        tx,
        rx,
        loss,
        int(stats.group(3) or 0) if stats else len(errors),
        verdict,
        message,
        int(mtu.group(1)) if mtu else None,
    )


@dataclass(frozen=True)
class Gid:
    index: int
    gid: str  # canonical IPv6 text (devinfo prints RoCE v1 entries uncompressed): ::ffff:10.0.0.1
    type: str | None  # "RoCE v2", "RoCE v1"; None on InfiniBand

    @property
    def ipv4(self) -> str | None:
        """The IPv4 address of an IPv4-mapped GID (::ffff:10.0.0.1), which is what RoCE v2 routes by."""
        try:
            mapped = ipaddress.IPv6Address(self.gid).ipv4_mapped
        except ValueError:
            return None
        return str(mapped) if mapped else None


@dataclass(frozen=True)
class IbPort:
    number: int
    state: str  # PORT_ACTIVE, PORT_DOWN, PORT_INIT …
    link_layer: str  # Ethernet (RoCE) or InfiniBand
    active_mtu: int | None  # bytes: "4096 (5)" → 4096
    max_mtu: int | None
    gids: tuple[Gid, ...] = ()  # only `ibv_devinfo -v` prints them

    @property
    def active(self) -> bool:
        return self.state == "PORT_ACTIVE"

    def gid_index(self, ipv4: str, type: str = "RoCE v2") -> int | None:
        """Index of the GID of that type for that IPv4 address (what NCCL_IB_GID_INDEX must name)."""
        return next((g.index for g in self.gids if g.ipv4 == ipv4 and g.type == type), None)


@dataclass(frozen=True)
class IbDevice:
    hca_id: str
    transport: str
    fw_ver: str | None
    board_id: str | None
    ports: dict[int, IbPort] = field(default_factory=dict)


def _mtu(value: str | None) -> int | None:
    match = re.match(r"(\d+)", value or "")
    return int(match.group(1)) if match else None


def parse_ibv_devinfo(text: str) -> list[IbDevice]:
    """`ibv_devinfo` or `ibv_devinfo -v` (rdma-core libibverbs/examples/devinfo.c) → devices with their ports.

    No RDMA devices (`No IB devices found`, `Failed to get IB devices list: …`) → [].
    """
    if re.search(r"^(No IB devices found|Failed to get IB devices list)", text, flags=re.MULTILINE):
        return []
    blocks = re.split(r"^hca_id:\s*(\S+)\s*$", text, flags=re.MULTILINE)
    if len(blocks) < 3:
        raise FactError(f"ibv_devinfo output has no `hca_id:` line: {text.strip()[:80]!r}")
    devices = []
    for hca_id, body in zip(blocks[1::2], blocks[2::2], strict=True):  # split on one group: id, body, id, body
        head, *port_blocks = re.split(r"^\t\tport:\t(\d+)\s*$", body, flags=re.MULTILINE)

        def value(key: str, within: str) -> str | None:
            match = re.search(rf"^\t+{key}:\s*(.*?)\s*$", within, flags=re.MULTILINE)
            return match.group(1) if match else None

        ports = {}
        for number, port in zip(port_blocks[0::2], port_blocks[1::2], strict=True):
            state, layer = value("state", port), value("link_layer", port)
            if state is None or layer is None:
                raise FactError(f"ibv_devinfo {hca_id} port {number} has no state or link_layer line")
            gids = tuple(
                Gid(int(i), _canonical_gid(gid), kind or None)
                for i, gid, kind in re.findall(
                    r"^\t+GID\[\s*(\d+)\]:\s+(\S+?)(?:, (RoCE v\d))?\s*$", port, flags=re.MULTILINE
                )
            )
            ports[int(number)] = IbPort(
                int(number),
                state.split()[0],
                layer,
                _mtu(value("active_mtu", port)),
                _mtu(value("max_mtu", port)),
                gids,
            )
        devices.append(
            IbDevice(hca_id, value("transport", head) or "", value("fw_ver", head), value("board_id", head), ports)
        )
    return devices


def _canonical_gid(text: str) -> str:
    try:
        address = ipaddress.IPv6Address(text.strip())
    except ValueError:
        raise FactError(f"GID is not a 128-bit GID: {text.strip()[:80]!r}") from None
    return f"::ffff:{address.ipv4_mapped}" if address.ipv4_mapped else str(address)


def parse_sysfs_gid(index: int, gid: str, gid_type: str | None) -> Gid | None:
    """/sys/class/infiniband/DEV/ports/P/gids/INDEX ("0000:…:ffff:0a00:0001") and gid_attrs/types/INDEX ("RoCE v2";
    unreadable for an unused entry: pass None) → the GID in ibv_devinfo's notation; None for an unused (zero) entry."""
    text = _canonical_gid(gid)
    if ipaddress.IPv6Address(text).packed[8:] == bytes(8):  # devinfo.c's null_gid(): the interface id is zero
        return None
    return Gid(index, text, (gid_type or "").strip() or None)


@dataclass(frozen=True)
class EnvFile:
    values: dict[str, str]
    sha256: str  # of the file's bytes: two stations' files are compared byte for byte


def parse_env_file(data: str | bytes) -> EnvFile:
    """KEY=VALUE lines (systemd EnvironmentFile / docker --env-file / shell `source`): `export ` prefix, single or
    double quotes, `#` comments and blank lines."""
    raw = data.encode() if isinstance(data, str) else data
    values = {}
    try:
        text = raw.decode()
    except UnicodeDecodeError as exc:
        raise FactError(f"env file is not UTF-8 text (byte {raw[exc.start]:#04x} at offset {exc.start})") from None
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)", line)
        if not match:
            raise FactError(f"env file line {number} is not KEY=VALUE: {line[:80]!r}")
        try:
            words = shlex.split(match.group(2), comments=True)
        except ValueError as exc:
            raise FactError(f"env file line {number}: {exc}") from None
        values[match.group(1)] = " ".join(words)
    return EnvFile(values, hashlib.sha256(raw).hexdigest())
