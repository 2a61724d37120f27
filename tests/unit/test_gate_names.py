"""Gate names are a closed type (golive.profile.schema.GateName) shared by the profile schema, the gates and the checks:
the floors declare exactly those names, and a misspelt gate in a check is a mypy error (issue 39 item 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from golive.endpoint import gates
from golive.profile.schema import GATE_NAMES, LoadFloors

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "suites/endpoint/test_throughput.py"


def test_the_floors_are_the_gates():
    assert set(LoadFloors.model_fields) == set(GATE_NAMES)
    assert gates.CEILINGS | gates.RATIOS | set(gates.UNMEASURABLE) | gates.LATENCY <= set(GATE_NAMES)


@pytest.mark.slow
def test_a_misspelt_gate_in_a_check_fails_mypy(tmp_path):
    """mypy passes the checklist as it is and fails a copy with one gate name misspelt, naming the line."""
    from mypy import api

    text = SUITE.read_text()
    assert '"aggregate_tok_s", "aggregate throughput")' in text
    copy = tmp_path / "test_throughput_copy.py"
    args = ["--no-incremental", "--follow-imports=silent", "--ignore-missing-imports", str(copy)]
    copy.write_text(text)
    out, _, status = api.run(args)
    assert status == 0, out
    copy.write_text(
        text.replace('"aggregate_tok_s", "aggregate throughput")', '"aggregate_tok_sx", "aggregate throughput")')
    )
    out, _, status = api.run(args)
    assert status == 1 and "aggregate_tok_sx" in out and "test_throughput_copy.py:" in out, out
