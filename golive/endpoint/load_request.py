"""One streamed chat request of the load generator: the workload, its salted prompt and body, the send, and the
request's timeline read from when its bytes arrived.

Metric definitions are docs/metrics.md; this module follows them exactly. Each request is salted (a unique prefix) so
the prefix cache cannot fake prefill, asks for exactly `output_tokens` (`max_tokens` + vLLM's `ignore_eos`), and asks
for the server's token counts (`stream_options.include_usage`).

SSE is parsed here, not by an SSE library: the timestamp of an event is when its last byte arrived, which a
line-iterator built on top of the transport cannot tell us. The transport is golive.endpoint.timed_http (why not httpx:
there).
"""

from __future__ import annotations

import itertools
import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from golive.endpoint.bounded import DEFAULT_CAPS, BoundError, Caps, Events, aread_body, deadline_async, loads
from golive.endpoint.errors import redirect_to
from golive.endpoint.longctx import filler
from golive.endpoint.timed_http import Lane, StreamedResponse, StreamError


class SseParser:
    """Feed raw bytes with their arrival time; get back (data, time) for each complete `data:` event, no line or
    event longer than `cap` (golive.endpoint.bounded.Events: a BoundError past it).

    >>> p = SseParser(); p.feed(b'data: {"a"', 1.0); p.feed(b': 1}\\n\\n', 2.0)
    [('{"a": 1}', 2.0)]
    """

    def __init__(self, cap: int = Caps.event_bytes) -> None:
        self._events = Events(cap)

    def feed(self, chunk: bytes, at: float) -> list[tuple[str, float]]:
        # bad bytes are replaced: the JSON then says what is wrong
        return [(data.decode(errors="replace"), at) for data in self._events.feed(chunk)]


@dataclass
class RequestTiming:
    """One request's timeline, in seconds since it was sent (docs/metrics.md)."""

    sent: float  # absolute clock time the request was sent
    token_times: list[float] = field(default_factory=list)  # arrival of each event that carried generated text
    first_content: float | None = None  # first event with content or a tool call (what the user sees)
    end: float | None = None  # arrival of the last byte (after [DONE])
    prompt_tokens: int | None = None
    completion_tokens: int | None = None  # the server's count (usage)
    error: str | None = None
    salt: str | None = None  # the prompt's unique prefix: finds the request in the server's log

    @property
    def ttft(self) -> float | None:
        return self.token_times[0] if self.token_times else None

    @property
    def client_tokens(self) -> int:
        """The client's own count: events that carried generated text (a cross-check on usage)."""
        return len(self.token_times)

    @property
    def itls(self) -> list[float]:
        return [b - a for a, b in itertools.pairwise(self.token_times)]

    @property
    def tpot(self) -> float | None:
        """(E2E − TTFT) ÷ (tokens − 1), as vLLM's client and AIPerf define it: the end of the stream, not the last
        token event, since a lagging server merges tokens into fewer events (the last can come with the first)."""
        if self.ttft is None or self.end is None or not self.completion_tokens or self.completion_tokens < 2:
            return None
        decode = self.end - self.ttft
        return decode / (self.completion_tokens - 1) if decode > 0 else None


def read_event(timing: RequestTiming, data: str, at: float, max_depth: int = Caps.json_depth) -> bool:
    """Apply one SSE event (at `at` seconds since send) to the timeline; True at [DONE]. An event that is not an
    OpenAI chunk (or nests deeper than `max_depth`) raises ValueError (the request's error)."""
    if data.strip() == "[DONE]":
        return True
    chunk = _object(loads(data, max_depth), "event")
    if chunk.get("error"):
        error = chunk["error"]
        timing.error = str(error.get("message", error) if isinstance(error, dict) else error)[:300]
    if chunk.get("usage"):
        usage = _object(chunk["usage"], "usage")
        timing.prompt_tokens = _count(usage.get("prompt_tokens"))
        timing.completion_tokens = _count(usage.get("completion_tokens"))
    choices = chunk.get("choices") or []
    if not isinstance(choices, list):
        raise ValueError(f"`choices` is not a list: {str(choices)[:80]!r}")
    for choice in choices:
        delta = _object(_object(choice, "choice").get("delta") or {}, "delta")
        # vLLM 0.32 says `reasoning`; older builds said `reasoning_content`: both are generated text (TTFT counts them)
        shown = delta.get("content") or delta.get("tool_calls")
        if shown or delta.get("reasoning") or delta.get("reasoning_content"):
            timing.token_times.append(at)
        if shown and timing.first_content is None:
            timing.first_content = at
    return False


def _object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"the stream's {what} is not a JSON object: {str(value)[:80]!r}")
    return value


def _count(value: object) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise ValueError(f"a token count that is not a number: {str(value)[:80]!r}")
    return value


SAMPLE_SENTENCES = 20


def prompt(sentences: int, salt: str) -> str:
    """A unique prefix first (no cached block can match it), then filler sentences."""
    return " ".join([f"[{salt}] Continue the notes.", *filler(sentences, seed=7)])


