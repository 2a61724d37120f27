"""NVIDIA GPUs and NUMA memory: nvidia-smi, /proc/driver/nvidia, /sys/devices/system/node."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

from golive.facts import FactError


def parse_query_csv(text: str, fields: list[str]) -> list[dict[str, str]]:
    """`nvidia-smi --query-…=a,b,c --format=csv,noheader,nounits` rows as dicts."""
    rows = []
    try:
        parsed = list(csv.reader(io.StringIO(text, newline=""), skipinitialspace=True))
    except csv.Error as exc:
        raise FactError(f"nvidia-smi output is not CSV: {exc}") from None
    for row in parsed:
        if not row or row[0].startswith("#"):
            continue
        if row[0].startswith("No ") and len(row) == 1:  # "No running processes found" on older drivers
            continue
        if len(row) != len(fields):
            raise FactError(
                f"nvidia-smi row has {len(row)} columns, expected {len(fields)} ({', '.join(fields)}): {row}"
            )
        rows.append({name: value.strip() for name, value in zip(fields, row, strict=True)})
    return rows


def mib(value: str) -> float | None:
    """nvidia-smi numbers with nounits; "[N/A]" and friends are unknown."""
    try:
        return float(value)
    except ValueError:
        return None


def normalize_bus_id(bus_id: str) -> str:
    """nvidia-smi prints 00000009:01:00.0, /proc/driver/nvidia uses 0009:01:00.0: compare as 0009:01:00.0."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    if not rest:
        return bus_id.lower()
    try:
        return f"{int(domain, 16):04x}:{rest}"
    except ValueError:
        raise FactError(f"not a PCI bus id: {bus_id[:80]!r}") from None


@dataclass
class SmiGpu:
    bus_id: str
    product_name: str
    addressing_mode: str | None
    fb_total_mib: float | None
    fb_used_mib: float | None
    brand: str | None = None  # `Product Brand`: "NVIDIA" (H200, GB300), "NVIDIA RTX" (a workstation/display GPU), …


# nvidia-smi prints NVML's brand (nvml.h nvmlBrandType_t): Quadro, NVS, GeForce, Titan and the *RTX brands are
# workstation and display GPUs; "NVIDIA" (NVML_BRAND_NVIDIA: H100, H200, GB300), "Tesla" and the virtual-GPU brands are
# the data-centre GPUs a serving profile is written for.
WORKSTATION_BRANDS = frozenset(
    {"quadro", "quadro rtx", "nvidia rtx", "nvs", "geforce", "geforce rtx", "titan", "titan rtx"}
)


def is_workstation_brand(brand: str | None) -> bool:
    """A display/workstation GPU (never the serving GPU of a data-centre profile); False when the brand is unknown."""
    return (brand or "").strip().lower() in WORKSTATION_BRANDS


def parse_smi_q(text: str) -> list[SmiGpu]:
    """`nvidia-smi -q`: one block per `GPU 00000009:01:00.0` header."""
    gpus: list[SmiGpu] = []
    blocks = re.split(r"^GPU ([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.\d)\s*$", text, flags=re.MULTILINE)
    for bus_id, body in zip(blocks[1::2], blocks[2::2], strict=True):  # re.split: text, (group, text)*

        def field(name: str, within: str = body) -> str | None:
            match = re.search(rf"^\s*{re.escape(name)}\s*:\s*(.*?)\s*$", within, flags=re.MULTILINE)
            return match.group(1) if match else None

        fb = re.search(r"FB Memory Usage\s*\n((?:\s{8,}.*\n?)+)", body)
        fb_text = fb.group(1) if fb else ""
        total, used = field("Total", fb_text), field("Used", fb_text)
        gpus.append(
            SmiGpu(
                bus_id=normalize_bus_id(bus_id),
                product_name=field("Product Name") or "",
                addressing_mode=field("Addressing Mode"),
                fb_total_mib=mib(total.split()[0]) if total else None,
                fb_used_mib=mib(used.split()[0]) if used else None,
                brand=field("Product Brand"),
            )
        )
    if not gpus and "GPU" in text:
        raise FactError("`nvidia-smi -q` output has no `GPU <bus id>` sections")
    return gpus


def parse_smi_versions(text: str) -> dict[str, str | None]:
    """`nvidia-smi -q`'s header: {"driver": "580.159.04", "cuda": "13.0"} (None where a line is missing)."""

    def header(name: str) -> str | None:
        match = re.search(rf"^{re.escape(name)}\s*:\s*(\S.*?)\s*$", text, flags=re.MULTILINE)
        return match.group(1) if match else None

    return {"driver": header("Driver Version"), "cuda": header("CUDA Version")}


def parse_node_meminfo(text: str) -> dict[str, int]:
    """/sys/devices/system/node/nodeN/meminfo → {"FilePages": kB, …} (HugePages_* counts are pages)."""
    values = {}
    for line in text.splitlines():
        match = re.match(r"Node\s+\d+\s+([\w()]+):\s+(\d+)", line)
        if match:
            values[match.group(1)] = int(match.group(2))
    if not values:
        raise FactError("node meminfo has no `Node N Key: value kB` lines")
    return values


def parse_cpulist(text: str) -> set[int]:
    """Kernel cpu/node list format: "0-71,80,82-83"; empty means none."""
    out: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        try:
            out.update(range(int(low), int(high or low) + 1))
        except ValueError:
            raise FactError(f"not a kernel cpu list (like 0-71,80): {text[:80]!r}") from None
    return out


def parse_numa_status(text: str) -> int | None:
    """/proc/driver/nvidia/gpus/<bdf>/numa_status: the `Node:` line names the GPU memory's NUMA node (-1: none)."""
    match = re.search(r"^\s*Node:\s*(-?\d+)", text, flags=re.MULTILINE)
    if not match:
        return None
    node = int(match.group(1))
    return node if node >= 0 else None


def parse_cgroup(text: str) -> str:
    """/proc/PID/cgroup: the cgroup v2 path (`0::/…`), else the first v1 line's path."""
    lines = [line for line in text.splitlines() if line.strip()]
    for line in lines:
        if line.startswith("0::"):
            return line[3:]
    return lines[0].split(":", 2)[-1] if lines else ""


def container_id_in_cgroup(path: str) -> str | None:
    """docker-<id>.scope (systemd driver) or /docker/<id> (cgroupfs driver)."""
    match = re.search(r"(?:docker-|/docker/)([0-9a-f]{64})", path)
    return match.group(1) if match else None
