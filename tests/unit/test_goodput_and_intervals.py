"""Goodput equals vLLM's own computation on the same requests; intervals are seeded, honest, and decide floors; the
curve's shape names the cause (docs/metrics.md)."""
import math

import pytest

from golive.endpoint import gates
from golive.endpoint.load import LevelResult, RequestTiming, Slo, meets_slo, steadiness, summarize
from golive.endpoint.uncertainty import (
    Decision,
    against_ceiling,
    against_floor,
    aggregate_interval,
    median_interval,
    ratio_interval,
    share_interval,
)
from golive.schema import Load


def timing(ttft: float, end: float, tokens: int, error: str | None = None) -> RequestTiming:
    step = (end - ttft) / max(tokens - 1, 1)
    return RequestTiming(sent=0.0, token_times=[ttft + i * step for i in range(tokens)], end=end,
                         completion_tokens=tokens, prompt_tokens=40, error=error)


# good and bad on each objective, one exactly at each objective (vLLM counts `s >= r` as good), a one-token answer
# (TPOT taken as 0), and a failed request (never good)
REQUESTS = [timing(0.10, 1.10, 101), timing(0.50, 1.50, 101), timing(0.60, 1.00, 101), timing(0.20, 3.20, 101),
            timing(0.30, 2.30, 51), timing(0.25, 0.25, 1), timing(0.10, 5.00, 101), timing(0.05, 0.50, 2),
            timing(0.10, 1.00, 101, error="HTTP 500")]
SLOS = [Slo(ttft_s=0.5), Slo(tpot_s=0.02), Slo(e2el_s=2.3), Slo(ttft_s=0.5, tpot_s=0.02, e2el_s=2.3),
        Slo(ttft_s=0.3, e2el_s=1.5)]


@pytest.mark.parametrize("slo", SLOS, ids=lambda s: f"ttft={s.ttft_s},tpot={s.tpot_s},e2el={s.e2el_s}")
def test_goodput_equals_vllm_bench_serve_on_the_same_requests(slo):
    """vLLM's own calculate_metrics (vllm/benchmarks/serve.py), fed the per-request numbers golive measured."""
    serve = pytest.importorskip("vllm.benchmarks.serve", reason="vLLM is installed with the testbed (./testbed)")
    from vllm.benchmarks.lib.endpoint_request_func import RequestFuncOutput

    outputs = [RequestFuncOutput(success=t.error is None, latency=t.end, output_tokens=t.completion_tokens,
                                 ttft=t.ttft, itl=t.itls, prompt_len=40, start_time=float(i))
               for i, t in enumerate(REQUESTS)]
    config = {name: value * 1000 for name, value in (("ttft", slo.ttft_s), ("tpot", slo.tpot_s),
                                                     ("e2el", slo.e2el_s)) if value is not None}  # vLLM's ms
    theirs, _ = serve.calculate_metrics(input_requests=[], outputs=outputs, dur_s=4.0, tokenizer=None,
                                        selected_percentiles=[50.0], goodput_config_dict=config)
    ours = summarize(2, REQUESTS, started=0.0, ended=4.0, slo=slo)
    assert ours.goodput_req_s == pytest.approx(theirs.request_goodput, abs=0, rel=1e-12)
    assert 0 < ours.good_requests < len(REQUESTS) - 1  # the cases tell good from bad
    assert ours.goodput_share == ours.good_requests / 8


def test_goodput_cases_by_hand():
    slo = Slo(ttft_s=0.5, tpot_s=0.02, e2el_s=2.3)
    assert [meets_slo(t, slo) for t in REQUESTS] == [True, True, False, False, False, True, False, False, False]
    assert summarize(2, REQUESTS, 0.0, 4.0).good_requests is None  # no objectives: no goodput


def test_intervals_are_seeded_and_contain_the_estimate():
    values = [0.11, 0.09, 0.13, 0.10, 0.12, 0.30, 0.10, 0.08]
    low, high = median_interval(values)
    assert low <= sorted(values)[4] and high >= sorted(values)[3] and low < high
    assert median_interval(values) == (low, high)  # same requests, same interval: reports do not move
    assert median_interval([0.1]) is None and aggregate_interval(10.0, [5], [1.0]) is None
    agg = aggregate_interval(100.0, [64] * 6, [1.0, 1.1, 0.9, 1.2, 1.0, 0.8])
    assert agg[0] < 100.0 < agg[1]
    assert aggregate_interval(100.0, [64] * 4, [1.0] * 4) == (pytest.approx(100.0), pytest.approx(100.0))


def test_more_requests_narrow_the_interval():
    few = median_interval([1.0, 1.4, 0.8, 1.2])
    many = median_interval([1.0, 1.4, 0.8, 1.2] * 8)
    assert many[1] - many[0] < few[1] - few[0]


