"""The served API as the checks see it: OpenAI chat (streaming or not, normalised), /health, /metrics, /tokenize."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from prometheus_client.parser import text_string_to_metric_families

from golive.core.verdict import counted, printable
from golive.endpoint.bounded import (
    BoundError,
    Events,
    TooDeep,
    answered,
    chunks,
    deadline,
    guarded_client,
    loads,
    read_body,
)
from golive.endpoint.errors import EndpointError, StatusError, from_bound, from_response, from_transport
from golive.endpoint.stream import BrokenEvent, StreamedAnswer
from golive.endpoint.target import EndpointTarget
from golive.endpoint.tls import trusting

# A gateway's own unauthenticated probes, golive tries where GET /health is not 200 (LiteLLM's: its /health wants the
# key and calls every model). One that answers 200 while /health does not is a gateway in front of vLLM; vLLM serves
# neither path. A gateway golive does not know names its own in the inventory (`gateway_health:`).
GATEWAY_PROBES = ("/health/readiness", "/health/liveliness")


@dataclass(frozen=True)
class Health:
    """What the station's health probe answered (EndpointClient.probe_health), and what it says of the way in.

    >>> EndpointClient(EndpointTarget("http://gw:4000/v1")).probe_health()   # LiteLLM: /health wants a key
    Health(url='http://gw:4000/health/readiness', status=200, gateway='a gateway …', vllm_seen=False, …)
    """

    url: str  # the probe that decided: vLLM's /health, or a gateway's own
    status: int | None  # its HTTP status; None: a declared gateway that answers no probe golive knows
    response: httpx.Response | None = field(default=None, repr=False)  # that answer, for the health check's finding
    gateway: str | None = None  # the gateway in front of vLLM as report lines name it; None: vLLM answers itself
    vllm_seen: bool = True  # vLLM's own /health decided (a plain endpoint, or `vllm_endpoint` behind a gateway)
    tried: tuple[str, ...] = ()  # what each probe answered, in order ("GET /health HTTP 401", …)

    @property
    def ok(self) -> bool:
        """200 from the probe; or a declared gateway with no probe (the canary through it shows the engine answers)."""
        return self.status in (200, None)

    @property
    def vllm_unseen(self) -> str:
        """The one line every check of vLLM's own server gives behind a gateway without `vllm_endpoint`."""
        return (
            f"not checked because the endpoint is {self.gateway}, which does not serve vLLM's own /health, /metrics, "
            f"/tokenize and served flags (max_model_len, /version): give the vLLM server behind it as "
            f"`vllm_endpoint:` in the inventory to check them (README: Gateways)"
        )


@dataclass
class ChatResult:
    content: str
    reasoning: str
    tool_calls: list[tuple[str, str]]  # (name, arguments JSON) as the server returned them
    finish_reason: str | None
    usage: dict = field(default_factory=dict)
    first_token_s: float | None = None


