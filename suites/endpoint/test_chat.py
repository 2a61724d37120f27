"""Chat and the recipe's real requests [000][002]."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import require

if TYPE_CHECKING:
    from golive.endpoint.client import EndpointClient
    from golive.profile.schema import Profile

pytestmark = pytest.mark.endpoint


@check("endpoint.chat.answers_and_stops", Cost.LIGHT)
def test_chat_answers_and_stops(endpoint: EndpointClient, profile: Profile) -> None:
    """One chat answer arrives in content and ends with finish_reason stop [000]."""
    result = endpoint.chat(
        profile.vllm.served_model_name, [{"role": "user", "content": "What is 17 * 23?"}], max_tokens=512, temperature=0
    )
    require(
        result.content.strip() != "" and result.finish_reason == "stop",
        found=f"content {result.content[:120]!r}, finish_reason {result.finish_reason}",
        recipe="one chat answer in `content`, finish_reason stop [000]",
        fix="check the chat template and the reasoning parser: with a thinking model and no parser the answer "
        "can be swallowed or cut",
    )


@check("endpoint.chat.sales_question_gets_trend_and_increase", Cost.LIGHT)
def test_sales_question_gets_trend_and_increase(endpoint: EndpointClient, profile: Profile) -> None:
    """The recipe's real request (quarterly sales, temperature 0) gets a trend summary and the right Q1-to-Q4
    increase [002]."""
    question = (
        "Our quarterly sales were Q1 100, Q2 110, Q3 130 and Q4 150 (thousand USD). "
        "Summarise the trend and compute the percentage increase from Q1 to Q4."
    )
    params: dict[str, Any] = {"temperature": 0, "max_tokens": 1024}
    if "low" in profile.endpoint.reasoning_effort_levels:
        params["reasoning_effort"] = "low"
    result = endpoint.chat(profile.vllm.served_model_name, [{"role": "user", "content": question}], **params)
    require(
        re.search(r"\b50(\.0+)?\s*%", result.content) is not None and result.finish_reason == "stop",
        found=f"content {result.content[:200]!r}, finish_reason {result.finish_reason}",
        recipe="a trend summary with the 50 % increase, finish_reason stop [002]",
        fix="a wrong answer at temperature 0 points at the checkpoint or the chat template: compare the image and "
        "checkpoint pins with the recipe",
    )
