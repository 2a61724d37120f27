"""Throughput floors: the recipe's measured go-live numbers, one concurrency sweep, each gate against its floor [000].

Metric definitions: docs/metrics.md. The sweep runs once per station (salted prompts, fixed answer length, warm-up
excluded) within the profile's load bounds; every check below reads its level of that one sweep. Each number is the
median of its rounds with their 95 % interval (golive.endpoint.uncertainty.Rounds): a floor passes when the interval
clears it, fails when the interval lies below it; in between the sweep adds rounds within load.max_requests /
max_duration_s, and a floor still undecided after that (or with too few rounds for an interval) is not checked (the run
is INCOMPLETE, never GO). Rounds that disagree (pyperf's check) are reported unstable, with their spread.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import counted, not_applicable, require
from golive.endpoint import gates, timeline
from golive.endpoint.client import metric_total
from golive.endpoint.errors import EndpointError
from golive.endpoint.levels import LevelResult
from golive.endpoint.load import PEAK_REFUSED, Sweep, SweepPlan, levels_to_run, sweep
from golive.endpoint.load_request import Workload
from golive.endpoint.uncertainty import Decision, against_floor, interval_text

if TYPE_CHECKING:
    from golive.endpoint.client import EndpointClient
    from golive.profile.inventory import Station
    from golive.profile.schema import GateName, Load, Profile
    from golive.run.fixtures import RecordFinding, RecordMetric, RecordSweep

pytestmark = [pytest.mark.endpoint, pytest.mark.perf]

CAUSES = (
    "what usually causes the gap: another workload on the GPU or a stray process holding HBM, a different or "
    "unpinned image, --max-num-seqs lower than the recipe's, prefix caching or chunked prefill off, thermal or "
    "power throttling (nvidia-smi -q -d PERFORMANCE), or the client too far from the station"
)


@pytest.fixture(scope="module")
def load(profile: Profile) -> Load:
    if profile.load is None:
        not_applicable("the profile sets no load section (no throughput floors)")
    return profile.load


@pytest.fixture(scope="module")
def swept(
    request: pytest.FixtureRequest, endpoint: EndpointClient, station: Station, profile: Profile, load: Load
) -> Sweep:
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    workload = Workload(
        model=profile.vllm.served_model_name,
        prompt_tokens=load.prompt_tokens,
        output_tokens=load.output_tokens,
        reasoning_effort=load.reasoning_effort,
    )
    capture = request.config.pluginmanager.get_plugin("capturemanager")

    def progress(line: str) -> None:  # live, one line per level: a sweep can take minutes
        if reporter is not None and capture is not None:
            with capture.global_and_fixture_disabled():
                reporter.write_line(f"{station.name}: {line}")

    levels, refused = levels_to_run(load.concurrency, station.production, request.config.getoption("allow_peak_load"))
    if not levels:
        return Sweep([], [], refused)
    plan = SweepPlan.of(load, levels, probe_path=True)
    measured = sweep(endpoint.target, workload, plan, progress)
    measured.refused = refused
    return measured


def _level(swept: Sweep, concurrency: int) -> LevelResult:
    if concurrency in swept.refused:
        pytest.skip(PEAK_REFUSED.format(levels=concurrency))
    level = swept.at(concurrency)
    if level is None:
        pytest.skip(
            f"concurrency {concurrency} was not run (the profile's max_duration_s ran out first): see the sweep check"
        )
    if level.requests == level.failures:
        pytest.skip(f"every request at concurrency {concurrency} failed: see the sweep check")
    return level


BUFFERING_CHECK = "test_stream_is_not_buffered"
STALL_CHECK = "test_sweep_never_stalls"
BUFFERED = (
    "not checked because the stream is buffered between the client and vLLM: the answers arrived whole or in a few "
    "bursts, so their first token and their gaps are the proxy's, not vLLM's (see {check})"
)


def _gate(load: Load, swept: Sweep, field: GateName, what: str) -> gates.Gate:
    """The gate's measurement, or why it is not applicable (no number in the profile) or not checked."""
    if gates.bound(load, field) is None:
        not_applicable(f"the profile sets no load floor {field}")
    users = 1 if field.startswith("single_user") else load.gate_level
    levels = [_level(swept, 1)] if users != 1 and field.endswith("_ratio") else []
    levels.append(_level(swept, users))
    if field in gates.LATENCY and swept.buffered is not None:
        pytest.skip(BUFFERED.format(check=BUFFERING_CHECK))
    measured = gates.gate(load, swept.levels, field)
    if measured is None or measured.value is None:
        pytest.skip(f"{what} could not be measured at concurrency {users}: {gates.UNMEASURABLE[field]}")
    return measured


