"""The profile: a recipe as data. Unknown keys are errors; the inventory's schema is golive.profile.inventory."""

from __future__ import annotations

from ipaddress import IPv4Address
from typing import Literal, Self, get_args

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from golive.profile.origins import ValueOrigins, cite_sources


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Digest = Field(default=None, pattern=r"^sha256:[0-9a-f]{64}$")


class Service(Strict):
    """systemd owns the container: restart policy, prestart, start cap [000]."""

    unit: str
    prestart: str
    container: str
    restart: str = "on-failure"
    restart_sec_s: float = 60
    start_limit_burst: int = 3
    start_limit_interval_s: float = 3600
    log_dir: str | None = None


class Image(Strict):
    repository: str
    digest: str | None = Digest
    architecture: str | None = None
    note: str | None = None


class Numa(Strict):
    """The GB300 page-cache trap [000]: file pages on the HBM node break the next start."""

    hbm_file_pages_ceiling_mib: float = 512
    dram_node: int = 0


def model_name(value: str | None) -> str | None:
    """A model name as requests carry it: vLLM takes any string, but one with a control character or a space at
    either end is a typo no client's request matches."""
    if value is not None and (not value or value != value.strip() or not value.isprintable()):
        raise ValueError(f"model name {value!r} has a space at an end, a control character, or nothing in it")
    return value


class Vllm(Strict):
    """Served flags as the recipe launches them; None = not pinned by the recipe."""

    served_model_name: str
    port: int
    host: str | None = None
    tensor_parallel_size: int = 1
    max_model_len: int
    max_num_seqs: int | None = None
    gpu_memory_utilization: float | None = None
    enable_chunked_prefill: bool | None = None
    enable_prefix_caching: bool | None = None
    enable_auto_tool_choice: bool | None = None
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    kv_cache_dtype: str | None = None
    speculative_num_tokens: int | None = None

    _served_model_name = field_validator("served_model_name")(model_name)


class Checkpoint(Strict):
    repository: str
    path: str | None = None
    revision: str | None = None
    shard_count: int | None = None
    architecture: str | None = None
    quant_algo: str | None = None
    kv_cache_quant_algo: str | None = None
    size_gb: float
    disk_need_gb: float


class Gpu(Strict):
    name_contains: str
    per_station: int = Field(default=1, ge=0)  # 0: a station that serves without GPUs
    idle_hbm_used_ceiling_mib: float = 2048


