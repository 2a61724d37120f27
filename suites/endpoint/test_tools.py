"""Tool calling is a launch blocker: calls come back structured, right, and the same streamed or not [000]."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import counted, require
from golive.endpoint.client import error_body
from golive.endpoint.errors import StatusError
from golive.endpoint.toolcalls import GET_WEATHER, WEATHER_QUESTION, load_battery, score_calls

if TYPE_CHECKING:
    from golive.endpoint.client import ChatResult, EndpointClient
    from golive.endpoint.toolcalls import ToolCase
    from golive.profile.schema import Profile
    from golive.run.fixtures import RecordMetric

    Smoke = tuple[ChatResult | None, str | None]  # the smoke request's answer, or why the server refused it
    BatteryRuns = list[tuple[ToolCase, ChatResult, ChatResult]]  # (case, plain result, streamed result)

pytestmark = pytest.mark.endpoint

SMOKE = [{"role": "user", "content": WEATHER_QUESTION}]
PARSER_FIX = "serve with `--enable-auto-tool-choice --tool-call-parser {parser}` (parser names are pinned to the build)"


@pytest.fixture(scope="session")
def smoke(endpoint: EndpointClient, profile: Profile) -> Smoke:
    """The recipe's smoke request, sent once; tool checks that need working tool calling depend on it."""
    try:
        return endpoint.chat(
            profile.vllm.served_model_name, SMOKE, tools=[GET_WEATHER], temperature=0, max_tokens=1024
        ), None
    except StatusError as exc:
        if exc.status_code != 400:
            raise
        return None, f"HTTP 400: {error_body(exc)}"


@pytest.fixture(scope="session")
def tools_work(smoke: Smoke) -> ChatResult:
    result, refused = smoke
    if refused:
        pytest.skip(f"the server refuses tool requests ({refused}): see the smoke-test check")
    assert result is not None  # a request that was not refused answered
    return result


@check("endpoint.tools.smoke_call_is_structured", Cost.LIGHT)
def test_smoke_get_weather_returns_structured_tool_call(smoke: Smoke, profile: Profile) -> None:
    """The smoke test: a get_weather request comes back as a structured tool_calls entry, not text [000]."""
    result, refused = smoke
    parser = profile.vllm.tool_call_parser or "<parser>"
    require(
        refused is None,
        found=f"the server refused a request with `tools`: {refused}",
        recipe="tool calling is a launch blocker: the smoke request returns a structured `tool_calls` entry [000]",
        fix=PARSER_FIX.format(parser=parser),
    )
    assert result is not None  # require() ended the check otherwise: a request that was not refused answered
    leaked = any(tag in result.content for tag in ("<tool_call>", "<arg_key>", "</tool_call>"))
    require(
        len(result.tool_calls) == 1 and not leaked,
        found=f"{counted(len(result.tool_calls), 'tool call')}; content {result.content[:160]!r}"
        + (" — the call arrived as TEXT in content" if leaked else ""),
        recipe="exactly one `tool_calls` entry for get_weather, nothing in content [000]",
        fix=PARSER_FIX.format(parser=parser),
    )
    name, arguments = result.tool_calls[0]
    verdict = score_calls(_smoke_case(), [(name, arguments)])
    require(
        verdict.passed and result.finish_reason == "tool_calls",
        found=f"call {name}({arguments}), finish_reason {result.finish_reason}: {verdict.reason}",
        recipe="get_weather with JSON arguments valid against the tool's schema (city 'Paris'), finish_reason "
        "tool_calls [000]",
        fix="re-test after every image upgrade: parser behaviour changes between builds [000]; if the parser "
        "flags are right, the checkpoint or chat template is not the recipe's",
    )


def _smoke_case() -> ToolCase:
    from golive.endpoint.toolcalls import ToolCase

    return ToolCase(
        id="smoke",
        category="simple",
        messages=SMOKE,
        tools=[GET_WEATHER],
        expected=[{"name": "get_weather", "arguments": {"city": ["Paris"], "unit": ["", "celsius", "fahrenheit"]}}],
    )


@pytest.fixture(scope="session")
def battery_runs(tools_work: ChatResult, endpoint: EndpointClient, profile: Profile) -> BatteryRuns:
    """Every battery case, non-streamed and streamed: [(case, plain result, streamed result)]."""

    def run(case: ToolCase, stream: bool) -> ChatResult:
        return endpoint.chat(
            profile.vllm.served_model_name,
            case.messages,
            tools=case.tools,
            temperature=0,
            max_tokens=1024,
            stream=stream,
        )

    cases = load_battery()
    with ThreadPoolExecutor(max_workers=profile.endpoint.max_concurrency) as pool:  # load bounded by the profile
        plain = list(pool.map(run, cases, [False] * len(cases)))
        streamed = list(pool.map(run, cases, [True] * len(cases)))
    return list(zip(cases, plain, streamed, strict=True))


@check("endpoint.tools.call_battery_meets_floor", Cost.TOOL_BATTERY)
def test_tool_call_battery_meets_floor(
    battery_runs: BatteryRuns, profile: Profile, record_metric: RecordMetric
) -> None:
    """The tool-call battery (BFCL-style AST scoring: name, required args, types, values) scores at least
    {endpoint.tool_battery_floor:%} [000]."""
    failures = []
    for case, plain, _ in battery_runs:
        verdict = score_calls(case, plain.tool_calls)
        if not verdict.passed:
            failures.append(f"{case.id} ({case.category}): {verdict.reason}")
    total = len(battery_runs)
    score = (total - len(failures)) / total
    floor = profile.endpoint.tool_battery_floor
    record_metric("tool_battery_score", round(score, 4), "fraction", floor=floor)
    require(
        score >= floor,
        found=f"{total - len(failures)}/{total} cases pass ({score:.0%}); failing: "
        + "; ".join(failures[:6])
        + (" …" if len(failures) > 6 else ""),
        recipe=f"tool-call battery ≥ {floor:.0%} of its {total} cases [000]",
        fix="compare the parser flags and image digest with the recipe; newer glm parsers drop calls to "
        "undeclared tools silently [field practice]",
    )


@check("endpoint.tools.streamed_and_plain_calls_agree", Cost.TOOL_BATTERY)
def test_streaming_and_non_streaming_give_same_calls(battery_runs: BatteryRuns) -> None:
    """Streaming and non-streaming return the same tool calls (agents use both) [000]."""
    made = sum(len(plain.tool_calls) + len(streamed.tool_calls) for _, plain, streamed in battery_runs)
    require(
        made > 0,
        found=f"neither mode made a single tool call in {len(battery_runs)} cases: nothing to compare",
        recipe="the same calls whether the client streams or not [000]",
        fix="see the tool-call battery check: tool calling itself does not work",
    )
    differ = []
    for case, plain, streamed in battery_runs:
        a = [(n, _canonical(args)) for n, args in plain.tool_calls]
        b = [(n, _canonical(args)) for n, args in streamed.tool_calls]
        if sorted(a) != sorted(b):
            differ.append(f"{case.id}: non-streamed {a} vs streamed {b}")
    require(
        not differ,
        found=f"{counted(len(differ), 'case')} {'differs' if len(differ) == 1 else 'differ'}: " + "; ".join(differ[:4]),
        recipe="the same calls whether the client streams or not [000]",
        fix="stream parsing differs by build: pin the image the recipe validated, or report it upstream with "
        "these cases",
    )


def _canonical(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True)
    except json.JSONDecodeError:
        return arguments
