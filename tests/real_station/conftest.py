"""One real station for the whole session, brought up the way an operator first meets it: `golive demo --targets
real-station --keep` (testbed/golive_testbed/demo.py → realstation.up), which checks it host + endpoint into one
report and leaves it up for the tests here.

Every module here shares it: they run in one xdist group (tests/conftest.py), in file order, each broken station
reverted before the next test; `test_down_leaves_nothing` (marker ends_station) runs last and takes it down.
Needs root and the packages of realstation.APT_LINE (scripts/setup.sh); skipped elsewhere, a failure under
GOLIVE_REQUIRE_E2E=1 (CI).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e import skip_e2e
from golive_run import golive

from golive_testbed import realstation

from .common import DEMO, NAME, TIMINGS


@pytest.fixture(scope="session")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("real-station-state")


@pytest.fixture(scope="session")
def station(state_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[realstation.Record]:
    try:
        realstation.preflight()
    except realstation.StationError as exc:
        skip_e2e(str(exc))
    out = tmp_path_factory.mktemp("demo") / "reports"
    started = time.monotonic()
    env = {"GOLIVE_STATE_DIR": str(state_dir), "GOLIVE_DEMO_STATION": NAME}
    try:
        DEMO["proc"] = golive("demo", "--targets", "real-station", "--keep", "-o", out, env=env, timeout=1500)
        DEMO["out"] = out
        TIMINGS["demo_s"] = time.monotonic() - started
        record = realstation.load(NAME, state_dir)
        said = DEMO["proc"].stdout[-3000:] + DEMO["proc"].stderr[-3000:]
        assert record is not None and realstation.alive(record.pids.get("nspawn"), record.scratch), said
        print(f"[real station] up: {record.timings}")
        yield record
    finally:
        realstation.down(NAME, state_dir)  # a no-op once test_down_leaves_nothing took it down
