"""What one golive run keeps on pytest's `config.stash`, and how a check says which layer and station it is for.

Shared by the plugin's hooks (golive.run.plugin), its fixtures (golive.run.fixtures) and outcome classification
(golive.run.outcomes); nothing here talks to a station.
"""

from __future__ import annotations

from typing import Any

import pytest

from golive.checklist import Collected, CollectedChecks, check_id, declared
from golive.profile.inventory import Station
from golive.profile.schema import LAYERS, Layer
from golive.report.model import legacy_check_id
from golive.report.results import Recorder, Results
from golive.site.loader import LoadedInventory

INVENTORY = pytest.StashKey[LoadedInventory | None]()
RECORDER = pytest.StashKey[Recorder]()
BASELINE = pytest.StashKey[Results | None]()  # the last go-live's results.json (--golive-baseline)
CONNECTIONS = pytest.StashKey[dict[tuple[str, str], Any]]()  # per run: testinfra hosts, facts, endpoint clients
NO_INVENTORY = "no inventory: pass --golive-inventory PATH (or use `golive run`)"


def inventory(config: pytest.Config) -> LoadedInventory | None:
    return config.stash.get(INVENTORY, None)


def layer_of(node: pytest.Item | pytest.Function | Any) -> Layer | None:
    """The check's layer, from its marker (`pytestmark = pytest.mark.host`); None for anything else."""
    marks = {m.name for m in node.iter_markers()}
    return next((name for name in LAYERS if name in marks), None)


def station_of(item: pytest.Item) -> Station | None:
    """The inventory station a check is parametrized with (golive.run.plugin.pytest_generate_tests), else None."""
    callspec = getattr(item, "callspec", None)
    station = callspec.params.get("station") if callspec is not None else None
    return station if isinstance(station, Station) else None


def id_of(item: pytest.Item) -> str:
    """The check's id in results.json (golive.checklist.check_id); a test that declares none: its schema 4 id."""
    station = station_of(item)
    name = station.name if station is not None else ""
    declaration = declared(item)
    return legacy_check_id(item.nodeid, name) if declaration is None else check_id(declaration.id, item.nodeid, name)


def collected(items: list[pytest.Item], rules: dict[str, str], layers: frozenset[str]) -> CollectedChecks:
    """The checks a run collected (`rules`: nodeid → its rule line; `layers`: those whose suites were collected)."""
    cases = []
    for item in items:
        station = station_of(item)
        name = station.name if station is not None else ""
        declaration = declared(item)
        cases.append(
            Collected(
                id=id_of(item),
                declared=declaration.id if declaration is not None else "",
                legacy_id=legacy_check_id(item.nodeid, name),
                name=getattr(item, "originalname", None) or item.name,
                layer=layer_of(item) or "",
                station=name,
                rule=rules.get(item.nodeid, ""),
            )
        )
    return CollectedChecks(tuple(cases), layers, layers >= set(LAYERS))


def duplicate_ids(items: list[pytest.Item]) -> list[str]:
    """One line for each id two different checks declare (results.json, waivers and the baseline would mix them up)."""
    where: dict[str, set[str]] = {}
    for item in items:
        declaration = declared(item)
        if declaration is not None:
            where.setdefault(declaration.id, set()).add(item.nodeid.partition("[")[0])
    return [f"{id} is declared by {' and '.join(sorted(at))}" for id, at in sorted(where.items()) if len(at) > 1]


def secrets(config: pytest.Config) -> list[str]:
    """Every secret the run knows (golive.core.secrets.station_secrets), longest first: scrubbed from every output."""
    loaded = inventory(config)
    return [] if loaded is None else loaded.secrets()