def _judge(
    gate: gates.Gate,
    load: Load,
    record_metric: RecordMetric,
    name: str,
    unit: str,
    what: str,
    suspects: tuple[str, ...] = (),
    **finding: str,
) -> None:
    """Record the gate's number with its interval; fail, pass or (undecided) leave it not checked; a smoke floor met
    (load.smoke) is measured, not judged: not applicable, with the profile's why. `suspects`: the served flags whose
    wrong value would explain a failure (tied to the host's served-flag finding: same cause)."""
    assert gate.value is not None  # _gate() skips a gate it could not measure; the peak is always measured
    smoke = load.smoke if load.smoke is not None and gate.field in load.smoke.floors else None
    met_smoke = smoke is not None and gate.decision is Decision.PASSES
    record_metric(name, gate.value, unit, **gate.recorded(unit), judged=not met_smoke)
    if gate.decision is Decision.UNDECIDED:
        pytest.skip(gate.undecided(what, unit, load))
    if smoke is not None and met_smoke:
        not_applicable(f"measured, not judged: a smoke floor of the profile (load.smoke): {smoke.why}")
    require(gate.decision is Decision.PASSES, suspects=suspects, **finding)


def _path_first(swept: Sweep) -> str:
    """A TTFT gate's Do: the network path first, when the comparison with vLLM's own TTFT shows a delay vLLM does not
    see; else nothing (the usual causes follow)."""
    measured = timeline.path_delay(swept.path) if swept.path is not None else None
    if not isinstance(measured, timeline.PathDelay) or not measured.significant:
        return ""
    return (
        f"the network path first: {measured.said()}; find what sits between the client and vLLM (a proxy, gateway, "
        f"load balancer, VPN or a distant client) and measure from closer to the station; then: "
    )


@check("endpoint.throughput.sweep_runs_every_level_without_failures", Cost.SWEEP)
def test_sweep_runs_every_level_without_failures(
    swept: Sweep, load: Load, profile: Profile, record_sweep: RecordSweep
) -> None:
    """The concurrency sweep runs every level ({load.concurrency} users) with 0 failed requests (the [002]-style
    table, as data) {cited}."""
    if not swept.levels and swept.refused:
        pytest.skip(PEAK_REFUSED.format(levels=", ".join(map(str, swept.refused))))
    record_sweep(swept.levels)
    failures = {lv.concurrency: lv.failures + lv.warmup_failures for lv in swept.levels}
    errors = sorted({e for lv in swept.levels for e in lv.errors})
    measured = sum(lv.requests for lv in swept.levels)
    measured_failed = sum(lv.failures for lv in swept.levels)
    warm_failed = sum(lv.warmup_failures for lv in swept.levels)
    require(
        not swept.not_run,
        found=f"concurrency {swept.not_run} not run: the sweep reached max_duration_s ({load.max_duration_s:g} s)",
        recipe=f"the go-live sweep covers {', '.join(map(str, load.concurrency))} users {profile.cited}",
        fix="raise load.max_duration_s in the site profile, or find why requests are this slow (TTFT/E2E in "
        "the sweep table)",
    )
    require(
        sum(failures.values()) == 0,
        # counts that add up: measured failures of the measured requests, warm-up failures beside them
        found=f"{measured_failed} of {measured} measured requests failed"
        + (f", and {warm_failed} warm-up requests" if warm_failed else "")
        + f" (by level, both: {failures}); first errors: {errors}",
        recipe=f"0 failures at every level ({', '.join(map(str, load.concurrency))} users) {profile.cited}",
        fix="read the server log around those requests: dropped connections (a proxy or load balancer timeout), "
        "HTTP 5xx (engine errors, KV cache exhausted), or answers shorter than asked (ignore_eos not honoured)",
    )


