"""The sweep's typed record: one concurrency level's row, handed from the load generator (golive.endpoint.load) to
the gates, results.json, go-live.md and the plot. Its own module so a report or a host-only run reads it without
importing the load generator (httpx, numpy) or the OpenAI client."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class LevelResult:
    """One concurrency level of the sweep: the [002]-style table row, as data."""

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
    client_usage_mismatches: int  # requests whose client count differs from usage (cross-check, not a failure)
    warmup_failures: int = 0  # not measured, still a failure of the station
    errors: list[str] = field(default_factory=list)
    # 95 % intervals of the median of the rounds below (golive.endpoint.uncertainty.Rounds), [low, high]; None with
    # fewer than MIN_ROUNDS rounds
    aggregate_tok_s_ci: list[float] | None = None
    per_user_tok_s_p50_ci: list[float] | None = None
    ttft_p50_s_ci: list[float] | None = None
    # goodput against the profile's load.slo (None: no objectives set): vLLM's request goodput is good ÷ duration
    good_requests: int | None = None
    goodput_req_s: float | None = None
    goodput_share: float | None = None  # good ÷ successful requests
    goodput_share_ci: list[float] | None = None
    batches: int = 1  # measured batches of `repeats` × C: more when a floor was undecided (the interval straddled it)
    # the gate level only: the ratio rounds (golive.endpoint.load.sweep_async), one value a round, each from a batch
    # at this level and a 1-user batch measured back to back: aggregate ÷ aggregate, per-user p50 ÷ per-user p50
    scaling_rounds: list[float] | None = None
    per_user_rounds: list[float | None] | None = None
    # the level's rounds: each measured batch's own value, in the order measured (the gates read their median and its
    # interval, golive.endpoint.uncertainty.Rounds); None for a row the sweep did not make
    aggregate_tok_s_rounds: list[float] | None = None
    per_user_tok_s_p50_rounds: list[float | None] | None = None
    ttft_p50_s_rounds: list[float | None] | None = None
    goodput_share_rounds: list[float | None] | None = None
    # the gate level only: vLLM's own count of the requests it ran and kept waiting, [running, waiting] per /metrics
    # poll during its round batches (`vllm:num_requests_running`, `vllm:num_requests_waiting`); None where /metrics
    # never reported them
    engine_samples: list[list[float]] | None = None

    def as_dict(self) -> dict:
        return asdict(self)
