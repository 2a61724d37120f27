"""Every check's Rule line, rendered under every shipped profile, is that profile's rule (golive/profile/rules.py).

For each shipped profile and each check of golive.suites: the rule is one complete sentence (it ends with '.'), every
`{field}` is rendered, no field the rule names is unset where the check applies, and no number appears in it that
only ANOTHER shipped profile holds (a number copied from one profile's recipe into the docstring). The number sets
come from the profiles' own values: numbers, fractions as percentages, and numbers inside short string values
(versions, env values, parser names); prose (name, description, sources, notes) is left out.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Callable
from typing import Any

import pytest

from golive.profile.rules import NOT_SET, field_value, fields_in, first_paragraph, number, rule_text
from golive.profile.schema import LAYERS, Profile
from golive.site.loader import load_profile, shipped_profiles

PROFILES: dict[str, Profile] = {name: load_profile(name).profile for name in shipped_profiles()}
PROSE = {"name", "description", "sources", "note", "source"}
_NUMBER = re.compile(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)*(?!\w)")  # not the digits of a name: sha256, mlx5_0, /v1/
_STATUS = re.compile(r"HTTP \d{3}")  # a status code is a protocol word, not a quantity of any profile

# Where an unset field makes a check not applicable, so its rule may say "(not set in this profile)". Fixtures first:
# a check that takes one of these fixtures is not applicable when that profile section is None (golive/run/fixtures.py
# `service` and `cluster`, suites/endpoint/test_throughput.py `load`); then the checks whose body says so.
SECTION_OF_FIXTURE = {
    "service": "service",
    "docker_run": "service",
    "cluster": "cluster",
    "cluster_facts": "cluster",
    "peer": "cluster",
    "rails": "cluster",
    "rdma_rails": "cluster",
    "load": "load",
    "swept": "load",
}
NOT_APPLICABLE_WHEN_UNSET = {
    "test_hbm_node_page_cache_is_near_empty": {"numa"},
    "test_kv_cache_capacity_meets_floor": {"endpoint.kv_cache_tokens_floor"},
    "test_streams_keep_decoding_during_long_prefill": {"load", "load.prefill_stall.prompt_tokens"},
    "test_reasoning_arrives_separately_from_content": {"vllm.reasoning_parser"},
    "test_reasoning_effort_levels_accepted": {"endpoint.reasoning_effort_levels"},
    "test_tool_calls_and_arithmetic_stay_correct_under_load": {"load"},
    "test_all_reduce_bus_bandwidth_floor": {"cluster.busbw_floor_gbs", "cluster.all_reduce_perf"},
    "test_stations_run_the_same_image": {"cluster.image_ref"},
    "test_stations_share_the_env_file": {"cluster.env_file"},
    "test_nccl_environment_is_pinned": {"cluster.env_file"},
    "test_single_user_decode_meets_floor": {"load.floors.single_user_decode_tok_s"},
    "test_single_user_ttft_within_ceiling": {"load.floors.single_user_ttft_p50_s"},
    "test_aggregate_throughput_meets_floor": {"load.floors.aggregate_tok_s"},
    "test_per_user_speed_meets_floor": {"load.floors.per_user_tok_s_p50"},
    "test_ttft_under_load_within_ceiling": {"load.floors.ttft_p50_s"},
    "test_peak_throughput_meets_floor": {"load.floors.peak_tok_s"},
    "test_aggregate_scales_with_users": {"load.floors.scaling_ratio"},
    "test_per_user_speed_holds_under_load": {"load.floors.per_user_ratio"},
}


def checks() -> list[tuple[str, Callable[..., Any]]]:
    """(layer, function) of every check in golive.suites, as pytest collects them (test_* functions of test_* files)."""
    found: list[tuple[str, Callable[..., Any]]] = []
    for layer in LAYERS:
        package = importlib.import_module(f"golive.suites.{layer}")
        for module_info in pkgutil.iter_modules(package.__path__):
            if not module_info.name.startswith("test_"):
                continue
            module = importlib.import_module(f"{package.__name__}.{module_info.name}")
            found += [
                (layer, function)
                for name, function in inspect.getmembers(module, inspect.isfunction)
                if name.startswith("test_") and function.__module__ == module.__name__
            ]
    return found


CHECKS = checks()


def _key(token: str) -> str:
    """One spelling per number: '1,464' and '1464.0' → '1464'; a dotted version ('2.30.7') stays as it is."""
    plain = token.replace(",", "")
    return plain if plain.count(".") > 1 else f"{float(plain):.10g}"


def numbers_in(text: str) -> set[str]:
    return {_key(token) for token in _NUMBER.findall(_STATUS.sub("", text))}


def profile_numbers(profile: Profile) -> set[str]:
    """Every number a profile holds, as a rule could show it (whole, to 4 significant digits, as a percentage)."""
    found: set[str] = set()

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, bool) or value is None:
            return
        elif isinstance(value, (int, float)):
            found.update({_key(str(value)), _key(number(value).replace(",", ""))})
            if isinstance(value, float) and 0 < abs(value) <= 1:  # a fraction a rule shows as a percentage
                found.add(_key(number(round(value * 100, 6)).replace(",", "")))
        elif isinstance(value, str) and key not in PROSE:
            found.update(numbers_in(value))

    walk(profile.model_dump(mode="json"))
    return found


NUMBERS = {name: profile_numbers(profile) for name, profile in PROFILES.items()}


def applies(layer: str, function: Callable[..., Any], profile: Profile, path: str) -> bool:
    """Whether the check still applies under `profile` although `path` (or a section above it) is unset."""
    if layer not in profile.layers:
        return False
    excused = {SECTION_OF_FIXTURE[p] for p in inspect.signature(function).parameters if p in SECTION_OF_FIXTURE}
    excused |= NOT_APPLICABLE_WHEN_UNSET.get(function.__name__, set())
    parts = path.split(".")
    prefixes = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return not any(p in excused and field_value(profile, p) in (None, []) for p in prefixes)


def _rule(function: Callable[..., Any], profile: Profile | None) -> str:
    """The rendered Rule line of a check function (it has a docstring)."""
    rule = rule_text(function, profile)
    assert rule is not None
    return rule


def problems(rule: str, layer: str, function: Callable[..., Any], profile_name: str) -> list[str]:
    """What is wrong with `rule` (the rendered Rule line of `function`) under the shipped profile `profile_name`."""
    profile = PROFILES[profile_name]
    found = []
    if not rule.endswith("."):
        found.append("does not end as a sentence (with '.'): cut, or a docstring whose first paragraph runs on")
    if not re.search(r"\[[^\]]+\]", rule):
        found.append("cites no source ([000], [field practice], the profile's {cited})")
    if "{" in rule or "}" in rule:
        found.append("has an unrendered `{…}`")
    doc = first_paragraph(function.__doc__ or "")
    unset = [p for p in fields_in(doc) if field_value(profile, p) in (None, [])]
    for path in unset:
        if applies(layer, function, profile, path):
            found.append(f"names {path}, unset in {profile_name} where the check applies: it shows {NOT_SET!r}")
    others = set().union(*(NUMBERS[n] for n in NUMBERS if n != profile_name)) - NUMBERS[profile_name]
    foreign = sorted(numbers_in(rule) & others)
    if foreign:
        holders = {n: [p for p in NUMBERS if p != profile_name and n in NUMBERS[p]] for n in foreign}
        found.append("shows " + ", ".join(f"{n} (a number of {', '.join(holders[n])} only)" for n in foreign))
    return found


@pytest.mark.parametrize("profile_name", sorted(PROFILES))
def test_every_rule_is_this_profiles_rule(profile_name):
    assert len(CHECKS) > 60  # every layer's checks were found, not an empty list that passes
    bad = []
    for layer, function in CHECKS:
        assert function.__doc__, f"{function.__module__}.{function.__name__} has no docstring: a check names its rule"
        rule = _rule(function, PROFILES[profile_name])
        bad += [f"{function.__name__}: {p}\n    {rule}" for p in problems(rule, layer, function, profile_name)]
    assert not bad, f"{len(bad)} rule(s) wrong under {profile_name}:\n" + "\n".join(bad)


def test_gate_rule_shows_each_profiles_gate_level():
    aggregate = next(f for _, f in CHECKS if f.__name__ == "test_aggregate_throughput_meets_floor")
    assert "At the gate level (32 users)" in _rule(aggregate, PROFILES["glm-5.3-flash-gb300"])
    two_stations = _rule(aggregate, PROFILES["glm-5.3-2x-station-tp2"])
    assert "(16 users)" in two_stations and "607.8 tok/s" in two_stations and "less 25 % tolerance" in two_stations
    assert two_stations.endswith("[two-station recipe].")  # the numbers' source, not the single-station recipe


def _old_style_check():
    """At the recipe's concurrency (32 users) the station delivers at least its aggregate tok/s (1,464) [000]."""


