"""Endpoint URLs as operators write them, normalised once at inventory load: the checks see one form only."""
from __future__ import annotations

from urllib.parse import unquote, urlsplit, urlunsplit


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


def without_password(spec: str | None) -> str | None:
    """A host spec or URL as it may be shown: `ssh://user:secret@host` → `ssh://user:***@host`."""
    if not spec or "://" not in spec:
        return spec
    parts = urlsplit(spec)
    if parts.password is None:
        return spec
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, parts.fragment))


def password_of(spec: str | None) -> list[str]:
    """The password in a host spec, as written and percent-decoded (either may reach a message); [] when none."""
    if not spec or "://" not in spec:
        return []
    try:
        password = urlsplit(spec).password
    except ValueError:
        return []
    return [password, unquote(password)] if password else []