@check("endpoint.throughput.single_user_decode_meets_floor", Cost.SWEEP, gates=("single_user_decode_tok_s",))
def test_single_user_decode_meets_floor(
    swept: Sweep, load: Load, profile: Profile, record_metric: RecordMetric
) -> None:
    """One user decodes at least the recipe's single-user speed, {load.floors.single_user_decode_tok_s} tok/s less
    {load.tolerance:%} tolerance {cited}."""
    gate = _gate(load, swept, "single_user_decode_tok_s", "single-user decode speed")
    _judge(
        gate,
        load,
        record_metric,
        "single_user_decode_tok_s",
        "tok/s",
        "single-user decode speed",
        found=f"1 user decodes at {gate.measured()} tok/s (p50), below the floor {gate.bound:,.1f} tok/s",
        recipe=f"1 user {load.floors.single_user_decode_tok_s:g} tok/s, less {load.tolerance:.0%} tolerance "
        f"({gates.workload(load, 1, swept.at(1))}) {profile.cited}",
        fix=CAUSES,
    )


@check("endpoint.throughput.single_user_ttft_within_ceiling", Cost.SWEEP, gates=("single_user_ttft_p50_s",))
def test_single_user_ttft_within_ceiling(
    swept: Sweep, load: Load, profile: Profile, record_metric: RecordMetric
) -> None:
    """One user's first token (reasoning counts) arrives within the recipe's TTFT, p50
    {load.floors.single_user_ttft_p50_s} s plus {load.tolerance:%} tolerance {cited}."""
    gate = _gate(load, swept, "single_user_ttft_p50_s", "time to first token")
    _judge(
        gate,
        load,
        record_metric,
        "single_user_ttft_p50_s",
        "s",
        "time to first token",
        found=f"1 user waits {gate.measured('.3f')} s for the first token (p50), above the ceiling {gate.bound:.3f} s",
        recipe=f"TTFT p50 {load.floors.single_user_ttft_p50_s:g} s at 1 user, plus {load.tolerance:.0%} "
        f"tolerance {profile.cited}",
        fix=_path_first(swept) + CAUSES + "; for TTFT also: a prefill-heavy workload sharing the station, or the "
        "network path",
    )


@check("endpoint.throughput.aggregate_meets_floor", Cost.SWEEP, gates=("aggregate_tok_s",))
def test_aggregate_throughput_meets_floor(
    swept: Sweep, load: Load, profile: Profile, record_metric: RecordMetric
) -> None:
    """At the gate level ({load.gate_level} users) the station delivers at least the recipe's aggregate
    {load.floors.aggregate_tok_s} tok/s, less {load.tolerance:%} tolerance {cited}."""
    gate = _gate(load, swept, "aggregate_tok_s", "aggregate throughput")
    users = gate.concurrency
    _judge(
        gate,
        load,
        record_metric,
        f"aggregate_tok_s_at_{users}",
        "tok/s",
        "aggregate throughput",
        found=f"{users} users get {gate.measured(',.1f')} tok/s aggregate, below the floor {gate.bound:,.1f}",
        recipe=f"{load.floors.aggregate_tok_s:,g} tok/s aggregate at {users} users, less {load.tolerance:.0%} "
        f"({gates.workload(load, users, swept.at(users))}) {profile.cited}",
        fix=CAUSES,
    )


@check("endpoint.throughput.per_user_speed_meets_floor", Cost.SWEEP, gates=("per_user_tok_s_p50",))
def test_per_user_speed_meets_floor(swept: Sweep, load: Load, profile: Profile, record_metric: RecordMetric) -> None:
    """At the gate level ({load.gate_level} users) each user still decodes at the recipe's median,
    {load.floors.per_user_tok_s_p50} tok/s less {load.tolerance:%} tolerance {cited}."""
    gate = _gate(load, swept, "per_user_tok_s_p50", "per-user decode speed")
    users = gate.concurrency
    _judge(
        gate,
        load,
        record_metric,
        f"per_user_tok_s_p50_at_{users}",
        "tok/s",
        "per-user decode speed",
        found=f"at {users} users each decodes at {gate.measured('.1f')} tok/s (median), below the floor "
        f"{gate.bound:.1f}",
        recipe=f"{load.floors.per_user_tok_s_p50:g} tok/s per user (median) at {users} users, less "
        f"{load.tolerance:.0%} {profile.cited}",
        fix=CAUSES,
    )


