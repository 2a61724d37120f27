"""Auth: required when the profile says so; an open endpoint is reported plainly [000][002]."""
import httpx
import pytest

from golive.verdict import require

pytestmark = pytest.mark.endpoint


def test_auth_matches_profile(endpoint_client, station, profile, record_finding):
    """Auth as the profile asks: without the key a request gets 401; an open endpoint is a finding [000][002]."""
    try:
        anonymous = endpoint_client.get("/v1/models", with_key=False).status_code
    except httpx.TransportError as exc:
        pytest.skip(f"{endpoint_client.base_url} did not answer ({type(exc).__name__}): see the /health check")
    require(anonymous in (200, 401),
            found=f"GET /v1/models without a key answered {anonymous}",
            recipe="the endpoint answers 200 (open) or 401 (auth required)",
            fix="check the proxy in front of the server")
    if anonymous == 401:
        require(endpoint_client.has_key,
                found="the endpoint requires a key (401 without one) and the inventory gives golive none"
                      + (f" (env var {station.api_key_env} is empty)" if station.api_key_env else ""),
                recipe="golive authenticates like a client does",
                fix=f"set `api_key_env:` for station {station.name} in the inventory to the NAME of an environment "
                    f"variable holding the key, and export it")
        keyed = endpoint_client.get("/v1/models").status_code
        require(keyed == 200,
                found=f"with the key from ${station.api_key_env} the endpoint answered {keyed}",
                recipe="the configured key is accepted", fix=f"put a valid key in ${station.api_key_env}")
        return
    require(not profile.security.require_auth,
            found=f"{endpoint_client.base_url} answers without any key",
            recipe="the profile requires auth: firewall, auth and TLS before wider exposure [002]",
            fix="put an authenticating proxy in front, or serve with an API key (vLLM reads VLLM_API_KEY)")
    record_finding(f"OPEN ENDPOINT: {endpoint_client.base_url} answers anyone who can reach it — no API key, as "
                   f"published [000][002]. Firewall the port, add auth and TLS before wider exposure.")
