"""Throughput floors: the recipe's measured go-live numbers, one concurrency sweep, each gate against its floor [000].

Metric definitions: docs/metrics.md. The sweep runs once per station (salted prompts, fixed answer length, warm-up
excluded) within the profile's load bounds; every check below reads its level of that one sweep.
"""
import pytest

from golive.endpoint.load import PEAK_REFUSED, LevelResult, Sweep, Workload, levels_to_run, sweep
from golive.verdict import not_applicable, require

pytestmark = [pytest.mark.endpoint, pytest.mark.perf]

CAUSES = ("what usually causes the gap: another workload on the GPU or a stray process holding HBM, a different or "
          "unpinned image, --max-num-seqs lower than the recipe's, prefix caching or chunked prefill off, thermal or "
          "power throttling (nvidia-smi -q -d PERFORMANCE), or the client too far from the station")


@pytest.fixture(scope="module")
def load(profile):
    if profile.load is None:
        not_applicable("the profile sets no load section (no throughput floors)")
    return profile.load


@pytest.fixture(scope="module")
def swept(request, endpoint, station, profile, load) -> Sweep:
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    workload = Workload(model=profile.vllm.served_model_name, prompt_tokens=load.prompt_tokens,
                        output_tokens=load.output_tokens, reasoning_effort=load.reasoning_effort)
    capture = request.config.pluginmanager.get_plugin("capturemanager")

    def progress(line: str) -> None:  # live, one line per level: a sweep can take minutes
        if reporter is not None and capture is not None:
            with capture.global_and_fixture_disabled():
                reporter.write_line(f"{station.name}: {line}")

    levels, refused = levels_to_run(load.concurrency, station.production, request.config.getoption("allow_peak_load"))
    if not levels:
        return Sweep([], [], refused)
    measured = sweep(endpoint.target, workload, levels, load.repeats, load.warmup, load.max_duration_s,
                     progress=progress)
    measured.refused = refused
    return measured


def _level(swept: Sweep, concurrency: int) -> LevelResult:
    if concurrency in swept.refused:
        pytest.skip(PEAK_REFUSED.format(levels=concurrency))
    level = swept.at(concurrency)
    if level is None:
        pytest.skip(f"concurrency {concurrency} was not run (the profile's max_duration_s ran out first): see the "
                    f"sweep check")
    if level.requests == level.failures:
        pytest.skip(f"every request at concurrency {concurrency} failed: see the sweep check")
    return level


SPEED_UNMEASURABLE = ("no successful answer had its tokens spread over time (each arrived in one read: no decode "
                      "time to divide); longer answers (load.output_tokens) give it one")
TTFT_UNMEASURABLE = "no successful answer carried a token event (content, reasoning or a tool call)"


def _measured(level: LevelResult, value: float | None, what: str, why: str) -> float:
    """A number the level's answers could not give is not checked (never GO on it), with why."""
    if value is None:
        pytest.skip(f"{what} could not be measured at concurrency {level.concurrency}: {why}")
    return value


def _gate(load) -> int:
    return load.gate_concurrency or max(load.concurrency)


def _floor(load, value: float | None, name: str) -> float:
    if value is None:
        not_applicable(f"the profile sets no load floor {name}")
    return value * (1 - load.tolerance)


def _ceiling(load, value: float | None, name: str) -> float:
    if value is None:
        not_applicable(f"the profile sets no load ceiling {name}")
    return value * (1 + load.tolerance)


def _workload(load, concurrency: int) -> str:
    return (f"{concurrency} in flight, ~{load.prompt_tokens}-token salted prompts, {load.output_tokens}-token answers, "
            f"{load.repeats} × {concurrency} requests after warm-up")


def test_sweep_runs_every_level_without_failures(swept, load, record_sweep):
    """The concurrency sweep runs every level with 0 failed requests (the [002]-style table, as data) [000]."""
    if not swept.levels and swept.refused:
        pytest.skip(PEAK_REFUSED.format(levels=", ".join(map(str, swept.refused))))
    record_sweep(swept.levels)
    failures = {lv.concurrency: lv.failures + lv.warmup_failures for lv in swept.levels}
    errors = sorted({e for lv in swept.levels for e in lv.errors})
    total = sum(lv.requests for lv in swept.levels)
    require(not swept.not_run,
            found=f"concurrency {swept.not_run} not run: the sweep reached max_duration_s ({load.max_duration_s:g} s)",
            recipe="the go-live sweep covers 1, 32 and 256 users [000]",
            fix="raise load.max_duration_s in the site profile, or find why requests are this slow (TTFT/E2E in "
                "the sweep table)")
    require(sum(failures.values()) == 0,
            found=f"{sum(failures.values())} of {total} measured (+ warm-up) requests failed "
                  f"(by level: {failures}); first errors: {errors}",
            recipe="0 failures under load (32 users) [000]",
            fix="read the server log around those requests: dropped connections (a proxy or load balancer timeout), "
                "HTTP 5xx (engine errors, KV cache exhausted), or answers shorter than asked (ignore_eos not honoured)")


