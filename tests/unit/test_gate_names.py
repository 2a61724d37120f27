"""Gate names are a closed type (golive.profile.schema.GateName) shared by the profile schema, the gates and the checks:
the floors declare exactly those names; a misspelt gate in a check is a mypy error: tests/unit/test_types.py."""

from __future__ import annotations

from golive.endpoint import gates
from golive.profile.schema import GATE_NAMES, LoadFloors


def test_the_floors_are_the_gates():
    assert set(LoadFloors.model_fields) == set(GATE_NAMES)
    assert gates.CEILINGS | gates.RATIOS | set(gates.UNMEASURABLE) | gates.LATENCY <= set(GATE_NAMES)
