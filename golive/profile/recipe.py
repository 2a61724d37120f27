"""Each recipe rule once: the decisions a check (suites/) and `golive profile capture` (golive.day2) both make.

A check fails where a rule here finds a problem, and a capture puts the same problem on its review list, because both
ask the same function on the same station facts: a captured profile and a check can never disagree. Every function
takes facts (golive.facts) and the profile in force and gives a typed answer: None or an empty list when the station
keeps the rule, else what is wrong, in words a finding can quote.

    >>> dram_node(profile)                                  # where downloads and copies run
    0
    >>> docker_restart_policy(run, container)               # `docker run --restart=always …`
    DockerRestart(policy='always', where='docker run line')
    >>> [s.setting for s in start_limit_problems(unit, service)]
    ['StartLimitBurst=3']
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from golive.facts.docker import ContainerFacts, DockerRun
    from golive.facts.systemd import UnitFacts
    from golive.profile.schema import Profile, Service

# --- NUMA: the host's own memory node ---------------------------------------------------------------------------------


def dram_node(profile: Profile) -> int:
    """The NUMA node of the host's own memory (LPDDR on a GB300): downloads and copies run there under
    `numactl --membind=N`, so their page cache stays off the GPU's HBM node [000]. Node 0 when the profile declares
    no coherent GPU memory (`numa: null`): every host has a node 0."""
    return profile.numa.dram_node if profile.numa else 0


@dataclass(frozen=True)
class DramPin:
    """The serving container confined to the DRAM node (`--cpuset-mems`): CUDA init fails with Error 802 [000]."""

    node: int
    values: tuple[str, ...]  # every --cpuset-mems the container has, the unit's and the running container's

    def __str__(self) -> str:
        nodes = "node" if len(self.values) == 1 else "nodes"
        return f"the serving container is confined to memory {nodes} {', '.join(self.values)}"


def dram_pin(profile: Profile, run: DockerRun, container: ContainerFacts | None) -> DramPin | None:
    """The container's `--cpuset-mems` (the unit's docker run line and, when one exists, the container's
    HostConfig.CpusetMems) where one confines it to the DRAM node; None when the container gets the whole machine."""
    node = dram_node(profile)
    values = [v for v in run.values("--cpuset-mems") if v]
    if container is not None and container.cpuset_mems:
        values.append(container.cpuset_mems)
    if all(v.strip() != str(node) for v in values):
        return None
    return DramPin(node, tuple(sorted(set(values))))


# --- the image: pinned, and the one that runs ----------------------------------------------------------------------


def running_image_not_pinned(run: DockerRun, pin: str | None, running_digests: set[str]) -> str | None:
    """The digest the running container should run where it runs another image: the unit's pin (its docker run line's
    `@sha256:`), else the profile's `image.digest` [000]. None where it runs the pinned image, or nothing is pinned
    (the pin check fails that station on its own)."""
    wanted = run.image.digest or pin
    if wanted and wanted not in running_digests:
        return wanted
    return None


# --- docker: systemd owns restarts -----------------------------------------------------------------------------------

RUN_LINE = "docker run line"
INSPECTED = "docker inspect HostConfig.RestartPolicy"


@dataclass(frozen=True)
class DockerRestart:
    """A docker restart policy in force: a docker restart skips the prestart and its drop_caches [000]."""

    policy: str
    where: str  # RUN_LINE or INSPECTED

    def said(self, origin: str = "") -> str:
        """`docker restart policy 'always' (docker run line (set by …))`: `origin` names where a variable set it."""
        return f"docker restart policy {self.policy!r} ({self.where}{origin})"

    def __str__(self) -> str:
        return self.said()


def docker_restart_policy(run: DockerRun, container: ContainerFacts | None) -> DockerRestart | None:
    """The docker restart policy in force: the unit's `docker run --restart=…` (what the next start gets), else the
    running container's HostConfig.RestartPolicy; None when none (`no`, or no policy at all)."""
    flags = [v for v in run.values("--restart") if v not in (None, "no")]
    if flags:
        return DockerRestart(str(flags[0]), RUN_LINE)
    if container is not None and container.restart_policy not in ("no", ""):
        return DockerRestart(container.restart_policy, INSPECTED)
    return None


