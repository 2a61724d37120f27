"""Auth: required when the profile says so; an open endpoint is reported plainly [000][002]."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import require
from golive.endpoint.errors import from_response

if TYPE_CHECKING:
    from golive.endpoint.client import EndpointClient
    from golive.profile.inventory import Station
    from golive.profile.schema import Profile
    from golive.run.fixtures import RecordFinding

pytestmark = pytest.mark.endpoint


@check("endpoint.security.auth_matches_profile", Cost.LIGHT)
def test_auth_matches_profile(
    endpoint_answers: EndpointClient, station: Station, profile: Profile, record_finding: RecordFinding
) -> None:
    """Auth as the profile asks (require_auth: {security.require_auth}): without the key a request gets HTTP 401; an
    open endpoint is a finding [000][002]."""
    response = endpoint_answers.get("/v1/models", with_key=False)
    anonymous = response.status_code
    problem = None
    if anonymous not in (200, 401):
        problem = from_response(response, "GET /v1/models without a key")
    elif anonymous == 200 and "json" not in response.headers.get("content-type", ""):
        problem = from_response(response, "GET /v1/models without a key answered a page, not the API")
    require(
        problem is None,
        found=problem.found if problem else "",
        recipe="the endpoint answers 200 (open) or 401 (auth required)",
        fix=problem.hint if problem else "",
    )
    if anonymous == 401:
        require(
            endpoint_answers.has_key,
            found="the endpoint requires a key (401 without one) and the inventory gives golive none"
            + (f" (env var {station.api_key_env} is empty)" if station.api_key_env else ""),
            recipe="golive authenticates like a client does",
            fix=f"set `api_key_env:` for station {station.name} in the inventory to the NAME of an environment "
            f"variable holding the key, and export it",
        )
        keyed = endpoint_answers.get("/v1/models")
        gateway = endpoint_answers.health.gateway if endpoint_answers.health else None
        require(
            keyed.status_code == 200,
            found=f"with the key from ${station.api_key_env}: "
            + from_response(keyed, "GET /v1/models refused the key").found,
            recipe="the configured key is accepted",
            fix=f"put a valid key in ${station.api_key_env}"
            + (
                f" (the endpoint is {gateway}: the gateway's key — LiteLLM's master key or a key it issued; a "
                f"LiteLLM with no key database answers any other key with HTTP 400 'No connected db.')"
                if gateway
                else ""
            ),
        )
        return
    require(
        not profile.security.require_auth,
        found=f"{endpoint_answers.base_url} answers without any key",
        recipe="the profile requires auth: firewall, auth and TLS before wider exposure [002]",
        fix="put an authenticating proxy in front, or serve with an API key (vLLM reads VLLM_API_KEY)",
    )
    record_finding(
        f"OPEN ENDPOINT: {endpoint_answers.base_url} answers anyone who can reach it — no API key, as "
        f"published [000][002]. Firewall the port, add auth and TLS before wider exposure."
    )
