"""The endpoint is up, alive, and serves the recipe's model under the recipe's name [000][002]."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import require
from golive.endpoint.client import error_body
from golive.endpoint.errors import EndpointError, StatusError, from_response

if TYPE_CHECKING:
    from golive.endpoint.client import EndpointClient, Health
    from golive.profile.schema import Profile
    from golive.run.fixtures import RecordFinding, RecordProvenance

pytestmark = pytest.mark.endpoint


@check("endpoint.liveness.health_ok", Cost.LIGHT)
def test_health_endpoint_is_ok(endpoint_health: Health | EndpointError, record_finding: RecordFinding) -> None:
    """GET /health answers HTTP 200: the engine is alive (a dead one answers HTTP 503 while /v1/models may still
    answer HTTP 200) [002]. Behind a gateway: vLLM's /health at `vllm_endpoint`, else the gateway's own probe."""
    health = endpoint_health
    if isinstance(health, EndpointError):
        if health.unreachable:  # golive never reached the station: nothing was checked, the verdict cannot be GO
            pytest.skip(str(health))
        if health.cut:  # the connection dropped before any answer: the way failed, the engine's state is unknown
            pytest.skip(
                f"not checked because {health.found}: the connection dropped before /health answered (a "
                f"transport failure, not the engine's answer); re-run, and check the network path and the "
                f"server log if it repeats"
            )
        problem: EndpointError | None = health
    elif health.status is None:  # a gateway with no probe: vLLM's /health is what cannot be seen through it
        pytest.skip(health.vllm_unseen)
    elif health.status == 200:
        problem = None
        if not health.vllm_seen:
            record_finding(
                f"{health.url} answers 200: {health.gateway} is up; vLLM's own /health is behind it (the one-token "
                f"canary through the gateway shows the engine answers). Give `vllm_endpoint:` to probe it directly"
            )
    else:
        assert health.response is not None
        problem = from_response(health.response, "GET /health is not 200")
    fix = problem.hint if problem else ""
    if problem is not None and problem.status in (401, 403, 404, 405, 500):  # what gateways answer for /health
        fix = (
            f"if a gateway sits in front of vLLM (LiteLLM's /health wants a key and calls every model), say so in "
            f"the inventory: `gateway:` with `vllm_endpoint:`, or its own probe as `gateway_health:` (README: "
            f"Gateways); otherwise: {fix}"
        )
    require(
        problem is None,
        found=problem.found if problem else "",
        recipe="health on the serving port answers 200 before go-live [002]; a dead engine answers 503",
        fix=fix + "; read the server log (`journalctl -u <unit>` / `docker logs`) and restart the service once the "
        "cause is fixed",
    )


@check("endpoint.models.lists_served_name", Cost.LIGHT)
def test_models_lists_served_name(
    endpoint_reachable: EndpointClient, profile: Profile, record_provenance: RecordProvenance
) -> None:
    """/v1/models lists the served model name the recipe publishes, {vllm.served_model_name} [000][002]."""
    ids = [m.get("id") for m in endpoint_reachable.models()]
    record_provenance(served_models=ids, vllm_version=endpoint_reachable.vllm_version())
    want = profile.vllm.served_model_name
    require(
        want in ids,
        found=f"/v1/models lists {ids}",
        recipe=f"served model name `{want}` (clients address the model by it) [000]",
        fix=f"serve with `--served-model-name {want}`",
    )


@check("endpoint.models.max_model_len_matches_profile", Cost.LIGHT)
def test_models_max_model_len_matches_profile(vllm_server: EndpointClient, profile: Profile) -> None:
    """The served model's max_model_len equals the recipe's context window, {vllm.max_model_len} tokens
    [000][002]."""
    try:
        models = {m.get("id"): m for m in vllm_server.vllm_models()}
    except EndpointError as exc:
        if exc.status not in (401, 403):
            raise
        pytest.skip(
            f"not checked because {exc.found}: the vLLM behind the gateway wants a key of its own (golive sends it "
            f"the station's, api_key_env); its max_model_len is read from its own /v1/models"
        )
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


@check("endpoint.liveness.one_token_canary_answers", Cost.LIGHT)
def test_one_token_canary_answers(endpoint: EndpointClient, profile: Profile) -> None:
    """A one-token chat completes: /v1/models can answer HTTP 200 while the engine is dead [field practice]."""
    try:
        result = endpoint.chat(profile.vllm.served_model_name, [{"role": "user", "content": "Hi"}], max_tokens=1)
        found, ok = (
            f"finish_reason {result.finish_reason}, {result.usage.get('completion_tokens')} token",
            result.usage.get("completion_tokens") == 1,
        )
    except StatusError as exc:
        found, ok = f"HTTP {exc.status_code}: {error_body(exc)}", False
    except EndpointError as exc:
        if not (exc.transport or exc.timed_out):
            raise  # an answer that is not a chat completion: the check's own finding, as it says
        found, ok = f"no answer: {exc.what}", False
    require(
        ok,
        found=found,
        recipe="a one-token canary answers; `/v1/models` alone does not prove the engine works [field practice]",
        fix="check /health and the server log; restart the service",
    )
