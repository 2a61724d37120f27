"""One real station for the whole session (testbed/golive_testbed/realstation.py, `golive station up|down`).

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

from golive_testbed import realstation

from .common import NAME, TIMINGS


@pytest.fixture(scope="session")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("real-station-state")


@pytest.fixture(scope="session")
def station(state_dir: Path) -> Iterator[realstation.Record]:
    try:
        realstation.preflight()
    except realstation.StationError as exc:
        skip_e2e(str(exc))
    started = time.monotonic()
    record = realstation.up(NAME, state_dir=state_dir, say=lambda text: print(f"[real station] {text}"))
    TIMINGS["up_s"] = time.monotonic() - started
    print(f"[real station] up: {record.timings}")
    try:
        yield record
    finally:
        realstation.down(NAME, state_dir)  # a no-op once test_down_leaves_nothing took it down
