"""Endpoint URLs as operators write them, normalised once at inventory load: the checks see one form only.

How a URL or host spec is shown without its password: golive.core.secrets.hide_password.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def normalise_endpoint(url: str) -> str:
    """`http://host:8000`, `http://host:8000/`, `http://host:8000/v1/` → `http://host:8000/v1`; no scheme → refused."""
    text = url.strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"endpoint URL {url!r} needs http:// or https:// and a host, e.g. http://gb300-a:8888/v1")
    if parts.query or parts.fragment:
        raise ValueError(f"endpoint URL {url!r} must not carry a query or fragment: give the server's base URL")
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise ValueError(f"endpoint URL {url!r} has a port that is not a number") from None
    path = parts.path.rstrip("/")
    if not path.endswith("/v1"):
        path += "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))