@check("endpoint.throughput.ttft_under_load_within_ceiling", Cost.SWEEP, gates=("ttft_p50_s",))
def test_ttft_under_load_within_ceiling(
    swept: Sweep, load: Load, profile: Profile, record_metric: RecordMetric
) -> None:
    """At the gate level ({load.gate_level} users) the first token (reasoning counts) arrives within the recipe's
    TTFT, p50 {load.floors.ttft_p50_s} s plus {load.tolerance:%} tolerance {cited}."""
    gate = _gate(load, swept, "ttft_p50_s", "time to first token")
    users = gate.concurrency
    _judge(
        gate,
        load,
        record_metric,
        f"ttft_p50_s_at_{users}",
        "s",
        "time to first token",
        found=f"at {users} users the first token takes {gate.measured('.3f')} s (p50), above the ceiling "
        f"{gate.bound:.3f} s",
        recipe=f"TTFT p50 {load.floors.ttft_p50_s:g} s at {users} users, plus {load.tolerance:.0%} {profile.cited}",
        fix=_path_first(swept) + CAUSES + "; for TTFT under load also: --max-num-batched-tokens / chunked prefill "
        "settings",
    )


@check("endpoint.throughput.peak_meets_floor", Cost.SWEEP, gates=("peak_tok_s",))
def test_peak_throughput_meets_floor(swept: Sweep, load: Load, profile: Profile, record_metric: RecordMetric) -> None:
    """The sweep's best aggregate, at any of {load.concurrency} users, reaches the recipe's peak,
    {load.floors.peak_tok_s} tok/s less {load.tolerance:%} tolerance {cited}."""
    floor = gates.bound(load, "peak_tok_s")
    if floor is None:
        not_applicable("the profile sets no load floor peak_tok_s")
    top = max(load.concurrency)
    top_level = _level(swept, top)
    gate = gates.peak(load, swept.levels)
    assert gate is not None  # the top level ran: at least one level has a successful request
    best = swept.at(gate.concurrency) or top_level
    _judge(
        gate,
        load,
        record_metric,
        "peak_tok_s",
        "tok/s",
        "the best aggregate",
        found=f"the best aggregate is {gate.measured(',.1f')} tok/s (at {best.concurrency} users; "
        f"{top} users: {top_level.aggregate_tok_s:,.1f}), below the floor {floor:,.1f}",
        recipe=f"peak {load.floors.peak_tok_s:,g} tok/s, less {load.tolerance:.0%} (levels "
        f"{load.concurrency}) {profile.cited}",
        fix=CAUSES + "; a peak that stops rising early usually means --max-num-seqs or the KV cache caps the batch",
    )


@check("endpoint.throughput.aggregate_scales_with_users", Cost.SWEEP, gates=("scaling_ratio",))
def test_aggregate_scales_with_users(swept: Sweep, load: Load, profile: Profile, record_metric: RecordMetric) -> None:
    """At {load.gate_concurrency} users the aggregate is at least {load.floors.scaling_ratio}× the single user's
    (the median of rounds of 1 and {load.gate_concurrency} users measured back to back: it holds on a busy machine),
    and the level where it stops rising is reported [000][002]."""
    gate = _gate(load, swept, "scaling_ratio", "the aggregate's scaling")
    users = gate.concurrency
    shape = gates.curve(swept.levels)
    record_metric("aggregate_peaks_at_users", shape.peak, "users")
    _judge(
        gate,
        load,
        record_metric,
        f"scaling_ratio_at_{users}",
        "×",
        "the aggregate's scaling",
        suspects=("max-num-seqs", "max-num-batched-tokens"),
        found=f"the aggregate at {users} users is {gate.measured('.2f')}× the single user's, below the "
        f"floor {gate.bound:.2f}×{gates.ratio_rounds(swept.at(users))}; aggregate tok/s by users: "
        f"{shape.described()}; it stops rising at {counted(shape.peak, 'user')} (max_num_seqs in the profile: "
        f"{profile.vllm.max_num_seqs})",
        recipe=f"aggregate at {users} users ÷ aggregate at 1 user ≥ {load.floors.scaling_ratio:g}, less "
        f"{load.tolerance:.0%} (the recipe's table: the aggregate keeps rising up to max_num_seqs) "
        f"[000][002]",
        fix=(shape.cause(profile.vllm.max_num_seqs, gate.value, users) or CAUSES) + "; then re-run the go-live",
    )


