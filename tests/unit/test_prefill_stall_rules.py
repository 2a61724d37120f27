"""The prefill-stall rule (golive.endpoint.prefill_stall.judge / settle), table-driven on timings shaped as the
reference station recorded them (vLLM 0.32 CPU build, 3 streams, a 12,460-token prompt): chunked prefill on, the
streams froze 0.69 s of a 2.60 s prefill (one chunk); off, 2.61 s of 2.63 s."""

import pytest

from golive.endpoint.prefill_stall import FREEZE_SHARE, Freeze, Round, Unjudged, judge, reads, settle


def steady(start: float, end: float, step: float) -> list[float]:
    """A stream's token events every `step` seconds from `start` to `end`."""
    count = round((end - start) / step)
    return [round(start + i * step, 6) for i in range(count + 1)]


def stream(*parts: list[float]) -> tuple[float, ...]:
    return tuple(t for part in parts for t in part)


SENT, FIRST = 0.74, 3.37  # the long prompt sent, and its first token (a 2.63 s prefill)
BEFORE = steady(0.05, 0.73, 0.004)  # decoding at a token every 4 ms before it

# chunked prefill on: 6 chunk steps through the prefill, the last (the costliest) 0.69 s
CHUNKS = [0.95, 1.25, 1.62, 2.05, 2.68, 3.37]
CHUNKED = stream(BEFORE, CHUNKS, steady(3.374, 3.6, 0.004))
# chunked prefill off: one step for the whole prompt, the streams' next token with the long prompt's
FROZEN = stream(BEFORE, [3.35], steady(3.354, 3.6, 0.004))


CASES = {
    # name: (round, freeze seconds or a fragment of why it cannot be judged, frozen)
    "chunked prefill on": (Round((CHUNKED,) * 3, SENT, FIRST, 12460), 0.69, False),
    "chunked prefill off": (Round((FROZEN,) * 3, SENT, FIRST, 12460), 3.35 - SENT, True),
    # one stream frozen through it is enough: the user of that stream saw it
    "one stream of three frozen": (Round((CHUNKED, CHUNKED, FROZEN), SENT, FIRST, 12460), 3.35 - SENT, True),
    # a freeze that began before the long prompt counts from its send: the wait before was not its doing
    "gap begun before the send": (
        Round((stream(BEFORE, [3.35], steady(3.354, 3.6, 0.004)),), SENT + 0.01, FIRST, None),
        3.35 - SENT - 0.01,
        True,
    ),
    # tokens merged into one read (one decode step) are one read, not a 0 s step
    "merged reads": (
        Round((stream([t for a in BEFORE for t in (a, a + 0.0001)], CHUNKS, [3.38, 3.39]),), SENT, FIRST, None),
        0.69,
        False,
    ),
    "a request failed": (Round((CHUNKED,), SENT, FIRST, error="HTTP 400: too long"), "HTTP 400: too long", None),
    "no token for the long prompt": (Round((CHUNKED,), SENT, None), "got no token", None),
    "streams ended before its token": (
        Round((BEFORE,) * 3, SENT, FIRST),
        "of 3 streams, 3 ended before the long prompt's first token and 0 had none yet when it was sent",
        None,
    ),
    "streams queued behind it": (
        Round((steady(3.4, 3.6, 0.004),) * 3, SENT, FIRST),
        "of 3 streams, 0 ended before the long prompt's first token and 3 had none yet",
        None,
    ),
    # behind a proxy that holds each answer: every stream's events in one read, at its end (issue 41: this said "is
    # --max-num-seqs above 3?"); the buffering finding explains it
    "streams arrived whole": (Round(((3.5,) * 300,) * 3, SENT, FIRST), "the probe's 3 streams arrived whole", None),
    "streams flushed once, then held": (
        Round(((0.5, *([3.5] * 299)),) * 3, SENT, FIRST),
        "3 streams arrived whole (900 token events in 6 reads of the socket)",
        None,
    ),
    # a lagging API process merges tokens into reads (the reference station on a busy machine: 12 a read): the
    # station's own streams, judged as such (here a read every 50 ms through the prefill: not frozen), never "buffered"
    "tokens merged into reads": (
        Round((tuple(t for a in steady(0.05, 3.6, 0.05) for t in [a] * 12),) * 3, SENT, FIRST),
        0.05,
        False,
    ),
    "too few steps before it": (Round((stream([0.7, 0.72], CHUNKS, [3.4]),), SENT, FIRST), "fewer than 5", None),
    "prefill within a few steps": (Round((CHUNKED,), SENT, SENT + 0.03), "too short to tell", None),
}


