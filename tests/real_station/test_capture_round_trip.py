"""Issue 27.6: `golive profile capture` round trip on the session's real station (tests/real_station/conftest.py).

The live station is captured over ssh and its endpoint (the inventory `up` wrote) against the profile it was built
to (fixtures/profiles/real-station-cpu.yaml, given as --recipe: a site's own base profile), the site profile it
writes goes live (`golive run --profile`: GO on the host layer and a short endpoint selection), then ONE thing is
changed on the station — RestartSec, in a runtime drop-in (no vLLM restart needed), removed after — and the same run
is NO-GO naming exactly that setting and the drop-in's file and line.
"""

from __future__ import annotations

import time

import pytest
from golive_run import golive, golive_run

from golive_testbed.realstation_day2 import TEST_DROPIN, remove_test_dropin, shorten_restart_sec
from golive_testbed.realstation_files import PROFILE

from .common import TIMINGS, assert_go

# the host layer and the endpoint checks a capture's values decide (served name, context, KV capacity) plus the
# liveness canary and the launch blocker (one structured tool call): seconds, not the whole endpoint layer
SELECTION = ["-m", "host or endpoint", "-k", "host or health_endpoint or models_ or canary or kv_cache or smoke_get"]
RESTARTS = "test_unit_restarts_on_failure_after_delay"


@pytest.mark.slow
def test_captured_profile_is_go_and_one_change_is_no_go_naming_it(station, tmp_path):
    """capture → site profile → GO; RestartSec changed on the station → NO-GO, only the restart check, naming the
    drop-in's file and line and the 60 s the captured profile holds."""
    started = time.monotonic()
    site = tmp_path / "site.yaml"
    captured = golive("profile", "capture", station.inventory, "--recipe", PROFILE, "-o", site, timeout=300)
    assert captured.returncode == 0, captured.stdout + captured.stderr
    text = site.read_text()
    assert f"\nextends: {PROFILE}\n" in text and f"host {station.host}" in text, text
    assert f'digest: "{station.digest}"' in text, text  # read from the unit's docker run line, not typed in
    go = golive_run(station.inventory, tmp_path / "go", "--profile", str(site), *SELECTION, timeout=600)
    assert_go(go, ("host", "endpoint"))
    shorten_restart_sec(station, 1)
    try:
        changed = golive_run(station.inventory, tmp_path / "changed", "--profile", str(site), "-m", "host", timeout=300)
    finally:
        remove_test_dropin(station)
    TIMINGS["capture_round_trip_s"] = time.monotonic() - started
    assert changed.code == 1 and changed.failed() == {RESTARTS}, changed.output[-4000:]
    found = changed.check(RESTARTS)["finding"]
    assert f"RestartSec=1 s (set at {TEST_DROPIN}:3" in found["found"], found
    assert "RestartSec=60 s" in found["recipe"], found
