"""Every message template of the endpoint path's findings (the stream's shape, stalls and the path, the prefill-stall
probe, long-context sizes, the two model names, TLS), rendered with edge values — equal numbers, one and many — and
read for the slips a reader trips on: a count whose noun disagrees with it ("stops rising at 1 users"), a "(s)" left
for the reader to resolve ("5 stall(s)"), a comparison its own numbers contradict ("the server's context (12,000) is
shorter than this probe's prompt (12,000)"). The detector is tested on those three first: a detector that finds
nothing proves nothing.

A template added to these modules is rendered here by the table that holds its kind, or by a new row."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from golive.endpoint import longctx, timeline
from golive.endpoint.prefill_stall import Freeze, Round, Unjudged, judge
from golive.endpoint.target import VllmName, model_names
from golive.endpoint.timeline import LEVEL, PRIMING, ROUND, WARMUP, Batch, PathDelay, Stream, batch_of, buffering
from golive.endpoint.tls import Presented, _also

# nouns findings count; a count of 1 takes the singular, any other integer the plural
NOUNS = {
    "user": "users",
    "stream": "streams",
    "request": "requests",
    "stall": "stalls",
    "read": "reads",
    "round": "rounds",
    "batch": "batches",
    "answer": "answers",
    "step": "steps",
    "token": "tokens",
    "model": "models",
    "call": "calls",
    "freeze": "freezes",
    "event": "events",
}
_COUNT = re.compile(
    r"(?<![\d.,\-])(\d[\d,]*)(?![\d.,]*\d)(?:\s+token)?\s+(" + "|".join([*NOUNS, *NOUNS.values()]) + r")\b"
)
_THAN = re.compile(
    r"\(?([\d][\d,]*(?:\.\d+)?)[^\d()]{0,8}\)?[^\d]{0,40}?\b(shorter|fewer|less|lower|smaller|longer|more|higher|larger)"
    r" than\b[^\d]{0,60}?\(?([\d][\d,]*(?:\.\d+)?)"
)
_SMALLER = {"shorter", "fewer", "less", "lower", "smaller"}


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def slips(text: str) -> list[str]:
    """What a reader would trip on in `text`, each as a short description; [] for none."""
    found = []
    if "(s)" in text:
        found.append(f"a plural left open: {text[max(0, text.index('(s)') - 30) : text.index('(s)') + 3]!r}")
    for count, noun in _COUNT.findall(text):
        n = int(count.replace(",", ""))
        singular = noun in NOUNS
        if (n == 1) != singular:
            found.append(f"{count} {noun}")
    for first, word, second in _THAN.findall(text):
        a, b = _number(first), _number(second)
        if (word in _SMALLER and not a < b) or (word not in _SMALLER and not a > b):
            found.append(f"{first} … {word} than … {second}")
    return found


@pytest.mark.parametrize(
    "text",
    [
        "not checked: the server's context (12,000) is shorter than this probe's prompt (12,000): see the check",
        "5 stall(s) in the sweep: …",
        "aggregate tok/s by users: 1: 4.1, 2: 4.0; it stops rising at 1 users (max_num_seqs in the profile: 16)",
        "while 1 streams decoded",
        "the streams decoded 3 step before the long prompt",
    ],
)
def test_the_detector_finds_the_slips_issue_41_met(text):
    assert slips(text), text


@pytest.mark.parametrize(
    "text",
    [
        "the server's 12,000-token context has no room for this probe's 12,000-token prompt and 256 tokens",
        "while 1 user was in flight (the 1-user level), 2 users: 12 of 12",
        "a 12,460-token prompt took 2.63 s; 1.0 tokens a read; 10.7 tokens a read",
        "the context (8,192) is shorter than the prompt (12,000)",
        "the streams decoded 2 steps before the long prompt, fewer than 5",
    ],
)
def test_the_detector_passes_what_reads_right(text):
    assert slips(text) == [], slips(text)


# --- the templates -------------------------------------------------------------------------------------------------


def _stream(sent: float, reads: int, tokens: int = 32, every: float = 0.1) -> Stream:
    times = [every * (1 + i * reads // tokens) for i in range(tokens)]
    return Stream(sent, times, times[-1] + 0.001, tokens, True)


def _batch(kind: str, users: int, started: float, duration: float, tokens: int, requests: int = 12, **kw) -> Batch:
    return Batch(kind, users, started, duration, requests, 0, tokens, **kw)


def _buffering_texts() -> list[str]:
    texts = []
    for levels in ((1,), (1, 2), (1, 8)):
        for reads in (1, 3):
            batches = [batch_of(LEVEL, c, [_stream(i * 0.1, reads) for i in range(12)], 0.0, 1.0) for c in levels]
            found = buffering(batches)
            assert found is not None
            texts.append(found.found())
    # equal TTFT and end-to-end, and 1 answer of each level in bursts out of many: the edges of its numbers
    texts.append(timeline.Buffering(8, 8, 0.35, 0.35, 32.0, ((1, 1, 1), (2, 7, 7))).found())
    return texts


def _stall_texts() -> list[str]:
    rounds = [
        replace(_batch(ROUND, users, 10.0 + i, d, 768, ttft_p50_s=0.05, ttft_p99_s=0.1), round=i + 1)
        for users in (1, 8)
        for i, d in enumerate((0.45, 0.5, 0.44, 4.5, 0.46))
    ]
    cases = [
        rounds,
        [_batch(LEVEL, 1, 2.0, 5.0, 384, silent_s=4.2, silent_at_s=3.1)],
        [_batch(LEVEL, 2, 2.0, 5.0, 384, silent_s=4.2, silent_at_s=3.1)],
        # a p99 just over 10× its p50: the ratio must not read "10×" against a rule of "above 10×"
        [_batch(LEVEL, 1, 1.0, 6.0, 384, ttft_p50_s=0.4, ttft_p99_s=4.2, slowest_ttft_at_s=2.5)],
        [_batch(LEVEL, 8, 1.0, 6.0, 768, itl_p50_s=0.0, itl_p99_s=3.5, longest_itl_at_s=4.0)],
        # a one-request warm-up, and a priming batch, far longer than their level's measured requests
        [_batch(WARMUP, 1, 0.5, 8.0, 32, requests=1), *rounds[:5]],
        [_batch(PRIMING, 8, 0.0, 9.0, 256, requests=8), *rounds[5:]],
    ]
    texts = [stall.text for batches in cases for stall in timeline.stalls(batches, buffered=False)]
    assert len(texts) >= len(cases), texts
    return texts


def _path_texts() -> list[str]:
    return [
        PathDelay(client, vllm, requests, trip).said()
        for client, vllm, requests, trip in (
            (0.345, 0.045, 1, 0.3),
            (0.345, 0.045, 12, 0.001),
            (0.085, 0.045, 12, 0.04),
            (0.1, 0.1, 12, None),
        )
    ]


def _prefill_texts() -> list[str]:
    steps = tuple(round(0.05 + i * 0.004, 6) for i in range(171))  # decoding before the long prompt (0.74 s)
    frozen = (*steps, 3.35, 3.38, 3.384, 3.388)  # no token through its prefill: a freeze of 2.6 s
    texts = []
    for count in (1, 3):
        for streams in ((frozen,) * count, (steps,) * count, ((3.5,) * 40,) * count, ((3.4, 3.41, 3.42),) * count):
            judged = judge(Round(streams, 0.74, 3.37, 12460, started_at=0.0))
            texts.append(judged.said() if isinstance(judged, Freeze) else judged.reason)
    texts.append(str(judge(Round(((0.7, 0.72, 3.4),), 0.74, 3.37))))
    texts.append(Freeze(2.6, 1.0, 2.6, 0.004, 1, 1).said())  # equal freeze and prefill, one stream, a 1-token prompt
    assert any(t.startswith("while ") for t in texts[:-1]), texts  # a freeze judged, beside the reasons
    return texts


def _context_texts() -> list[str]:
    return [longctx.no_room(served, 12_000, 256) for served in (12_000, 12_255, 11_999)]


def _name_texts() -> list[str]:
    texts = [model_names(names, choice) for names in ([], ["a"], ["a", "b"]) for choice in (False, True)]
    for served in ([], ["glm-5.3-fp8"], ["a", "b"]):
        for declared in (None, "glm-5.3-fp8", "x"):
            name = VllmName.among("glm-5.3", declared, served, "http://vllm:8000/v1/models")
            texts.append(name.problem or "")
    return texts


def _tls_texts() -> list[str]:
    expired = Presented("CN=gw", "CN=Site CA", ("DNS:gw",), "Jan  1 00:00:00 2020 GMT")
    nameless = Presented("CN=gw", "CN=gw", (), "Jan  1 00:00:00 2099 GMT")
    return [expired.said(), nameless.said(), _also(expired, "10.0.0.5"), _also(nameless, "gw")]


def _count_texts() -> list[str]:
    from golive.core.verdict import counted

    return [
        counted(n, noun, plural)
        for n in (0, 1, 2, 1000)
        for noun, plural in (("tool call", None), ("batch", "batches"))
    ]


KINDS = {
    "counts": _count_texts,
    "buffering": _buffering_texts,
    "stalls": _stall_texts,
    "the path": _path_texts,
    "the prefill-stall probe": _prefill_texts,
    "long-context sizes": _context_texts,
    "model names": _name_texts,
    "TLS": _tls_texts,
}


@pytest.mark.parametrize("kind", KINDS)
def test_no_template_renders_a_slip(kind):
    texts = KINDS[kind]()
    assert texts and all(isinstance(t, str) for t in texts), texts
    found = {text: slips(text) for text in texts if slips(text)}
    assert not found, found


def test_equal_numbers_read_right():
    """The edge the issue met: a probe exactly as long as the context is not "shorter than" it."""
    assert "has no room for this probe's 12,000-token prompt and 256 tokens for the chat template and the answer" in (
        longctx.no_room(12_000, 12_000, 256)
    )
    ratio = timeline.stalls(
        [_batch(LEVEL, 1, 1.0, 6.0, 384, ttft_p50_s=0.4, ttft_p99_s=4.2, slowest_ttft_at_s=2.5)], False
    )
    assert "is 10.5× its p50" in ratio[0].text, ratio[0].text
    assert isinstance(judge(Round(((3.5,) * 40,), 0.74, 3.37)), Unjudged)
