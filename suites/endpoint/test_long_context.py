"""Long context: the needle is found near the full context window [000]."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import require
from golive.endpoint import longctx

if TYPE_CHECKING:
    from golive.endpoint.client import EndpointClient
    from golive.profile.schema import Profile
    from golive.run.fixtures import RecordMetric

pytestmark = pytest.mark.endpoint

ROOM = 256  # the chat template and the answer, beside the haystack


@pytest.mark.parametrize("depth", [0.1, 0.5, 0.9], ids=["depth10", "depth50", "depth90"])
@check("endpoint.context.needle_retrieved_near_full_context", Cost.NEEDLE)
def test_needle_retrieved_near_full_context(
    vllm_server: EndpointClient, profile: Profile, depth: float, record_metric: RecordMetric
) -> None:
    """A needle planted near the start, middle or end of a prompt filling {endpoint.needle_fraction_of_context:%} of
    the {vllm.max_model_len}-token context is retrieved [000]."""
    name = profile.vllm.served_model_name
    fraction = profile.endpoint.needle_fraction_of_context
    target = int(profile.vllm.max_model_len * fraction)
    own = vllm_server.target.vllm_name(name)  # vLLM's own name: a gateway may rename the model
    served = {m.get("id"): m.get("max_model_len") for m in vllm_server.vllm_models()}.get(own)
    if isinstance(served, int) and served < target + ROOM:
        pytest.skip(longctx.no_room(served, target, ROOM))
    label = f"needle_{int(depth * 100)}"
    started = time.perf_counter()
    haystack = longctx.build(lambda text: vllm_server.tokenize(own, text), target, depth, seed=int(depth * 100))
    record_metric(f"{label}_build_s", round(time.perf_counter() - started, 2), "s")
    started = time.perf_counter()
    result = vllm_server.chat(name, [{"role": "user", "content": haystack.prompt}], max_tokens=1024, temperature=0)
    elapsed = time.perf_counter() - started
    record_metric(f"{label}_latency_s", round(elapsed, 2), "s")
    prompt_tokens = result.usage.get("prompt_tokens")
    if isinstance(prompt_tokens, int):
        record_metric(f"{label}_prompt_tokens", prompt_tokens, "tokens")
    require(
        haystack.answer in result.content,
        found=f"at {haystack.tokens:,} prompt tokens, depth {depth:.0%}: answered {result.content[:120]!r} "
        f"instead of {haystack.answer!r} ({elapsed:.1f} s)",
        recipe=f"the needle is retrieved at ~{fraction:.0%} of {profile.vllm.max_model_len:,} tokens, every "
        f"depth [000]",
        fix="check --max-model-len, the checkpoint's rope/long-context config and the KV cache dtype; "
        "a model that misses needles must not be sold as long-context",
    )
    mismatch = longctx.usage_mismatch(prompt_tokens, haystack)
    require(
        mismatch is None,
        found=f"depth {depth:.0%}: {mismatch and mismatch.found}",
        recipe=f"the needle prompt is {target:,} tokens ±0.5 % ({fraction:.0%} of "
        f"{profile.vllm.max_model_len:,}) by the server's own count, and the answer's usage.prompt_tokens "
        f"is that plus the chat template's few tokens [000]",
        fix=mismatch.fix if mismatch else "",
    )