def test_single_user_decode_meets_floor(swept, load, record_metric):
    """One user decodes at least the recipe's single-user speed (145.9 tok/s; alert below 100) [000][001]."""
    floor = _floor(load, load.floors.single_user_decode_tok_s, "single_user_decode_tok_s")
    level = _level(swept, 1)
    measured = _measured(level, level.per_user_tok_s_p50, "single-user decode speed", SPEED_UNMEASURABLE)
    record_metric("single_user_decode_tok_s", measured, "tok/s", floor=floor)
    require(measured >= floor,
            found=f"1 user decodes at {measured:.1f} tok/s (p50 over {level.requests} requests; "
                  f"{level.aggregate_tok_s:,.1f} tok/s aggregate), below the floor {floor:,.1f} tok/s",
            recipe=f"1 user {load.floors.single_user_decode_tok_s:g} tok/s, less {load.tolerance:.0%} tolerance "
                   f"({_workload(load, 1)}) [000]",
            fix=CAUSES)


def test_single_user_ttft_within_ceiling(swept, load, record_metric):
    """One user's first token (reasoning counts) arrives within the recipe's TTFT (p50 0.061 s) [000]."""
    ceiling = _ceiling(load, load.floors.single_user_ttft_p50_s, "single_user_ttft_p50_s")
    level = _level(swept, 1)
    measured = _measured(level, level.ttft_p50_s, "time to first token", TTFT_UNMEASURABLE)
    record_metric("single_user_ttft_p50_s", measured, "s", ceiling=ceiling)
    require(measured <= ceiling,
            found=f"1 user waits {measured:.3f} s for the first token (p50), above the ceiling {ceiling:.3f} s",
            recipe=f"TTFT p50 {load.floors.single_user_ttft_p50_s:g} s at 1 user, plus {load.tolerance:.0%} "
                   f"tolerance [000]",
            fix=CAUSES + "; for TTFT also: a prefill-heavy workload sharing the station, or the network path")


def test_aggregate_throughput_meets_floor(swept, load, record_metric):
    """At the recipe's concurrency (32 users) the station delivers at least its aggregate tok/s (1,464) [000]."""
    floor = _floor(load, load.floors.aggregate_tok_s, "aggregate_tok_s")
    gate = _gate(load)
    level = _level(swept, gate)
    record_metric(f"aggregate_tok_s_at_{gate}", level.aggregate_tok_s, "tok/s", floor=floor)
    require(level.aggregate_tok_s >= floor,
            found=f"{gate} users get {level.aggregate_tok_s:,.1f} tok/s aggregate, below the floor {floor:,.1f}",
            recipe=f"{load.floors.aggregate_tok_s:,g} tok/s aggregate at {gate} users, less {load.tolerance:.0%} "
                   f"({_workload(load, gate)}) [000]",
            fix=CAUSES)


def test_per_user_speed_meets_floor(swept, load, record_metric):
    """At the recipe's concurrency each user still decodes at the recipe's median (55.6 tok/s at 32) [000][001]."""
    floor = _floor(load, load.floors.per_user_tok_s_p50, "per_user_tok_s_p50")
    gate = _gate(load)
    level = _level(swept, gate)
    measured = _measured(level, level.per_user_tok_s_p50, "per-user decode speed", SPEED_UNMEASURABLE)
    record_metric(f"per_user_tok_s_p50_at_{gate}", measured, "tok/s", floor=floor)
    require(measured >= floor,
            found=f"at {gate} users each decodes at {measured:.1f} tok/s (median), below the floor {floor:.1f}",
            recipe=f"{load.floors.per_user_tok_s_p50:g} tok/s per user (median) at {gate} users, less "
                   f"{load.tolerance:.0%} [000]",
            fix=CAUSES)


def test_ttft_under_load_within_ceiling(swept, load, record_metric):
    """At the recipe's concurrency the first token (reasoning counts) arrives within its TTFT (p50 0.985 s) [000]."""
    ceiling = _ceiling(load, load.floors.ttft_p50_s, "ttft_p50_s")
    gate = _gate(load)
    level = _level(swept, gate)
    measured = _measured(level, level.ttft_p50_s, "time to first token", TTFT_UNMEASURABLE)
    record_metric(f"ttft_p50_s_at_{gate}", measured, "s", ceiling=ceiling)
    require(measured <= ceiling,
            found=f"at {gate} users the first token takes {measured:.3f} s (p50), above the ceiling {ceiling:.3f} s",
            recipe=f"TTFT p50 {load.floors.ttft_p50_s:g} s at {gate} users, plus {load.tolerance:.0%} [000]",
            fix=CAUSES + "; for TTFT under load also: --max-num-batched-tokens / chunked prefill settings")


def test_peak_throughput_meets_floor(swept, load, record_metric):
    """The sweep's best aggregate reaches the recipe's peak (2,517 tok/s at 256 users) [000]."""
    floor = _floor(load, load.floors.peak_tok_s, "peak_tok_s")
    top = max(load.concurrency)
    _level(swept, top)
    best = max(swept.levels, key=lambda lv: lv.aggregate_tok_s)
    record_metric("peak_tok_s", best.aggregate_tok_s, "tok/s", floor=floor)
    require(best.aggregate_tok_s >= floor,
            found=f"the best aggregate is {best.aggregate_tok_s:,.1f} tok/s (at {best.concurrency} users; "
                  f"{top} users: {swept.at(top).aggregate_tok_s:,.1f}), below the floor {floor:,.1f}",
            recipe=f"peak {load.floors.peak_tok_s:,g} tok/s, less {load.tolerance:.0%} (levels "
                   f"{load.concurrency}) [000]",
            fix=CAUSES + "; a peak that stops rising early usually means --max-num-seqs or the KV cache caps the batch")