@check("endpoint.throughput.gate_level_never_held_back", Cost.SWEEP)
def test_gate_level_is_never_held_back(swept: Sweep, load: Load, profile: Profile, record_metric: RecordMetric) -> None:
    """With {load.gate_level} users in flight vLLM keeps none of them waiting while it runs fewer than
    --max-num-seqs {vllm.max_num_seqs} (`vllm:num_requests_running` and `_waiting` on /metrics during every measured
    batch of {load.gate_level} users): a cap on the batch that a busy machine's noise cannot hide, where throughput
    ratios can [000][002]."""
    if not load.rounds_to_run:
        not_applicable("the profile runs no ratio rounds (load.ratio_rounds 0, no ratio floor, or gate level 1)")
    users = load.gate_level
    level = _level(swept, users)
    cap = profile.vllm.max_num_seqs
    batch = min(users, cap) if cap else users
    counted = gates.held_back(level, batch)
    if not counted.busy:
        pytest.skip(
            "not checked: GET /metrics never reported vllm:num_requests_running and _waiting with work in "
            f"the engine while {users} users were in flight (vLLM serves /metrics by default: is a proxy "
            "hiding it?)"
        )
    most = counted.most
    passed = counted.decision is Decision.PASSES
    record_metric(f"held_back_share_at_{users}", counted.share, "", ceiling=0.5, passed=passed)
    # a request that reached the engine between two scheduler steps waits a few ms: a poll can meet that once in a
    # while, a cap holds requests back in every poll (a batch capped at 2 of 8: 6 waiting, poll after poll)
    require(
        passed,
        found=f"with {users} requests in flight vLLM ran at most {most:g} at once and kept requests waiting in "
        f"{counted.held} of {counted.busy} polls (`vllm:num_requests_running`/`_waiting` on /metrics, every 0.1 s "
        f"during {level.batches} batches of {users} users)",
        recipe=f"the station batches up to --max-num-seqs {cap or '(unset)'}: {users} users run as one batch of "
        f"{batch}, none waiting {profile.cited}",
        fix=f"the batch is capped at about {most:g}: read --max-num-seqs in the service's ExecStart (the "
        f"recipe serves {cap or 'its default'}); a KV cache too small for {batch} sequences caps it too "
        f"(the vLLM log's 'Maximum concurrency' line, --gpu-memory-utilization, --max-model-len), as does "
        f"--max-num-batched-tokens below {batch} prompts; then re-run the go-live",
        suspects=("max-num-seqs", "max-num-batched-tokens", "gpu-memory-utilization", "max-model-len"),
    )


@check("endpoint.throughput.per_user_speed_holds_under_load", Cost.SWEEP, gates=("per_user_ratio",))
def test_per_user_speed_holds_under_load(
    swept: Sweep, load: Load, profile: Profile, record_metric: RecordMetric
) -> None:
    """At {load.gate_concurrency} users each user still decodes at least {load.floors.per_user_ratio} of the single
    user's speed (the median of rounds of 1 and {load.gate_concurrency} users measured back to back) [000][002]."""
    gate = _gate(load, swept, "per_user_ratio", "per-user decode under load")
    users = gate.concurrency
    _judge(
        gate,
        load,
        record_metric,
        f"per_user_ratio_at_{users}",
        "×",
        "per-user decode under load",
        found=f"at {users} users each user decodes at {gate.measured('.3f')} of the single user's speed "
        f"(p50 ÷ p50), below the floor {gate.bound:,.4g}",
        recipe=f"per-user decode at {users} users ÷ single-user decode ≥ {load.floors.per_user_ratio:g}, less "
        f"{load.tolerance:.0%} [000][002]",
        fix="batches this large slow every user more than the recipe's: preemptions or KV-cache swapping "
        "(`vllm:num_preemptions_total` on /metrics), --max-num-batched-tokens too small for the batch, or "
        "another workload on the accelerator; " + CAUSES,
    )


