"""What the watcher reads of a station itself in a round: /metrics, a canary, a timed probe, systemd's restarts.

In this process, three requests timed here: /metrics (KV cache, running and waiting requests, the inter-token latency
histogram), a one-token canary, one small timed probe; and systemd's restart count of the serving unit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from golive.core.verdict import printable
from golive.day2.light_checks import WatchedCheck
from golive.profile.inventory import Station
from golive.profile.schema import Profile
from golive.site import loader

if TYPE_CHECKING:  # imported where used: the client brings openai
    from golive.endpoint.client import EndpointClient

CANARY_PROMPT = "Say OK."
PROBE_PROMPT = "Count from one to one hundred in words, separated by commas."


@dataclass
class StationRound:
    """One station's readings from one round; None: not read this round (the series is left out)."""

    checks: dict[str, WatchedCheck] = field(default_factory=dict)  # check id -> its state (light_checks)
    canary_up: bool | None = None
    ttft_s: float | None = None
    decode_tok_s: float | None = None
    others_running: float | None = None  # requests the station was serving when the probe started
    kv_usage: float | None = None
    running: float | None = None
    waiting: float | None = None
    per_user_tok_s: float | None = None
    restarts: float | None = None
    problems: list[str] = field(default_factory=list)


def _sample(samples: dict, *names: str) -> float | None:
    for name in names:
        values = [v for _, v in samples.get(name, [])]
        if values:
            return float(sum(values))
    return None


@dataclass
class Latency:
    """The station's inter-token latency histogram totals (vLLM: vllm:inter_token_latency_seconds; older builds
    vllm:time_per_output_token_seconds), to turn two readings into a per-user speed."""

    total_s: float
    count: float


def read_latency(samples: dict) -> Latency | None:
    for base in ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"):
        total, count = _sample(samples, f"{base}_sum"), _sample(samples, f"{base}_count")
        if total is not None and count is not None:
            return Latency(total, count)
    return None


def per_user_speed(before: Latency | None, after: Latency | None) -> float | None:
    """Tokens per second one user saw between two readings: 1 / mean inter-token latency; None without tokens."""
    if before is None or after is None or after.count <= before.count or after.total_s <= before.total_s:
        return None
    return (after.count - before.count) / (after.total_s - before.total_s)


def read_station_metrics(client: EndpointClient, reading: StationRound) -> Latency | None:
    samples = client.metrics()
    # vllm:kv_cache_usage_perc is a fraction (1 = full), whatever its name says
    reading.kv_usage = _sample(samples, "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    reading.running = _sample(samples, "vllm:num_requests_running")
    reading.waiting = _sample(samples, "vllm:num_requests_waiting")
    return read_latency(samples)


def probe(client: EndpointClient, profile: Profile, reading: StationRound) -> None:
    """The canary (one token, not streamed) then one timed streamed answer: TTFT and decode speed."""

    model = profile.vllm.served_model_name
    try:
        answer = client.chat(model, [{"role": "user", "content": CANARY_PROMPT}], max_tokens=1, temperature=0)
        reading.canary_up = bool(answer.content or answer.reasoning or answer.tool_calls or answer.finish_reason)
    except Exception as exc:  # any failure to answer is "not answering"; the checks say why
        reading.canary_up = False
        reading.problems.append(f"canary: {printable(str(exc))[:200]}")
        return
    started = time.perf_counter()
    try:
        answer = client.chat(
            model,
            [{"role": "user", "content": PROBE_PROMPT}],
            stream=True,
            temperature=0,
            max_tokens=profile.watch.probe_output_tokens,
        )
    except Exception as exc:
        reading.problems.append(f"probe: {printable(str(exc))[:200]}")
        return
    total = time.perf_counter() - started
    tokens = (answer.usage or {}).get("completion_tokens") or 0
    reading.ttft_s = answer.first_token_s
    if answer.first_token_s is not None and tokens >= 2 and total > answer.first_token_s:
        reading.decode_tok_s = (tokens - 1) / (total - answer.first_token_s)  # TPOT from the end of the stream


def read_restarts(loaded: loader.LoadedInventory, station: Station, profile: Profile) -> float | None:
    """systemd's NRestarts of the unit (`systemctl show`), where the host is reachable and systemd runs."""
    if not station.host or profile.service is None:
        return None
    from golive.facts import systemd
    from golive.station.connection import connect

    with connect(
        loaded.host_spec(station) or "", loaded.ssh_config, profile.host.connect_timeout_s, station.name
    ) as connection:
        if connection.unreachable():
            return None
        result = connection.host.run("systemctl show %s", profile.service.unit)
    if result.rc != 0:
        return None
    values = systemd.parse_show(result.stdout).get("NRestarts")
    return float(values[-1]) if values and values[-1].isdigit() else None
