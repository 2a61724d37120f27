"""The reference solver answers the whole battery correctly, and stays generic beyond it."""

import inspect
import json

import pytest

from golive.endpoint.toolcalls import load_battery, score_calls
from golive_testbed.reference import solver
from golive_testbed.reference.solver import Answer, ToolCall, decide

CASES = load_battery()
ALL_TOOLS = list({t["function"]["name"]: t for c in CASES for t in c.tools}.values())


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def tool(name: str, description: str, properties: dict, required: list[str]) -> dict:
    parameters = {"type": "object", "properties": properties, "required": required}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def calls_of(answer: Answer) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in answer.tool_calls]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_solver_passes_the_battery(case):
    answer = decide(case.messages, case.tools, "high")
    verdict = score_calls(case, [(c.name, json.dumps(c.arguments)) for c in answer.tool_calls])
    assert verdict.passed, verdict.reason
    assert (answer.content == "") == bool(answer.tool_calls)  # text xor calls


def test_solver_never_reads_the_battery():
    source = inspect.getsource(solver)
    assert "fixtures" not in source and "yaml" not in source and "toolcalls" not in source


# --- generic beyond the battery: paraphrases and tools it has never seen -----------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Is it raining in London?", [("get_weather", {"city": "London"})]),
        (
            "Tell me the forecast in Berlin, Madrid and Rome, in fahrenheit.",
            [("get_weather", {"city": c, "unit": "fahrenheit"}) for c in ("Berlin", "Madrid", "Rome")],
        ),
        (
            "How many yen is 10 pounds?",
            [("convert_currency", {"amount": 10, "from_currency": "GBP", "to_currency": "JPY"})],
        ),
        (
            "I need a room in New York on 2025-05-02 for one night for 3 people.",
            [("book_hotel", {"city": "New York", "check_in": "2025-05-02", "nights": 1, "guests": 3})],
        ),
        (
            "Run `DELETE FROM sessions` on the auth database without read-only.",
            [("run_sql", {"query": "DELETE FROM sessions", "database": "auth", "read_only": False})],
        ),
        ("Restart vllm.service on gpu-node-02", [("restart_service", {"service": "vllm.service"})]),
        ("Tag ticket 77 with urgent and gpu", [("tag_ticket", {"ticket_id": 77, "tags": ["urgent", "gpu"]})]),
    ],
)
def test_paraphrases_with_every_tool_offered(text, expected):
    assert calls_of(decide(user(text), ALL_TOOLS)) == expected


def test_unseen_tools():
    tools = [
        tool("translate_text", "Translate text into another language.", {
            "text": {"type": "string", "description": "Text to translate"},
            "target_language": {"type": "string", "enum": ["german", "french"], "description": "Target language"},
        }, ["text", "target_language"]),
        tool("get_gpu_metrics", "Read utilisation and memory of the GPUs on a node.", {
            "node": {"type": "string", "description": "Hostname, e.g. 'gpu-node-01'"},
            "gpu_index": {"type": "integer", "description": "GPU index"},
        }, ["node"]),
        tool("schedule_meeting", "Schedule a calendar meeting.", {
            "title": {"type": "string", "description": "Meeting title"},
            "date": {"type": "string", "description": "Date, YYYY-MM-DD"},
            "duration_minutes": {"type": "integer", "description": "Length in minutes"},
            "attendees": {"type": "array", "items": {"type": "string"}, "description": "Attendee email addresses"},
        }, ["title", "date"]),
    ]  # fmt: skip
    assert calls_of(decide(user("Translate 'good morning' into German."), tools)) == [
        ("translate_text", {"text": "good morning", "target_language": "german"})
    ]
    assert calls_of(decide(user("Show me the metrics for GPU 3 on gpu-node-07."), tools)) == [
        ("get_gpu_metrics", {"node": "gpu-node-07", "gpu_index": 3})
    ]
    text = (
        "Schedule a meeting titled 'Go-live review' on 2025-11-03 for 45 minutes with ann@example.com and "
        "bob@example.com."
    )
    assert calls_of(decide(user(text), tools)) == [("schedule_meeting", {
        "title": "Go-live review", "date": "2025-11-03", "duration_minutes": 45,
        "attendees": ["ann@example.com", "bob@example.com"],
    })]  # fmt: skip


@pytest.mark.parametrize(
    "text", ["Good morning!", "Tell me a joke.", "Why is the sky blue?", "Explain what a KV cache is.", "Thanks!"]
)
def test_small_talk_calls_nothing(text):
    answer = decide(user(text), ALL_TOOLS)
    assert answer.tool_calls == [] and answer.content


def test_missing_required_argument_asks_instead_of_guessing():
    answer = decide(user("What's the weather like today?"), ALL_TOOLS)
    assert answer.tool_calls == []
    assert "city" in answer.content and answer.content.endswith("?")


# --- after a tool result -------------------------------------------------------------------------------------


