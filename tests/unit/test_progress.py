"""The progress line names the check and its target, never a secret: a host spec's password is hidden, and any
secret golive knows (keys, passwords) is scrubbed from the line."""

from types import SimpleNamespace

from golive.run.progress import Progress


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
    watch._finished, watch._finished_s = 2, 9.0  # two checks took 4.5 s each
    assert watch.waiting_line(item, 31) == (
        "golive: still waiting: test_x[gb300-a] (check 3 of 40) on http://h:8888/v1, 31 s so far; about 3 min left in "
        "the run after this check (37 more × 4.5 s, the mean of the 2 finished)"
    )
    item.nodeid = "suites/t.py::test_39"
    assert watch.waiting_line(item, 5).endswith(
        "(check 40 of 40) on http://h:8888/v1, 5 s so far; the run's last check"
    )
    watch._finished, watch._finished_s = 1, 100.0
    item.nodeid = "suites/t.py::test_0"
    assert "about 65 min left in the run after this check (39 more × 100.0 s" in watch.waiting_line(item, 5)
