"""The sweep's typed record: one concurrency level's row, handed from the load generator (golive.endpoint.load) to
the gates, results.json (golive.report.model.SweepRow is this row and its station), go-live.md and the plot: one model,
declared once. Its own module so a report or a host-only run reads it without importing the load generator (httpx,
numpy) or the OpenAI client.

Each gated quantity (`ROUNDED`: aggregate tok/s, per-user tok/s p50, TTFT p50, goodput share) is the **median of the
level's rounds** (one value a measured batch: golive.endpoint.uncertainty.Rounds) wherever the sweep measured rounds:
the number the gate judges, the sweep table shows, the terminal prints and results.json keeps is one number. The other
quantities (TTFT p99, ITL, E2E, …) are read over all the level's measured requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# the level's quantities read per round (a batch's own value), whose median the row carries
Rounded = Literal["aggregate_tok_s", "per_user_tok_s_p50", "ttft_p50_s", "goodput_share"]
ROUNDED: tuple[Rounded, ...] = ("aggregate_tok_s", "per_user_tok_s_p50", "ttft_p50_s", "goodput_share")


class LevelResult(BaseModel):
    """One concurrency level of the sweep: the [002]-style table row, as data (results.json's `sweep` row, less its
    station)."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    concurrency: int
    requests: int
    failures: int
    duration_s: float
    output_tokens: int
    aggregate_tok_s: float
    per_user_tok_s_p50: float | None
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    ttft_mean_s: float | None
    ttfo_p50_s: float | None
    itl_p50_s: float | None
    itl_mean_s: float | None
    tpot_p50_s: float | None
    e2e_p50_s: float | None
    e2e_mean_s: float | None
    prompt_tokens_p50: float | None
    client_usage_mismatches: int = Field(
        description="requests whose client count differs from usage (cross-check, not a failure)"
    )
    warmup_failures: int = Field(default=0, description="not measured, still a failure of the station")
    errors: list[str] = Field(default_factory=list)
    # 95 % intervals of the median of the rounds below (golive.endpoint.uncertainty.Rounds), [low, high]; None with
    # 2 to 5 rounds; a level of one batch: the bootstrap over its requests (no gate reads those)
    aggregate_tok_s_ci: list[float] | None = None
    per_user_tok_s_p50_ci: list[float] | None = None
    ttft_p50_s_ci: list[float] | None = None
    # goodput against the profile's load.slo (None: no objectives set): vLLM's request goodput is good ÷ duration
    good_requests: int | None = None
    goodput_req_s: float | None = None
    goodput_share: float | None = Field(default=None, description="good ÷ successful requests (median of the rounds)")
    goodput_share_ci: list[float] | None = None
    batches: int = Field(default=1, description="measured batches: more when a floor was undecided")
    # the gate level only: the ratio rounds (golive.endpoint.load), one value a round, each from a batch at this level
    # and a 1-user batch measured back to back: aggregate ÷ aggregate, per-user p50 ÷ per-user p50
    scaling_rounds: list[float] | None = None
    per_user_rounds: list[float | None] | None = None
    # the level's rounds: each measured batch's own value, in the order measured (the row's value is their median,
    # the gates read it and its interval, golive.endpoint.uncertainty.Rounds); None for a row the sweep did not make
    aggregate_tok_s_rounds: list[float] | None = None
    per_user_tok_s_p50_rounds: list[float | None] | None = None
    ttft_p50_s_rounds: list[float | None] | None = None
    goodput_share_rounds: list[float | None] | None = None
    # the gate level only: vLLM's own count of the requests it ran and kept waiting, [running, waiting] per /metrics
    # poll during its round batches (`vllm:num_requests_running`, `vllm:num_requests_waiting`); None where /metrics
    # never reported them
    engine_samples: list[list[float]] | None = None

    def rounds_of(self, quantity: Rounded) -> Sequence[float | None] | None:
        """The rounds the sweep recorded for a quantity (None for a row the sweep did not make)."""
        found: dict[Rounded, Sequence[float | None] | None] = {
            "aggregate_tok_s": self.aggregate_tok_s_rounds,
            "per_user_tok_s_p50": self.per_user_tok_s_p50_rounds,
            "ttft_p50_s": self.ttft_p50_s_rounds,
            "goodput_share": self.goodput_share_rounds,
        }
        return found[quantity]

    def value_of(self, quantity: Rounded) -> float | None:
        found: dict[Rounded, float | None] = {
            "aggregate_tok_s": self.aggregate_tok_s,
            "per_user_tok_s_p50": self.per_user_tok_s_p50,
            "ttft_p50_s": self.ttft_p50_s,
            "goodput_share": self.goodput_share,
        }
        return found[quantity]

    def interval_of(self, quantity: Rounded) -> list[float] | None:
        found: dict[Rounded, list[float] | None] = {
            "aggregate_tok_s": self.aggregate_tok_s_ci,
            "per_user_tok_s_p50": self.per_user_tok_s_p50_ci,
            "ttft_p50_s": self.ttft_p50_s_ci,
            "goodput_share": self.goodput_share_ci,
        }
        return found[quantity]

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump()


def catches(detectable: float | None, ceiling: bool) -> str:
    """What a gate's rounds could see, in words (golive.endpoint.gates.Gate.detectable), the same in every report:
    "this run would catch a station 1.32× below the floor"; empty where the rounds give no interval."""
    if detectable is None:
        return ""
    return f"this run would catch a station {detectable:.2f}× {'above the ceiling' if ceiling else 'below the floor'}"
