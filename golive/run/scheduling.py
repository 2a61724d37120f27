"""A fleet in one run: `golive run INV -n N` checks stations in parallel (pytest-xdist), one report for all.

Each station's checks go to one worker, in order: its load tests never overlap (the load a profile bounds is per
endpoint), and its connections and gathered facts are made once. Stations run side by side on the workers. Reports
reach the controller, which alone writes results.json, go-live.md and the HTML (golive.run.plugin).
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling


def station_of(nodeid: str, stations: list[str]) -> str | None:
    """The inventory station a check's node id is parametrized with (`test_x[gb300-a]`, `test_y[gb300-a-q3]`)."""
    if not nodeid.endswith("]") or "[" not in nodeid:
        return None
    params = nodeid[nodeid.index("[") + 1 : -1]
    for name in sorted(stations, key=len, reverse=True):  # `gb300-a-2` before `gb300-a`
        if params == name or params.startswith(f"{name}-") or params.endswith(f"-{name}") or f"-{name}-" in params:
            return name
    return None


class StationScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with the station as the scope; a check of no station is a scope of its own."""

    def __init__(self, config: pytest.Config, log: Any, stations: list[str]) -> None:
        super().__init__(config, log)
        self.stations = stations

    def _split_scope(self, nodeid: str) -> str:
        station = station_of(nodeid, self.stations)
        return f"station:{station}" if station else nodeid


def station_scheduling(config: pytest.Config, log: Any, stations: list[str]) -> StationScheduling | None:
    """Under plain `-n N` (xdist's default `--dist load`), schedule by station; another --dist is the user's choice."""
    if config.getoption("dist", "no") != "load" or not stations:
        return None
    return StationScheduling(config, log, stations)
