"""Waiver files: validated like profiles (one line, file:line), matched by check or rule and station, with expiry."""

import datetime as dt
from pathlib import Path

import pytest

from golive.checklist import Collected, CollectedChecks
from golive.profile.schema import LAYERS
from golive.profile.waivers import load_waivers
from golive.site.loader import ConfigError, load_inventory

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
    path.write_text("waivers:\n  - check: host.unit.x\n    owner: ops\n    justification: because\n    expires: soon\n")
    with pytest.raises(ConfigError, match=r"w.yaml:5: 'waivers.0.expires': .*\(got 'soon'\)"):
        load_waivers(path)


def test_matching_by_check_rule_and_station():
    """A waiver's `check` is the id a check declares (golive.checklist), for every case of it or, with the parameter,
    one case; never a file or function name."""
    waivers = load_waivers(REPO / "fixtures/waivers/hermes-accepted.yaml")
    case = "host.vllm.served_flags_match_profile"
    found = waivers.find(case, "", "gb300-a")
    assert found is not None and found.name == "hermes-until-parser-fix"
    assert waivers.find(case, "", "gb300-b") is None  # another station
    assert waivers.find("host.unit.enabled_and_active", "", "gb300-a") is None
    assert (
        waivers.find("suites/host/test_container.py::test_served_flags_match_profile[gb300-a]", "", "gb300-a") is None
    )
    expired = load_waivers(REPO / "fixtures/waivers/hermes-expired.yaml").find(case, "", "gb300-a")
    assert expired is not None
    assert expired.expired() and not expired.expired(today=dt.date(2020, 1, 31))


@pytest.mark.parametrize(
    "check, case, matches",
    [
        ("endpoint.context.needle", "endpoint.context.needle[depth50]", True),  # every case of the check
        ("endpoint.context.needle[depth50]", "endpoint.context.needle[depth50]", True),  # this case
        ("endpoint.context.needle[depth50]", "endpoint.context.needle[depth10]", False),  # not another
        ("endpoint.context", "endpoint.context.needle[depth50]", False),  # an id, not a prefix
        ("needle", "endpoint.context.needle[depth50]", False),  # nor a substring
    ],
)
def test_a_waiver_names_a_check_or_one_of_its_cases(tmp_path, check, case, matches):
    path = tmp_path / "w.yaml"
    path.write_text(f"waivers:\n  - check: '{check}'\n    owner: ops\n    justification: j\n    expires: 2099-01-01\n")
    assert (load_waivers(path).find(case, "", "a") is not None) is matches


def _collected(layers: frozenset[str] = frozenset(LAYERS)) -> CollectedChecks:
    return CollectedChecks(
        tuple(
            Collected(
                id=f"{declared}{params}@gb300-a",
                declared=declared,
                legacy_id="",
                name=name,
                layer=declared.split(".")[0],
                station="gb300-a",
                rule=rule,
            )
            for declared, params, name, rule in (
                ("host.vllm.served_flags_match_profile", "", "test_served_flags_match_profile", "vLLM is served …"),
                ("host.vllm.served_flags_accepted_by_vllm", "", "test_served_flags_are_accepted_by_vllm", "argparse"),
                ("endpoint.context.needle_retrieved", "[depth50]", "test_needle_retrieved", "A needle …"),
            )
        ),
        layers,
        layers >= set(LAYERS),
    )


@pytest.mark.parametrize(
    "entry, said",
    [
        ("check: host.vllm.served_flags_match_profile", None),
        ("check: endpoint.context.needle_retrieved[depth50]", None),
        ("rule: A needle", None),
        (
            "check: test_served_flags_match_profile",  # a waiver written for golive 0.2: a function name
            "waiver 'w': check 'test_served_flags_match_profile' matches no check id; did you mean "
            "host.vllm.served_flags_match_profile? (every id: docs/ci.md, Check ids)",
        ),
        (
            "check: served_flags",  # a node id substring that once waived two checks
            "waiver 'w': check 'served_flags' matches no check id; did you mean "
            "host.vllm.served_flags_accepted_by_vllm or host.vllm.served_flags_match_profile? (every id: docs/ci.md, "
            "Check ids)",
        ),
        (
            "check: host.vllm.served_flag_match_profile",  # misspelt
            "waiver 'w': check 'host.vllm.served_flag_match_profile' matches no check id; did you mean "
            "host.vllm.served_flags_match_profile? (every id: docs/ci.md, Check ids)",
        ),
        (
            "check: endpoint.context.needle_retrieved[depth60]",
            "waiver 'w': check 'endpoint.context.needle_retrieved[depth60]' matches no check id; did you mean "
            "endpoint.context.needle_retrieved? (every id: docs/ci.md, Check ids)",
        ),
        ("rule: a rule nobody wrote", "waiver 'w': rule 'a rule nobody wrote' is in no check's rule"),
        (
            "check: host.vllm.served_flags_match_profile\n    station: gb300-b",
            "waiver 'w': station 'gb300-b' is not in the inventory (gb300-a)",
        ),
    ],
    ids=["id", "case", "rule", "function-name", "substring", "misspelt", "no-such-case", "rule-nowhere", "station"],
)
def test_a_waiver_that_matches_no_check_is_a_warning_naming_what_it_may_mean(tmp_path, entry, said):
    path = tmp_path / "w.yaml"
    path.write_text(
        f"waivers:\n  - id: w\n    {entry}\n    owner: ops\n    justification: j\n    expires: 2099-01-01\n"
    )
    assert load_waivers(path).unmatched(_collected(), {"gb300-a"}) == ([f"{said} ({path})"] if said else [])


def test_a_waiver_of_a_layer_the_run_did_not_collect_is_no_news(tmp_path):
    """`-m host` does not collect the endpoint's suite: a waiver of an endpoint check is not known to be wrong; a
    rule waiver is judged only where every layer was collected."""
    path = tmp_path / "w.yaml"
    path.write_text(
        "waivers:\n  - check: endpoint.limits.gone\n    owner: o\n    justification: j\n    expires: 2099-01-01\n"
        "  - rule: nowhere\n    owner: o\n    justification: j\n    expires: 2099-01-01\n"
        "  - check: host.unit.gone\n    owner: o\n    justification: j\n    expires: 2099-01-01\n"
    )
    (line,) = load_waivers(path).unmatched(_collected(frozenset({"host"})), {"gb300-a"})
    assert line.startswith("waiver 'host.unit.gone': check 'host.unit.gone' matches no check id"), line


def test_missing_waiver_file_points_at_the_inventory_line(tmp_path):
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("profile: reference-cpu\nwaivers: nowhere.yaml\nstations:\n  - {name: a}\n")
    with pytest.raises(ConfigError) as info:
        load_inventory(inventory)
    assert str(info.value) == f"{inventory}:2: waiver file {tmp_path / 'nowhere.yaml'} not found"
