"""systemd 252 as the oracle of golive's unit reader, on the session's real station (tests/real_station/conftest.py):
a seeded batch of generated units, drop-ins and env files (testbed/golive_testbed/oracles/systemd_cases.py) loaded in
one daemon-reload, read back with `systemctl show` and started, each command recording its arguments, working
directory and environment (systemd_oracle.py). golive reads the same files and must say what systemd said; a
disagreement fails with the input reduced to its smallest form. ~10 s; the deep run (≥ 10,000) is bench/oracles.py.
"""

from __future__ import annotations

import pytest

from golive_testbed.oracles.systemd_cases import UnitCase
from golive_testbed.oracles.systemd_oracle import SystemdOracle

pytestmark = pytest.mark.slow
COUNT, SEED = 80, 43


def test_golive_reads_generated_units_as_systemd_252_loads_and_runs_them(station):
    with SystemdOracle(station) as oracle:
        report = oracle.run(COUNT, SEED, tag="ci")
    assert report.inputs == COUNT
    assert not report.disagreements, report.describe(UnitCase.text)