# --- systemd: restart after a pause, cap the starts, enabled ---------------------------------------------------------


@dataclass(frozen=True)
class UnitSetting:
    """One systemd setting the profile pins: what the unit has and what the profile wants."""

    key: str  # the systemd key: "Restart"
    field: str  # the profile's key under service: "restart"
    got: str | int | float | None  # None: the unit shows no value
    want: str | int | float

    @property
    def differs(self) -> bool:
        return self.got != self.want

    @property
    def setting(self) -> str:
        """The line that fixes it: `StartLimitIntervalSec=3600`."""
        return f"{self.key}={self.want:g}" if isinstance(self.want, float) else f"{self.key}={self.want}"


def restart_settings(unit: UnitFacts, service: Service) -> list[UnitSetting]:
    """Restart= and RestartSec=: systemd restarts a crashed container after a pause [000]."""
    return [
        UnitSetting("Restart", "restart", unit.restart, service.restart),
        UnitSetting("RestartSec", "restart_sec_s", unit.restart_sec_s, service.restart_sec_s),
    ]


def start_limit_settings(unit: UnitFacts, service: Service) -> list[UnitSetting]:
    """StartLimitBurst= and StartLimitIntervalSec=: a crash loop stops, then the unit stays down [000]."""
    return [
        UnitSetting("StartLimitBurst", "start_limit_burst", unit.start_limit_burst, service.start_limit_burst),
        UnitSetting(
            "StartLimitIntervalSec",
            "start_limit_interval_s",
            unit.start_limit_interval_s,
            service.start_limit_interval_s,
        ),
    ]


def restart_problems(unit: UnitFacts, service: Service) -> list[UnitSetting]:
    """The restart settings that differ from the profile's; empty when the unit restarts as the profile says."""
    return [s for s in restart_settings(unit, service) if s.differs]


def start_limit_problems(unit: UnitFacts, service: Service) -> list[UnitSetting]:
    """The start-limit settings that differ from the profile's; empty when the unit caps starts as it says."""
    return [s for s in start_limit_settings(unit, service) if s.differs]


# What each Restart= value does, by how the service ended (systemd.service(5), the table under Restart=)
RESTART_DOES = {
    "no": "Restart=no: systemd never restarts it, so after a crash the station stays down until someone starts it",
    "always": "Restart=always: systemd restarts it however it ends, a clean exit included, so a container stopped on "
    "purpose (`docker stop`) comes straight back",
    "on-success": "Restart=on-success: systemd restarts it only after a clean exit, so after a crash it stays down",
    "on-abnormal": "Restart=on-abnormal: systemd restarts it after a signal, a timeout or the watchdog but not after "
    "an exit code other than 0, so a vLLM that exits with an error stays down",
    "on-abort": "Restart=on-abort: systemd restarts it only after an uncaught signal, so a vLLM that exits with an "
    "error or times out stays down",
    "on-watchdog": "Restart=on-watchdog: systemd restarts it only when the watchdog fires, so after a crash it stays "
    "down",
}


def span(seconds: float | None) -> str:
    """A systemd time span as a finding shows it: `60`, `infinity`, `(not shown)`."""
    return "(not shown)" if seconds is None else "infinity" if math.isinf(seconds) else f"{seconds:g}"


def restart_does(restart: str | None, restart_sec_s: float | None, wanted: str = "on-failure") -> list[str]:
    """What the unit's restart settings do, where that is not what the profile wants (`wanted`): a safety switched
    off says so."""
    said = [RESTART_DOES[restart]] if restart in RESTART_DOES and restart != wanted else []
    if restart_sec_s is not None and restart_sec_s < 1 and restart != "no":
        said.append(
            f"RestartSec={span(restart_sec_s)}: systemd restarts it "
            + (
                "at once after a crash, no delay between attempts (a crash loop with no pause)"
                if restart_sec_s == 0
                else f"{span(restart_sec_s)} s after a crash (a crash loop with next to no pause)"
            )
        )
    return said