@check("endpoint.throughput.goodput_meets_floor", Cost.SWEEP, gates=("goodput_share",))
def test_goodput_meets_floor(swept: Sweep, load: Load, record_metric: RecordMetric) -> None:
    """At {load.gate_concurrency} users at least {load.floors.goodput_share} of the requests meet every objective at
    once (TTFT {load.slo.ttft_s} s, TPOT {load.slo.tpot_s} s, E2E {load.slo.e2el_s} s), as `vllm bench serve
    --goodput` counts them [000][002]."""
    if not any(v is not None for v in (load.slo.ttft_s, load.slo.tpot_s, load.slo.e2el_s)):
        not_applicable("the profile sets no load.slo objectives (no goodput)")
    gate = _gate(load, swept, "goodput_share", "goodput")
    users = gate.concurrency
    level = swept.at(users)
    # _gate() measured the goodput share at this level: it was run and its good requests were counted
    assert level is not None and level.goodput_req_s is not None
    record_metric(f"goodput_req_s_at_{users}", level.goodput_req_s, "req/s")
    _judge(
        gate,
        load,
        record_metric,
        f"goodput_share_at_{users}",
        "share",
        "the goodput share",
        found=f"at {users} users {level.good_requests} of {gate.requests} requests meet every objective "
        f"({gate.measured('.3f')}; {level.goodput_req_s:.3g} req/s good), below the floor "
        f"{gate.bound:.3f}; TTFT p50 {level.ttft_p50_s} s, TPOT p50 {level.tpot_p50_s} s, "
        f"E2E p50 {level.e2e_p50_s} s",
        recipe=f"objectives TTFT ≤ {load.slo.ttft_s} s, TPOT ≤ {load.slo.tpot_s} s, E2E ≤ {load.slo.e2el_s} s "
        f"per request (vllm bench serve --goodput definitions), met by ≥ {load.floors.goodput_share:g} "
        f"of the requests, less {load.tolerance:.0%} [000][002]",
        fix=_path_first(swept)
        + "the objective that most requests miss names the fix: TTFT (prefill, queueing: --max-num-seqs, "
        "--max-num-batched-tokens), TPOT (batch too large for the accelerator, preemptions), E2E (both); " + CAUSES,
    )


def _clock(swept: Sweep, at_s: float) -> str:
    """Seconds into the sweep, and the wall-clock time (UTC) to find in the server's log."""
    return time.strftime("%H:%M:%S UTC", time.gmtime(swept.started_at + at_s))


@check("endpoint.path.stream_not_buffered", Cost.SWEEP)
def test_stream_is_not_buffered(swept: Sweep, load: Load, record_metric: RecordMetric) -> None:
    """Streamed answers reach the client token by token, as vLLM sends them: nothing between the client and vLLM
    holds the response until it ends (the latency gates read the gaps between tokens) [field practice]."""
    if load.output_tokens < timeline.MIN_TOKENS:
        not_applicable(
            f"the profile's answers (load.output_tokens {load.output_tokens}) are shorter than "
            f"{timeline.MIN_TOKENS} tokens: they fit one read whether buffered or not"
        )
    streams = sum(b.streams for b in swept.batches)
    if streams < timeline.MIN_STREAMS:
        pytest.skip(
            f"not checked: the sweep gave {streams} successful answers of {timeline.MIN_TOKENS}+ tokens (fewer than "
            f"{timeline.MIN_STREAMS}): see the sweep check"
        )
    bunched = sum(b.bunched for b in swept.batches)
    record_metric(
        "answers_in_one_burst_share",
        bunched / streams,
        "share",
        ceiling=timeline.BUFFERED_SHARE,
        requests=streams,
        passed=bunched < timeline.BUFFERED_SHARE * streams,
    )
    held = swept.buffered
    require(
        held is None,
        found=held.found() if held else "",
        recipe=f"vLLM streams each token as it is generated (`stream: true`); fewer than "
        f"{timeline.BUFFERED_SHARE:.0%} of the answers may arrive in bursts ({timeline.BURST}; docs/metrics.md) "
        f"[field practice]",
        fix="disable response buffering on every hop between the clients and vLLM: nginx `proxy_buffering off;` "
        "(or the upstream header `X-Accel-Buffering: no`) and no gzip of text/event-stream; HAProxy and Envoy: no "
        "buffer or compression filter on the route; a CDN or API gateway: no caching or response buffering of "
        "text/event-stream; then re-run the go-live. The latency gates (TTFT, per-user decode, goodput) are not "
        "checked until then: through a buffer they time the buffer",
    )


