"""What vLLM says about itself while the load runs: its running and waiting request counts and its own TTFT
histogram from /metrics, and the /health round trip (a request that generates nothing)."""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time

import httpx

from golive.endpoint.bounded import DEFAULT_CAPS, BoundError, Caps, aget
from golive.endpoint.client import parse_metrics

RUNNING, WAITING = "vllm:num_requests_running", "vllm:num_requests_waiting"


async def engine_counts(
    client: httpx.AsyncClient,
    root: str,
    headers: dict,
    model: str,
    done: asyncio.Event,
    every_s: float = 0.1,
    timeout_s: float = 10,
    caps: Caps = DEFAULT_CAPS,
) -> list[list[float]]:
    """[running, waiting] from vLLM's /metrics gauges (the served model's series summed over engines), polled every
    `every_s` until `done`; polls that did not give both are left out. Read only: a GET, like Prometheus' scrape;
    each read within `timeout_s` and the body cap."""
    samples: list[list[float]] = []
    while not done.is_set():
        with contextlib.suppress(httpx.HTTPError, BoundError, ValueError):
            status, body = await aget(client, f"{root}/metrics", headers, timeout_s, caps.body_bytes)
            if status == 200:
                # only the two gauges' lines go to the parser: the whole page is ~100 kB, polled ten times a second
                text = body.decode(errors="replace")
                lines = "\n".join(line for line in text.splitlines() if line.startswith((RUNNING, WAITING)))
                found = parse_metrics(lines + "\n")
                served = [
                    [value for labels, value in found.get(name, []) if labels.get("model_name", model) == model]
                    for name in (RUNNING, WAITING)
                ]
                if all(served):
                    samples.append([sum(values) for values in served])
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), every_s)
    return samples


TTFT_SUM, TTFT_COUNT = "vllm:time_to_first_token_seconds_sum", "vllm:time_to_first_token_seconds_count"


async def vllm_ttft(
    client: httpx.AsyncClient, root: str, headers: dict, model: str, timeout_s: float = 10, caps: Caps = DEFAULT_CAPS
) -> tuple[float, float] | str:
    """(sum, count) of vLLM's `vllm:time_to_first_token_seconds` histogram for the served model (summed over
    engines), or why it could not be read."""
    try:
        status, body = await aget(client, f"{root}/metrics", headers, timeout_s, caps.body_bytes)
    except httpx.HTTPError as exc:
        return f"GET /metrics did not answer ({type(exc).__name__})"
    except BoundError as exc:
        return f"GET /metrics: {exc.what}"
    if status != 200:
        return f"GET /metrics answered HTTP {status}"
    text = body.decode(errors="replace")
    lines = "\n".join(line for line in text.splitlines() if line.startswith((TTFT_SUM, TTFT_COUNT)))
    try:
        found = parse_metrics(lines + "\n")
    except ValueError:
        return "GET /metrics is not Prometheus text"
    served = [
        [value for labels, value in found.get(name, []) if labels.get("model_name", model) == model]
        for name in (TTFT_SUM, TTFT_COUNT)
    ]
    if not all(served):
        labelled = sorted({labels.get("model_name", "") for labels, _ in found.get(TTFT_COUNT, [])} - {""})
        return (
            f"GET /metrics has no vllm:time_to_first_token_seconds histogram for model_name `{model}` (it has "
            + (", ".join(f"`{name}`" for name in labelled) or "none")
            + ")"
        )
    return sum(served[0]), sum(served[1])


async def round_trip(
    client: httpx.AsyncClient, root: str, times: int = 5, timeout_s: float = 10, caps: Caps = DEFAULT_CAPS
) -> float | None:
    """The median time of GET /health, a request that generates nothing; None where it never answered 200. Sent
    without the key: vLLM asks none there, and a gateway's keyed /health may call every model (LiteLLM's does)."""
    taken = []
    for _ in range(times):
        with contextlib.suppress(httpx.HTTPError, BoundError):
            begun = time.perf_counter()
            status, _ = await aget(client, f"{root}/health", {}, timeout_s, caps.body_bytes)
            if status == 200:
                taken.append(time.perf_counter() - begun)
    return statistics.median(taken) if taken else None