class EndpointClient:
    """One station's endpoint (its EndpointTarget). The key travels only in the Authorization header.

    Every request goes through one door (`_exchange`, `_chat_stream`): golive's guarded httpx client
    (golive.endpoint.bounded), a total deadline per request (a generation `request_timeout_s`, anything else
    `light_timeout_s`), the body read at most to the profile's caps after decompression, JSON no deeper than its cap,
    a stream ended at its token budget plus slack, no redirect followed. Whatever a server sends ends as an answer or
    as one EndpointError (a StatusError for a status that is not 2xx)."""

    def __init__(self, target: EndpointTarget):
        self.target = target
        self.base_url = target.url
        self.root = target.root
        self.timeout = target.request_timeout_s
        self.caps = target.caps
        # generation may take `request_timeout_s`; a streamed answer may pause `stream_stall_timeout_s` between
        # chunks; nothing else waits longer than `light_timeout_s`, and no connect longer than `connect_timeout_s`
        self._light = httpx.Timeout(target.light_timeout_s, connect=target.connect_timeout_s)
        self._generation = httpx.Timeout(target.request_timeout_s, connect=target.connect_timeout_s)
        self._stream = httpx.Timeout(
            target.request_timeout_s, connect=target.connect_timeout_s, read=target.stream_stall_timeout_s
        )
        self.ca_file = target.ca_file
        self.http = guarded_client(trusting(target.ca_file), self._light)
        self.health: Health | None = None  # what probe_health found (the gateway in front, the probe that answers)

    @property
    def has_key(self) -> bool:
        return bool(self.target.api_key or self.target.basic)

    @property
    def sees_vllm(self) -> bool:
        """golive reaches vLLM's own server (/metrics, /tokenize, /version, its own /v1/models): a plain endpoint,
        or a gateway's `vllm_endpoint`; not a gateway on its own, named in the inventory or found by probe_health."""
        if self.target.vllm_url:
            return True
        if self.target.declares_gateway:
            return False
        return self.health is None or self.health.gateway is None

    def url_of(self, path: str) -> str:
        """`/v1/…` is the OpenAI API as clients reach it (through the gateway, if any); `/health` the probe the station
        answers (probe_health: vLLM's, or its gateway's own); any other path vLLM's own server (EndpointTarget.root)."""
        if path == "/health" and self.health is not None:
            return self.health.url
        return (self.target.api_root if path.startswith("/v1/") else self.root) + path

    def _exchange(
        self, method: str, url: str, body: dict | None = None, with_key: bool = True, generation: bool = False
    ) -> httpx.Response:
        """One request and its whole answer, read within its deadline and caps (golive.endpoint.bounded): any status
        comes back (checks judge it) but a redirect (golive follows none: a StatusError naming it); no answer, or one
        past a bound, raises EndpointError."""
        headers = self.target.headers() if with_key else {}
        seconds = self.target.request_timeout_s if generation else self.target.light_timeout_s
        try:
            with deadline(seconds):
                request = self.http.build_request(
                    method, url, json=body, headers=headers, timeout=self._generation if generation else self._light
                )
                response = self.http.send(request, stream=True)
                if response.is_redirect:
                    response.close()
                    raise from_response(answered(response, b""), f"{method} {urlsplit(url).path} answered")
                content, _ = read_body(response, self.caps.body_bytes)
        except httpx.HTTPError as exc:
            raise from_transport(url, exc, self.ca_file) from None
        except BoundError as exc:
            raise from_bound(url, exc) from None
        return answered(response, content)

    def get(self, path: str, with_key: bool = True) -> httpx.Response:
        """Any answer comes back (checks judge the status); no answer at all raises EndpointError."""
        return self._exchange("GET", self.url_of(path), with_key=with_key)

    def post(self, path: str, body: dict, with_key: bool = True, generation: bool = False) -> httpx.Response:
        """`generation`: the request may take `request_timeout_s` (a long prompt to count), not `light_timeout_s`."""
        return self._exchange("POST", self.url_of(path), body, with_key, generation)

    def probe_health(self) -> Health:
        """The station's health, probed as what answers at the endpoint expects, without the key: vLLM's GET /health
        (at `vllm_endpoint` where the inventory names the vLLM behind a gateway); else, where /health is not 200,
        a gateway's own probe (`gateway_health`, GATEWAY_PROBES). Remembered: later GET /health asks the same probe.
        No answer at all from the first probe raises EndpointError (the health check reads `unreachable`, `cut`)."""
        target = self.target
        url = self.root + "/health"  # vLLM's own: the endpoint's, or the `vllm_endpoint`'s behind a gateway
        first = self._exchange("GET", url, with_key=False)
        named = f"the gateway `{target.gateway}`" if target.gateway else "a gateway"
        if target.vllm_url or first.status_code == 200:
            gateway = named if target.declares_gateway else None
            seen = gateway is None or bool(target.vllm_url)  # a gateway's /health 200 is its own, not vLLM's
            self.health = Health(url, first.status_code, first, gateway, vllm_seen=seen)
            return self.health
        tried = [f"GET /health HTTP {first.status_code}"]
        for path in dict.fromkeys([*([target.gateway_health] if target.gateway_health else []), *GATEWAY_PROBES]):
            try:
                answer = self._exchange("GET", target.api_root + path, with_key=False)
            except EndpointError as exc:
                tried.append(f"GET {path} {exc.what}")
                continue
            tried.append(f"GET {path} HTTP {answer.status_code}")
            if answer.status_code == 200:
                if not target.declares_gateway:
                    named = f"a gateway (GET /health answered HTTP {first.status_code}; its own {path} answers 200)"
                self.health = Health(target.api_root + path, 200, answer, named, vllm_seen=False, tried=tuple(tried))
                return self.health
        if target.declares_gateway:  # a gateway that serves no probe golive knows: the canary shows the way works
            self.health = Health(url, None, first, named, vllm_seen=False, tried=tuple(tried))
        else:
            self.health = Health(url, first.status_code, first, tried=tuple(tried))
        return self.health

    def _json(self, response: httpx.Response, what: str) -> dict:
        if response.status_code != 200:
            raise from_response(response, what)
        try:
            body = loads(response.content, self.caps.json_depth)
        except TooDeep as exc:
            raise from_response(response, f"{what}: {exc}") from None
        except ValueError:
            raise from_response(response, f"{what}: the answer is not JSON (truncated or not the OpenAI API)") from None
        if not isinstance(body, dict):
            raise from_response(response, f"{what}: the answer is JSON but not an object")
        return body

    # --- API ---------------------------------------------------------------------------------------------------------

    def models(self) -> list[dict]:
        body = self._json(self.get("/v1/models"), "GET /v1/models did not list models")
        data = body.get("data")
        if not isinstance(data, list) or not all(isinstance(m, dict) for m in data):
            raise EndpointError(
                self.target.api_root + "/v1/models",
                "the answer has no `data` list of models",
                "check that the endpoint URL points at a vLLM (OpenAI-compatible) server",
            )
        return data

    def chat(
        self, model: str, messages: list[dict], *, stream: bool = False, tools: list[dict] | None = None, **params: Any
    ) -> ChatResult:
        """One chat completion, streamed or not, as a ChatResult; a status that is not 2xx raises StatusError (checks
        read its meaning: 400, 413 …), anything else a server may send one EndpointError. `extra_body` is merged into
        the request as the openai client does (vLLM's own parameters: top_k …)."""
        body: dict[str, Any] = {"model": model, "messages": messages, **params}
        body.update(body.pop("extra_body", None) or {})
        if tools:
            body["tools"] = tools
        url = self.base_url + "/chat/completions"
        if stream:
            return self._chat_stream(url, body)
        answer = self._json(self._exchange("POST", url, body, generation=True), "POST /v1/chat/completions")
        if not isinstance(answer.get("choices"), list) or not answer["choices"]:
            raise EndpointError(
                url,
                "the answer has no choices",
                "check that the endpoint URL points at a vLLM (OpenAI-compatible) server",
            )
        folded = StreamedAnswer(whole=True)
        try:
            folded.add(answer, 0.0)
        except BrokenEvent as exc:
            raise EndpointError(
                url,
                f"the answer is not an OpenAI chat completion ({exc})",
                "check that the endpoint URL points at a vLLM (OpenAI-compatible) server",
            ) from None
        return ChatResult(
            content="".join(folded.content),
            reasoning="".join(folded.reasoning),
            tool_calls=folded.tool_calls(),
            finish_reason=folded.finish_reason,
            usage=folded.usage,
        )

    def _chat_stream(self, url: str, body: dict) -> ChatResult:
        """The streamed answer, read as raw events (golive.endpoint.stream checks each value it reads), each line and
        the whole stream within their caps, ended at its token budget (max_tokens + endpoint.stream_token_slack) or
        its deadline (request_timeout_s), whichever comes first: anything a server sends ends as a ChatResult or one
        EndpointError."""
        started = time.perf_counter()
        answer = StreamedAnswer()
        budget = _token_budget(body)
        caps = self.caps
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        try:
            with deadline(self.target.request_timeout_s):
                request = self.http.build_request(
                    "POST", url, json=body, headers=self.target.headers(), timeout=self._stream
                )
                response = self.http.send(request, stream=True)
                try:
                    if not response.is_success:
                        content, _ = (b"", False) if response.is_redirect else read_body(response, caps.body_bytes)
                        raise from_response(answered(response, content), "POST /v1/chat/completions")
                    events = Events(caps.event_bytes)
                    for chunk in chunks(response, caps.body_bytes):
                        for data in events.feed(chunk):
                            if data.strip() == b"[DONE]":
                                break
                            answer.add(_event(data, caps.json_depth), time.perf_counter() - started)
                            if budget is not None and answer.token_events > budget + caps.stream_slack:
                                raise BoundError(
                                    f"the stream sent {answer.token_events} events carrying tokens, past its "
                                    f"max_tokens of {budget} and golive's slack of {caps.stream_slack} "
                                    f"(endpoint.stream_token_slack), without finishing",
                                    "the server does not honour max_tokens or never ends its stream: check the "
                                    "server (vLLM honours max_tokens) or the proxy in front",
                                )
                        else:
                            continue
                        break
                finally:
                    response.close()
        except httpx.HTTPError as exc:
            raise from_transport(url, exc, self.ca_file) from None
        except BoundError as exc:
            raise from_bound(url, exc) from None
        except BrokenEvent as exc:
            raise EndpointError(
                url,
                f"the stream carried an error or an event that is not an OpenAI chat chunk ({exc})",
                "check the server log; a proxy may be cutting or rewriting event streams",
            ) from None
        if answer.finish_reason is None:
            raise EndpointError(
                url,
                f"the stream ended before the answer did (no finish_reason after {counted(answer.events, 'event')})",
                "check the server log for a crash; a proxy may be cutting long event streams",
            )
        return ChatResult(
            content="".join(answer.content),
            reasoning="".join(answer.reasoning),
            tool_calls=answer.tool_calls(),
            finish_reason=answer.finish_reason,
            usage=answer.usage,
            first_token_s=answer.first_token_s,
        )

    def vllm_models(self) -> list[dict]:
        """vLLM's own /v1/models, with the flags it serves (max_model_len): the endpoint's, or behind a gateway the
        `vllm_endpoint`'s (a gateway lists the names it routes, not vLLM's flags)."""
        if not self.target.vllm_url:
            return self.models()
        response = self._exchange("GET", self.target.vllm_url + "/models")
        data = self._json(response, "GET /v1/models of the vLLM behind the gateway did not list models").get("data")
        return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []

    def vllm_version(self) -> str | None:
        """vLLM's /version, where golive sees vLLM's own server; None where it cannot (a gateway) or it does not say."""
        if not self.sees_vllm:
            return None
        try:
            version = self._json(self.get("/version"), "GET /version").get("version")
        except EndpointError:
            return None
        return version if isinstance(version, str) else None

    def tokenize(self, model: str, text: str) -> int:
        # a 1M-token prompt takes a while to tokenize: this call gets the generation timeout, not the light one
        response = self.post(
            "/tokenize", {"model": model, "prompt": text, "add_special_tokens": False}, generation=True
        )
        count = self._json(response, "POST /tokenize did not count tokens").get("count")
        if not isinstance(count, int):
            raise from_response(response, "POST /tokenize answered without a token `count`")
        return count

    def metrics(self) -> dict[str, list[tuple[dict, float]]]:
        """/metrics as {sample name: [(labels, value), …]}."""
        response = self.get("/metrics")
        if response.status_code != 200:
            raise from_response(response, "GET /metrics did not answer")
        try:
            return parse_metrics(response.text)
        except ValueError:
            raise from_response(response, "GET /metrics is not Prometheus text") from None

    def close(self) -> None:
        self.http.close()