@pytest.mark.parametrize("name", CASES)
def test_judge(name):
    probe, expected, frozen = CASES[name]
    judged = judge(probe)
    if isinstance(expected, str):
        assert isinstance(judged, Unjudged) and expected in judged.reason, judged
        assert judged.buffered is ("arrived whole" in expected), judged
        assert "--max-num-seqs" not in judged.reason and "(s)" not in judged.reason, judged  # no guess at a flag
        return
    assert isinstance(judged, Freeze), judged
    assert judged.seconds == pytest.approx(expected, abs=1e-6)
    assert judged.frozen is frozen
    assert judged.prefill_s == pytest.approx(probe.first - probe.sent)


def test_cases_cover_both_verdicts_and_every_reason():
    outcomes = [CASES[name][2] for name in CASES]
    assert True in outcomes and False in outcomes and None in outcomes


def test_frozen_is_a_share_of_the_prefill_not_a_multiple_of_the_step():
    """The healthy station's chunk step is already ~170× its decode step (0.69 s vs 4 ms): a rule on the step would
    fail it; the share of the prefill tells one chunk (26 %) from the whole prefill (99 %)."""
    healthy = judge(CASES["chunked prefill on"][0])
    broken = judge(CASES["chunked prefill off"][0])
    assert isinstance(healthy, Freeze) and isinstance(broken, Freeze)
    assert healthy.seconds / healthy.step_s > 100 and healthy.share < FREEZE_SHARE <= broken.share


def test_said_names_the_freeze_the_prefill_and_when():
    judged = judge(Round((FROZEN,) * 3, SENT, FIRST, 12460, started_at=0.0))
    assert isinstance(judged, Freeze)
    assert judged.said() == (
        "while 3 streams decoded (a token every 4.0 ms, median), a 12,460-token prompt took 2.63 s to its first "
        "token and the running streams got no token for 2.61 s of it (99%), from 0.74 s into the probe "
        "(00:00:00 UTC)"
    )


def _freeze(seconds: float) -> Freeze:
    return Freeze(seconds, 1.0, 2.6, 0.004, 3)


@pytest.mark.parametrize(
    "judged,expected",
    [
        ([_freeze(0.69)], 0.69),  # one round, not frozen: passes
        ([_freeze(2.6), _freeze(0.7)], 0.7),  # a freeze that did not show again: the clean round decides
        ([_freeze(2.6), _freeze(2.5)], 2.5),  # frozen in every round: the smallest freeze is the finding
        ([Unjudged("a request of the probe failed: x"), _freeze(2.5)], 2.5),  # a round not judged is skipped
        ([Unjudged("a request of the probe failed: x")], "a request of the probe failed: x"),
        ([], "no round ran"),
    ],
)
def test_settle(judged, expected):
    settled = settle(judged)
    if isinstance(expected, str):
        assert isinstance(settled, Unjudged) and settled.reason == expected
    else:
        assert isinstance(settled, Freeze) and settled.seconds == expected


def test_reads_merge_events_of_one_read():
    assert reads([0.010, 0.0101, 0.014, 0.018]) == [0.0101, 0.014, 0.018]
    assert reads([]) == []
