"""Which layers apply to which station (the profile and the inventory decide, before any check runs), and which
layers' suites a run collects at all."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from golive.core.verdict import NOT_APPLICABLE, NOT_CHECKED
from golive.profile.inventory import Station
from golive.profile.schema import LAYERS, Layer, Profile

# the pytest marker of each layer (golive.profile.schema.LAYERS), as `pytest --markers` shows it
MARKER_HELP: dict[Layer, str] = {
    "host": "host checks: NUMA page cache, prestart, systemd unit, docker flags, image, served flags, checkpoint, GPU",
    "cluster": "cluster checks: rails, MTU, RDMA, NCCL, station parity",
    "endpoint": "endpoint checks through the OpenAI API",
}


def layer_scope(layer: Layer, station: Station, profile: Profile, profile_name: str) -> tuple[str, str] | None:
    """None when the layer's checks run on this station; else (not_applicable | not_checked, the reason)."""
    if layer not in profile.layers:
        return (
            NOT_APPLICABLE,
            f"profile {profile_name} has no {layer} layer: its layers are {', '.join(profile.layers)}",
        )
    if station.layers is not None and layer not in station.layers:
        return NOT_APPLICABLE, f"the inventory scopes station {station.name} to `layers: [{', '.join(station.layers)}]`"
    if layer in ("host", "cluster") and not station.host:
        return NOT_CHECKED, (
            f"station {station.name} has no `host:` in the inventory, so its {layer} layer was not "
            f"checked: add a testinfra host spec (ssh://…, local://, chroot:///tree)"
        )
    if layer == "endpoint":
        if station.role == "b":
            return NOT_APPLICABLE, (
                f"station {station.name} is role b, a headless worker: the endpoint is served by "
                f"the role a station [002]"
            )
        if station.phase == "pre-start":
            return NOT_APPLICABLE, f"station {station.name} is in phase pre-start: nothing is serving yet"
        if not station.endpoint:
            return NOT_CHECKED, (
                f"station {station.name} has no `endpoint:` in the inventory, so its endpoint layer "
                f"was not checked: add the base URL (http://host:port/v1)"
            )
    return None


def suites_dir() -> Path:
    """The checklist, one folder a layer, shipped inside the package (the repo's top-level suites/ is installed as
    golive.suites)."""
    suites = importlib.import_module("golive.suites")  # by name: in a checkout it is the top-level suites/
    return Path(str(suites.__file__)).parent


def layers_asked(markexpr: str) -> frozenset[str] | None:
    """The layers a `-m` expression asks for when it names only layers, joined by `or` ("host", "host or cluster");
    None for any other expression, which pytest evaluates check by check."""
    names = re.split(r"\s+or\s+", markexpr.strip())
    return frozenset(names) if markexpr.strip() and set(names) <= set(LAYERS) else None