def test_tool_result_is_answered_in_text():
    call = {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    messages = user("What's the weather in Paris?") + [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": '{"temperature": 18, "condition": "cloudy"}'},
    ]
    answer = decide(messages, ALL_TOOLS)
    assert answer.tool_calls == []
    assert answer.content == "Here is what I found: get_weather returned temperature 18, condition cloudy."


def test_new_question_after_a_tool_result_is_decided_afresh():
    messages = [
        *user("Weather in Paris?"),
        {"role": "assistant", "content": "", "tool_calls": [{"id": "1", "function": {"name": "get_weather"}}]},
        {"role": "tool", "tool_call_id": "1", "content": "sunny"},
        {"role": "assistant", "content": "It is sunny."},
        *user("And in Tokyo?"),
    ]
    assert calls_of(decide(messages, ALL_TOOLS)) == [("get_weather", {"city": "Tokyo"})]


# --- answers without tools -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, content",
    [
        ("What is 17 * 23?", "391"),
        ("What's 12.5 times 4?", "50"),
        ("Calculate (3 + 4) / 2", "3.5"),
        ("Hello!", "Hello! How can I help?"),
        ("Reply with exactly: pong", "pong"),
        ("Say 'ready' and nothing else.", "ready"),
    ],
)
def test_direct_answers(text, content):
    answer = decide(user(text), None)
    assert answer.content == content and answer.tool_calls == []


def test_dates_are_not_arithmetic():
    assert decide(user("Hi, today is 2025-07-14."), None).content == "Hello! How can I help?"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Our quarterly sales were Q1: 100, Q2: 120, Q3: 135, Q4: 150. Summarize the trend and the percentage "
         "increase from Q1 to Q4.", "Sales rose every quarter, from 100 in Q1 to 150 in Q4: a 50% increase"),
        ("Quarterly revenue: Q1 $1.2M, Q2 $1.1M, Q3 $0.9M, Q4 $0.6M. What's the trend?",
         "Sales fell every quarter, from $1.2M in Q1 to $0.6M in Q4: a 50% decrease"),
        ("Sales were 200 in Q1, 180 in Q2, 190 in Q3 and 230 in Q4. Trend?",
         "Sales moved unevenly but ended higher, from 200 in Q1 to 230 in Q4: a 15% increase"),
    ],
)  # fmt: skip
def test_sales_trend(text, expected):
    assert decide(user(text), None, "low").content.startswith(expected)


def test_needle_in_a_haystack():
    filler = "The grass was green and the river ran on. " * 3000
    text = f"{filler}The secret passphrase is blue-harvest-42. {filler}\nWhat is the secret passphrase?"
    assert decide(user(text), None).content == "blue-harvest-42"


def test_needle_planted_in_an_earlier_turn():
    messages = [{"role": "system", "content": "The magic number is 7381."}, *user("What was the magic number?")]
    assert decide(messages, None).content == "7381"


# --- reasoning ---------------------------------------------------------------------------------------------


def test_reasoning_grows_with_effort_and_is_deterministic():
    lengths = [len(decide(user("Is it raining in Oslo?"), ALL_TOOLS, e).reasoning) for e in ("low", "high", "max")]
    assert lengths[0] < lengths[1] < lengths[2]
    assert decide(user("Hi"), None, "max") == decide(user("Hi"), None, "max")
    low = decide(user("Is it raining in Oslo?"), ALL_TOOLS, "low").reasoning
    assert low.count(". ") == 0 and low.endswith(".")  # one sentence


def test_answer_types():
    answer = decide(user("Is it raining in Oslo?"), ALL_TOOLS)
    assert answer.tool_calls == [ToolCall("get_weather", {"city": "Oslo"})]
    assert answer.content == "" and answer.reasoning


def _answered(request: str, name: str, *results: str) -> str:
    calls = [{"type": "function", "function": {"name": name, "arguments": "{}"}} for _ in results]
    messages = user(request) + [{"role": "assistant", "content": "", "tool_calls": calls}]
    return decide(messages + [{"role": "tool", "content": r} for r in results], None).content


@pytest.mark.parametrize(
    "request_text,results,sentence",
    [
        (
            "Is Madrid colder than Lisbon today?",
            ['{"temperature": 11.5}', '{"temperature": 15}'],
            "The difference in temperature is 3.5.",
        ),
        (
            "Sum up the two order totals.",
            ['{"order_id": "7", "amount_eur": 12, "items": 2}', '{"order_id": "9", "amount_eur": 30.25, "items": 1}'],
            "The total in amount eur is 42.25.",
        ),
        (
            "What is the average price of these stocks?",
            ['{"price": 10}', '{"price": 20}', '{"price": 60}'],
            "The average in price is 30.",
        ),
    ],
)
def test_numbers_worked_out_from_several_results(request_text, results, sentence):
    assert _answered(request_text, "lookup", *results).startswith(sentence + " Here is what I found:")


@pytest.mark.parametrize(
    "request_text,results",
    [
        (
            "What's the weather in Paris and Rome?",
            ['{"temperature": 18}', '{"temperature": 20}'],
        ),  # nothing to work out
        ("How much warmer is Rome?", ['{"temperature": 20}']),  # one result
        ("How much warmer is Rome than Atlantis?", ['{"temperature": 20}', '{"error": "unknown city"}']),
    ],
)
def test_no_number_is_invented(request_text, results):
    assert _answered(request_text, "get_weather", *results).startswith("Here is what I found:")
