"""One station's endpoint as every golive client reaches it: URL, key, trusted CA and timeouts, built once.

The API key is read from the environment here and only here (the inventory names the variable, never the key); it is
kept out of repr() so no log, report or traceback can print it. Credentials in the endpoint URL's userinfo
(`http://user:secret@gw/v1`) are taken out of every URL golive requests and sent only where the key is (as HTTP
Basic, where no key is named): the auth check's request "without a key" carries none.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit, urlunsplit

from golive.endpoint.bounded import Caps
from golive.profile.inventory import Station
from golive.profile.schema import Endpoint


def api_key_of(station: Station) -> str | None:
    """The key in the environment variable the inventory names for this station (None: no variable, or empty)."""
    return (os.environ.get(station.api_key_env) or None) if station.api_key_env else None


@dataclass(frozen=True)
class EndpointTarget:
    """>>> EndpointTarget("http://gb300-a:8888/v1").chat_url
    'http://gb300-a:8888/v1/chat/completions'
    """

    url: str  # the OpenAI base URL, ending in /v1 (golive.core.urls.normalise_endpoint), as clients reach it
    api_key: str | None = field(default=None, repr=False)
    ca_file: str | None = None  # the site CA for https (golive.endpoint.tls); None: httpx's default trust
    request_timeout_s: float = 120  # one whole non-streamed generation
    connect_timeout_s: float = 5
    light_timeout_s: float = 10  # /health, /v1/models, /metrics
    stream_stall_timeout_s: float = 120  # the longest silence between two chunks of a stream
    # a gateway at `url` (README "Gateways"): its name, its own unauthenticated health probe where the inventory names
    # one, and the vLLM server behind it (its /v1 URL) where golive can reach it
    gateway: str | None = None
    gateway_health: str | None = None
    vllm_url: str | None = None
    caps: Caps = Caps()  # what golive reads of one answer at most (endpoint.max_body_bytes …)
    basic: str | None = field(default=None, repr=False)  # `user:password` from the URL's userinfo, taken out of it
    # vLLM's own name for the model, where a gateway renames it (clients ask for the profile's served_model_name):
    # the inventory's `vllm_model`, or the one golive learned from vLLM's own /v1/models (VllmName)
    vllm_model: str | None = None

    def __post_init__(self) -> None:
        url, basic = without_userinfo(self.url)
        vllm_url, vllm_basic = without_userinfo(self.vllm_url) if self.vllm_url else (None, None)
        object.__setattr__(self, "url", url)
        object.__setattr__(self, "vllm_url", vllm_url)
        object.__setattr__(self, "basic", self.basic or basic or vllm_basic)

    @classmethod
    def of(cls, station: Station, limits: Endpoint, ca_file: str | None) -> EndpointTarget:
        """The station's endpoint with the profile's timeouts (`endpoint.*_timeout_s`)."""
        if not station.endpoint:
            raise ValueError(f"station {station.name} has no endpoint URL")
        return cls(
            url=station.endpoint.rstrip("/"),
            api_key=api_key_of(station),
            gateway=station.gateway,
            gateway_health=station.gateway_health,
            vllm_url=station.vllm_endpoint.rstrip("/") if station.vllm_endpoint else None,
            vllm_model=station.vllm_model,
            ca_file=ca_file,
            request_timeout_s=limits.request_timeout_s,
            connect_timeout_s=limits.connect_timeout_s,
            light_timeout_s=limits.light_timeout_s,
            stream_stall_timeout_s=limits.stream_stall_timeout_s,
            caps=Caps.of(limits),
        )

    def vllm_name(self, model: str) -> str:
        """The name vLLM's own endpoints (/tokenize, the model_name label of /metrics, its /v1/models and their
        max_model_len) know `model` by, the name clients ask the endpoint for: the same, unless a gateway renames it.

        >>> EndpointTarget("http://gw:4000/v1", vllm_model="glm-5.3-fp8").vllm_name("glm-5.3")
        'glm-5.3-fp8'
        """
        return self.vllm_model or model

    @property
    def root(self) -> str:
        """vLLM's own server root (/health, /metrics, /tokenize, /version live there, not under /v1): the endpoint's,
        or behind a gateway the `vllm_endpoint`'s (a gateway without one serves none of them as vLLM does)."""
        return (self.vllm_url or self.url).removesuffix("/v1")

    @property
    def declares_gateway(self) -> bool:
        """The inventory says a gateway sits at the endpoint (its name, its health probe or the vLLM behind it)."""
        return bool(self.gateway or self.gateway_health or self.vllm_url)

    @property
    def api_root(self) -> str:
        """The root of the endpoint as clients reach it (a gateway's own paths, such as its health probe)."""
        return self.url.removesuffix("/v1")

    @property
    def chat_url(self) -> str:
        return self.url + "/chat/completions"

    def headers(self) -> dict[str, str]:
        """The bearer header where the station has a key, else HTTP Basic where the URL carried userinfo; {} for an
        open endpoint."""
        if self.api_key:
            return {"Authorization": f"Bearer {self.api_key}"}
        if self.basic:
            return {"Authorization": f"Basic {basic_token(self.basic)}"}
        return {}


