"""`golive watch --once` on station trees: the light host checks become golive_check_passed per check, a tree broken
in one rule turns exactly that check to 0, and the unit's restarts come from `systemctl show`."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from golive.day2.light_checks import watched_layers
from golive_testbed.targets import build_station_trees

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="station trees are reached through chroot, which needs root")


@pytest.fixture(scope="module")
def trees():
    return build_station_trees()


def watch_once(inventory: Path) -> tuple[dict, str]:
    result = subprocess.run(
        [sys.executable, "-m", "golive.cli", "watch", str(inventory), "--once", "--every", "60"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    samples: dict = {}
    for family in text_string_to_metric_families(result.stdout):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples, result.stdout


def host_checks(inventory: Path) -> int:
    """How many host checks the checklist has for this inventory, as `golive run --co` lists them."""
    listed = subprocess.run(
        [sys.executable, "-m", "golive", "run", str(inventory), "-m", "host", "--co", "-q"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    return sum("::test_" in line for line in listed.stdout.splitlines())


@pytest.mark.parametrize(
    "variant, failing",
    [
        ("gb300-healthy", set()),
        ("tool-parser-wrong", {"host.vllm.served_flags_match_profile"}),
        ("unit-disabled", {"host.unit.enabled_and_active"}),
    ],
)
def test_watch_round_on_a_tree(trees, variant, failing):
    samples, output = watch_once(REPO / f"fixtures/inventories/{variant}.yaml")
    passed = {labels["check"]: value for labels, value in samples["golive_check_passed"]}
    assert {labels["station"] for labels, _ in samples["golive_check_passed"]} == {"gb300-a"}
    assert {labels["layer"] for labels, _ in samples["golive_check_passed"]} == {"host"}  # no endpoint: not watched
    assert {check for check, value in passed.items() if value == 0} == failing, output
    # the host layer less the pre-start check (not applicable while serving) and the saved-logs check (not applicable
    # where systemd never restarted the unit: NRestarts=0 on the trees)
    assert len(passed) == host_checks(REPO / f"fixtures/inventories/{variant}.yaml") - 2
    assert "host.prestart.saved_the_dead_containers_logs" not in passed
    assert samples["golive_service_restarts_total"] == [({"station": "gb300-a"}, 0.0)]
    assert ("golive_last_success_timestamp_seconds" in samples) == (not failing)
    assert "golive_canary_up" not in samples  # no endpoint: no canary, never a made-up 0


def test_watched_layers_follow_the_inventory():
    from golive.profile.inventory import Station

    assert watched_layers(Station(name="a", host="ssh://h", endpoint="http://h:8000/v1")) == {"host", "endpoint"}
    assert watched_layers(Station(name="a", endpoint="http://h:8000/v1")) == {"endpoint"}
    assert watched_layers(Station(name="a", host="ssh://h")) == {"host"}