def _cut_check():
    """The agent battery (single, parallel and chained calls, tool errors, no tool needed, numbers worked out from"""


def test_a_number_copied_from_one_profile_is_flagged_under_the_others():
    """Today's docstrings (before placeholders) carried the single-station recipe's numbers: the checker says so."""
    rule = _rule(_old_style_check, PROFILES["glm-5.3-2x-station-tp2"])
    assert problems(rule, "endpoint", _old_style_check, "glm-5.3-2x-station-tp2") == [
        "shows 1464 (a number of glm-5.3-flash-gb300 only)"
    ]
    assert problems(rule, "endpoint", _old_style_check, "glm-5.3-flash-gb300") == []  # its own numbers are fine


def test_a_cut_rule_and_an_unset_field_are_flagged():
    assert problems(_rule(_cut_check, None), "endpoint", _cut_check, "reference-cpu") == [
        "does not end as a sentence (with '.'): cut, or a docstring whose first paragraph runs on",
        "cites no source ([000], [field practice], the profile's {cited})",
    ]

    def unset_where_it_applies():
        """The checkpoint has {checkpoint.shard_count} shards [000]."""

    rule = _rule(unset_where_it_applies, PROFILES["glm-5.3-flash-gb300"])
    assert rule == f"The checkpoint has {NOT_SET} shards [single-station recipe]."
    assert problems(rule, "host", unset_where_it_applies, "glm-5.3-flash-gb300") == [
        f"names checkpoint.shard_count, unset in glm-5.3-flash-gb300 where the check applies: it shows {NOT_SET!r}"
    ]
    # the same field under a profile whose layers leave the host out: not applicable there, the rule may say so
    assert (
        problems(
            _rule(unset_where_it_applies, PROFILES["reference-cpu"]), "host", unset_where_it_applies, "reference-cpu"
        )
        == []
    )


