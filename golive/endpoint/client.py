"""The served API as the checks see it: OpenAI chat (streaming or not, normalised), /health, /metrics, /tokenize."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
from prometheus_client.parser import text_string_to_metric_families

from golive.core.verdict import printable
from golive.endpoint.errors import EndpointError, from_response, from_transport
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
    """One station's endpoint (its EndpointTarget). The key travels only in the Authorization header."""

    def __init__(self, target: EndpointTarget):
        self.target = target
        self.base_url = target.url
        self.root = target.root
        self.timeout = target.request_timeout_s
        # generation may take `request_timeout_s`; a streamed answer may pause `stream_stall_timeout_s` between
        # chunks; nothing else waits longer than `light_timeout_s`, and no connect longer than `connect_timeout_s`
        # openai.Timeout is the HTTP library's Timeout that this openai release types and sends with (httpx2 today)
        self._generation = httpx.Timeout(target.request_timeout_s, connect=target.connect_timeout_s)
        self._openai_generation = openai.Timeout(target.request_timeout_s, connect=target.connect_timeout_s)
        self._stream = openai.Timeout(
            target.request_timeout_s, connect=target.connect_timeout_s, read=target.stream_stall_timeout_s
        )
        self.ca_file = target.ca_file
        tls = trusting(target.ca_file)  # one trust for every client: left alone, the openai client would trust the OS
        # the openai client insists on a key; "EMPTY" is what vLLM's docs use for an open server
        self.openai = openai.OpenAI(
            base_url=self.base_url,
            api_key=target.api_key or "EMPTY",
            timeout=self._openai_generation,
            max_retries=0,
            http_client=openai.DefaultHttpxClient(verify=tls),
        )
        self.http = httpx.Client(
            timeout=httpx.Timeout(target.light_timeout_s, connect=target.connect_timeout_s), verify=tls
        )
        self.health: Health | None = None  # what probe_health found (the gateway in front, the probe that answers)

    @property
    def has_key(self) -> bool:
        return bool(self.target.api_key)

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

    def get(self, path: str, with_key: bool = True) -> httpx.Response:
        """Any answer comes back (checks judge the status); no answer at all raises EndpointError."""
        headers = self.target.headers() if with_key else {}
        url = self.url_of(path)
        try:
            return self.http.get(url, headers=headers)
        except httpx.HTTPError as exc:
            raise from_transport(url, exc, self.ca_file) from None

    def post(
        self, path: str, body: dict, with_key: bool = True, timeout: httpx.Timeout | None = None
    ) -> httpx.Response:
        headers = self.target.headers() if with_key else {}
        url = self.url_of(path)
        try:
            return self.http.post(
                url, json=body, headers=headers, timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout
            )
        except httpx.HTTPError as exc:
            raise from_transport(url, exc, self.ca_file) from None

    def probe_health(self) -> Health:
        """The station's health, probed as what answers at the endpoint expects, without the key: vLLM's GET /health
        (at `vllm_endpoint` where the inventory names the vLLM behind a gateway); else, where /health is not 200,
        a gateway's own probe (`gateway_health`, GATEWAY_PROBES). Remembered: later GET /health asks the same probe.
        No answer at all from the first probe raises EndpointError (the health check reads `unreachable`, `cut`)."""
        target = self.target
        url = self.root + "/health"  # vLLM's own: the endpoint's, or the `vllm_endpoint`'s behind a gateway
        try:
            first = self.http.get(url)
        except httpx.HTTPError as exc:
            raise from_transport(url, exc, self.ca_file) from None
        named = f"the gateway `{target.gateway}`" if target.gateway else "a gateway"
        if target.vllm_url or first.status_code == 200:
            gateway = named if target.declares_gateway else None
            seen = gateway is None or bool(target.vllm_url)  # a gateway's /health 200 is its own, not vLLM's
            self.health = Health(url, first.status_code, first, gateway, vllm_seen=seen)
            return self.health
        tried = [f"GET /health HTTP {first.status_code}"]
        for path in dict.fromkeys([*([target.gateway_health] if target.gateway_health else []), *GATEWAY_PROBES]):
            try:
                answer = self.http.get(target.api_root + path)
            except httpx.HTTPError as exc:
                tried.append(f"GET {path} {from_transport(target.api_root + path, exc, self.ca_file).what}")
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
            body = response.json()
        except (ValueError, httpx.HTTPError):
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
                self.root + "/v1/models",
                "the answer has no `data` list of models",
                "check that the endpoint URL points at a vLLM (OpenAI-compatible) server",
            )
        return data

    def chat(
        self, model: str, messages: list[dict], *, stream: bool = False, tools: list[dict] | None = None, **params: Any
    ) -> ChatResult:
        kwargs = dict(model=model, messages=messages, **params)
        if tools:
            kwargs["tools"] = tools
        if not stream:
            try:
                response = self.openai.chat.completions.create(**kwargs)
            except openai.APIConnectionError as exc:  # status errors stay: checks read their meaning (400, 413 …)
                raise from_transport(self.base_url + "/chat/completions", exc, self.ca_file) from None
            if not response.choices:
                raise EndpointError(
                    self.base_url + "/chat/completions",
                    "the answer has no choices",
                    "check that the endpoint URL points at a vLLM (OpenAI-compatible) server",
                )
            choice = response.choices[0]
            message = choice.message
            calls = [(c.function.name, c.function.arguments) for c in (message.tool_calls or [])]
            return ChatResult(
                content=message.content or "",
                reasoning=_reasoning(message) or "",
                tool_calls=calls,
                finish_reason=choice.finish_reason,
                usage=response.usage.model_dump() if response.usage else {},
            )
        return self._chat_stream(kwargs)

    def _chat_stream(self, kwargs: dict) -> ChatResult:
        """The streamed answer, read as raw events (golive.endpoint.stream checks each value it reads): anything a
        server sends ends as a ChatResult or one EndpointError."""
        import time

        started = time.perf_counter()
        answer = StreamedAnswer()
        url = self.base_url + "/chat/completions"
        try:
            stream = self.openai.post(
                "/chat/completions",
                cast_to=object,
                stream=True,
                stream_cls=openai.Stream[object],
                body={**kwargs, "stream": True, "stream_options": {"include_usage": True}},
                options={"timeout": self._stream},
            )
            for event in _events(stream):
                answer.add(event, time.perf_counter() - started)
        except (openai.APIConnectionError, httpx.HTTPError) as exc:
            raise from_transport(url, exc, self.ca_file) from None
        except openai.APIStatusError:
            raise  # checks read its meaning (400, 413 …)
        except openai.APIError as exc:
            raise EndpointError(
                url,
                f"the stream carried an error or a broken event ({_one_line(str(exc))})",
                "check the server log; a proxy may be cutting or rewriting event streams",
            ) from None
        except BrokenEvent as exc:
            raise EndpointError(
                url,
                f"the stream carried an event that is not an OpenAI chat chunk ({exc})",
                "check the server log; a proxy may be cutting or rewriting event streams",
            ) from None
        if answer.finish_reason is None:
            raise EndpointError(
                url,
                f"the stream ended before the answer did (no finish_reason after {answer.events} event(s))",
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
        url = self.target.vllm_url + "/models"
        try:
            response = self.http.get(url, headers=self.target.headers())
        except httpx.HTTPError as exc:
            raise from_transport(url, exc, self.ca_file) from None
        data = self._json(response, "GET /v1/models of the vLLM behind the gateway did not list models").get("data")
        return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []

    def vllm_version(self) -> str | None:
        """vLLM's /version, where golive sees vLLM's own server; None where it cannot (a gateway) or it does not say."""
        if not self.sees_vllm:
            return None
        try:
            version = self.get("/version").json().get("version")
        except (EndpointError, httpx.HTTPError, ValueError, AttributeError):
            return None
        return version if isinstance(version, str) else None

    def tokenize(self, model: str, text: str) -> int:
        # a 1M-token prompt takes a while to tokenize: this call gets the generation timeout, not the light one
        response = self.post(
            "/tokenize", {"model": model, "prompt": text, "add_special_tokens": False}, timeout=self._generation
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
        return parse_metrics(response.text)

    def close(self) -> None:
        self.http.close()
        self.openai.close()


def _events(stream: openai.Stream[object]) -> Iterator[object]:
    """The stream's events as decoded JSON; an event that is not valid JSON (cut in half) or not UTF-8 is an error,
    not a crash."""
    request = stream.response.request
    try:
        yield from stream
    except json.JSONDecodeError as exc:
        raise openai.APIError(f"an event is not valid JSON ({exc.msg})", request=request, body=None) from None
    except UnicodeDecodeError:
        raise openai.APIError("an event is not UTF-8 text", request=request, body=None) from None
    finally:
        stream.close()


def _one_line(text: str, limit: int = 160) -> str:
    """Server-chosen text (an error event's message) inside a one-line error: short, no line breaks, no escapes."""
    return printable(" ".join(text[:limit].split()))


def _reasoning(message: Any) -> str | None:
    # vLLM 0.32 says `reasoning`; older builds said `reasoning_content`: read both
    for name in ("reasoning", "reasoning_content"):
        value: str | None = getattr(message, name, None)
        if value is None and getattr(message, "model_extra", None):
            value = message.model_extra.get(name)
        if value:
            return value
    return None


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


def error_body(exc: openai.APIStatusError) -> str:
    try:
        body = exc.response.json()
    except (json.JSONDecodeError, ValueError):
        return exc.response.text[:300]
    err = body.get("error", body)
    return err.get("message", str(err))[:300] if isinstance(err, dict) else str(err)[:300]