@check("endpoint.path.latency_is_vllms_own", Cost.SWEEP)
def test_latency_is_vllms_own(
    swept: Sweep, load: Load, record_metric: RecordMetric, record_finding: RecordFinding
) -> None:
    """The client's time to first token at 1 user is compared with vLLM's own (`vllm:time_to_first_token_seconds` on
    /metrics, over the same requests) and with a request-free round trip (GET /health): a delay on the path between
    them is reported as the path's, not vLLM's [field practice]."""
    if swept.path is None:
        pytest.skip("not checked: no 1-user batch was measured (see the sweep check)")
    if swept.buffered is not None:
        pytest.skip(BUFFERED.format(check=BUFFERING_CHECK))
    frozen = [
        stall
        for stall in timeline.stalls(swept.batches, buffered=False, stall_s=load.stall_s)
        if stall.batch.concurrency == 1 and stall.batch.measured
    ]
    if frozen:  # vLLM's engine does not time a request it has not read yet: a freeze would look like the path's
        pytest.skip(
            f"not checked because a 1-user batch stalled ({frozen[0].text}): the comparison with vLLM's own time to "
            f"first token would count the stall as the path's (see {STALL_CHECK})"
        )
    measured = timeline.path_delay(swept.path)
    if isinstance(measured, str):
        pytest.skip(
            f"not checked: the comparison with vLLM's own time to first token was not possible: {measured}; "
            f"golive cannot tell a delay on the path (proxy, gateway, network) from vLLM's own (vLLM serves "
            f"/metrics by default: is a proxy hiding it?)"
        )
    record_metric("path_added_ttft_s", measured.added_s, "s", requests=measured.requests)
    if swept.path.round_trip_s is not None:
        record_metric("health_round_trip_s", swept.path.round_trip_s, "s")
    if measured.significant:
        record_finding(
            f"PATH: {measured.said()}. The TTFT gates include it; a TTFT gate that fails names the path first"
        )


@check("endpoint.throughput.sweep_never_stalls", Cost.SWEEP)
def test_sweep_never_stalls(swept: Sweep, load: Load) -> None:
    """No batch of the sweep stalls: none far below its level's other batches, no TTFT or ITL p99 many times its p50,
    no warm-up far longer than the measured batches, no seconds without a byte while requests are in flight
    (thresholds: docs/metrics.md) [field practice]."""
    if not swept.batches:
        pytest.skip("not checked: the sweep sent no batch (see the sweep check)")
    found = timeline.stalls(swept.batches, buffered=swept.buffered is not None, stall_s=load.stall_s)
    require(
        not found,
        found=f"{counted(len(found), 'stall')} in the sweep: "
        + "; ".join(f"{stall.text}, at {_clock(swept, stall.at_s)}" for stall in found),
        recipe=f"every batch within 1/{timeline.BATCH_FACTOR:g} of its level's median, TTFT and ITL p99 within "
        f"{timeline.SPREAD_FACTOR:g}× their p50, warm-up within {timeline.WARMUP_FACTOR:g}× the measured batches "
        f"and no {load.stall_s:g} s without a byte (each only when it costs {load.stall_s:g} s or more: load.stall_s), "
        f"over levels {load.concurrency} [field practice]",
        fix="read the server's log and the host's at those times: the engine paused (a restart, a long garbage "
        "collection, swapping: `vmstat 1`, `dmesg`), another workload took the accelerator or the CPU, or a proxy or "
        "load balancer held the connections; then re-run the go-live",
    )


