"""A sick endpoint as one operator line: which URL, what came back (status, content type, first bytes), what to do."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import httpx

from golive.core.verdict import printable
from golive.endpoint.bounded import DEFAULT_CAPS, BoundError, loads

try:  # the openai client makes its requests with httpx2 (a fork): its errors are the same kinds under other classes
    import httpx2

    _HTTP_LIBS: tuple[ModuleType, ...] = (httpx, httpx2)
except ImportError:  # an openai release that still uses httpx
    _HTTP_LIBS = (httpx,)

FIRST_BYTES = 120


def _kinds(*names: str) -> tuple[type, ...]:
    return tuple(getattr(lib, name) for lib in _HTTP_LIBS for name in names if hasattr(lib, name))


def _openai_error(exc: BaseException, name: str) -> bool:
    """Whether `exc` is the openai client's error `name`. Not imported here: a run that never loaded the client
    (host and cluster checks only) cannot have met one of its errors, and importing it costs ~0.6 s of the start."""
    openai = sys.modules.get("openai")
    return openai is not None and isinstance(exc, getattr(openai, name))


class EndpointError(Exception):
    """The endpoint did not answer as an OpenAI-compatible vLLM server does. str() is the one line shown."""

    def __init__(
        self,
        url: str,
        what: str,
        hint: str,
        *,
        status: int | None = None,
        content_type: str | None = None,
        first_bytes: str | None = None,
        unreachable: bool = False,
        cut: bool = False,
        timed_out: bool = False,
        client_side: bool = False,
    ):
        self.url, self.what, self.hint = url, what, hint
        self.client_side = client_side  # golive's own configuration must change (its trust), not the server
        self.unreachable = unreachable  # never reached (refused, DNS, connect timeout): not checked, not a verdict
        self.cut = cut  # the connection closed or reset mid-answer: the way failed, the server said nothing
        self.timed_out = timed_out  # connected, but the answer did not come (or end) in time
        self.status, self.content_type, self.first_bytes = status, content_type, first_bytes
        super().__init__(self.found)

    @property
    def found(self) -> str:
        text = f"{self.url}: {self.what}"
        if self.status is not None:
            text += f"; HTTP {self.status}"
        if self.content_type is not None:
            text += f", content type {self.content_type or 'none'}"
        if self.first_bytes is not None:
            text += f", body starts {self.first_bytes!r}"
        return text

    @property
    def transport(self) -> bool:
        """The way to the endpoint failed (refused, timed out connecting, closed mid-answer): mid-run, after the
        endpoint had answered, this is not the station's answer (golive.run.outcomes: not checked)."""
        return self.unreachable or self.cut

    def __str__(self) -> str:
        return f"{self.found}. Do: {self.hint}"


class StatusError(EndpointError):
    """The endpoint answered an HTTP status that is not 2xx (a redirect included: golive follows none). Checks that
    read a status's meaning (400 for an over-long prompt, 413 …) catch it; anywhere else it is the check's one line
    (golive.run.outcomes). `message` is what the body says (its `error.message` or `detail`, else its first bytes)."""

    def __init__(self, url: str, what: str, hint: str, *, status: int, message: str, **kwargs: Any):
        super().__init__(url, what, hint, status=status, **kwargs)
        self.status_code = status
        self.message = message


def _first_bytes(response: httpx.Response) -> str:
    try:
        raw = response.content[:FIRST_BYTES]
    except httpx.HTTPError:  # the body itself was cut: show nothing rather than fail again
        return ""
    return raw.decode("utf-8", errors="replace")


def body_message(response: httpx.Response, limit: int = 300) -> str:
    """What an error answer says, in one line: its JSON `error.message` (OpenAI, vLLM), `detail` (FastAPI) or
    `message`, else its first bytes; never deeper JSON than golive reads (golive.endpoint.bounded.loads)."""
    try:
        raw = response.content
    except httpx.HTTPError:
        return ""
    try:
        body = loads(raw[: 64 * 1024], 16)
    except ValueError:
        body = None
    said: object = body
    if isinstance(body, dict):
        said = body.get("error", body)
        if isinstance(said, dict):
            said = said.get("message", said.get("detail", said))
        elif "detail" in body and said is body:
            said = body["detail"]
    text = str(said) if body is not None else raw[:limit].decode("utf-8", errors="replace")
    return printable(" ".join(text.split()))[:limit]


