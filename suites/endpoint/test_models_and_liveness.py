"""The endpoint is up, alive, and serves the recipe's model under the recipe's name [000][002]."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import openai
import pytest

from golive.core.verdict import require
from golive.endpoint.client import error_body
from golive.endpoint.errors import EndpointError, from_response

if TYPE_CHECKING:
    from golive.endpoint.client import EndpointClient
    from golive.profile.schema import Profile, Station
    from golive.run.fixtures import RecordProvenance

pytestmark = pytest.mark.endpoint


def test_health_endpoint_is_ok(endpoint_client: EndpointClient, station: Station) -> None:
    """GET /health answers HTTP 200: the engine is alive (a dead one answers HTTP 503 while /v1/models may still
    answer HTTP 200) [002]."""
    try:
        response = endpoint_client.get("/health", with_key=False)
        problem = None if response.status_code == 200 else from_response(response, "GET /health is not 200")
    except EndpointError as exc:
        if exc.unreachable:  # golive never reached the station: nothing was checked, the verdict cannot be GO
            pytest.skip(str(exc))
        if exc.cut:  # the connection dropped before any answer: the way failed, the engine's state is unknown
            pytest.skip(
                f"not checked because {exc.found}: the connection dropped before /health answered (a "
                f"transport failure, not the engine's answer); re-run, and check the network path and the "
                f"server log if it repeats"
            )
        problem = exc
    require(
        problem is None,
        found=problem.found if problem else "",
        recipe="health on the serving port answers 200 before go-live [002]; a dead engine answers 503",
        fix=(problem.hint if problem else "") + "; read the server log (`journalctl -u <unit>` / `docker logs`) "
        "and restart the service once the cause is fixed",
    )


def test_models_lists_served_name(
    endpoint_reachable: EndpointClient, profile: Profile, record_provenance: RecordProvenance
) -> None:
    """/v1/models lists the served model name the recipe publishes, {vllm.served_model_name} [000][002]."""
    ids = [m.get("id") for m in endpoint_reachable.models()]
    try:  # vLLM's /version; other servers may not have it
        version = endpoint_reachable.get("/version").json().get("version")
    except (httpx.HTTPError, ValueError, AttributeError):
        version = None
    record_provenance(served_models=ids, vllm_version=version)
    want = profile.vllm.served_model_name
    require(
        want in ids,
        found=f"/v1/models lists {ids}",
        recipe=f"served model name `{want}` (clients address the model by it) [000]",
        fix=f"serve with `--served-model-name {want}`",
    )


def test_models_max_model_len_matches_profile(endpoint: EndpointClient, profile: Profile) -> None:
    """The served model's max_model_len equals the recipe's context window, {vllm.max_model_len} tokens
    [000][002]."""
    models = {m.get("id"): m for m in endpoint.models()}
    entry: dict[str, Any] = models.get(profile.vllm.served_model_name) or next(iter(models.values()), {})
    got = entry.get("max_model_len")
    want = profile.vllm.max_model_len
    if isinstance(got, int) and got > want:
        direction = (
            f"raised above the recipe's {want:,} tokens: a window the recipe never measured; the KV cache "
            f"holds fewer full-length requests, and long prompts may no longer fit at the recipe's load"
        )
    elif isinstance(got, int):
        direction = f"lowered below the recipe's {want:,} tokens: prompts the service is meant to take are refused"
    else:
        direction = "the server does not say its context window"
    require(
        got == want,
        found=f"{entry.get('id')} max_model_len {got if not isinstance(got, int) else f'{got:,}'}: {direction}",
        recipe=f"--max-model-len {want} [000][002]",
        fix=f"serve with `--max-model-len {want}` (and check the KV cache still fits), or pin this station's "
        f"window in its site profile (vllm.max_model_len) if it is meant to differ",
    )


def test_one_token_canary_answers(endpoint: EndpointClient, profile: Profile) -> None:
    """A one-token chat completes: /v1/models can answer HTTP 200 while the engine is dead [field practice]."""
    try:
        result = endpoint.chat(profile.vllm.served_model_name, [{"role": "user", "content": "Hi"}], max_tokens=1)
        found, ok = (
            f"finish_reason {result.finish_reason}, {result.usage.get('completion_tokens')} token",
            result.usage.get("completion_tokens") == 1,
        )
    except openai.APIStatusError as exc:
        found, ok = f"HTTP {exc.status_code}: {error_body(exc)}", False
    except openai.APIConnectionError as exc:
        found, ok = f"no answer: {exc}", False
    require(
        ok,
        found=found,
        recipe="a one-token canary answers; `/v1/models` alone does not prove the engine works [field practice]",
        fix="check /health and the server log; restart the service",
    )
