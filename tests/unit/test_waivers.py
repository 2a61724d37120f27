"""Waiver files: validated like profiles (one line, file:line), matched by check or rule and station, with expiry."""

import datetime as dt
from pathlib import Path

import pytest

from golive.inventory.loader import ConfigError, load_inventory
from golive.profile.waivers import load_waivers

REPO = Path(__file__).resolve().parents[2]


def test_typo_in_a_waiver_file_is_one_line_with_file_and_line():
    with pytest.raises(ConfigError) as info:
        load_inventory(REPO / "fixtures/inventories/waiver-typo.yaml")
    assert str(info.value) == (
        f"{REPO / 'fixtures/inventories/../waivers/typo.yaml'}:7: unknown key "
        f"'waivers.0.expiry'; did you mean 'expires'?"
    )


def test_a_waiver_must_name_a_check_and_a_date(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("waivers:\n  - owner: ops\n    justification: because\n    expires: 2099-01-01\n")
    with pytest.raises(ConfigError, match=r"w.yaml:2: .*give `check` or `rule`"):
        load_waivers(path)
    path.write_text("waivers:\n  - check: test_x\n    owner: ops\n    justification: because\n    expires: soon\n")
    with pytest.raises(ConfigError, match=r"w.yaml:5: 'waivers.0.expires': .*\(got 'soon'\)"):
        load_waivers(path)


def test_matching_by_check_rule_and_station():
    waivers = load_waivers(REPO / "fixtures/waivers/hermes-accepted.yaml")
    nodeid = "suites/host/test_container.py::test_served_flags_match_profile[gb300-a]"
    found = waivers.find(nodeid, "", "gb300-a")
    assert found is not None and found.name == "hermes-until-parser-fix"
    assert waivers.find(nodeid, "", "gb300-b") is None  # another station
    assert waivers.find("suites/host/test_unit.py::test_unit_is_enabled_and_active[gb300-a]", "", "gb300-a") is None
    expired = load_waivers(REPO / "fixtures/waivers/hermes-expired.yaml").find(nodeid, "", "gb300-a")
    assert expired is not None
    assert expired.expired() and not expired.expired(today=dt.date(2020, 1, 31))


def test_missing_waiver_file_points_at_the_inventory_line(tmp_path):
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("profile: reference-cpu\nwaivers: nowhere.yaml\nstations:\n  - {name: a}\n")
    with pytest.raises(ConfigError) as info:
        load_inventory(inventory)
    assert str(info.value) == f"{inventory}:2: waiver file {tmp_path / 'nowhere.yaml'} not found"