@pytest.fixture(scope="module")
def prefilled(endpoint: EndpointClient, profile: Profile, load: Load) -> tuple[dict[int, LevelResult], float]:
    """Each listed prompt length, one request at a time, one output token; and the server's prefix-cache hits
    (tokens) over all of it, which must be 0: every prompt starts with its own salt
    (golive.endpoint.load_request.prompt)."""
    lengths = [n for n in load.prefill.prompt_tokens if n < profile.vllm.max_model_len]
    if not lengths:
        not_applicable("the profile lists no load.prefill.prompt_tokens within its max_model_len")
    try:
        before = metric_total(endpoint.metrics(), "vllm:prefix_cache_hits_total")
    except EndpointError as exc:
        pytest.skip(
            f"not checked because /metrics did not answer ({exc.what}): without the server's prefix-cache "
            f"counter golive cannot show the prompts were not served from cache"
        )
    measured = {}
    for length in lengths:
        workload = Workload(model=profile.vllm.served_model_name, prompt_tokens=length, output_tokens=1)
        level = sweep(endpoint.target, workload, SweepPlan((1,), load.prefill.requests, 0, load.max_duration_s)).at(1)
        if level is not None:
            measured[length] = level
    return measured, metric_total(endpoint.metrics(), "vllm:prefix_cache_hits_total") - before


@check("endpoint.prefill.speed_at_long_prompts", Cost.PREFILL)
def test_prefill_speed_at_long_prompts(
    prefilled: tuple[dict[int, LevelResult], float], load: Load, record_metric: RecordMetric
) -> None:
    """Prompts of {load.prefill.prompt_tokens} tokens are read at the profile's prefill floors (prompt tok/s = prompt
    tokens ÷ TTFT, one output token), none served from the prefix cache (the server's vllm:prefix_cache_hits_total
    does not move); without floors the speed is recorded beside the reference values, not gated [000]."""
    measured, hits = prefilled
    record_metric("prefix_cache_hits_during_prefill", hits, "tokens", ceiling=0)
    if hits > 0:
        pytest.skip(
            f"not checked because the server's prefix cache served {hits:,.0f} tokens while golive measured "
            f"prefill with salted prompts (another client, or a cache that ignores the prefix): the speed "
            f"would be the cache's; re-run when golive is the station's only client"
        )
    below: list[str] = []
    undecided: list[str] = []
    for length, level in measured.items():
        if level.failures or level.ttft_p50_s is None or not level.prompt_tokens_p50:
            below.append(
                f"{length:,} tokens: {level.failures} of {level.requests} requests failed ({'; '.join(level.errors)})"
            )
            continue
        speed = level.prompt_tokens_p50 / level.ttft_p50_s
        ci = level.ttft_p50_s_ci
        interval = (
            None if ci is None or ci[0] <= 0 else (level.prompt_tokens_p50 / ci[1], level.prompt_tokens_p50 / ci[0])
        )
        floor = load.prefill.floors_tok_s.get(length)
        bound = None if floor is None else floor * (1 - load.tolerance)
        decision = Decision.PASSES if bound is None else against_floor(interval, bound)
        record_metric(
            f"prefill_tok_s_at_{length}",
            speed,
            "tok/s",
            floor=bound,
            interval=interval,
            requests=level.requests - level.failures,
            passed=decision is Decision.PASSES,
        )
        reference = load.prefill.reference_tok_s.get(length)
        said = (
            f"{length:,} tokens: {speed:,.0f} prompt tok/s ({interval_text(interval, ',.0f')}, "
            f"{level.requests - level.failures} requests, {level.prompt_tokens_p50:,.0f} prompt tokens)"
            + (f", reference {reference:,.0f} ({load.prefill.reference_source})" if reference else "")
        )
        if decision is Decision.FAILS:
            below.append(f"{said}, below the floor {bound:,.0f}")
        elif decision is Decision.UNDECIDED:
            undecided.append(f"{said} straddles the floor {bound:,.0f}")
    require(
        not below,
        found="; ".join(below),
        recipe=f"prefill at {', '.join(f'{n:,}' for n in load.prefill.prompt_tokens)} prompt tokens at least the "
        f"profile's load.prefill.floors_tok_s, less {load.tolerance:.0%} [000]",
        fix="prefill is compute-bound: the accelerator's clocks and power (nvidia-smi -q -d PERFORMANCE), "
        "--max-num-batched-tokens (chunked prefill's chunk), another workload on the accelerator, the "
        "attention backend the server picked (its start-up log)",
    )
    if undecided:
        pytest.skip(f"undecided: {'; '.join(undecided)}: raise load.prefill.requests")
