"""The endpoint is up, alive, and serves the recipe's model under the recipe's name [000][002]."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import require
from golive.endpoint.client import error_body
from golive.endpoint.errors import EndpointError, StatusError, from_response
from golive.endpoint.target import model_names

if TYPE_CHECKING:
    from golive.endpoint.client import EndpointClient, Health
    from golive.endpoint.target import VllmName
    from golive.profile.inventory import Station
    from golive.profile.schema import Profile
    from golive.run.fixtures import RecordFinding, RecordProvenance
    from golive.site.loader import LoadedInventory

pytestmark = pytest.mark.endpoint


@check("endpoint.liveness.health_ok", Cost.LIGHT)
def test_health_endpoint_is_ok(
    endpoint_health: Health | EndpointError,
    record_finding: RecordFinding,
    station: Station,
    golive_inventory: LoadedInventory,
) -> None:
    """GET /health answers HTTP 200: the engine is alive (a dead one answers HTTP 503 while /v1/models may still
    answer HTTP 200) [002]. Behind a gateway: vLLM's /health at `vllm_endpoint`, else the gateway's own probe."""
    health = endpoint_health
    if isinstance(health, EndpointError):
        if health.unreachable:  # golive never reached the station: nothing was checked, the verdict cannot be GO
            pytest.skip(str(health))
        if health.client_side:  # golive's own trust must change (a CA it was not given): the station is not judged
            at = golive_inventory.written_at(station, "tls_ca_file")
            pytest.skip(f"not checked because {health.found}. Do: {health.hint} (station {station.name}: {at})")
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
    if problem is not None and not problem.what.startswith("TLS failed"):  # a certificate is no engine's fault
        fix += (
            "; read the server log (`journalctl -u <unit>` / `docker logs`) and restart the service once the cause "
            "is fixed"
        )
    require(
        problem is None,
        found=problem.found if problem else "",
        recipe="health on the serving port answers 200 before go-live [002]; a dead engine answers 503",
        fix=fix,
    )


@check("endpoint.models.lists_served_name", Cost.LIGHT)
def test_models_lists_served_name(
    endpoint_reachable: EndpointClient,
    profile: Profile,
    vllm_names: VllmName | None,
    station: Station,
    golive_inventory: LoadedInventory,
    record_provenance: RecordProvenance,
    record_finding: RecordFinding,
) -> None:
    """/v1/models lists the served model name the recipe publishes, {vllm.served_model_name}, the name clients ask
    for; where golive sees vLLM's own server, golive knows vLLM's own name for it (behind a gateway that renames the
    model: the inventory's `vllm_model`, or the one model vLLM serves) [000][002]."""
    client = endpoint_reachable
    ids = [str(m.get("id")) for m in client.models()]
    record_provenance(served_models=ids, vllm_version=client.vllm_version())
    want = profile.vllm.served_model_name
    gateway = client.health.gateway if client.health is not None else None
    gateway = gateway or (f"the gateway `{station.gateway}`" if station.gateway else None)
    if gateway is None and client.target.declares_gateway:
        gateway = "the gateway"
    require(
        want in ids,
        found=f"{client.target.url}/models lists {model_names(ids)}; `{want}` is not among them",
        recipe=f"served model name `{want}`, the name clients address the model by [000]",
        fix=_unlisted_fix(want, ids, gateway, vllm_names, golive_inventory.written_at(station, "vllm_model")),
    )
    if vllm_names is None:
        return
    at = golive_inventory.written_at(station, "vllm_model")
    require(
        vllm_names.problem is None,
        found=vllm_names.problem or "",
        recipe=f"clients ask for `{want}` [000]; golive asks vLLM's own /tokenize, /metrics and /v1/models by the "
        f"name vLLM serves it as (README: Gateways)",
        fix=f"check that `vllm_endpoint` points at the vLLM {gateway or 'the gateway'} routes `{want}` to ({at}): "
        f"a vLLM serves the model it was started with"
        if not vllm_names.served
        else f"correct `vllm_model: {vllm_names.declared}` ({at}) to the name vLLM serves the model as: "
        f"{model_names(vllm_names.served, choice=True)}"
        if vllm_names.declared
        else f"name vLLM's own name for `{want}` as `vllm_model:` in the inventory ({at}): "
        f"{model_names(vllm_names.served, choice=True)}, the one {gateway or 'the gateway'} routes `{want}` to "
        f"(LiteLLM: its `litellm_params.model` after `hosted_vllm/`)",
    )
    if vllm_names.renamed:
        how = "as the inventory's `vllm_model` says" if vllm_names.declared else "the one model it serves"
        record_finding(
            f"clients ask for `{want}`; vLLM serves it as `{vllm_names.name}` ({vllm_names.where}, {how}): golive "
            f"asks vLLM's own /tokenize, /metrics and /v1/models by `{vllm_names.name}`"
        )


def _unlisted_fix(want: str, ids: list, gateway: str | None, vllm: VllmName | None, at: str) -> str:
    """Who acts when the endpoint does not list the clients' name: vLLM's launch (a plain endpoint), or the gateway's
    model list and golive's own names (a gateway that renames the model)."""
    if gateway is None:
        return f"serve with `--served-model-name {want}`"
    if vllm is not None and want in vllm.served:
        return (
            f"vLLM serves `{want}` ({vllm.where}), but {gateway} does not offer it by that name: it renames the "
            f"model. If clients ask for {model_names(ids, choice=True)}, that is the name to check: set the profile's "
            f"vllm.served_model_name to it (a site profile that extends this one) and name vLLM's own as "
            f"`vllm_model: {want}` in the inventory ({at}; README: Gateways); otherwise add `{want}` to "
            f"{gateway}'s model list (LiteLLM: a model_list entry with model_name `{want}`)"
        )
    return (
        f"add `{want}` to {gateway}'s model list (LiteLLM: a model_list entry with model_name `{want}`), routed to the "
        f"vLLM that serves the model; or, if clients ask for {model_names(ids, choice=True)}, set the profile's "
        f"vllm.served_model_name to it and name vLLM's own as `vllm_model:` in the inventory (README: Gateways)"
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
    name = vllm_server.target.vllm_name(profile.vllm.served_model_name)
    if name not in models:  # the served-name check names what vLLM serves: no other model's window stands in
        pytest.skip(f"not checked because vLLM's own /v1/models does not list `{name}`: see the served-name check")
    entry: dict[str, Any] = models[name]
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
