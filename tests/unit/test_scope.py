"""Which suites a run collects: `-m` naming only layers (joined by `or`) asks for exactly those; any other expression
is pytest's to evaluate check by check (golive.run.scope.layers_asked, golive.run.plugin.pytest_ignore_collect)."""

import pytest

from golive.run.scope import layers_asked


@pytest.mark.parametrize(
    "markexpr,asked",
    [
        ("host", {"host"}),
        ("host or cluster", {"host", "cluster"}),
        ("  endpoint   or host ", {"host", "endpoint"}),
        ("host or host", {"host"}),
        ("", None),  # no -m: every suite
        ("not host", None),
        ("host and perf", None),
        ("perf", None),  # a marker inside a layer's suite: pytest selects within it
        ("(host)", None),
        ("hosts", None),
        ("host or", None),
    ],
)
def test_layers_asked(markexpr, asked):
    assert layers_asked(markexpr) == (frozenset(asked) if asked is not None else None)