def basic_token(userinfo: str) -> str:
    """HTTP Basic's token for `user:password` (RFC 7617: base64 of the UTF-8 bytes)."""
    return base64.b64encode(userinfo.encode("utf-8", errors="surrogateescape")).decode("ascii")


def without_userinfo(url: str) -> tuple[str, str | None]:
    """(the URL without `user:password@`, that userinfo percent-decoded, or None where it had none)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    return urlunsplit(parts._replace(netloc=host)), f"{unquote(user)}:{unquote(password)}"


def model_names(names: tuple[str, ...] | list[str], choice: bool = False) -> str:
    """Model names as a finding says them: "`a`", "`a`, `b`"; `choice`: "`a`", "one of `a`, `b`"; "no model".

    >>> model_names(["glm-5.3"], choice=True), model_names(["a", "b"], choice=True)
    ('`glm-5.3`', 'one of `a`, `b`')
    """
    said = ", ".join(f"`{n}`" for n in names)
    if not said:
        return "no model"
    return f"one of {said}" if choice and len(names) > 1 else said


@dataclass(frozen=True)
class VllmName:
    """vLLM's own name for the model clients ask for (`clients`), read against vLLM's own /v1/models (`served`, at
    `where`): the inventory's `vllm_model` (`declared`), else the clients' name where vLLM serves it, else the one
    model vLLM serves. `problem`: why no name fits (one sentence naming the names), and `name` is then None.

    >>> VllmName.among("glm-5.3", None, ["glm-5.3-fp8"], "http://gb300-a:8000/v1/models").name
    'glm-5.3-fp8'
    """

    clients: str
    name: str | None
    served: tuple[str, ...]
    where: str
    declared: str | None = None
    problem: str | None = None

    @property
    def renamed(self) -> bool:
        """vLLM serves the model under another name than the clients ask for (a gateway renames it)."""
        return self.name is not None and self.name != self.clients

    @classmethod
    def among(cls, clients: str, declared: str | None, served: list[str], where: str) -> VllmName:
        listed = tuple(served)
        names = model_names(listed)
        if declared is not None and listed:
            if declared in listed:
                return cls(clients, declared, listed, where, declared)
            return cls(clients, None, listed, where, declared, f"vLLM's own {where} lists {names}, not `{declared}`")
        if not listed:
            return cls(clients, None, listed, where, declared, f"vLLM's own {where} lists no model")
        if clients in listed:
            return cls(clients, clients, listed, where)
        if len(listed) == 1:
            return cls(clients, listed[0], listed, where)
        return cls(
            clients,
            None,
            listed,
            where,
            problem=f"vLLM's own {where} lists {names}: none is `{clients}`, the name clients ask for, and golive "
            f"cannot tell which of them the gateway routes it to",
        )