def test_fractions_show_as_percentages_and_numbers_to_four_digits():
    def tolerance_rule():
        """Within {load.tolerance:%} of {load.floors.peak_tok_s} tok/s, levels {load.concurrency} [000]."""

    assert _rule(tolerance_rule, PROFILES["glm-5.3-flash-gb300"]) == (
        "Within 10 % of 2,517 tok/s, levels 1, 32, 256 [single-station recipe]."
    )
    assert [number(v) for v in (279.37329271811655, 0.0612345, 5933986, 1464.0, 12345.6)] == [
        "279.4",
        "0.06123",
        "5,933,986",
        "1,464",
        "12,346",
    ]


def test_site_profiles_of_the_self_tests_leave_no_field_unset_where_the_check_applies():
    """Site profiles extend the shipped ones and change sections (rails, env files, gates): still no rule that applies
    shows '(not set in this profile)'."""
    from pathlib import Path

    sites = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "profiles").glob("*.yaml"))
    assert sites
    bad = []
    for path in sites:
        profile = load_profile(path).profile
        for layer, function in CHECKS:
            for field in fields_in(first_paragraph(function.__doc__ or "")):
                if field_value(profile, field) in (None, []) and applies(layer, function, profile, field):
                    bad.append(f"{path.name}: {function.__name__} names {field}, unset where the check applies")
    assert not bad, "\n".join(bad)