def test_share_interval_is_wilson():
    low, high = share_interval(8, 10)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)  # Wilson 95 % for 8/10
    assert share_interval(10, 10)[1] == pytest.approx(1.0) and share_interval(0, 0) is None


@pytest.mark.parametrize("interval,floor,decision", [
    ((5.0, 6.0), 4.0, Decision.PASSES), ((5.0, 6.0), 5.0, Decision.PASSES), ((2.0, 3.0), 4.0, Decision.FAILS),
    ((3.0, 5.0), 4.0, Decision.UNDECIDED), (None, 4.0, Decision.UNDECIDED)])
def test_a_floor_is_judged_on_the_interval(interval, floor, decision):
    assert against_floor(interval, floor) is decision
    mirrored = None if interval is None else (-interval[1], -interval[0])
    assert against_ceiling(mirrored, -floor) is decision


def test_ratio_interval_adds_the_two_errors_in_quadrature():
    low, high = ratio_interval(40.0, (36.0, 44.0), 10.0, (9.0, 11.0))  # ±10 % each (about): ±~14 % on the ratio
    assert low == pytest.approx(4.0 * math.exp(-math.hypot(math.log(40 / 36), math.log(11 / 10))))
    assert high == pytest.approx(4.0 * math.exp(math.hypot(math.log(44 / 40), math.log(10 / 9))))
    assert 36.0 / 11.0 < low < 4.0 < high < 44.0 / 9.0  # narrower than each end at its worst, around the ratio
    assert ratio_interval(40.0, None, 10.0, (9.0, 11.0)) is None


def level(users: int, aggregate: float, per_user: float | None = None, spread: float = 0.05) -> LevelResult:
    per_user = aggregate / users if per_user is None else per_user
    ci = lambda v: [v * (1 - spread), v * (1 + spread)]  # noqa: E731
    return LevelResult(concurrency=users, requests=4 * users, failures=0, duration_s=10.0,
                       output_tokens=int(aggregate * 10), aggregate_tok_s=aggregate, per_user_tok_s_p50=per_user,
                       ttft_p50_s=0.1, ttft_p99_s=None, ttft_mean_s=None, ttfo_p50_s=None, itl_p50_s=None,
                       itl_mean_s=None, tpot_p50_s=None, e2e_p50_s=None, e2e_mean_s=None, prompt_tokens_p50=None,
                       client_usage_mismatches=0, aggregate_tok_s_ci=ci(aggregate), per_user_tok_s_p50_ci=ci(per_user),
                       ttft_p50_s_ci=[0.09, 0.11])


LOAD = Load(concurrency=[1, 2, 4, 8], gate_concurrency=8, tolerance=0,
            floors={"scaling_ratio": 2.5, "per_user_ratio": 0.3})


@pytest.mark.parametrize("curve,peak,ratio_decision,cause", [
    ([100, 190, 340, 520], 8, Decision.PASSES, ""),
    ([100, 101, 99, 100], 1, Decision.FAILS, "flat from 1 user on: the station does not batch"),
    ([100, 190, 195, 192], 2, Decision.FAILS, "stops rising at 2 users (the profile serves --max-num-seqs 16)"),
    ([100, 190, 340, 200], 4, Decision.FAILS, "rises to 4 users, then falls: a KV-cache or scheduling ceiling"),
    ([100, 103, 226, 440], 8, Decision.PASSES, ""),  # measured on a busy machine: 2 users no faster, then it rises
], ids=["healthy", "max-num-seqs-1", "max-num-seqs-2", "falls", "healthy-noisy"])
def test_the_curve_names_its_cause(curve, peak, ratio_decision, cause):
    levels = [level(users, aggregate, per_user=90.0) for users, aggregate in zip([1, 2, 4, 8], curve, strict=True)]
    shape = gates.curve(levels)
    assert shape.peak == peak
    assert (cause in shape.cause(16)) if cause else shape.cause(16) == ""
    assert gates.gate(LOAD, levels, "scaling_ratio").decision is ratio_decision
    assert gates.gate(LOAD, levels, "per_user_ratio").decision is Decision.PASSES  # a capped batch decodes alone


def test_an_interval_that_straddles_asks_for_more_requests():
    levels = [level(1, 100.0), level(8, 250.0, spread=0.3)]  # 2.5× ± 30 %: the interval straddles the 2.5 floor
    assert gates.gate(LOAD, levels, "scaling_ratio").decision is Decision.UNDECIDED
    assert gates.undecided(LOAD, levels[1], levels[:1]) == "ratio"  # the 1-user level may be the side to measure
    assert gates.undecided(LOAD, levels[0], []) is None
    own = Load(concurrency=[1, 8], gate_concurrency=8, tolerance=0, floors={"aggregate_tok_s": 250.0})
    assert gates.undecided(own, levels[1], levels[:1]) == "level"  # the gate level's own floor: measure it