async def sentences_for(
    client: httpx.AsyncClient,
    root: str,
    workload: Workload,
    headers: dict,
    caps: Caps = DEFAULT_CAPS,
    timeout_s: float = 120,
) -> int:
    """How many filler sentences make the request `prompt_tokens` long as the server counts it (usage.prompt_tokens,
    chat template included): two /tokenize calls on the chat messages (vLLM's), the prefix alone and with
    SAMPLE_SENTENCES, each read within `caps` and `timeout_s`. Where the server has no /tokenize, ~10 tokens a
    sentence; usage reports the real count anyway."""

    async def count(sentences: int) -> int:
        async with deadline_async(timeout_s):
            request = client.build_request(
                "POST",
                root + "/tokenize",
                headers=headers,
                json={
                    "model": workload.model,
                    "add_generation_prompt": True,
                    "messages": [{"role": "user", "content": prompt(sentences, uuid.uuid4().hex[:12])}],
                },
            )
            response = await client.send(request, stream=True)
            try:
                body = await aread_body(response, caps.body_bytes)
            finally:
                await response.aclose()
        if response.status_code != 200:
            raise ValueError(f"HTTP {response.status_code}")
        return int(loads(body, caps.json_depth)["count"])

    try:
        overhead = await count(0)
        per_sentence = max((await count(SAMPLE_SENTENCES) - overhead) / SAMPLE_SENTENCES, 1)
    except (httpx.HTTPError, BoundError, ValueError, KeyError, TypeError):
        overhead, per_sentence = 0, 10
    return max(0, round((workload.prompt_tokens - overhead) / per_sentence))


@dataclass
class Workload:
    model: str
    prompt_tokens: int
    output_tokens: int
    reasoning_effort: str | None = None


@dataclass
class Attempt:
    """A request as sent and its response as it arrived, not parsed yet (read_timeline does that, later)."""

    salt: str
    sent: float
    response: StreamedResponse | None = None
    error: str | None = None  # the connection failed
    caps: Caps = DEFAULT_CAPS  # the lane's: what its answer is read within (read_timeline)


def request_body(workload: Workload, sentences: int) -> tuple[str, bytes]:
    """(salt, JSON body) of one load request."""
    salt = uuid.uuid4().hex[:12]
    body = {
        "model": workload.model,
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": prompt(sentences, salt)}],
        "max_tokens": workload.output_tokens,
        "ignore_eos": True,
        "temperature": 0,
    }
    if workload.reasoning_effort:
        body["reasoning_effort"] = workload.reasoning_effort
    return salt, json.dumps(body).encode()


async def send(lane: Lane, prepared: tuple[str, bytes], headers: dict) -> Attempt:
    """Send one streamed chat request (`request_body`'s salt and body) and wait for its whole response, parsing
    nothing: parsing it here would delay the timestamps of every other stream whose bytes arrive meanwhile."""
    salt, body = prepared
    attempt = Attempt(salt=salt, sent=lane.clock(), caps=lane.caps)
    try:
        attempt.response = await lane.post(body, headers, max_tokens_of(body))
        attempt.sent = attempt.response.sent
    except StreamError as exc:
        attempt.error = f"StreamError: {exc}"[:300]
    return attempt


_MAX_TOKENS = re.compile(rb'"max_tokens": ?(\d+)')


def max_tokens_of(body: bytes) -> int | None:
    """The `max_tokens` a request body (JSON) asks for, found without parsing it (a long prompt is megabytes): its
    last top-level occurrence; a prompt's own text holds the word only JSON-escaped (`\\"max_tokens\\"`)."""
    at = body.rfind(b'"max_tokens":')
    while at > 0 and body[at - 1 : at] == b"\\":
        at = body.rfind(b'"max_tokens":', 0, at)
    found = _MAX_TOKENS.match(body, at) if at >= 0 else None
    return int(found[1]) if found else None


def read_timeline(attempt: Attempt, workload: Workload) -> RequestTiming:
    """The request's timeline (docs/metrics.md) from its response's pieces and their arrival times."""
    timing = RequestTiming(sent=attempt.sent, salt=attempt.salt, error=attempt.error)
    response = attempt.response
    if response is None:
        return timing
    if 300 <= response.status < 400:
        timing.error = f"HTTP {response.status}: {redirect_to(response.location)}"
        return timing
    if response.status != 200:
        timing.error = f"HTTP {response.status}: {response.text()}"
        return timing
    done = False
    parser = SseParser(attempt.caps.event_bytes)
    try:
        for arrived, piece in response.pieces:
            for data, at in parser.feed(piece, arrived):
                done = read_event(timing, data, at - timing.sent, attempt.caps.json_depth) or done
    except BoundError as exc:  # a line past its cap
        timing.error = exc.what[:300]
        return timing
    except ValueError as exc:  # an event that is not JSON or not an OpenAI chunk
        timing.error = f"{type(exc).__name__}: {exc}"[:300]
        return timing
    timing.end = None if response.end is None else response.end - timing.sent
    if timing.error is None and not done:
        timing.error = "the stream ended without [DONE]"
    elif timing.error is None and timing.completion_tokens != workload.output_tokens:
        timing.error = f"usage says {timing.completion_tokens} completion tokens, asked for {workload.output_tokens}"
    return timing


async def one_request(lane: Lane, workload: Workload, headers: dict, sentences: int = 4) -> RequestTiming:
    return read_timeline(await send(lane, request_body(workload, sentences), headers), workload)
