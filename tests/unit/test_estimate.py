"""The time estimate said before a run: the sweep's tokens at the floors, the budgets as the upper bound."""

import pytest

from golive.inventory.loader import load_profile
from golive.run.estimate import Estimate, duration, level_speed, sweep_seconds


def test_sweep_time_is_tokens_over_floor_speed():
    load = load_profile("glm-5.3-flash-gb300").profile.load  # levels 1, 32, 256; 3 repeats + 1 warm-up; 256 tokens
    assert [level_speed(load, users) for users in (1, 32, 256)] == [145.9, 1464, 2517]
    # the levels, and 3 ratio rounds: 3 more requests at 1 user and 96 more at 32 users each
    expected = (13 * 256 / 145.9 + 13 * 0.985) + (416 * 256 / 1464 + 13 * 0.985) + (1024 * 256 / 2517 + 4 * 0.985)
    assert sweep_seconds(load) == pytest.approx(expected)
    assert sweep_seconds(load) < load.max_duration_s  # a station at its floors finishes within the budget


def test_speed_between_floors_is_log_linear():
    load = load_profile("glm-5.3-flash-gb300").profile.load
    assert level_speed(load, 16) == pytest.approx(145.9 + (1464 - 145.9) * 0.8)  # log2(16)/log2(32)


@pytest.mark.parametrize("seconds,shown", [(0.2, "1 s"), (59, "59 s"), (61, "1 min 1 s"), (3700, "1 h 1 min")])
def test_durations_read_as_an_operator_says_them(seconds, shown):
    assert duration(seconds) == shown


def test_nothing_is_expected_to_outlast_its_budget():
    guess = Estimate()
    guess.add("throughput sweep", 5000, 600)  # a station at the floors would need longer than load.max_duration_s
    guess.add("other", 2, 10)
    assert (guess.expected_s, guess.upper_s) == (602, 610)
    assert guess.line(2) == (
        "golive: 2 checks should take about 10 min 2 s at the profile's floors (throughput sweep "
        "10 min 0 s, other 2 s); at most 10 min 10 s by its budgets"
    )
