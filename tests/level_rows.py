"""A sweep level as the load generator reports it (golive.endpoint.levels.LevelResult), for tests that judge, render
or plot levels: only what a test names, every other number unmeasured (None)."""

from __future__ import annotations

from typing import Any

from golive.endpoint.levels import LevelResult

UNMEASURED = (
    "ttft_p99_s",
    "ttft_mean_s",
    "ttfo_p50_s",
    "itl_p50_s",
    "itl_mean_s",
    "tpot_p50_s",
    "e2e_p50_s",
    "e2e_mean_s",
    "prompt_tokens_p50",
)


def level_row(users: int, aggregate: float, **fields: Any) -> LevelResult:
    """`users` in flight at `aggregate` tok/s over 10 s, 3 requests a user, none failed; `fields` set the rest."""
    named: dict[str, Any] = {
        "concurrency": users,
        "requests": 3 * users,
        "failures": 0,
        "duration_s": 10.0,
        "output_tokens": int(aggregate * 10),
        "aggregate_tok_s": aggregate,
        "per_user_tok_s_p50": aggregate / users,
        "ttft_p50_s": 0.1,
        "client_usage_mismatches": 0,
    }
    return LevelResult(**(named | dict.fromkeys(UNMEASURED) | fields))
