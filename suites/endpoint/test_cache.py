"""KV cache: the capacity the recipe planned for, and prefix caching that really hits [000]."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import not_applicable, require
from golive.endpoint.client import metric_total
from golive.endpoint.longctx import filler
from golive.profile.recipe import kv_capacity_short, kv_capacity_tokens

if TYPE_CHECKING:
    from golive.endpoint.client import EndpointClient
    from golive.profile.schema import Profile
    from golive.run.fixtures import RecordMetric

pytestmark = pytest.mark.endpoint


def _cache_config(endpoint: EndpointClient) -> dict:
    samples = endpoint.metrics().get("vllm:cache_config_info", [])
    return samples[0][0] if samples else {}


@check("endpoint.cache.kv_capacity_meets_floor", Cost.LIGHT)
def test_kv_cache_capacity_meets_floor(
    vllm_server: EndpointClient, profile: Profile, record_metric: RecordMetric
) -> None:
    """KV cache capacity (from /metrics) holds at least the recipe's {endpoint.kv_cache_tokens_floor} tokens {cited}."""
    floor = profile.endpoint.kv_cache_tokens_floor
    if floor is None:
        not_applicable("the profile sets no kv_cache_tokens_floor")
    info = _cache_config(vllm_server)
    tokens = kv_capacity_tokens(info)
    require(
        tokens is not None,
        found=f"/metrics has no vllm:cache_config_info capacity (labels: {sorted(info)})",
        recipe=f"KV cache ≥ {floor:,} tokens {profile.cited}",
        fix="enable /metrics (it is on by default in vLLM)",
    )
    assert tokens is not None  # require() ended the check otherwise
    record_metric("kv_cache_tokens", tokens, "tokens", floor=floor)
    short = kv_capacity_short(tokens, floor)
    require(
        short is None,
        found=f"{short} ({tokens / profile.vllm.max_model_len:.2f} full-context requests; "
        f"cache dtype {info.get('cache_dtype', '?')})",
        recipe=f"KV cache ≥ {floor:,} tokens ({floor / profile.vllm.max_model_len:.2f} full-context requests) "
        f"{profile.cited}",
        fix="check --gpu-memory-utilization, the checkpoint's fp8 KV config, and that nothing else holds HBM "
        "(page cache on the HBM node, a stray process)",
    )


@check("endpoint.cache.prefix_caching_on_and_effective", Cost.LIGHT)
def test_prefix_caching_on_and_effective(vllm_server: EndpointClient, profile: Profile) -> None:
    """Prefix caching is on and hits: a repeated prefix is served from cache [000]."""
    if profile.vllm.enable_prefix_caching is False:
        not_applicable("the profile serves without prefix caching")
    name = profile.vllm.served_model_name
    # salted, so an earlier run's cache cannot make this pass [field practice]
    prefix = f"Reference {uuid.uuid4()}. " + " ".join(filler(120, seed=3))
    before = metric_total(vllm_server.metrics(), "vllm:prefix_cache_hits_total")
    for question in ("Summarise the notes.", "List the subjects in the notes."):
        vllm_server.chat(name, [{"role": "user", "content": prefix + "\n" + question}], max_tokens=8, temperature=0)
    hits = metric_total(vllm_server.metrics(), "vllm:prefix_cache_hits_total") - before
    info = _cache_config(vllm_server)
    require(
        hits > 0,
        found=f"a repeated ~{len(prefix.split())}-word prefix earned {hits:.0f} cached tokens "
        f"(enable_prefix_caching={info.get('enable_prefix_caching', '?')})",
        recipe="prefix caching on: a shared prefix (the same system prompt) is not paid for twice [000]",
        fix="serve with `--enable-prefix-caching`",
    )
