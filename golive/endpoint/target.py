"""One station's endpoint as every golive client reaches it: URL, key, trusted CA and timeouts, built once.

The API key is read from the environment here and only here (the inventory names the variable, never the key); it is
kept out of repr() so no log, report or traceback can print it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from golive.profile.schema import Endpoint, Station


def api_key_of(station: Station) -> str | None:
    """The key in the environment variable the inventory names for this station (None: no variable, or empty)."""
    return (os.environ.get(station.api_key_env) or None) if station.api_key_env else None


@dataclass(frozen=True)
class EndpointTarget:
    """>>> EndpointTarget("http://gb300-a:8888/v1").chat_url
    'http://gb300-a:8888/v1/chat/completions'
    """

    url: str  # the OpenAI base URL, ending in /v1 (golive.core.urls.normalise_endpoint)
    api_key: str | None = field(default=None, repr=False)
    ca_file: str | None = None  # the site CA for https (golive.endpoint.tls); None: httpx's default trust
    request_timeout_s: float = 120  # one whole non-streamed generation
    connect_timeout_s: float = 5
    light_timeout_s: float = 10  # /health, /v1/models, /metrics
    stream_stall_timeout_s: float = 120  # the longest silence between two chunks of a stream

    @classmethod
    def of(cls, station: Station, limits: Endpoint, ca_file: str | None) -> EndpointTarget:
        """The station's endpoint with the profile's timeouts (`endpoint.*_timeout_s`)."""
        if not station.endpoint:
            raise ValueError(f"station {station.name} has no endpoint URL")
        return cls(
            url=station.endpoint.rstrip("/"),
            api_key=api_key_of(station),
            ca_file=ca_file,
            request_timeout_s=limits.request_timeout_s,
            connect_timeout_s=limits.connect_timeout_s,
            light_timeout_s=limits.light_timeout_s,
            stream_stall_timeout_s=limits.stream_stall_timeout_s,
        )

    @property
    def root(self) -> str:
        """The server's root (/health, /metrics, /tokenize live there, not under /v1)."""
        return self.url.removesuffix("/v1")

    @property
    def chat_url(self) -> str:
        return self.url + "/chat/completions"

    def headers(self) -> dict[str, str]:
        """The bearer header where the station has a key; {} for an open endpoint."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
