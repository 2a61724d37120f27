"""The progress line names the check and its target, never a secret: a host spec's password is hidden, and any
secret golive knows (keys, passwords) is scrubbed from the line."""

from types import SimpleNamespace

import pytest

from golive.profile.rules import duration
from golive.run.progress import Progress, _duration


def _item(endpoint_check: bool, **station):
    where = SimpleNamespace(**{"endpoint": None, "host": None, **station})
    return SimpleNamespace(
        name="test_x[gb300-a]",
        callspec=SimpleNamespace(params={"station": where}),
        get_closest_marker=lambda name: endpoint_check or None,
    )


def test_progress_line_names_the_target_of_the_checks_layer_without_secrets():
    watch = Progress(0, None, lambda: ["sk-very-secret", "hunter2"])
    station = dict(endpoint="http://gb300-a:8888/v1?k=sk-very-secret", host="ssh://admin:hunter2@gb300-a")
    assert (
        watch.waiting_line(_item(False, **station), 31.4)
        == "golive: still waiting: test_x[gb300-a] on ssh://admin:***@gb300-a, 31 s so far"
    )
    assert (
        watch.waiting_line(_item(True, **station), 45)
        == "golive: still waiting: test_x[gb300-a] on http://gb300-a:8888/v1?k=[REDACTED], 45 s so far"
    )


def test_progress_line_shows_the_time_left_of_the_runs_bound():
    watch = Progress(0, 600, lambda: [])
    watch.started -= 100
    line = watch.waiting_line(_item(True, endpoint="http://h:8888/v1"), 20)
    assert line.endswith(", 20 s so far; 500 s left of the run's 600 s time bound"), line
    watch.pytest_unconfigure()


def test_progress_line_says_which_check_of_how_many_and_the_runs_estimated_time_left():
    watch = Progress(0, None, lambda: [])
    items = [SimpleNamespace(nodeid=f"suites/t.py::test_{i}") for i in range(40)]
    watch.pytest_collection_finish(SimpleNamespace(items=items))  # type: ignore[arg-type]
    item = _item(True, endpoint="http://h:8888/v1")
    item.nodeid = "suites/t.py::test_2"  # the third check of 40
    # nothing finished yet: no estimate
    assert (
        watch.waiting_line(item, 31)
        == "golive: still waiting: test_x[gb300-a] (check 3 of 40) on http://h:8888/v1, 31 s so far"
    )
    # no estimate given: each check counts 1 s; two took 4.5 s each: pace (9 + 20) / (2 + 20)
    watch._finished, watch._finished_s, watch._finished_expected = 2, 9.0, 2.0
    assert watch.waiting_line(item, 31) == (
        "golive: still waiting: test_x[gb300-a] (check 3 of 40) on http://h:8888/v1, 31 s so far; about 49 s left in "
        "the run after this check (37 more, estimated 37 s, × 1.32: the 2 finished took 9 s for 2 s estimated)"
    )
    item.nodeid = "suites/t.py::test_39"
    assert watch.waiting_line(item, 5).endswith(
        "(check 40 of 40) on http://h:8888/v1, 5 s so far; the run's last check"
    )


def _run_of(*expected: float) -> tuple[Progress, list[SimpleNamespace]]:
    watch = Progress(0, None, lambda: [])
    items = [SimpleNamespace(nodeid=f"suites/t.py::test_{i}") for i in range(len(expected))]
    watch.pytest_collection_finish(SimpleNamespace(items=items))  # type: ignore[arg-type]
    watch.expect({item.nodeid: seconds for item, seconds in zip(items, expected, strict=True)})
    return watch, items


def _finish(watch: Progress, item: SimpleNamespace, took_s: float) -> None:
    """A check as pytest_runtest_protocol counts it, `took_s` long."""
    watch._finished += 1
    watch._finished_s += took_s
    watch._finished_expected += watch._expected_of(item.nodeid)


# (the estimate's seconds per check, how long the finished ones took, the check waited on, time left after it)
ETA_CASES = {
    # the estimate alone: nothing finished yet to refine it (pace 1)
    "as-estimated": ([1, 100, 1, 50], [], 0, 151),
    # the first check took 2 s for 1 s estimated: one quick check barely moves the pace, (2 + 20) / (1 + 20)
    "one-quick-check": ([1, 100, 1, 50], [2], 1, 51 * 22 / 21),
    # the sweep took twice its estimate: what is left is read at that pace, (2 + 200 + 20) / (1 + 100 + 20)
    "sweep-ran-slow": ([1, 100, 1, 50], [2, 200], 2, 50 * 222 / 121),
    # the sweep took half its estimate
    "sweep-ran-fast": ([1, 100, 1, 50], [1, 50], 2, 50 * 71 / 121),
}


@pytest.mark.parametrize("case", ETA_CASES, ids=str)
def test_time_left_is_the_estimate_of_the_rest_at_the_pace_so_far(case):
    expected, took, waiting, left = ETA_CASES[case]
    watch, items = _run_of(*expected)
    for item, seconds in zip(items, took, strict=False):
        _finish(watch, item, seconds)
    rest = sum(expected[waiting + 1 :])
    assert watch.pace * rest == pytest.approx(left)
    after = len(items) - waiting - 1
    assert watch.run_estimate(after).startswith(
        f"{_duration(left)} left in the run after this check ({after} more, estimated {duration(rest)}"
    )


def test_a_long_check_shows_its_own_estimate_at_the_pace():
    watch, items = _run_of(1, 100, 1)
    _finish(watch, items[0], 3.0)  # pace (3 + 20) / 21: this check 100 s × 1.095
    check = _item(True, endpoint="http://h:8888/v1")
    check.nodeid = items[1].nodeid
    assert "; this check estimated 1 min 50 s; about 1 s left in the run after this check" in watch.waiting_line(
        check, 40
    )