def start_limit_does(burst: int | None, interval_s: float | None, restart_sec_s: float | None) -> list[str]:
    """What the unit's start limit does, where it does not cap a crash loop: a limit switched off says so."""
    if interval_s == 0:  # systemd.unit(5): "may be set to 0 to disable any kind of rate limiting"
        return [
            "StartLimitIntervalSec=0 switches the start limit off (systemd.unit(5): 0 disables rate limiting): "
            "systemd restarts a crash loop for ever, each start burying the last crash's logs"
        ]
    if burst == 0:  # src/basic/ratelimit.h: a limit applies only with an interval and a burst above 0
        return [
            "StartLimitBurst=0 switches the start limit off (systemd applies a start limit only with an interval "
            "and a burst above 0): systemd restarts a crash loop for ever, each start burying the last crash's "
            "logs"
        ]
    if interval_s is not None and math.isinf(interval_s):
        return [
            f"StartLimitIntervalSec=infinity counts every start the unit ever makes: after {burst} starts it stays "
            "down for good, until `systemctl reset-failed`"
        ]
    if burst and interval_s and restart_sec_s and burst * restart_sec_s > interval_s:
        return [
            f"the cap never triggers: with RestartSec={restart_sec_s:g} s, {burst} restarts take at least "
            f"{burst * restart_sec_s:g} s, longer than StartLimitIntervalSec={interval_s:g} s"
        ]
    return []


def unit_not_enabled(unit: UnitFacts, unit_name: str) -> str | None:
    """`glm53-flash.service is disabled` when the unit does not start at boot (`systemctl enable`) [000]; None when it
    is enabled. A state systemd does not show is not "enabled" either."""
    return None if unit.enabled == "enabled" else f"{unit_name} is {unit.enabled or 'of unknown state'}"


# --- vLLM: the flags a profile pins, the KV cache it plans ------------------------------------------------------------

# profile key under vllm -> the vLLM flag it pins
VLLM_FLAGS = {
    "served_model_name": "served-model-name",
    "port": "port",
    "tensor_parallel_size": "tensor-parallel-size",
    "max_model_len": "max-model-len",
    "max_num_seqs": "max-num-seqs",
    "gpu_memory_utilization": "gpu-memory-utilization",
    "enable_chunked_prefill": "enable-chunked-prefill",
    "enable_prefix_caching": "enable-prefix-caching",
    "enable_auto_tool_choice": "enable-auto-tool-choice",
    "tool_call_parser": "tool-call-parser",
    "reasoning_parser": "reasoning-parser",
    "kv_cache_dtype": "kv-cache-dtype",
}


def pinned_flags(profile: Profile, vllm_model: str | None = None) -> dict[str, object]:
    """The vLLM flags the profile pins, flag -> value (`{"max-model-len": 1048576, …}`); a key it leaves unset pins
    nothing. `vllm_model`: vLLM's own --served-model-name where the station's inventory declares one (a gateway in
    front renames the model: clients ask for the profile's name, vLLM serves this one)."""
    pinned = {flag: getattr(profile.vllm, key) for key, flag in VLLM_FLAGS.items()}
    if vllm_model:
        pinned["served-model-name"] = vllm_model
    return {flag: value for flag, value in pinned.items() if value is not None}


def _whole(label: object) -> int | None:
    if label in (None, "", "None"):
        return None
    try:
        return int(str(label))
    except ValueError:
        return None


def kv_capacity_tokens(info: Mapping[str, object]) -> int | None:
    """KV cache capacity in tokens from the labels of `vllm:cache_config_info` (GET /metrics): kv_cache_size_tokens,
    else num_gpu_blocks × block_size (older vLLM); None when neither is published as a whole number."""
    tokens = _whole(info.get("kv_cache_size_tokens"))
    if tokens is not None:
        return tokens
    blocks, block_size = _whole(info.get("num_gpu_blocks")), _whole(info.get("block_size"))
    return blocks * block_size if blocks is not None and block_size else None


def kv_capacity_short(tokens: int, floor: int | None) -> str | None:
    """`KV cache holds 5,000,000 tokens, below the floor of 5,933,986` when the profile sets a floor
    (endpoint.kv_cache_tokens_floor) and the capacity is below it; None when it holds at least that, or no floor is
    set."""
    if floor is None or tokens >= floor:
        return None
    return f"KV cache holds {tokens:,} tokens, below the floor of {floor:,}"