def _token_budget(body: dict) -> int | None:
    """The tokens a request asks for at most (`max_tokens`, or `max_completion_tokens`); None where it names none."""
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.get(key)
        if type(value) is int and value >= 0:
            return value
    return None


def _event(data: bytes, max_depth: int) -> object:
    """One SSE event's JSON; one that is not JSON, not UTF-8, too deep, or an error the server streams is
    BrokenEvent."""
    try:
        event = loads(data, max_depth)
    except TooDeep as exc:
        raise BrokenEvent(str(exc)) from None
    except UnicodeDecodeError:
        raise BrokenEvent("an event is not UTF-8 text") from None
    except ValueError as exc:
        raise BrokenEvent(f"an event is not valid JSON ({getattr(exc, 'msg', exc)})") from None
    if isinstance(event, dict) and event.get("error"):  # vLLM streams an error mid-answer as an event
        error = event["error"]
        said = error.get("message", error) if isinstance(error, dict) else error
        raise BrokenEvent(f"the server sent an error: {_one_line(str(said))}")
    return event


def _one_line(text: str, limit: int = 160) -> str:
    """Server-chosen text (an error event's message) inside a one-line error: short, no line breaks, no escapes."""
    return printable(" ".join(text[:limit].split()))


def parse_metrics(text: str) -> dict[str, list[tuple[dict, float]]]:
    """Prometheus text (/metrics) as {sample name: [(labels, value), …]}, read by prometheus_client's parser."""
    samples: dict[str, list[tuple[dict, float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


def metric_total(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    """Sum a counter/gauge across label sets that match `labels`."""
    return sum(v for lbl, v in samples.get(name, []) if all(lbl.get(k) == val for k, val in labels.items()))


def error_body(exc: StatusError) -> str:
    """What the error answer says, in one line (its message, else its first bytes)."""
    return exc.message
