"""Which shipped recipe a station is: each recipe scored on what the station showed (served model, unit, GPU,
context length, tensor parallel, two stations), the best one chosen, or the one named with --recipe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from golive.core.verdict import EXIT_USAGE
from golive.day2.captured import CaptureError, Observed
from golive.profile.inventory import Station
from golive.profile.schema import Profile

if TYPE_CHECKING:  # imported where used: testinfra is slow to import
    from testinfra.host import Host


def _fit(recipe: Profile, host_units: set[str], observed: Observed) -> tuple[int, list[str]]:
    """How well a recipe fits what the station showed: points, and the reasons said to the operator."""
    points, why = 0, []
    if recipe.cluster is not None and observed.pair:
        points += 2
        why.append("is one of two stations (roles a and b)")
    served = [m.get("id") for m in observed.models] + [observed.flags.get("served-model-name")]
    if recipe.vllm.served_model_name in served:
        points += 3
        why.append(f"serves {recipe.vllm.served_model_name}")
    if recipe.service and recipe.service.unit in host_units:
        points += 2
        why.append(f"has its unit {recipe.service.unit}")
    if observed.gpu_names and any(recipe.gpu.name_contains.lower() in n.lower() for n in observed.gpu_names):
        points += 2
        why.append(f"has a {recipe.gpu.name_contains} GPU")
    lengths = {m.get("max_model_len") for m in observed.models} | {observed.flags.get("max-model-len")}
    if recipe.vllm.max_model_len in lengths or str(recipe.vllm.max_model_len) in lengths:
        points += 1
        why.append(f"max_model_len {recipe.vllm.max_model_len:,}")
    tp = observed.flags.get("tensor-parallel-size")
    if isinstance(tp, str) and tp.isdigit() and int(tp) == recipe.vllm.tensor_parallel_size:
        points += 1
        why.append(f"tensor parallel {tp}")
    return points, why


def choose_recipe(
    recipes: dict[str, Profile], host_units: set[str], observed: Observed, forced: str | None
) -> tuple[str, str]:
    if forced:
        if forced not in recipes:
            raise CaptureError(f"--recipe {forced}: not a shipped recipe ({', '.join(recipes)})", EXIT_USAGE)
        return forced, "named with --recipe"
    scored = sorted(
        ((_fit(p, host_units, observed), name) for name, p in recipes.items()), key=lambda item: (-item[0][0], item[1])
    )
    (points, why), name = scored[0]
    if points == 0:
        raise CaptureError(
            "no shipped recipe fits this station (served name, unit, GPU, context length, tensor "
            f"parallel all differ from {', '.join(recipes)}); name one with --recipe"
        )
    runner_up = f"; next: {scored[1][1]} ({scored[1][0][0]} points)" if len(scored) > 1 else ""
    return name, f"the station {', '.join(why)} ({points} points{runner_up})"


def units_present(host: Host, recipes: dict[str, Profile]) -> set[str]:
    from golive.station.host import UNIT_DIRS

    found = set()
    for profile in recipes.values():
        unit = profile.service.unit if profile.service else None
        if unit and any(host.file(f"{folder}/{unit}").exists for folder in UNIT_DIRS):
            found.add(unit)
    return found


def is_pair(stations: list[Station]) -> bool:
    return len(stations) == 2 and {s.role for s in stations} == {"a", "b"} and all(s.host for s in stations)
