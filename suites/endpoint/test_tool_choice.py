"""Agents steer tool use with `tool_choice`: auto, none, required and a named function are each honoured [000]."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import require
from golive.endpoint.client import ChatResult, error_body
from golive.endpoint.errors import StatusError
from golive.endpoint.toolcalls import schema_problem

if TYPE_CHECKING:
    from collections.abc import Callable

    from golive.endpoint.client import EndpointClient
    from golive.profile.schema import Profile

pytestmark = pytest.mark.endpoint


def _tool(name: str, description: str) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name, e.g. 'Paris'"}},
                "required": ["city"],
            },
        },
    }


TOOLS = [
    _tool("get_weather", "Get the current weather for a city."),
    _tool("get_local_time", "Get the current local time in a city."),
]
WEATHER = "What's the weather in Paris right now?"
# mode -> (prompt, tool_choice): each prompt tempts the model to do what the mode forbids
MODES = {
    "auto": (WEATHER, "auto"),
    "none": (WEATHER, "none"),
    "required": ("Hello! I am flying to Paris on Monday.", "required"),
    "named": (WEATHER, {"type": "function", "function": {"name": "get_local_time"}}),
    "parallel": ("What's the weather in Paris and in Tokyo?", "auto"),
}
MARKUP = ("<tool_call>", "<arg_key>", "</tool_call>")
FIX = (
    "serve with the recipe's `--tool-call-parser` and image: vLLM enforces required/named tool_choice with the "
    "parser's structural tag (xgrammar); if those match, the checkpoint or chat template is not the recipe's"
)


@dataclass(frozen=True)
class Refused:
    """The server refused the request (an HTTP error status): what each mode did is reported, mode by mode."""

    status: int
    message: str

    def __str__(self) -> str:
        return f"HTTP {self.status}: {self.message}"


# vLLM 0.32 refuses auto without `--enable-auto-tool-choice and --tool-call-parser`, required and named without
# `--tool-call-parser` (measured on the reference station's no-tool-parser variant; `none` still answers): the smoke
# test's root cause, which it reports
PARSER_MISSING = ("--enable-auto-tool-choice", "--tool-call-parser")
ChoiceRuns = dict[tuple[str, bool], ChatResult | Refused]  # {(mode, streamed): its answer or its refusal}


@pytest.fixture(scope="module")
def choice_runs(endpoint: EndpointClient, profile: Profile) -> ChoiceRuns:
    """Every mode, non-streamed and streamed, each on its own: {(mode, streamed): its answer or its refusal}."""

    def run(key: tuple[str, bool]) -> ChatResult | Refused:
        prompt, choice = MODES[key[0]]
        try:
            return endpoint.chat(
                profile.vllm.served_model_name,
                [{"role": "user", "content": prompt}],
                tools=TOOLS,
                tool_choice=choice,
                temperature=0,
                max_tokens=1024,
                stream=key[1],
            )
        except StatusError as exc:
            return Refused(exc.status_code, error_body(exc))

    keys = [(mode, streamed) for mode in MODES for streamed in (False, True)]
    with ThreadPoolExecutor(max_workers=profile.endpoint.max_concurrency) as pool:  # load bounded by the profile
        return dict(zip(keys, pool.map(run, keys), strict=True))


def _problems(choice_runs: ChoiceRuns, mode: str, wrong: Callable[[ChatResult], str | None]) -> list[str]:
    """'mode (streamed): what was wrong' for each run where wrong(result) says something; a refusal is what was
    wrong, except one for want of the tool parser flags, which the smoke test reports (one root cause, one failure):
    that mode is not checked."""
    out = []
    for streamed in (False, True):
        result = choice_runs[(mode, streamed)]
        problem: str | None
        if isinstance(result, Refused):
            if any(flag in result.message for flag in PARSER_MISSING):
                pytest.skip(
                    f"not checked because the server refuses tool_choice {mode} without its tool parser "
                    f"({result}): see the smoke-test check, which reports it"
                )
            problem = f"refused: {result}"
        else:
            problem = wrong(result)
        if problem:
            out.append(f"{mode} ({'streamed' if streamed else 'non-streamed'}): {problem}")
    return out


def _invalid(calls: list[tuple[str, str]]) -> str | None:
    params = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    for name, raw in calls:
        if name not in params:
            return f"called {name!r}, not an offered tool"
        try:
            args = json.loads(raw)
        except (TypeError, ValueError):
            return f"{name}: arguments are not JSON: {raw!r}"
        problem = schema_problem(name, args, params[name]) if isinstance(args, dict) else "arguments not an object"
        if problem:
            return problem
    return None


@check("endpoint.tool_choice.auto_calls_when_a_tool_fits", Cost.TOOL_CHOICE)
def test_tool_choice_auto_calls_when_a_tool_fits(choice_runs: ChoiceRuns) -> None:
    """tool_choice auto: a request a tool fits comes back as a call to that tool [000]."""
    bad = _problems(
        choice_runs,
        "auto",
        lambda r: (
            None
            if [n for n, _ in r.tool_calls] == ["get_weather"]
            else f"calls {r.tool_calls}, content {r.content[:80]!r}"
        ),
    )
    require(
        not bad,
        found="; ".join(bad),
        recipe="tool_choice auto: get_weather called for a weather question [000]",
        fix=FIX,
    )


@check("endpoint.tool_choice.none_answers_in_text", Cost.TOOL_CHOICE)
def test_tool_choice_none_answers_in_text(choice_runs: ChoiceRuns) -> None:
    """tool_choice none: no call even when a tool fits, and a text answer instead [000]."""

    def wrong(r: ChatResult) -> str | None:
        if r.tool_calls:
            return f"called {[n for n, _ in r.tool_calls]}"
        if any(tag in r.content for tag in MARKUP):
            return f"tool-call markup in content {r.content[:80]!r}"
        return None if r.content.strip() else "no text answer (empty content)"

    bad = _problems(choice_runs, "none", wrong)
    require(
        not bad,
        found="; ".join(bad),
        recipe="tool_choice none: the model answers in text and calls nothing [000]",
        fix="the model ignores tool_choice none: pin the recipe's checkpoint and chat template; as a stopgap "
        "serve with `--exclude-tools-when-tool-choice-none` so the model never sees the tools",
    )


@check("endpoint.tool_choice.required_forces_a_call", Cost.TOOL_CHOICE)
def test_tool_choice_required_forces_a_call(choice_runs: ChoiceRuns) -> None:
    """tool_choice required: a valid call even when text would do [000]."""
    bad = _problems(
        choice_runs,
        "required",
        lambda r: f"no call, content {r.content[:80]!r}" if not r.tool_calls else _invalid(r.tool_calls),
    )
    require(
        not bad,
        found="; ".join(bad),
        recipe="tool_choice required: at least one call, valid against the offered tool's schema [000]",
        fix=FIX,
    )


@check("endpoint.tool_choice.named_calls_that_function", Cost.TOOL_CHOICE)
def test_named_tool_choice_calls_that_function(choice_runs: ChoiceRuns) -> None:
    """A named tool_choice: a call to that function, whatever the question leans to [000]."""

    def wrong(r: ChatResult) -> str | None:
        names = [n for n, _ in r.tool_calls]
        if not names or set(names) != {"get_local_time"}:
            return f"calls {names or 'none'}, content {r.content[:80]!r}"
        return _invalid(r.tool_calls)

    bad = _problems(choice_runs, "named", wrong)
    require(
        not bad,
        found="; ".join(bad),
        recipe="tool_choice {function: get_local_time}: get_local_time is called, nothing else [000]",
        fix=FIX,
    )


@check("endpoint.tool_choice.parallel_calls_are_separate_entries", Cost.TOOL_CHOICE)
def test_parallel_calls_are_separate_entries(choice_runs: ChoiceRuns) -> None:
    """Parallel calls come back as separate tool_calls entries, one per call [000]."""

    def wrong(r: ChatResult) -> str | None:
        cities = sorted(json.loads(a).get("city", "") for _, a in r.tool_calls) if not _invalid(r.tool_calls) else []
        return None if cities == ["Paris", "Tokyo"] else f"tool_calls {r.tool_calls}"

    bad = _problems(choice_runs, "parallel", wrong)
    require(
        not bad,
        found="; ".join(bad),
        recipe="two get_weather entries, Paris and Tokyo, each its own tool_calls item [000]",
        fix="parallel calls merged or lost: the tool parser of this build splits calls differently; pin the "
        "recipe's image and parser",
    )
