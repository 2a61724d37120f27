"""Site-battery scoring rules and file validation (golive.endpoint.answers)."""

import pytest

from golive.endpoint.answers import SHIPPED, Expect, load_answer_battery, score_answer
from golive.endpoint.battery_runs import Spread, failing_ids
from golive.profile.schema import Sampling
from golive.site.loader import ConfigError, load_inventory, load_profile

# Answers as the reference station's server returned them (message.content; streamed content joins to the same text).
SALES = "Sales rose every quarter, from $100k in Q1 to $120k in Q4: a 20% increase from Q1 to Q4."


@pytest.mark.parametrize(
    "expect,answer,passed,fragment",
    [
        ({"exact": "ready"}, "Ready.", True, ""),
        ({"exact": "ready"}, "ready now", False, "expected exactly 'ready'"),
        ({"contains": "blue-harbor-42"}, "The passphrase is blue-harbor-42.", True, ""),
        ({"contains": ["20%", "Q4"]}, SALES, True, ""),
        ({"contains": ["20%", "Q5"]}, SALES, False, "missing ['Q5']"),
        ({"one_of": ["yes", "yes, I can"]}, "Yes", True, ""),
        ({"one_of": ["yes", "yes, I can"]}, "no", False, "expected one of"),
        ({"regex": r"\b20(\.0)?% increase\b"}, SALES, True, ""),
        ({"regex": r"\b25% increase\b"}, SALES, False, "expected a match"),
        ({"numeric": 391}, "391", True, ""),
        ({"numeric": 1234.5, "tolerance": 0.1}, "The total is 1,234.56 units.", True, ""),
        ({"numeric": 391, "tolerance": 0.5}, "392", False, "expected 391 ± 0.5"),
        (
            {"regex": "increase", "not_contains": ["decrease"]},
            "an increase, then a decrease",
            False,
            "must not contain",
        ),
    ],
    ids=[
        "exact",
        "exact-miss",
        "contains",
        "contains-all",
        "contains-miss",
        "one-of",
        "one-of-miss",
        "regex",
        "regex-miss",
        "numeric",
        "numeric-tolerance",
        "numeric-miss",
        "not-contains",
    ],
)
def test_scoring_rule(expect, answer, passed, fragment):
    ok, reason = score_answer(Expect(**expect), answer)
    assert ok is passed, reason
    assert fragment in reason
    assert answer.strip()[:40] in reason  # the operator sees what came back


def test_shipped_example_battery_loads():
    battery = load_answer_battery(SHIPPED / "example-site.yaml")
    rules = {
        r
        for c in battery.cases
        for r in ("exact", "contains", "one_of", "regex", "numeric")
        if getattr(c.expect, r) is not None
    }
    assert rules == {"exact", "contains", "one_of", "regex", "numeric"}  # the example shows every rule


@pytest.mark.parametrize(
    "body,fragment",
    [
        (
            "name: x\nfloor: 1\ncases:\n  - id: a\n    prompt: hi\n    expect: {contians: hi}\n",
            "battery.yaml:6: unknown key 'cases.0.expect.contians'; did you mean 'contains'?",
        ),
        (
            "name: x\nfloor: 1\ndescripton: y\ncases:\n  - id: a\n    prompt: hi\n    expect: {exact: hi}\n",
            "battery.yaml:3: unknown key 'descripton'; did you mean 'description'?",
        ),
        (
            "name: x\nfloor: 1\ncases:\n  - id: a\n    prompt: hi\n    expect: {exact: hi, regex: h}\n",
            "one scoring rule per case",
        ),
        ("name: x\nfloor: 1\ncases:\n  - id: a\n    prompt: hi\n    expect: {regex: '('}\n", "regex does not compile"),
    ],
)
def test_bad_battery_is_one_config_line(tmp_path, body, fragment):
    (tmp_path / "battery.yaml").write_text(body)
    (tmp_path / "site.yaml").write_text("extends: reference-cpu\nendpoint:\n  site_batteries: [battery.yaml]\n")
    with pytest.raises(ConfigError) as err:
        load_profile(tmp_path / "site.yaml")
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_missing_battery_file_is_a_config_error(tmp_path):
    (tmp_path / "site.yaml").write_text("extends: reference-cpu\nendpoint:\n  site_batteries: [nope.yaml]\n")
    with pytest.raises(ConfigError, match="site battery 'nope.yaml': no such file"):
        load_profile(tmp_path / "site.yaml")


def _inventory(tmp_path, batteries: str):
    path = tmp_path / "inventory.yaml"
    path.write_text(
        "profile: reference-cpu\nstations:\n  - {name: ref, endpoint: 'http://127.0.0.1:1/v1'}\n"
        f"site_batteries: {batteries}\n"
    )
    return path


def test_inventory_names_site_batteries_relative_to_itself(tmp_path):
    (tmp_path / "battery.yaml").write_text("name: x\nfloor: 1\ncases:\n  - {id: a, prompt: hi, expect: {exact: hi}}\n")
    assert load_inventory(_inventory(tmp_path, "[battery.yaml]")).inventory.site_batteries == ["battery.yaml"]


@pytest.mark.parametrize(
    "body,fragment",
    [
        (None, "inventory.yaml:4: site battery 'nope.yaml': no such file"),
        ("name: x\nfloor: 2\ncases:\n  - {id: a, prompt: hi, expect: {exact: hi}}\n", "nope.yaml:2: "),
    ],
)
def test_bad_inventory_battery_is_one_config_line(tmp_path, body, fragment):
    if body:
        (tmp_path / "nope.yaml").write_text(body)
    with pytest.raises(ConfigError) as err:
        load_inventory(_inventory(tmp_path, "[nope.yaml]"))
    assert fragment in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "sampling,fragment",
    [
        ("{temperature: 0, repeats: 3}", "repeats > 1 only with temperature > 0"),
        ("{temperature: 1.0, repeats: 0}", "repeats"),
    ],
)
def test_repeats_need_sampling(tmp_path, sampling, fragment):
    (tmp_path / "site.yaml").write_text(f"extends: reference-cpu\nendpoint:\n  battery_sampling: {sampling}\n")
    with pytest.raises(ConfigError, match=fragment):
        load_profile(tmp_path / "site.yaml")


def test_sampling_with_repeats_is_described():
    assert (
        Sampling(source="vendor", temperature=1.0, top_p=0.95, repeats=3).describe()
        == "temperature=1.0, top_p=0.95 (vendor), 3 runs"
    )
    assert "repeats" not in Sampling(temperature=1.0, repeats=3).params()


def test_spread_of_repeated_runs_is_reported_and_recorded():
    spread, recorded = Spread([1.0, 0.8, 0.9]), []
    assert spread.text() == "mean 90% (min 80%, max 100% over 3 runs)"
    spread.record(lambda *a, **k: recorded.append((a[0], a[1], k.get("floor"))), "agent_battery_score", 0.85)
    assert recorded == [
        ("agent_battery_score", 0.9, 0.85),
        ("agent_battery_score.min", 0.8, None),
        ("agent_battery_score.max", 1.0, None),
    ]
    assert Spread([0.5]).text() == "50%"
    assert failing_ids([{"b": "x"}, {"a": "y", "b": "z"}]) == ["a", "b"]
