"""What each check of the checklist declares about itself, where it is written: a stable id, what it costs the station
and the run, and the gates it owns. The product reads these declarations (the time estimate and its probe, the light
set `golive watch` runs, waivers, the post-upgrade baseline, results.json), never a file name, a fixture name or a
`-k` substring.

>>> from golive.checklist import Cost, check
>>> @check("host.image.pinned_by_digest", Cost.READ)
... def test_image_pinned_by_digest(facts, docker_run, profile, service): ...

The id is dotted, `layer.area.rule` (lower case, digits and `_`), and its first part is the check's layer marker
(host, cluster, endpoint): a waiver or a dashboard names the check by it, and it stays the same when the check moves
to another file or is renamed. A parametrized check declares one id; each of its cases carries the parameter after
it, as results.json shows it: `endpoint.context.needle_retrieved[depth50]@gb300-a` (`check_id`). tests/unit/
test_checklist.py holds every check of golive.suites to this: an id, well formed, of its own layer, unique.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

import pytest

from golive.profile.schema import LAYERS, GateName  # a gate: a bound of the profile's `load.floors` a check judges

MARKER = "golive_check"  # the pytest marker that carries a check's Declaration (`check` puts it on)
LIGHT = "light"  # the pytest marker of the checks `golive watch` may run every round (`Cost.light` decides)
ID = re.compile(rf"({'|'.join(LAYERS)})(\.[a-z][a-z0-9_]*){{2,}}")


class Cost(StrEnum):
    """What a check costs the station and the run: how the time estimate reckons it, whether the estimate's probe must
    time the station first, and whether `golive watch` may run it every round. Checks of a shared class on one station
    read one measurement between them (the sweep, a battery, the tool_choice set): the first to run pays for it."""

    READ = "read"  # host or cluster: a few commands or files read on the station
    LIGHT = "light"  # endpoint: one or a few short requests (health, models, a short chat, /metrics)
    OVER_LONG = "over_long"  # endpoint: one prompt past the context, which the server must refuse
    TOOL_CHOICE = "tool_choice"  # the tool_choice modes, each plain and streamed (a grammar per request); shared
    TOOL_BATTERY = "tool_battery"  # the tool-call battery, each case plain and streamed; shared
    AGENT_BATTERY = "agent_battery"  # the agent battery, a few turns a case; shared
    SITE_BATTERIES = "site_batteries"  # the site's own batteries (profile or inventory); shared
    SWEEP = "sweep"  # the concurrency sweep, its levels and ratio rounds; shared
    UNDER_LOAD = "under_load"  # answers judged while the gate level's load runs
    PREFILL = "prefill"  # the profile's prefill prompts, one at a time
    PREFILL_STALL = "prefill_stall"  # streams decoding while a long prompt is prefilled beside them
    NEEDLE = "needle"  # a prompt filling most of the context

    @property
    def light(self) -> bool:
        """`golive watch` may run it every round: a bounded handful of reads or short requests."""
        return self in (Cost.READ, Cost.LIGHT)

    @property
    def shared(self) -> bool:
        """One measurement per station, read by every check of this class (the first to run pays for it)."""
        return self in _SHARED

    @property
    def at_station_speed(self) -> bool:
        """Its time is answers (or prompts) at the station's own speed: the estimate probes the station first."""
        return self not in (Cost.READ, Cost.LIGHT, Cost.OVER_LONG)

    @property
    def long_prompts(self) -> bool:
        """Its time is a long prompt's prefill: the probe also times two long prompts."""
        return self in (Cost.PREFILL, Cost.PREFILL_STALL, Cost.NEEDLE)


_SHARED = frozenset({Cost.TOOL_CHOICE, Cost.TOOL_BATTERY, Cost.AGENT_BATTERY, Cost.SITE_BATTERIES, Cost.SWEEP})


@dataclass(frozen=True)
class Declaration:
    """One check's declaration (`check`)."""

    id: str
    cost: Cost
    gates: tuple[GateName, ...] = ()

    @property
    def layer(self) -> str:
        return self.id.split(".", 1)[0]


F = TypeVar("F", bound=Callable[..., Any])


def check(id: str, cost: Cost, *, gates: tuple[GateName, ...] = ()) -> Callable[[F], F]:
    """Declare a check: its stable `id` (`layer.area.rule`), its `cost` and the `gates` (load.floors fields) it owns.
    Puts the declaration on the test as the `golive_check` marker, and the `light` marker where `golive watch` may
    run it. A malformed id is an error when the suite is imported."""
    if not ID.fullmatch(id):
        raise ValueError(
            f"check id {id!r} is not `layer.area.rule` (host, cluster or endpoint, then two or more dotted parts of "
            f"lower-case letters, digits and _)"
        )
    declaration = Declaration(id, Cost(cost), tuple(gates))

    def declare(function: F) -> F:
        marked: F = pytest.mark.golive_check(declaration)(function)
        if declaration.cost.light:
            marked = pytest.mark.light(marked)
        return marked

    return declare


