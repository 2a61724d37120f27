"""The reasoning parser: thinking arrives apart from the answer [000][002]."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import not_applicable, require
from golive.endpoint.client import error_body
from golive.endpoint.errors import StatusError

if TYPE_CHECKING:
    from golive.endpoint.client import EndpointClient
    from golive.profile.schema import Profile
    from golive.run.fixtures import RecordMetric

pytestmark = pytest.mark.endpoint
QUESTION = [{"role": "user", "content": "What is 12 * 12?"}]


@check("endpoint.reasoning.arrives_separately_from_content", Cost.LIGHT)
def test_reasoning_arrives_separately_from_content(endpoint: EndpointClient, profile: Profile) -> None:
    """With the {vllm.reasoning_parser} parser, reasoning arrives in `reasoning` (or `reasoning_content`), and no
    <think>/</think> reaches content [000]."""
    if not profile.vllm.reasoning_parser:
        not_applicable("the profile serves no reasoning parser")
    for stream in (False, True):
        result = endpoint.chat(profile.vllm.served_model_name, QUESTION, temperature=0, max_tokens=1024, stream=stream)
        leaked = [tag for tag in ("<think>", "</think>") if tag in result.content]
        mode = "streamed" if stream else "non-streamed"
        require(
            result.reasoning.strip() != "" and not leaked,
            found=f"{mode}: reasoning {result.reasoning[:80]!r}, content {result.content[:120]!r}"
            + (f" — {' and '.join(leaked)} leaked into content" if leaked else ""),
            recipe=f"`--reasoning-parser {profile.vllm.reasoning_parser}`: reasoning in its own field, the answer "
            f"alone in content [000]",
            fix=f"serve with `--reasoning-parser {profile.vllm.reasoning_parser}`; if it is set, the chat template "
            f"or the parser does not match this build — re-test after the image upgrade [000]",
        )


@check("endpoint.reasoning.effort_levels_accepted", Cost.LIGHT)
def test_reasoning_effort_levels_accepted(
    endpoint: EndpointClient, profile: Profile, record_metric: RecordMetric
) -> None:
    """Every reasoning effort level the recipe uses is accepted and answered: {endpoint.reasoning_effort_levels}
    [002]."""
    levels = profile.endpoint.reasoning_effort_levels
    if not levels:
        not_applicable("the profile lists no reasoning effort levels")
    refused = []
    for level in levels:
        try:
            result = endpoint.chat(
                profile.vllm.served_model_name, QUESTION, temperature=0, max_tokens=2048, reasoning_effort=level
            )  # vLLM hands it to the chat template
        except StatusError as exc:
            if exc.status_code != 400:
                raise
            refused.append(f"{level}: HTTP 400 {error_body(exc)}")
            continue
        tokens = (result.usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
        if tokens is not None:
            record_metric(f"reasoning_tokens_effort_{level}", tokens, "tokens")
        if not result.content.strip():
            refused.append(f"{level}: empty answer (finish_reason {result.finish_reason})")
    require(
        not refused,
        found="; ".join(refused),
        recipe=f"reasoning effort levels {', '.join(levels)} accepted [002]",
        fix="the build or chat template does not know these levels: use the recipe's image and template",
    )
