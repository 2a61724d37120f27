"""A streamed chat answer assembled from the server's raw events. Every value golive reads is checked for its type
first: a server (or a proxy) can send anything, and the answer must then be one clear error, never a crash."""

from __future__ import annotations

from dataclasses import dataclass, field

import pydantic
from openai.types import CompletionUsage


class BrokenEvent(ValueError):
    """An event that is not an OpenAI chat chunk; str() says which part, in a few words."""


@dataclass
class StreamedAnswer:
    """A chat answer folded from its events (a complete answer is one event: `whole`)."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, list[str]] = field(default_factory=dict)  # index -> [name, arguments JSON]
    finish_reason: str | None = None
    usage: dict = field(default_factory=dict)
    events: int = 0
    first_token_s: float | None = None
    token_events: int = 0  # events that carried generated text or a tool call (a stream's token budget counts them)
    whole: bool = False  # a complete (not streamed) answer: its one message is read as one event's delta

    @property
    def where(self) -> str:
        return "the answer" if self.whole else f"event {self.events}"

    def add(self, event: object, since_start_s: float) -> None:
        """Fold one event (its JSON, decoded) into the answer; BrokenEvent if it is not a chat chunk."""
        self.events += 1
        if not isinstance(event, dict):
            raise BrokenEvent(f"{self.where} is JSON but not an object")
        if event.get("usage") is not None:
            try:
                self.usage = CompletionUsage.model_validate(event["usage"]).model_dump()
            except pydantic.ValidationError:
                raise BrokenEvent(f"{self.where}: `usage` is not token counts") from None
        choices = event.get("choices") or []
        if not isinstance(choices, list):
            raise BrokenEvent(f"{self.where}: `choices` is not a list")
        part = "message" if self.whole else "delta"
        for choice in choices:
            delta = choice.get(part) or {} if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                raise BrokenEvent(f"{self.where}: a choice has no `{part}` object")
            content = self._text(delta, "content")
            reasoning = self._text(delta, "reasoning") or self._text(delta, "reasoning_content")
            calls = delta.get("tool_calls") or []
            if not isinstance(calls, list):
                raise BrokenEvent(f"{self.where}: `tool_calls` is not a list")
            if self.whole:  # a complete answer's calls carry no `index`: their order is theirs
                calls = [{**c, "index": i} if isinstance(c, dict) else c for i, c in enumerate(calls)]
            if content or reasoning or calls:
                self.token_events += 1
            if self.first_token_s is None and (content or reasoning or calls):
                self.first_token_s = since_start_s  # reasoning counts: thinking models stream it first
            self.content.append(content)
            self.reasoning.append(reasoning)
            for call in calls:
                self._add_call(call)
            finish = choice.get("finish_reason")
            if finish is not None and not isinstance(finish, str):
                raise BrokenEvent(f"{self.where}: `finish_reason` is not a string")
            self.finish_reason = finish or self.finish_reason
            if self.whole:
                break  # one answer: its first choice

    def _add_call(self, call: object) -> None:
        index = call.get("index") if isinstance(call, dict) else None
        function = call.get("function") or {} if isinstance(call, dict) else None
        if type(index) is not int or not isinstance(function, dict):  # bool is an int to isinstance
            raise BrokenEvent(f"{self.where}: a tool call has no integer `index` or no `function` object")
        entry = self.calls.setdefault(index, ["", ""])
        entry[0] += self._text(function, "name")
        entry[1] += self._text(function, "arguments")

    def _text(self, part: dict, key: str) -> str:
        value = part.get(key)
        if value is not None and not isinstance(value, str):
            raise BrokenEvent(f"{self.where}: `{key}` is not a string")
        return value or ""

    def tool_calls(self) -> list[tuple[str, str]]:
        return [(self.calls[i][0], self.calls[i][1]) for i in sorted(self.calls)]
