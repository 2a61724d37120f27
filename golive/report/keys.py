"""The keys golive puts on a pytest test report (`report.user_properties`), in one place.

They travel with the report (also between pytest-xdist workers and the controller) and are read by the recorder;
nothing is ever re-parsed from failure text.
"""

from __future__ import annotations

from typing import Any

import pytest

ID = "golive_id"  # the check's id in results.json: its declared id, its parameters, @station (golive.checklist)
LAYER = "golive_layer"  # host | cluster | endpoint
STATION = "golive_station"  # the inventory's station name
RULE = "golive_rule"  # the check's docstring line, recipe tags expanded
OUTCOME = "golive_outcome"  # (outcome, reason) as golive classifies this phase (golive.core.verdict.OUTCOMES)
FINDING = "golive_finding"  # {found, recipe, fix, sources} of a failed check
NOTE = "golive_note"  # a passed check the operator must still read (e.g. an endpoint open to anyone)
METRIC = "golive_metric"  # a golive.report.results.Metric as plain data {name, value, unit, floor, ceiling, passed}
SWEEP = "golive_sweep"  # the station's concurrency sweep: [golive.endpoint.levels.LevelResult as plain data, …]
WAIVER = "golive_waiver"  # the waiver that matched a failed check {name, owner, justification, expires, expired, …}
SCOPED_OUT = "golive_scoped_out"  # True: not applicable because the check's layer is out of the station's scope
PROVENANCE = "golive_provenance"  # what a check learned about the station: served args, parsers, image, vLLM version


def props(report: pytest.TestReport | pytest.Item) -> dict[str, Any]:
    """A report's (or item's) user properties by key; the last value of a key wins."""
    return dict(report.user_properties)
