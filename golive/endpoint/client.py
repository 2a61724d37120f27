"""The served API as the checks see it: OpenAI chat (streaming or not, normalised), /health, /metrics, /tokenize."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import httpx
import openai
from prometheus_client.parser import text_string_to_metric_families


@dataclass
class ChatResult:
    content: str
    reasoning: str
    tool_calls: list[tuple[str, str]]  # (name, arguments JSON) as the server returned them
    finish_reason: str | None
    usage: dict = field(default_factory=dict)
    first_token_s: float | None = None


class EndpointClient:
    """One station's endpoint. The API key lives here only; it is never part of a message or a report."""

    def __init__(self, base_url: str, api_key: str | None, timeout: float = 120):
        self.base_url = base_url.rstrip("/")
        self.root = self.base_url.removesuffix("/v1")
        self._api_key = api_key
        self.timeout = timeout
        # the openai client insists on a key; "EMPTY" is what vLLM's docs use for an open server
        self.openai = openai.OpenAI(base_url=self.base_url, api_key=api_key or "EMPTY", timeout=timeout, max_retries=0)
        self.http = httpx.Client(timeout=timeout)

    @property
    def has_key(self) -> bool:
        return bool(self._api_key)

    def get(self, path: str, with_key: bool = True) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self._api_key}"} if with_key and self._api_key else {}
        return self.http.get(self.root + path, headers=headers)

    def post(self, path: str, body: dict, with_key: bool = True) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self._api_key}"} if with_key and self._api_key else {}
        return self.http.post(self.root + path, json=body, headers=headers)

    # --- API ---------------------------------------------------------------------------------------------------------

    def models(self) -> list[dict]:
        response = self.get("/v1/models")
        response.raise_for_status()
        return response.json().get("data", [])

    def chat(self, model: str, messages: list[dict], *, stream: bool = False, tools: list[dict] | None = None,
             **params) -> ChatResult:
        kwargs = dict(model=model, messages=messages, **params)
        if tools:
            kwargs["tools"] = tools
        if not stream:
            response = self.openai.chat.completions.create(**kwargs)
            choice = response.choices[0]
            message = choice.message
            calls = [(c.function.name, c.function.arguments) for c in (message.tool_calls or [])]
            return ChatResult(content=message.content or "", reasoning=_reasoning(message) or "", tool_calls=calls,
                              finish_reason=choice.finish_reason,
                              usage=response.usage.model_dump() if response.usage else {})
        return self._chat_stream(kwargs)

    def _chat_stream(self, kwargs: dict) -> ChatResult:
        import time

        started = time.perf_counter()
        first = None
        content, reasoning, finish = [], [], None
        calls: dict[int, list[str]] = {}
        usage: dict = {}
        stream = self.openai.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs)
        for chunk in stream:
            if chunk.usage:
                usage = chunk.usage.model_dump()
            for choice in chunk.choices:
                delta = choice.delta
                piece = (delta.content or "") + (_reasoning(delta) or "")
                if first is None and (piece or delta.tool_calls):
                    first = time.perf_counter() - started  # reasoning counts: thinking models stream it first
                content.append(delta.content or "")
                reasoning.append(_reasoning(delta) or "")
                for call in delta.tool_calls or []:
                    entry = calls.setdefault(call.index, ["", ""])
                    if call.function and call.function.name:
                        entry[0] += call.function.name
                    if call.function and call.function.arguments:
                        entry[1] += call.function.arguments
                finish = choice.finish_reason or finish
        return ChatResult(content="".join(content), reasoning="".join(reasoning),
                          tool_calls=[tuple(calls[i]) for i in sorted(calls)], finish_reason=finish, usage=usage,
                          first_token_s=first)

    def tokenize(self, model: str, text: str) -> int:
        response = self.post("/tokenize", {"model": model, "prompt": text, "add_special_tokens": False})
        response.raise_for_status()
        return int(response.json()["count"])

    def metrics(self) -> dict[str, list[tuple[dict, float]]]:
        """/metrics as {sample name: [(labels, value), …]}."""
        response = self.get("/metrics")
        response.raise_for_status()
        samples: dict[str, list[tuple[dict, float]]] = {}
        for family in text_string_to_metric_families(response.text):
            for sample in family.samples:
                samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
        return samples

    def close(self) -> None:
        self.http.close()
        self.openai.close()


def _reasoning(message) -> str | None:
    # vLLM 0.32 says `reasoning`; older builds said `reasoning_content`: read both
    for name in ("reasoning", "reasoning_content"):
        value = getattr(message, name, None)
        if value is None and getattr(message, "model_extra", None):
            value = message.model_extra.get(name)
        if value:
            return value
    return None


def metric_total(samples: dict, name: str, **labels) -> float:
    """Sum a counter/gauge across label sets that match `labels`."""
    return sum(v for lbl, v in samples.get(name, []) if all(lbl.get(k) == val for k, val in labels.items()))


def error_body(exc: openai.APIStatusError) -> str:
    try:
        body = exc.response.json()
    except (json.JSONDecodeError, ValueError):
        return exc.response.text[:300]
    err = body.get("error", body)
    return err.get("message", str(err))[:300] if isinstance(err, dict) else str(err)[:300]