def from_response(response: httpx.Response, what: str) -> EndpointError:
    """The one line for an answer that is not what golive asked for: a StatusError where its status is not 2xx."""
    status = response.status_code
    kind = response.headers.get("content-type", "")
    if "html" in kind:
        hint = (
            "an HTML page answered, not the OpenAI API: a login page or proxy sits in front, or the URL points at "
            "another service; give the inventory the vLLM server's URL (and its key in api_key_env)"
        )
    elif status == 404 and _names_a_model(response):
        hint = (
            "the server serves no model by the name golive sent (its answer names the ones it serves): requests "
            "through the endpoint carry the profile's vllm.served_model_name; vLLM's own /tokenize and /v1/models "
            "behind a gateway that renames the model, the inventory's `vllm_model` (README: Gateways)"
        )
    elif status == 404:
        hint = "nothing is served at this path: check the endpoint URL and port in the inventory point at vLLM"
    elif status in (502, 503, 504):
        hint = "a proxy answered for a server that is down or starting: check the service and its log"
    elif status in (401, 403):
        hint = "the endpoint refused golive's credentials: set api_key_env in the inventory to the key's env var"
    elif status == 429:
        hint = "the endpoint limits golive's rate: give golive's key a limit that lets the profile's load through"
    elif 300 <= status < 400:
        hint = (
            "golive follows no redirect (another origin's answer is not this station's, and the key stays with its "
            "origin): give the inventory the URL that answers itself"
        )
        what += f": {redirect_to(response.headers.get('location'))}"
    else:
        hint = "check that the endpoint URL points at a healthy vLLM server (its log says why it answers this way)"
    url = _without_query(str(response.request.url))
    if response.is_success:
        return EndpointError(url, what, hint, status=status, content_type=kind, first_bytes=_first_bytes(response))
    return StatusError(
        url,
        what,
        hint,
        status=status,
        message=redirect_to(response.headers.get("location")) if response.is_redirect else body_message(response),
        content_type=kind,
        first_bytes=_first_bytes(response),
    )


def _names_a_model(response: httpx.Response) -> bool:
    """A 404 that is about the model, not the path: vLLM's `{"error": {"param": "model", "message": "The model `x`
    does not exist. …"}}` (an OpenAI-style error naming the `model` parameter)."""
    try:  # an error body is the server's: read within golive's depth cap (a hostile one nests without end)
        error = loads(response.content, DEFAULT_CAPS.json_depth)
    except (ValueError, httpx.HTTPError):
        return False
    error = error.get("error") if isinstance(error, dict) else None
    return isinstance(error, dict) and error.get("param") == "model"


def redirect_to(location: str | None) -> str:
    """A redirect as golive's lines name it (golive follows none)."""
    if not location:
        return "a redirect (golive follows none)"
    return f"a redirect to {printable(' '.join(location.split()))[:200]!r} (golive follows none)"


def _without_query(url: str) -> str:
    return url.split("?", 1)[0]


def from_bound(url: str, exc: BoundError) -> EndpointError:
    """A bound golive keeps (a cap, the request's deadline, the run stopping) as the request's one line."""
    return EndpointError(url, exc.what, exc.hint, timed_out=exc.timed_out)


def from_transport(url: str, exc: BaseException, ca_file: str | None = None) -> EndpointError:
    """httpx / openai transport errors (connect, DNS, TLS, timeouts, cut streams) as one line, no internals; a TLS
    failure says what the server presented and which side acts (golive.endpoint.tls.failure; `ca_file`: the CA golive
    trusted for it)."""
    if isinstance(exc, BoundError):
        return from_bound(url, exc)
    cause = exc.__cause__ if _openai_error(exc, "APIConnectionError") and exc.__cause__ else exc
    text = str(cause).splitlines()[0][:200] if str(cause) else ""
    if isinstance(cause, _kinds("ConnectTimeout", "PoolTimeout")):
        what, hint = (
            "no connection within the connect timeout",
            "check the host is up and the port is not firewalled (endpoint.connect_timeout_s in the profile)",
        )
    elif isinstance(cause, _kinds("ReadTimeout", "WriteTimeout")) or _openai_error(exc, "APITimeoutError"):
        what, hint = (
            "connected, but no answer within the timeout",
            "the server accepts connections but does not answer: check its log for a hang or an overloaded engine "
            "(timeouts: endpoint.light_timeout_s, request_timeout_s, stream_stall_timeout_s in the profile)",
        )
    elif isinstance(cause, _kinds("ConnectError")) and (
        "Name or service" in text or "nodename" in text or "resolution" in text or "getaddrinfo" in text
    ):
        what, hint = f"the host name does not resolve ({text})", "check the host name in the endpoint URL and DNS"
    elif isinstance(cause, _kinds("ConnectError")) and ("SSL" in text or "certificate" in text.lower()):
        from golive.endpoint.tls import failure  # reads the server's certificate: only where TLS failed

        tls = failure(url, text, ca_file)
        return EndpointError(url, tls.what, tls.hint, client_side=tls.client_side)
    elif isinstance(cause, _kinds("ConnectError")):
        what, hint = (
            f"connection failed ({text or 'refused'})",
            "check the service is running and listens on this host and port (`ss -ltnp`)",
        )
    elif isinstance(cause, _kinds("RemoteProtocolError", "ReadError")):
        what, hint = (
            f"the server closed the connection mid-answer ({text or type(cause).__name__})",
            "check the server log for a crash or a proxy cutting long responses",
        )
    else:
        what, hint = f"the request failed ({type(cause).__name__}: {text})", "check the endpoint URL and the server log"
    never_reached = isinstance(cause, _kinds("ConnectTimeout", "PoolTimeout")) or (
        isinstance(cause, _kinds("ConnectError")) and not what.startswith("TLS")
    )
    cut = isinstance(cause, _kinds("RemoteProtocolError", "ReadError"))
    timed_out = isinstance(cause, _kinds("ReadTimeout", "WriteTimeout")) or _openai_error(exc, "APITimeoutError")
    return EndpointError(url, what, hint, unreachable=never_reached, cut=cut, timed_out=timed_out)
