"""Agent battery: multi-turn tool use — call, read the tool's result, call the next tool or answer.

Calls are scored per turn as the tool-call battery scores them (golive.endpoint.toolcalls.score_calls); the final
text answer by an answer rule (golive.endpoint.answers). The battery file is golive's own (batteries/agent.yaml).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from golive.endpoint.answers import Expect, score_answer
from golive.endpoint.toolcalls import ToolCase, normalized, score_calls

if TYPE_CHECKING:  # agent.py scores answers; it needs the client only to name what a chat returns
    from golive.endpoint.client import ChatResult

BATTERY = Path(__file__).parent / "batteries" / "agent.yaml"
MAX_TURNS = 6  # an agent loop that keeps calling past this is a failure, not a hang


@dataclass
class AgentCase:
    id: str
    category: str
    messages: list[dict]
    tools: list[dict]
    turns: list[list[dict]]  # expected calls per calling turn
    results: list[dict]  # {name, match?: {arg: value}, result}
    answer: Expect

    def result_for(self, name: str, arguments: str) -> str:
        """The canned result of a call; an unknown call gets an error result, as a real tool would return."""
        try:
            args = json.loads(arguments)
        except (TypeError, ValueError):
            args = {}
        for entry in self.results:
            match = entry.get("match", {})
            if entry["name"] == name and all(
                normalized(str(args.get(k, ""))) == normalized(str(v)) for k, v in match.items()
            ):
                result: str = entry["result"]  # the battery's canned results are JSON text
                return result
        return json.dumps({"error": f"no such call in this test: {name}({arguments})"})


@dataclass
class Outcome:
    passed: bool
    reason: str
    calls: list[list[tuple[str, str]]] = field(default_factory=list)  # per turn, as the server returned them


def load_agent_battery(path: Path | None = None) -> list[AgentCase]:
    """Read the battery; a case whose expected calls name tools it does not offer raises ValueError."""
    path = Path(path or BATTERY)
    data = yaml.safe_load(path.read_text())
    defs = data["tools"]
    cases = []
    for raw in data["cases"]:
        tools = [{"type": "function", "function": {"name": t, **defs[t]}} for t in raw["tools"]]
        case = AgentCase(
            raw["id"], raw["category"], raw["messages"], tools, raw["turns"], raw["results"], Expect(**raw["answer"])
        )
        for turn in case.turns:  # reuse the tool battery's checks on each turn's expectations
            for call in turn:
                if call["name"] not in raw["tools"]:
                    raise ValueError(f"{path}: case {case.id}: expects {call['name']!r}, which it does not offer")
        cases.append(case)
    return cases


Chat = Callable[[list[dict], list[dict]], "ChatResult"]  # (messages, tools) -> the server's answer


def run_agent_case(case: AgentCase, chat: Chat) -> Outcome:
    """Drive the conversation through the case's turns, then score the final answer."""
    messages = [dict(m) for m in case.messages]
    seen: list[list[tuple[str, str]]] = []
    for turn in range(MAX_TURNS):
        result = chat(messages, case.tools)
        if not result.tool_calls:
            break
        seen.append(list(result.tool_calls))
        if turn >= len(case.turns) and case.turns:
            names = [n for n, _ in result.tool_calls]
            return Outcome(False, f"turn {turn + 1}: called {names} again instead of answering from the results", seen)
        expected = case.turns[turn] if turn < len(case.turns) else []
        verdict = score_calls(ToolCase(case.id, case.category, messages, case.tools, expected), result.tool_calls)
        if not verdict.passed:
            return Outcome(False, f"turn {turn + 1}: {verdict.reason}", seen)
        ids = [f"call_{turn}_{i}" for i in range(len(result.tool_calls))]
        messages.append(
            {
                "role": "assistant",
                "content": result.content or "",
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                    for i, (n, a) in zip(ids, result.tool_calls, strict=True)
                ],
            }
        )  # one id per call
        messages += [
            {"role": "tool", "tool_call_id": i, "content": case.result_for(n, a)}
            for i, (n, a) in zip(ids, result.tool_calls, strict=True)
        ]
    else:
        return Outcome(False, f"still calling tools after {MAX_TURNS} turns", seen)
    if len(seen) < len(case.turns):
        want = [c["name"] for c in case.turns[len(seen)]]
        return Outcome(
            False,
            f"turn {len(seen) + 1}: answered in text where a call to {want} was expected "
            f"({result.content.strip()[:80]!r})",
            seen,
        )
    ok, reason = score_answer(case.answer, result.content)
    return Outcome(ok, "final answer " + reason, seen)