def declared(node: pytest.Item | pytest.Function | Any) -> Declaration | None:
    """The declaration a collected check carries (its `golive_check` marker), None for a test that declares none."""
    marker = node.get_closest_marker(MARKER) if hasattr(node, "get_closest_marker") else None
    if marker is None or not marker.args or not isinstance(marker.args[0], Declaration):
        return None
    return marker.args[0]


def declaration_of(function: Callable[..., Any]) -> Declaration | None:
    """The declaration on a check's function itself (before pytest collects it)."""
    for mark in getattr(function, "pytestmark", []):
        if mark.name == MARKER and mark.args and isinstance(mark.args[0], Declaration):
            return mark.args[0]
    return None


def check_id(declared_id: str, nodeid: str, station: str) -> str:
    """A check's id in results.json: its declared id, the parameters of this case (less the station) and `@station`.

    >>> check_id("endpoint.context.needle_retrieved", "suites/endpoint/t.py::test_needle[depth50-gb300-a]", "gb300-a")
    'endpoint.context.needle_retrieved[depth50]@gb300-a'
    """
    return declared_id + parameters_of(nodeid, station) + (f"@{station}" if station else "")


def parameters_of(nodeid: str, station: str) -> str:
    """`…::test_y[depth50-gb300-a]` → `[depth50]`; no parameter but the station → ``."""
    _, bracket, params = nodeid.partition("::")[2].partition("[")
    params = _without_station(params.removesuffix("]"), station) if bracket else ""
    return f"[{params}]" if params else ""


def _without_station(params: str, station: str) -> str:
    """`depth50-gb300-a` less `gb300-a` → `depth50` (pytest joins parameter ids with `-`)."""
    if not station or params == station:
        return "" if station else params
    if params.startswith(f"{station}-"):
        return params[len(station) + 1 :]
    if params.endswith(f"-{station}"):
        return params[: -len(station) - 1]
    return params.replace(f"-{station}-", "-")


@dataclass(frozen=True)
class Collected:
    """One check, on one station, as a run collected it (whether `-m`/`-k` then selected it or not)."""

    id: str  # check_id: the declared id, the parameters, @station
    declared: str  # the declared id ("" for a test that declares none)
    legacy_id: str  # the id results.json schema 2–4 gave it (golive.report.model.legacy_check_id)
    name: str  # the test function's name (a waiver of golive 0.2 named it)
    layer: str
    station: str
    rule: str

    @property
    def case(self) -> str:
        """The id less the station: what a waiver's `check` names (`endpoint.context.needle_retrieved[depth50]`)."""
        return self.id.removesuffix(f"@{self.station}") if self.station else self.id


@dataclass(frozen=True)
class CollectedChecks:
    """Every check a run collected, and the layers whose suites it collected (`-m host` collects no other layer's
    suite, so an id of another layer is not known to be wrong): what waivers and the baseline are matched against."""

    cases: tuple[Collected, ...] = ()
    layers: frozenset[str] = frozenset()
    every_layer: bool = False  # no layer's suite was left out

    def knows(self, id: str) -> bool:
        """Whether an id can be judged here: its layer's suite was collected (an id of no layer always can)."""
        layer = id.split(".", 1)[0]
        return layer in self.layers or layer not in LAYERS

    def closest(self, text: str) -> list[str]:
        """The declared ids a waiver's `check` most likely means: those of the checks whose function name holds
        `text` (golive 0.2 matched waivers on node ids), else the closest declared id by spelling."""
        from difflib import get_close_matches

        named = sorted({c.declared for c in self.cases if c.declared and text and text in c.name})
        if named:
            return named
        declared = sorted({c.declared for c in self.cases if c.declared})
        return get_close_matches(text.partition("[")[0], declared, n=1, cutoff=0.75)


def every_check() -> list[tuple[Declaration, Callable[..., Any]]]:
    """Every check of the shipped checklist (golive.suites) that declares itself, with its function, by id: the test_*
    functions of each layer's test_* modules, as pytest collects them."""
    import importlib
    import inspect
    import pkgutil

    found = []
    for layer in LAYERS:
        package = importlib.import_module(f"golive.suites.{layer}")
        for info in pkgutil.iter_modules(package.__path__):
            if not info.name.startswith("test_"):
                continue
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for name, function in inspect.getmembers(module, inspect.isfunction):
                declaration = declaration_of(function)
                if name.startswith("test_") and function.__module__ == module.__name__ and declaration is not None:
                    found.append((declaration, function))
    return sorted(found, key=lambda pair: pair[0].id)


def ids_table() -> str:
    """The checklist's ids as docs/ci.md lists them (`python -m golive.checklist`): id, cost, gates."""
    rows = ["| id | cost | gates |", "| --- | --- | --- |"]
    rows += [
        f"| `{d.id}` | {d.cost} | {', '.join(f'`{g}`' for g in d.gates)} |".replace(" |  |", " | |")
        for d, _ in every_check()
    ]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # the suites mark their checks with golive.checklist's Declaration, not __main__'s
    from golive.checklist import ids_table as listed

    print(listed(), end="")
