"""Limits are refused cleanly: a 400 the client can act on, never a 500 or a hang [field practice]."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import require
from golive.endpoint.client import error_body
from golive.endpoint.errors import EndpointError, StatusError
from golive.endpoint.longctx import repeat_to

if TYPE_CHECKING:
    from collections.abc import Callable

    from golive.endpoint.client import ChatResult, EndpointClient
    from golive.profile.schema import Profile

pytestmark = pytest.mark.endpoint


def _outcome(call: Callable[[], ChatResult]) -> tuple[int | str, str]:
    try:
        result = call()
        return 200, f"accepted (finish_reason {result.finish_reason})"
    except StatusError as exc:
        return exc.status_code, error_body(exc)
    except EndpointError as exc:
        if not exc.timed_out:
            raise
        return "timeout", "no answer within the request timeout"


@check("endpoint.limits.over_long_prompt_refused_cleanly", Cost.OVER_LONG)
def test_over_long_prompt_refused_cleanly(vllm_server: EndpointClient, profile: Profile) -> None:
    """A prompt longer than the {vllm.max_model_len}-token context is refused with HTTP 400, not a 500 or a hang
    [field practice]."""
    limit = profile.vllm.max_model_len
    name = profile.vllm.served_model_name
    own = vllm_server.target.vllm_name(name)  # vLLM's own name: a gateway may rename the model
    text = repeat_to(lambda t: vllm_server.tokenize(own, t), limit + 64)  # sized by vLLM's own /tokenize
    status, detail = _outcome(lambda: vllm_server.chat(name, [{"role": "user", "content": text}], max_tokens=1))
    require(
        status == 400,
        found=f"a prompt over {limit} tokens got {status}: {detail[:200]}",
        recipe=f"over-long prompts are refused with 400 at the {limit}-token limit [000][002]",
        fix=f"serve with `--max-model-len {limit}`; a 500 or a hang here means clients retry into a broken server",
    )


@check("endpoint.limits.max_tokens_over_limit_refused_cleanly", Cost.LIGHT)
def test_max_tokens_over_limit_refused_cleanly(endpoint: EndpointClient, profile: Profile) -> None:
    """max_tokens beyond the {vllm.max_model_len}-token context is refused with HTTP 400 [field practice]."""
    limit = profile.vllm.max_model_len
    status, detail = _outcome(
        lambda: endpoint.chat(profile.vllm.served_model_name, [{"role": "user", "content": "Hi"}], max_tokens=limit + 1)
    )
    require(
        status == 400,
        found=f"max_tokens={limit + 1} got {status}: {detail[:200]}",
        recipe=f"requests asking for more than the {limit}-token context are refused with 400",
        fix=f"serve with `--max-model-len {limit}`",
    )