class Sampling(Strict):
    """Sampling the quality batteries use: the model vendor's recommendation, or greedy (temperature 0)."""

    source: str = "greedy"  # where the values come from, shown in the report (e.g. "vendor model card")
    temperature: float = Field(default=0.0, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = None
    repeats: int = Field(default=1, ge=1)  # runs of each battery; the score is reported with its spread

    @model_validator(mode="after")
    def _repeats_need_sampling(self) -> Self:
        if self.repeats > 1 and self.temperature == 0:
            raise ValueError("repeats > 1 only with temperature > 0: greedy answers do not vary between runs")
        return self

    def describe(self) -> str:
        shown = ", ".join(
            f"{k}={v}" for k, v in self.model_dump(exclude={"source", "repeats"}).items() if v is not None
        )
        return f"{shown} ({self.source})" + (f", {self.repeats} runs" if self.repeats > 1 else "")

    def params(self) -> dict:
        return {k: v for k, v in {"temperature": self.temperature, "top_p": self.top_p}.items() if v is not None} | (
            {"extra_body": {"top_k": self.top_k}} if self.top_k is not None else {}
        )


class Endpoint(Strict):
    """What the served API must do; floors are the recipe's measured values or a site's."""

    tool_battery_floor: float = 1.0
    agent_battery_floor: float = 1.0  # multi-turn agent battery, fraction of cases passing streamed and not
    site_batteries: list[str] = Field(default_factory=list)  # answer batteries: files relative to the profile
    battery_sampling: Sampling = Sampling()
    reasoning_effort_levels: list[str] = Field(default_factory=list)
    kv_cache_tokens_floor: int | None = None
    needle_fraction_of_context: float = 0.9
    request_timeout_s: float = Field(default=120, gt=0)  # one whole non-streamed generation
    connect_timeout_s: float = Field(default=5, gt=0)  # TCP/TLS connect, every request
    light_timeout_s: float = Field(default=10, gt=0)  # /health, /v1/models, /metrics
    stream_stall_timeout_s: float = Field(default=120, gt=0)  # longest silence between two chunks of a stream
    max_concurrency: int = Field(default=4, ge=1)  # golive never has more requests in flight than this
    baseline_tolerance_pct: float = Field(default=10, ge=0)  # --baseline: a metric moving more than this is listed
    # what golive reads of one answer at most, after decompression (golive.endpoint.bounded): past a cap, one line
    max_body_bytes: int = Field(default=16 * 2**20, ge=4096)  # one answer: JSON, /metrics, a whole stream
    max_event_bytes: int = Field(default=2**20, ge=1024)  # one line or event of a stream
    max_json_depth: int = Field(default=64, ge=8)  # nesting of any JSON answer (a chat answer nests ~6 deep)
    stream_token_slack: int = Field(default=64, ge=0)  # token events past max_tokens before a stream is ended


class Host(Strict):
    """How golive reaches a station's host (testinfra)."""

    connect_timeout_s: float = Field(default=10, gt=0)  # ssh connect and banner: a host that never answers fails here


# The sweep's gates, one a `load.floors` number: a closed type shared by this schema, the gates
# (golive.endpoint.gates), the checks (suites/endpoint/test_throughput.py) and the reports; a misspelt gate is a mypy
# error (tests/unit/test_gate_names.py). LoadFloors declares exactly these fields (the same test).
GateName = Literal[
    "single_user_decode_tok_s",
    "single_user_ttft_p50_s",
    "aggregate_tok_s",
    "per_user_tok_s_p50",
    "ttft_p50_s",
    "peak_tok_s",
    "scaling_ratio",
    "per_user_ratio",
    "goodput_share",
]
GATE_NAMES: tuple[GateName, ...] = get_args(GateName)


class LoadFloors(Strict):
    """The recipe's measured numbers (or a site's); each gate is this value less `tolerance` (docs/metrics.md)."""

    single_user_decode_tok_s: float | None = None
    single_user_ttft_p50_s: float | None = None  # a ceiling
    aggregate_tok_s: float | None = None  # at gate_concurrency
    per_user_tok_s_p50: float | None = None  # at gate_concurrency
    ttft_p50_s: float | None = None  # a ceiling, at gate_concurrency
    peak_tok_s: float | None = None  # the best aggregate of the sweep
    # ratios within one run: they hold on any machine (a station that cannot batch fails them on a laptop too)
    scaling_ratio: float | None = None  # aggregate at gate_concurrency ÷ aggregate at 1 user
    per_user_ratio: float | None = None  # per-user decode (p50) at gate_concurrency ÷ single-user decode
    goodput_share: float | None = None  # at gate_concurrency: share of requests meeting every load.slo objective

    def of(self, gate: GateName) -> float | None:
        """The profile's number for a gate (None: the profile sets none, the gate is not applicable)."""
        value: float | None = getattr(self, gate)
        return value


class LoadSmoke(Strict):
    """Floors that say only that the station answers at all: set so far below what its machine does (a CPU shared with
    other work) that a broken station meets them too. Meeting one judges nothing: its check ends not applicable,
    "measured, not judged", with `why`, and the number stays in the reports' Measured table marked so; missing one
    still fails. Other gates (a ratio, the batch check) judge such a station (docs/metrics.md: smoke floors)."""

    floors: list[GateName] = Field(min_length=1)
    why: str = Field(min_length=1)  # what these floors can tell, and what judges instead


class LoadSlo(Strict):
    """Per-request objectives for goodput; the same as `vllm bench serve --goodput ttft:MS tpot:MS e2el:MS`."""

    ttft_s: float | None = Field(default=None, gt=0)
    tpot_s: float | None = Field(default=None, gt=0)  # (E2E − TTFT) ÷ (output tokens − 1)
    e2el_s: float | None = Field(default=None, gt=0)


class LoadPrefill(Strict):
    """Prompt tok/s at long prompts: one output token, a salted prompt no cached block can match, one at a time."""

    prompt_tokens: list[int] = Field(default_factory=list)  # the lengths measured
    requests: int = Field(default=3, ge=1)  # per length (sequential)
    floors_tok_s: dict[int, float] = Field(default_factory=dict)  # a site's floors, by length: gated where set
    reference_tok_s: dict[int, float] = Field(default_factory=dict)  # shown beside the measurement, never gated
    reference_source: str | None = None  # where the reference numbers were measured (checkpoint, hardware)


class LoadPrefillStall(Strict):
    """Running streams while one long prompt is prefilled (golive.endpoint.prefill_stall): `streams` answers decode,
    one salted `prompt_tokens` prompt arrives beside them; with chunked prefill on they keep decoding."""

    # the long prompt, by the server's /tokenize: at least 4 × the served --max-num-batched-tokens (vLLM's default 2,048
    # on CPU, 8,192 on H100/H200, 16,384 on 160 GB+ GPUs) so that one chunk is a small share of its prefill; None: not
    # checked (not applicable)
    prompt_tokens: int | None = Field(default=None, ge=1)
    streams: int = Field(default=3, ge=1)  # decoding while it is prefilled


class Load(Strict):
    """The throughput workload and its floors; golive never exceeds the bounds (max_*)."""

    prompt_tokens: int = Field(default=40, ge=1)
    output_tokens: int = Field(default=256, ge=2)
    concurrency: list[int] = Field(default_factory=lambda: [1], min_length=1)
    gate_concurrency: int | None = None  # the level the aggregate/per-user/TTFT gates read
    repeats: int = Field(default=3, ge=1)  # measured requests per level = repeats x level
    min_requests: int = Field(default=1, ge=1)  # … but at least this many: the 1-user level's interval needs them
    warmup: int = Field(default=1, ge=0)  # warm-up requests per level = warmup x level, never measured
    # ratio rounds after the levels (a 1-user batch and a gate-level batch back to back, each round one ratio; more
    # while a ratio floor is undecided): the ratio gates read their median. 0: the ratios of the pooled levels
    ratio_rounds: int = Field(default=3, ge=0)
    reasoning_effort: str | None = None
    tolerance: float = Field(default=0.1, ge=0, lt=1)  # floors x (1 - t), ceilings x (1 + t)
    max_concurrency: int = Field(default=256, ge=1)
    max_requests: int = Field(default=2048, ge=1)
    max_duration_s: float = Field(default=900, gt=0)
    # a stall: seconds lost in one freeze (no byte, a batch far below its level, a p99 far above its p50, a long
    # warm-up) that make a finding; an accelerator station never pauses this long (golive.endpoint.timeline)
    stall_s: float = Field(default=2.0, gt=0)
    floors: LoadFloors = LoadFloors()
    smoke: LoadSmoke | None = None  # floors measured, not judged (LoadSmoke)
    slo: LoadSlo = LoadSlo()
    prefill: LoadPrefill = LoadPrefill()
    prefill_stall: LoadPrefillStall = LoadPrefillStall()

    @property
    def gate_level(self) -> int:
        """The users the aggregate, per-user and TTFT-under-load gates read: gate_concurrency, else the top level."""
        return self.gate_concurrency or max(self.concurrency)

    @property
    def round_requests(self) -> int:
        """The requests of one ratio round (0 where the profile sets no ratio floor or the gate level is 1)."""
        if self.gate_level == 1 or (self.floors.scaling_ratio is None and self.floors.per_user_ratio is None):
            return 0
        return max(self.repeats, self.min_requests) + max(self.gate_level * self.repeats, self.min_requests)

    @property
    def rounds_to_run(self) -> int:
        """The ratio rounds the sweep runs at first: ratio_rounds, where a round has something to measure."""
        return self.ratio_rounds if self.round_requests else 0

    @model_validator(mode="after")
    def _bounded(self) -> Self:
        if max(self.concurrency) > self.max_concurrency or min(self.concurrency) < 1:
            raise ValueError(
                f"concurrency levels {self.concurrency} must lie in 1..max_concurrency ({self.max_concurrency})"
            )
        if self.prefill_stall.streams + 1 > self.max_concurrency:
            raise ValueError(
                f"prefill_stall.streams {self.prefill_stall.streams} and its long prompt exceed max_concurrency "
                f"({self.max_concurrency})"
            )
        if self.gate_concurrency is not None and self.gate_concurrency not in self.concurrency:
            raise ValueError(f"gate_concurrency {self.gate_concurrency} is not one of the levels {self.concurrency}")
        needed = sum(max(c * self.repeats, self.min_requests) + c * self.warmup for c in set(self.concurrency))
        needed += max(self.concurrency) * self.warmup  # the station primed once at the top level first
        needed += self.ratio_rounds * self.round_requests
        if needed > self.max_requests:
            raise ValueError(f"the sweep needs {needed} requests, more than max_requests ({self.max_requests})")
        return self


class Watch(Strict):
    """After go-live (`golive watch`): the alert thresholds of the recipe's operations notes. A threshold left None
    is the go-live floor less `load.tolerance`; with neither, that alert is not generated."""

    single_user_decode_tok_s: float | None = None  # the probe's decode speed, one user
    per_user_tok_s: float | None = None  # per-user decode speed with load.gate_concurrency users running
    kv_usage_ceiling: float = Field(default=0.95, gt=0, le=1)  # KV cache in use, with requests waiting
    restarts_per_interval: int | None = Field(default=None, ge=1)  # None: service.start_limit_burst - 1
    probe_output_tokens: int = Field(default=64, ge=2)  # the timed probe's answer length


class Security(Strict):
    require_auth: bool = False


Role = Literal["a", "b"]


class Rail(Strict):
    """One RoCE rail: the interface, its RDMA device and port, and each station's address on it [002]."""

    interface: str
    rdma_device: str | None = None  # None: a rail without RDMA (a test rail), its RDMA checks do not apply
    port: int = 1
    addresses: dict[Role, IPv4Address]


class Cluster(Strict):
    """Two stations over RDMA: rails, NCCL and what must be identical on both [002]."""

    rails: list[Rail] = Field(default_factory=list)  # [] = both ranks on one host: no rail to check
    mtu: int = 9000
    speed_gbps: float = 400
    ping_count: int = Field(default=3, ge=1, le=10)
    nccl_version: str
    env_file: str | None = None  # where each station keeps the pinned environment (KEY=VALUE)
    env: dict[str, str] = Field(default_factory=dict)  # pinned in that file, value for value
    gdrdma_required: bool = True
    nccl_log: str | None = None  # each station's NCCL_DEBUG=INFO log of the serving run
    image_ref: str | None = None  # the image reference the launch script runs on both stations
    all_reduce_perf: str | None = None  # nccl-tests all_reduce_perf output on station a (optional gate)
    busbw_floor_gbs: float | None = None  # GB/s, the `# Avg bus bandwidth` floor


Layer = Literal["host", "cluster", "endpoint"]
LAYERS: tuple[Layer, ...] = get_args(Layer)  # the one list of layers: markers, scope and reports read it


class Profile(Strict):
    name: str
    description: str
    sources: list[str] = Field(default_factory=list)
    # what a go-live of this recipe checks
    layers: list[Layer] = Field(default_factory=lambda: list[Layer](["host", "endpoint"]))
    service: Service | None = None
    image: Image
    numa: Numa | None = None
    vllm: Vllm
    checkpoint: Checkpoint
    gpu: Gpu
    endpoint: Endpoint = Endpoint()
    security: Security = Security()
    cluster: Cluster | None = None
    load: Load | None = None  # throughput floors; None: the perf checks are not applicable
    host: Host = Host()
    watch: Watch = Watch()
    # where each value was written (set by the loader; None for a profile built in code): golive.profile.origins
    _origins: ValueOrigins | None = PrivateAttr(default=None)

    @property
    def cited(self) -> str:
        """The profile's sources as citations ("[000][001]"): a rule whose numbers are this profile's cites them."""
        return cite_sources(self.sources, self.name)

    @property
    def origins(self) -> ValueOrigins | None:
        """Where each value was written, `extends:` resolved; `golive.profile.origins.origin` reads it."""
        return self._origins

    def written_at(self, origins: ValueOrigins) -> Profile:
        """This profile, knowing where its values were written (the loader calls this once, after validation)."""
        self._origins = origins
        return self
