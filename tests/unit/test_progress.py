"""The progress line names the check and its target, never a secret: a host spec's password is hidden, and any
secret golive knows (keys, passwords) is scrubbed from the line."""
from types import SimpleNamespace

from golive.progress import Progress


def _item(endpoint_check: bool, **station):
    where = SimpleNamespace(**{"endpoint": None, "host": None, **station})
    return SimpleNamespace(name="test_x[gb300-a]", callspec=SimpleNamespace(params={"station": where}),
                           get_closest_marker=lambda name: endpoint_check or None)


def test_progress_line_names_the_target_of_the_checks_layer_without_secrets():
    watch = Progress(0, None, lambda: ["sk-very-secret", "hunter2"])
    station = dict(endpoint="http://gb300-a:8888/v1?k=sk-very-secret", host="ssh://admin:hunter2@gb300-a")
    assert watch.waiting_line(_item(False, **station), 31.4) == \
        "golive: still waiting: test_x[gb300-a] on ssh://admin:***@gb300-a, 31 s so far"
    assert watch.waiting_line(_item(True, **station), 45) == \
        "golive: still waiting: test_x[gb300-a] on http://gb300-a:8888/v1?k=[REDACTED], 45 s so far"


def test_progress_line_shows_the_time_left_of_the_runs_bound():
    watch = Progress(0, 600, lambda: [])
    watch.started -= 100
    line = watch.waiting_line(_item(True, endpoint="http://h:8888/v1"), 20)
    assert line.endswith(", 20 s so far; 500 s left of the run's 600 s time bound"), line
    watch.pytest_unconfigure()
