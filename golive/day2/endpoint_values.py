"""The endpoint's part of a capture: the served name, the context length and the KV capacity.

They are read read-only from GET /v1/models and GET /metrics; a KV capacity below the recipe's floor is decided by
golive.profile.recipe, as the endpoint's KV capacity check decides it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from golive.core.secrets import hide_password
from golive.day2.captured import CaptureError, Collector, Observed
from golive.profile.inventory import Station
from golive.profile.recipe import kv_capacity_short, kv_capacity_tokens
from golive.profile.schema import Profile

if TYPE_CHECKING:  # imported where used: the client brings openai
    from golive.endpoint.client import EndpointClient
    from golive.site import loader


def _endpoint_client(loaded: loader.LoadedInventory, station: Station, profile: Profile) -> EndpointClient:
    from golive.endpoint.client import EndpointClient
    from golive.endpoint.target import EndpointTarget

    return EndpointClient(EndpointTarget.of(station, profile.endpoint, loaded.tls_ca_file(station)))


def read_endpoint(loaded: loader.LoadedInventory, station: Station, observed: Observed) -> None:
    """Served models and the KV cache's configuration (GET /v1/models, GET /metrics), read-only."""
    from golive.endpoint.errors import EndpointError

    if not station.endpoint:
        return
    client = _endpoint_client(loaded, station, loaded.profile_of(station).profile)
    try:
        observed.models = client.models()
        cache = client.metrics().get("vllm:cache_config_info", [])
        observed.cache_info = dict(cache[0][0]) if cache else {}
        observed.endpoint = client.root
    except EndpointError as exc:
        raise CaptureError(
            f"station {station.name}: the endpoint did not answer ({exc}); capture a station that serves"
        ) from None
    finally:
        client.close()


def capture_endpoint(collect: Collector, observed: Observed) -> None:
    """The served name and context length (GET /v1/models), and a KV capacity below the recipe's floor."""
    if not observed.endpoint:
        return
    root = hide_password(observed.endpoint)
    source = f"GET {root}/v1/models"
    ids = [m.get("id") for m in observed.models if isinstance(m.get("id"), str)]
    if ids:
        name = collect.recipe.vllm.served_model_name
        served = name if name in ids else ids[0]
        collect.add("vllm", "served_model_name", served, source, said=f"serves the model as {served!r}")
        lengths = [m.get("max_model_len") for m in observed.models if m.get("id") == served]
        if lengths and isinstance(lengths[0], int):
            collect.add("vllm", "max_model_len", lengths[0], source, said=f"serves max_model_len {lengths[0]:,}")
    tokens = kv_capacity_tokens(observed.cache_info)
    if tokens is None:
        return  # no capacity published: nothing captured, nothing made up
    floor = collect.recipe.endpoint.kv_cache_tokens_floor
    metrics = f"GET {root}/metrics vllm:cache_config_info"
    short = kv_capacity_short(tokens, floor)
    if short:
        # above the floor the recipe's floor stays: a capture never tightens a gate the recipe set
        collect.ruled(
            "endpoint",
            "kv_cache_tokens_floor",
            tokens,
            metrics,
            said=f"holds {tokens:,} tokens of KV cache",
            differs=True,
            does=[],
        )
    else:
        where = "at or above the recipe's floor" if floor is not None else "the recipe sets no floor"
        collect.capture.read_from.append(f"KV cache {tokens:,} tokens ({metrics}): {where}")
