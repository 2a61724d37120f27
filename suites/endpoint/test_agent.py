"""Agents loop: call a tool, read its result, call the next or answer — the agent battery meets its floor [000]."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import require
from golive.endpoint.agent import load_agent_battery, run_agent_case
from golive.endpoint.battery_runs import Spread, failing_ids
from golive.endpoint.client import error_body
from golive.endpoint.errors import StatusError

if TYPE_CHECKING:
    from golive.endpoint.agent import AgentCase, Outcome
    from golive.endpoint.client import EndpointClient
    from golive.profile.schema import Profile
    from golive.run.fixtures import RecordFinding, RecordMetric, RecordProvenance

pytestmark = pytest.mark.endpoint


@check("endpoint.agent.battery_meets_floor", Cost.AGENT_BATTERY)
def test_agent_battery_meets_floor(
    endpoint: EndpointClient,
    profile: Profile,
    record_metric: RecordMetric,
    record_finding: RecordFinding,
    record_provenance: RecordProvenance,
) -> None:
    """The agent battery (single, parallel and chained calls, tool errors, no tool needed, numbers worked out from
    results), streamed and not, scores at least {endpoint.agent_battery_floor:%} on calls and final answers [000]."""
    sampling = profile.endpoint.battery_sampling
    cases = load_agent_battery()

    def run(case_stream: tuple[AgentCase, bool]) -> Outcome:
        case, stream = case_stream
        return run_agent_case(
            case,
            lambda messages, tools: endpoint.chat(
                profile.vllm.served_model_name,
                messages,
                tools=tools,
                max_tokens=1024,
                stream=stream,
                **sampling.params(),
            ),
        )

    jobs = [(case, stream) for case in cases for stream in (False, True)]
    runs = []  # per run: case id -> why it failed
    for _ in range(sampling.repeats):
        try:
            with ThreadPoolExecutor(max_workers=profile.endpoint.max_concurrency) as pool:  # load bounded by profile
                outcomes = list(pool.map(run, jobs))
        except StatusError as exc:
            if exc.status_code != 400:
                raise
            pytest.skip(f"the server refuses tool requests (HTTP 400: {error_body(exc)}): see the smoke-test check")
        failing: dict[str, str] = {}
        for (case, stream), outcome in zip(jobs, outcomes, strict=True):
            if not outcome.passed:
                failing.setdefault(
                    case.id,
                    f"{case.id} ({case.category}, {'streamed' if stream else 'non-streamed'}): {outcome.reason}",
                )
        runs.append(failing)
    spread = Spread([(len(cases) - len(failing)) / len(cases) for failing in runs])
    floor = profile.endpoint.agent_battery_floor
    spread.record(record_metric, "agent_battery_score", floor)
    record_provenance(**{"battery_failing.agent": failing_ids(runs)})
    record_finding(f"agent battery {spread.text()}, sampled with {sampling.describe()}")
    worst = min(runs, key=len, default={}) if spread.mean >= floor else max(runs, key=len)
    require(
        spread.mean >= floor,
        found=f"{len(cases) - len(worst)}/{len(cases)} cases pass streamed and not (score {spread.text()}); "
        f"failing: " + "; ".join(list(worst.values())[:6]) + (" …" if len(worst) > 6 else ""),
        recipe=f"agent battery ≥ {floor:.0%} of its {len(cases)} cases, streamed and not [000]",
        fix="an agent that ignores tool results or loops is not fit for go-live: compare the checkpoint, chat "
        "template and parser flags with the recipe's",
    )
