"""Agent battery runner and scoring (golive.endpoint.agent) on responses as the reference station's server gave them."""

import pytest

from golive.endpoint.agent import MAX_TURNS, load_agent_battery, run_agent_case
from golive.endpoint.client import ChatResult

CASES = {c.id: c for c in load_agent_battery()}


class Replay:
    """A chat that returns the given results in turn and records the messages it was sent."""

    def __init__(self, *results: ChatResult):
        self.sent: list[list[dict]] = []
        self._queue = list(results)

    def __call__(self, messages: list[dict], tools: list[dict]) -> ChatResult:
        self.sent.append([dict(m) for m in messages])
        return self._queue.pop(0)


def call(name, args):
    return ChatResult("", "reasoning", [(name, args)], "tool_calls")


def text(content):
    return ChatResult(content, "reasoning", [], "stop")


def test_battery_covers_every_category():
    assert {c.category for c in CASES.values()} == {"single", "parallel", "chained", "error", "irrelevance", "numeric"}


def test_single_call_then_answer_passes_and_sends_the_result_as_a_tool_message():
    chat = Replay(
        call("get_weather", '{"city": "Oslo"}'),
        text("Here is what I found: get_weather returned temperature c -4, condition snow."),
    )
    outcome = run_agent_case(CASES["single-call-then-answer"], chat)
    assert outcome.passed, outcome.reason
    assistant, tool = chat.sent[1][-2:]
    assert assistant["tool_calls"][0]["function"]["name"] == "get_weather"
    assert tool == {
        "role": "tool",
        "tool_call_id": assistant["tool_calls"][0]["id"],
        "content": '{"temperature_c": -4, "condition": "snow"}',
    }


def test_parallel_results_follow_the_call_arguments():
    chat = Replay(
        ChatResult("", "", [("get_weather", '{"city": "Tokyo"}'), ("get_weather", '{"city": "Paris"}')], "tool_calls"),
        text("Tokyo 27 humid, Paris 18 sunny."),
    )
    assert run_agent_case(CASES["parallel-calls-then-answer"], chat).passed
    assert [m["content"] for m in chat.sent[1][-2:]] == [
        '{"temperature_c": 27, "condition": "humid"}',
        '{"temperature_c": 18, "condition": "sunny"}',
    ]


@pytest.mark.parametrize(
    "case,responses,fragment",
    [
        (
            "single-call-then-answer",
            [call("get_weather", '{"city": "Oslo"}'), text("Done. Let me know.")],
            "final answer answered 'Done. Let me know.', missing ['-4', 'snow']",
        ),
        (
            "chained-calls",
            [call("find_ticket", '{"title": "GPU fan failure"}'), text("Ticket 4312 is open.")],
            "turn 2: answered in text where a call to ['tag_ticket'] was expected",
        ),
        (
            "chained-calls",
            [
                call("find_ticket", '{"title": "GPU fan failure"}'),
                call("tag_ticket", '{"ticket_id": 1, "tags": ["hardware"]}'),
            ],
            "turn 2: tag_ticket: argument 'ticket_id' = 1, expected one of [4312]",
        ),
        (
            "tool-error-reported",
            [call("get_weather", '{"city": "Atlantis"}'), text("Atlantis: temperature 20°C.")],
            "must not contain 'temperature'",
        ),
        ("no-tool-needed", [call("get_weather", '{"city": "Paris"}')], "turn 1: called get_weather where no tool fits"),
        (
            "single-call-then-answer",
            [call("get_weather", '{"city": "Oslo"}')] * MAX_TURNS,
            "turn 2: called ['get_weather'] again instead of answering from the results",
        ),
    ],
    ids=[
        "ignores-result",
        "stops-mid-chain",
        "wrong-chained-value",
        "invents-despite-error",
        "calls-needlessly",
        "loops",
    ],
)
def test_agent_failure_is_named(case, responses, fragment):
    outcome = run_agent_case(CASES[case], Replay(*responses))
    assert not outcome.passed
    assert fragment in outcome.reason, outcome.reason
