"""The GPU: present, used by the serving container only, idle before a start [000][002]."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import not_applicable, require
from golive.facts import FactError
from golive.facts.gpu import is_workstation_brand, mib, normalize_bus_id
from golive.profile.inventory import Station
from golive.profile.origins import origin, sourced
from golive.profile.schema import Profile

if TYPE_CHECKING:
    from golive.run.fixtures import RecordProvenance
    from golive.station.host import StationFacts

pytestmark = pytest.mark.host


def _per_station(profile: Profile) -> str:
    """ "1 × GB300 per station [000]": the GPUs a station serves with, and where the profile's numbers came from."""
    return sourced(
        profile,
        (lambda p: p.gpu.per_station, f"{profile.gpu.per_station} ×"),
        (lambda p: p.gpu.name_contains, f"{profile.gpu.name_contains} per station"),
        join=" ".join,
    )


def _not_applicable_without_gpus(profile: Profile) -> None:
    """A profile of a station that serves without GPUs (gpu.per_station: 0): no GPU to find, own or keep idle."""
    if profile.gpu.per_station == 0:
        not_applicable(
            f"the profile expects no serving GPU on this station (gpu.per_station: 0 "
            f"{origin(profile, lambda p: p.gpu.per_station)})"
        )


@check("host.gpu.serving_gpu_present", Cost.READ)
def test_serving_gpu_present(facts: StationFacts, profile: Profile, record_provenance: RecordProvenance) -> None:
    """The station shows its {gpu.per_station} serving {gpu.name_contains} GPU(s), not the display GPU [000][002]."""
    _not_applicable_without_gpus(profile)
    serving = facts.serving_gpus()
    listed = facts.gpus
    counts = Counter(g["name"] for g in listed)
    # provenance names the GPUs the station has, whatever they are: the serving ones, else every GPU listed
    record_provenance(
        gpu=", ".join(sorted({g["name"] for g in serving or listed})) or None,
        gpus=", ".join(f"{n} × {name}" for name, n in sorted(counts.items())) or None,
        **facts.smi_versions,
    )
    seen = [f"{g['name']} ({g['pci.bus_id']})" for g in listed]
    want = profile.gpu.name_contains
    try:
        brands = {g.bus_id: g.brand for g in facts.smi_q}
    except FactError:
        brands = {}
    # Another data-centre GPU where the profile's should be: this is other hardware, not a GPU the driver lost.
    # Only display GPUs (or none) listed: the serving GPU is there but did not come up — the driver advice.
    others = [
        g
        for g in listed
        if g not in serving
        and normalize_bus_id(g["pci.bus_id"]) in brands
        and not is_workstation_brand(brands[normalize_bus_id(g["pci.bus_id"])])
    ]
    if not serving and others:
        other_counts = Counter(g["name"] for g in others)
        has = ", ".join(f"{n} × {name}" for name, n in sorted(other_counts.items()))
        require(
            False,
            found=f"nvidia-smi lists {', '.join(seen)}: this station has {has}, no {want}",
            recipe=f"profile {profile.name} is written for " + _per_station(profile),
            fix=f"this profile does not fit this hardware: check this station with a profile written for its "
            f"{' / '.join(sorted(other_counts))} (`golive profile list`, or a site profile that `extends:` "
            f"one and sets gpu.name_contains, the checkpoint and the vLLM flags that station serves with), "
            f"or run this profile on a {want} station",
        )
    require(
        len(serving) >= profile.gpu.per_station,
        found=f"nvidia-smi lists {', '.join(seen) or 'no GPU'}",
        recipe=_per_station(profile),
        fix="check `nvidia-smi -q` and `dmesg | grep -i nvrm`; reseat/reboot or reinstall the driver until the "
        f"{want} is listed",
    )


@check("host.gpu.compute_processes_belong_to_serving_container", Cost.READ)
def test_gpu_compute_processes_belong_to_serving_container(
    facts: StationFacts, profile: Profile, station: Station
) -> None:
    """Compute processes on the serving GPU belong to the serving container only; a stray process is a finding [000]."""
    _not_applicable_without_gpus(profile)
    serving = {normalize_bus_id(g["pci.bus_id"]) for g in facts.serving_gpus()}
    if not serving:
        pytest.skip(f"no {profile.gpu.name_contains} visible (see the GPU presence check)")
    container = facts.container
    ours = container.id if container is not None and container.running and station.phase == "serving" else None
    stray = []
    for app in facts.compute_apps:
        if normalize_bus_id(app["gpu_bus_id"]) not in serving:
            continue
        owner = facts.pid_container(app["pid"])
        if ours is None or owner != ours:
            stray.append(
                f"pid {app['pid']} {app['process_name']} ({app['used_gpu_memory']} MiB, "
                f"{'container ' + owner[:12] if owner else 'not in a container'})"
            )
    require(
        not stray,
        found=f"{len(stray)} compute process(es) on the {profile.gpu.name_contains} outside the serving container: "
        + "; ".join(stray),
        recipe="the GPU belongs to the serving container; anything else steals HBM vLLM sized its KV cache for [000]",
        fix="identify each pid (`ps -o pid,user,cmd -p PID`), stop it, and keep ad-hoc work off the serving GPU",
    )


@check("host.gpu.idle_hbm_below_ceiling_before_start", Cost.READ)
def test_idle_hbm_below_ceiling_before_start(facts: StationFacts, profile: Profile, station: Station) -> None:
    """Before a start (service stopped), HBM in use is below the idle ceiling of {gpu.idle_hbm_used_ceiling_mib} MiB,
    so vLLM can claim its share [000]."""
    _not_applicable_without_gpus(profile)
    if station.phase != "pre-start":
        not_applicable("serving phase: HBM is meant to be in use (this check runs with phase: pre-start)")
    ceiling = profile.gpu.idle_hbm_used_ceiling_mib
    used_mib = [(g, mib(g["memory.used"])) for g in facts.serving_gpus()]
    busy = [(g, used) for g, used in used_mib if used is not None and used > ceiling]
    require(
        not busy,
        found="; ".join(
            f"{g['name']} {g['pci.bus_id']} has {used / 1024:.1f} GiB in use with the service stopped"
            for g, used in busy
        ),
        recipe=sourced(
            profile, (lambda p: p.gpu.idle_hbm_used_ceiling_mib, f"HBM in use below {ceiling:g} MiB before a start")
        )
        + (
            f"; vLLM claims {profile.vllm.gpu_memory_utilization:g} of it "
            f"{origin(profile, lambda p: p.vllm.gpu_memory_utilization)}"
            if profile.vllm.gpu_memory_utilization is not None
            else "; vLLM claims 0.9 of it [vLLM's default --gpu-memory-utilization]"
        ),
        fix="find the holder (`nvidia-smi --query-compute-apps=pid,used_gpu_memory --format=csv`, `fuser -v "
        "/dev/nvidia*`), stop it, then start the service",
    )
