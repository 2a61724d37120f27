"""Answers stay right under load: batch-dependent corruption passes every single-request check and still ships [000].

The load is the throughput sweep's gate level (same workload, golive's load generator), within the profile's load
bounds; the probes are the smoke test's get_weather call and small sums with known answers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import counted, not_applicable, require
from golive.endpoint.client import ChatResult
from golive.endpoint.load_request import Workload
from golive.endpoint.underload import PROBES, Probe, probes_under_load

if TYPE_CHECKING:
    from golive.endpoint.client import EndpointClient
    from golive.profile.inventory import Station
    from golive.profile.schema import Profile

pytestmark = [pytest.mark.endpoint, pytest.mark.perf]


@check("endpoint.under_load.tool_calls_and_arithmetic_stay_correct", Cost.UNDER_LOAD)
def test_tool_calls_and_arithmetic_stay_correct_under_load(
    endpoint: EndpointClient, station: Station, profile: Profile
) -> None:
    """Tool calls and arithmetic come back right while the gate level's load ({load.gate_level} users) runs [000]."""
    load = profile.load
    if load is None:
        not_applicable("the profile sets no load section (no load to probe under)")
    gate = load.gate_concurrency or max(load.concurrency)
    room = load.max_concurrency - gate  # probes share the profile's bound on requests in flight
    if room < 1:
        not_applicable(
            f"the gate level ({gate}) already fills load.max_concurrency ({load.max_concurrency}): no room for a probe"
        )
    probes = list(PROBES[: max(0, load.max_requests - gate)])  # every request counts against max_requests
    model = profile.vllm.served_model_name
    workload = Workload(
        model=model,
        prompt_tokens=load.prompt_tokens,
        output_tokens=load.output_tokens,
        reasoning_effort=load.reasoning_effort,
    )

    def ask(probe: Probe) -> ChatResult:
        return endpoint.chat(
            model, [{"role": "user", "content": probe.question}], tools=probe.tools, temperature=0, max_tokens=1024
        )

    measured = asyncio.run(
        probes_under_load(
            endpoint.target,
            workload,
            gate,
            probes,
            ask,
            max_load_requests=load.max_requests - len(probes),
            deadline=time.perf_counter() + load.max_duration_s,
            probes_in_flight=min(room, len(probes)),
        )
    )
    loaded = [o for o in measured.outcomes if o.load_in_flight > 0]
    if not loaded:
        pytest.skip(
            f"no load request was in flight when the probes were sent ({len(measured.load)} load requests, "
            f"{measured.load_failures} failed): see the throughput sweep"
        )
    wrong = [o for o in measured.outcomes if o.wrong]
    # a probe wrong under load is asked again alone: wrong alone too, it is no load fault, and the functional check
    # of the same question (the smoke tool call, the chat checks) reports it with its own cause
    alone = {o.probe.name: judged_alone(o.probe, ask) for o in wrong}
    under_load_only = [o for o in wrong if alone[o.probe.name] is None]
    also_alone = [o for o in wrong if alone[o.probe.name] is not None]
    if also_alone and not under_load_only:
        pytest.skip(
            f"not checked under load because {counted(len(also_alone), 'probe')} "
            f"{'is' if len(also_alone) == 1 else 'are'} wrong without load too ("
            + "; ".join(f"{o.probe.name}: {alone[o.probe.name]}" for o in also_alone)
            + "): not a load fault; see the tool-call and chat checks, which report it"
        )
    require(
        not under_load_only,
        found="; ".join(
            f"{o.probe.name} (expected {o.probe.expect}, {o.load_in_flight} load requests in flight) got {o.wrong}"
            for o in under_load_only
        )
        + f" — {len(under_load_only)} of {len(probes)} probes wrong under {gate} concurrent load requests, "
        f"each right when asked again alone"
        + (
            f"; {len(also_alone)} more wrong without load too (reported by the tool-call and chat checks)"
            if also_alone
            else ""
        ),
        recipe="the smoke tool call and known sums answer right at the gate concurrency "
        f"({gate} users), as they do alone [000]",
        fix="the fault is batch-dependent (right alone, wrong under load): compare --max-num-seqs / "
        "--max-num-batched-tokens / CUDA graph capture sizes with the recipe, disable suspect kernels one at "
        "a time, and re-run; report it to the image's maintainers with this probe",
    )


def judged_alone(probe: Probe, ask: Callable[[Probe], ChatResult]) -> str | None:
    """What is wrong with the probe's answer with no load in flight (None: right), an HTTP error included."""
    try:
        return probe.judge(ask(probe))
    except Exception as exc:  # noqa: BLE001 - an HTTP error is a wrong answer, named as such (as under load)
        return f"{type(exc).__name__}: {str(exc)[:200]}"
