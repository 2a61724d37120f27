"""The profile (a recipe as data) and the inventory (a site's stations). Unknown keys are errors."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


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
    per_station: int = 1
    idle_hbm_used_ceiling_mib: float = 2048


class Sampling(Strict):
    """Sampling the quality batteries use: the model vendor's recommendation, or greedy (temperature 0)."""

    source: str = "greedy"  # where the values come from, shown in the report (e.g. "vendor model card")
    temperature: float = Field(default=0.0, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = None

    def describe(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.model_dump(exclude={"source"}).items() if v is not None)
        return f"{shown} ({self.source})"

    def params(self) -> dict:
        return {k: v for k, v in {"temperature": self.temperature, "top_p": self.top_p}.items() if v is not None} | (
            {"extra_body": {"top_k": self.top_k}} if self.top_k is not None else {})


class Endpoint(Strict):
    """What the served API must do; floors are the recipe's measured values or a site's."""

    tool_battery_floor: float = 1.0
    agent_battery_floor: float = 1.0  # multi-turn agent battery, fraction of cases passing streamed and not
    site_batteries: list[str] = Field(default_factory=list)  # answer batteries: files relative to the profile
    battery_sampling: Sampling = Sampling()
    reasoning_effort_levels: list[str] = Field(default_factory=list)
    kv_cache_tokens_floor: int | None = None
    needle_fraction_of_context: float = 0.9
    request_timeout_s: float = 120
    max_concurrency: int = Field(default=4, ge=1)  # golive never has more requests in flight than this


class Security(Strict):
    require_auth: bool = False


Layer = Literal["host", "cluster", "endpoint"]


class Profile(Strict):
    name: str
    description: str
    sources: list[str] = Field(default_factory=list)
    layers: list[Layer] = Field(default_factory=lambda: ["host", "endpoint"])  # what a go-live of this recipe checks
    service: Service | None = None
    image: Image
    numa: Numa | None = None
    vllm: Vllm
    checkpoint: Checkpoint
    gpu: Gpu
    endpoint: Endpoint = Endpoint()
    security: Security = Security()


class Station(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    role: Literal["a", "b"] = "a"
    host: str | None = None
    endpoint: str | None = None
    api_key_env: str | None = None
    phase: Literal["serving", "pre-start"] = "serving"
    layers: list[Layer] | None = None  # checked here; default: every layer of the profile (others: not applicable)
    profile: str | None = None  # this station's own profile, where it differs from the inventory's


class Inventory(Strict):
    profile: str
    stations: list[Station] = Field(min_length=1)
    output: str | None = None
