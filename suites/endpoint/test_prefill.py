"""Prefill that stalls decoding: running streams keep decoding while a long prompt is prefilled (chunked prefill).

How a station freezes its streams, the probe and the rule: golive.endpoint.prefill_stall, docs/metrics.md ("Prefill
that stalls decoding"). The load is bounded: `load.prefill_stall.streams` answers and one long prompt, a second round
only when the first froze.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import not_applicable, require
from golive.endpoint import longctx, prefill_stall
from golive.endpoint.prefill_stall import FREEZE_SHARE, Freeze, Plan, Unjudged

if TYPE_CHECKING:
    from golive.endpoint.client import EndpointClient
    from golive.profile.schema import Profile
    from golive.run.fixtures import RecordMetric

pytestmark = pytest.mark.endpoint

HOST_CHECK = "test_served_flags_match_profile"
BUFFERING_CHECK = "test_stream_is_not_buffered"  # the sweep's: the same path, measured over every answer
ROOM = 256  # the chat template and the answer, beside the long prompt


@check("endpoint.prefill.streams_keep_decoding_during_long_prefill", Cost.PREFILL_STALL)
def test_streams_keep_decoding_during_long_prefill(
    vllm_server: EndpointClient, profile: Profile, record_metric: RecordMetric
) -> None:
    """While {load.prefill_stall.streams} streams decode, a {load.prefill_stall.prompt_tokens}-token prompt is
    prefilled beside them and they keep decoding: chunked prefill is on, and no running stream goes without a token
    for most of that prefill {cited}."""
    load = profile.load
    if profile.vllm.enable_chunked_prefill is not True:
        not_applicable("the profile does not serve chunked prefill (vllm.enable_chunked_prefill is not true)")
    if load is None or load.prefill_stall.prompt_tokens is None:
        not_applicable("the profile sets no load.prefill_stall.prompt_tokens (the long prompt)")
    stall = load.prefill_stall
    tokens = stall.prompt_tokens
    assert tokens is not None  # not applicable above
    name = profile.vllm.served_model_name
    if tokens + ROOM > profile.vllm.max_model_len:
        not_applicable(
            f"load.prefill_stall.prompt_tokens {tokens:,} does not fit the {profile.vllm.max_model_len:,}-token "
            f"context with {ROOM} tokens to spare"
        )
    own = vllm_server.target.vllm_name(name)  # vLLM's own name: a gateway may rename the model
    served = {m.get("id"): m.get("max_model_len") for m in vllm_server.vllm_models()}.get(own)
    if isinstance(served, int) and served < tokens + ROOM:
        pytest.skip(longctx.no_room(served, tokens, ROOM))
    text = longctx.repeat_to(lambda t: vllm_server.tokenize(own, t), tokens)
    room = (served if isinstance(served, int) else profile.vllm.max_model_len) - tokens - ROOM
    plan = Plan(name, text, streams=stall.streams, stream_tokens=min(prefill_stall.STREAM_TOKENS, max(room, 64)))
    verdict = prefill_stall.probe(vllm_server.target, plan)
    if isinstance(verdict, Unjudged) and verdict.buffered:  # the path's finding explains it, not the station's flags
        pytest.skip(f"not checked because {verdict.reason} (see {BUFFERING_CHECK})")
    if isinstance(verdict, Unjudged):
        pytest.skip(f"not checked: {verdict.reason}")
    record_metric("prefill_freeze_s", verdict.seconds, "s", passed=not verdict.frozen)
    record_metric(
        "prefill_freeze_share", verdict.share, "share", ceiling=FREEZE_SHARE, passed=not verdict.frozen, requests=1
    )
    rounds = [j for j in plan.judged if isinstance(j, Freeze)]
    require(
        not verdict.frozen,
        suspects=("enable-chunked-prefill", "max-num-batched-tokens"),  # the host's served-flag finding: same cause
        found=verdict.said()
        + (f"; every one of {len(rounds)} rounds froze ({_shares(rounds)})" if len(rounds) > 1 else ""),
        recipe=f"chunked prefill on: running streams keep decoding while a long prompt is prefilled, a chunk a step "
        f"(no stream without a token for {FREEZE_SHARE:.0%} or more of the prefill) {profile.cited}",
        fix="serve `--enable-chunked-prefill` (vLLM 0.32 has it on by default: look for `--no-enable-chunked-prefill` "
        "in the served arguments) and keep `--max-num-batched-tokens` well below the long prompts (one chunk a "
        "step: a budget as large as the prompt prefills it in one step and freezes the streams too); where the host "
        f"layer ran, {HOST_CHECK} reads the same served flags: a `--enable-chunked-prefill` found off there is this "
        "same cause, one fix; then restart the service and re-run the go-live",
    )


def _shares(rounds: list[Freeze]) -> str:
    return ", ".join(f"{r.seconds:.2f} s of {r.prefill_s:.2f} s" for r in rounds)