def test_a_noisy_rise_within_the_intervals_is_no_rise():
    """Measured on a busy 2-core machine, --max-num-seqs 1: 2 users looked 1.4× faster, within the noise."""
    measured = [(1, 6.327, [4.82, 8.61]), (2, 8.956, [6.79, 13.16]), (4, 7.566, [5.91, 10.95]),
                (8, 6.844, [5.98, 8.11])]
    levels = []
    for users, aggregate, ci in measured:
        lv = level(users, aggregate)
        lv.aggregate_tok_s_ci = ci
        levels.append(lv)
    shape = gates.curve(levels)
    assert (shape.peak, shape.falls) == (1, False)
    assert "flat from 1 user on: the station does not batch" in shape.cause(16)


def test_no_ratio_from_a_machine_whose_speed_changed_mid_sweep():
    """Measured: one user gave 386 tok/s before the other levels and ~80 after (another job ended, then started):
    the ratio gates are not judged on that run."""
    one, top = level(1, 119.0), level(8, 1428.0)
    one.drift = [386.2, 80.0]
    assert gates.gate(LOAD, [one, top], "scaling_ratio").value is None
    assert gates.undecided(LOAD, top, [one]) is None  # more requests would not make the machine steady


@pytest.mark.parametrize("before,after,spread,drift,covers", [
    # measured (CI, a sleep-paced server): 98.53 then 98.21 tok/s, intervals ~0.1 % wide: apart, yet one machine
    (98.53, 98.21, 0.001, None, [98.11, 98.63]),
    (100.0, 91.0, 0.01, None, [90.09, 101.0]),  # 9 % slower after: still within STEADY, covered
    (386.2, 80.0, 0.05, [386.2, 80.0], None),  # measured: another job ended, then started
    (100.0, 85.0, 0.01, [100.0, 85.0], None),  # 15 % slower: the machine changed
    (100.0, 104.0, 0.05, None, None),  # intervals overlap: one measurement, nothing to say
])
def test_the_one_user_level_before_and_after_is_steady_covered_or_drifted(before, after, spread, drift, covers):
    d, c = steadiness(level(1, before, spread=spread), level(1, after, spread=spread))
    assert d == drift
    if covers is None:
        assert c is None
    else:
        assert c is not None and c[0] == pytest.approx(covers, abs=0.01) and c[1] == pytest.approx(covers, abs=0.01)


def test_a_small_move_of_one_user_widens_every_ratio_instead_of_dropping_it():
    """The 1-user interval that covers both batches is the denominator: the ratio is judged, with a wider interval."""
    one, top = level(1, 98.4, spread=0.001), level(8, 577.6, spread=0.01)
    narrow = gates.gate(LOAD, [one, top], "scaling_ratio")
    _, covers = steadiness(level(1, 98.53, spread=0.001), level(1, 98.21, spread=0.001))
    assert covers is not None
    one.aggregate_tok_s_ci = covers[0]
    wide = gates.gate(LOAD, [one, top], "scaling_ratio")
    assert narrow is not None and wide is not None and wide.interval is not None and narrow.interval is not None
    assert wide.interval[0] < narrow.interval[0] and wide.interval[1] > narrow.interval[1]
    assert wide.decision is Decision.PASSES


def test_a_curve_too_noisy_to_name_a_peak_still_names_the_cap_from_the_ratio():
    """Measured, --max-num-seqs 2 on a machine going quiet: 663 / 1,188 / 1,124 / 1,524 tok/s, 2.30× at 8 users."""
    shape = gates.curve([level(u, a) for u, a in ((1, 663.3), (2, 1188.0), (4, 1124.0), (8, 1524.0))])
    assert "batching is capped at about 2 sequences" in shape.cause(16, 2.30, 8)
    assert gates.curve([level(1, 100.0), level(8, 800.0)]).cause(16, 8.0, 8) == ""  # 8× at 8: not capped


def test_a_ratio_near_one_says_no_batching_whatever_one_noisy_level_shows():
    """Measured, --max-num-seqs 1: 14.1 / 113.7 (a lull, interval 45–479) / 13.2 / 19.0 tok/s, 1.34× at 8 users."""
    levels = []
    for users, aggregate, ci in ((1, 14.14, [11.02, 19.7]), (2, 113.7, [45.37, 479.5]), (4, 13.15, [10.29, 19.12]),
                                 (8, 18.99, [14.58, 25.85])):
        lv = level(users, aggregate)
        lv.aggregate_tok_s_ci = ci
        levels.append(lv)
    assert "flat from 1 user on: the station does not batch" in gates.curve(levels).cause(16, 1.34, 8)
