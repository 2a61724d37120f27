"""KV cache: the capacity the recipe planned for, and prefix caching that really hits [000]."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest

from golive.core.verdict import not_applicable, require
from golive.endpoint.client import metric_total
from golive.endpoint.longctx import filler

if TYPE_CHECKING:
    from golive.endpoint.client import EndpointClient
    from golive.profile.schema import Profile
    from golive.run.fixtures import RecordMetric

pytestmark = pytest.mark.endpoint


def _cache_config(endpoint: EndpointClient) -> dict:
    samples = endpoint.metrics().get("vllm:cache_config_info", [])
    return samples[0][0] if samples else {}


def test_kv_cache_capacity_meets_floor(endpoint: EndpointClient, profile: Profile, record_metric: RecordMetric) -> None:
    """KV cache capacity (from /metrics) holds at least the recipe's {endpoint.kv_cache_tokens_floor} tokens {cited}."""
    floor = profile.endpoint.kv_cache_tokens_floor
    if floor is None:
        not_applicable("the profile sets no kv_cache_tokens_floor")
    info = _cache_config(endpoint)
    label = info.get("kv_cache_size_tokens")
    tokens: int | None = None
    if label not in (None, "", "None"):
        tokens = int(str(label))
    elif info.get("num_gpu_blocks") not in (None, "", "None"):
        tokens = int(str(info["num_gpu_blocks"])) * int(str(info.get("block_size") or 0))
    require(
        tokens is not None,
        found=f"/metrics has no vllm:cache_config_info capacity (labels: {sorted(info)})",
        recipe=f"KV cache ≥ {floor:,} tokens {profile.cited}",
        fix="enable /metrics (it is on by default in vLLM)",
    )
    assert tokens is not None  # require() ended the check otherwise
    record_metric("kv_cache_tokens", tokens, "tokens", floor=floor)
    require(
        tokens >= floor,
        found=f"KV cache holds {tokens:,} tokens ({tokens / profile.vllm.max_model_len:.2f} full-context requests; "
        f"cache dtype {info.get('cache_dtype', '?')})",
        recipe=f"KV cache ≥ {floor:,} tokens ({floor / profile.vllm.max_model_len:.2f} full-context requests) "
        f"{profile.cited}",
        fix="check --gpu-memory-utilization, the checkpoint's fp8 KV config, and that nothing else holds HBM "
        "(page cache on the HBM node, a stray process)",
    )


def test_prefix_caching_on_and_effective(endpoint: EndpointClient, profile: Profile) -> None:
    """Prefix caching is on and hits: a repeated prefix is served from cache [000]."""
    if profile.vllm.enable_prefix_caching is False:
        not_applicable("the profile serves without prefix caching")
    name = profile.vllm.served_model_name
    # salted, so an earlier run's cache cannot make this pass [field practice]
    prefix = f"Reference {uuid.uuid4()}. " + " ".join(filler(120, seed=3))
    before = metric_total(endpoint.metrics(), "vllm:prefix_cache_hits_total")
    for question in ("Summarise the notes.", "List the subjects in the notes."):
        endpoint.chat(name, [{"role": "user", "content": prefix + "\n" + question}], max_tokens=8, temperature=0)
    hits = metric_total(endpoint.metrics(), "vllm:prefix_cache_hits_total") - before
    info = _cache_config(endpoint)
    require(
        hits > 0,
        found=f"a repeated ~{len(prefix.split())}-word prefix earned {hits:.0f} cached tokens "
        f"(enable_prefix_caching={info.get('enable_prefix_caching', '?')})",
        recipe="prefix caching on: a shared prefix (the same system prompt) is not paid for twice [000]",
        fix="serve with `--enable-prefix-caching`",
    )
