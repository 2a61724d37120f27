"""How long the selected checks should take, said before any runs: expected from the profile's workload at its floors,
and an upper bound from its budgets (`load.max_duration_s`, `endpoint.request_timeout_s`, the host connect timeout).

The expected time is what a station exactly at its floors would take: the throughput sweep's tokens ÷ the floor speed
of each level (interpolated between the floors the profile sets), one answer per battery case at the single-user floor,
the needle probes at the recipe's long-context prefill speed, and a second for every other check. A faster station
finishes sooner; the upper bound is what golive's own limits allow, whatever the station does.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import pytest

from golive.profile.rules import duration
from golive.profile.schema import Load, Profile, Station
from golive.run.session import layer_of, station_of

# [000]: 3 needles at 968,377 prompt tokens took 37.0 / 35.8 / 33.5 s: ~27,000 prompt tok/s with the answer
RECIPE_LONG_PREFILL_TOK_S = 968_377 / 35.4
ANSWER_TOKENS = 64  # a typical battery answer: a tool call or a short text, with a little reasoning
OTHER_CHECK_S = 1.0
# checks that send one request per battery case: module → the battery's size (read once, lazily)
BATTERY_MODULES = {"test_tools.py": "tool", "test_agent.py": "agent"}


@dataclass
class Estimate:
    expected_s: float = 0.0
    upper_s: float = 0.0
    parts: dict[str, list[float]] = field(default_factory=lambda: defaultdict(lambda: [0.0, 0.0]))

    def add(self, what: str, expected: float, upper: float) -> None:
        expected = min(expected, upper)  # the budgets stop golive there, however slow the station
        self.expected_s += expected
        self.upper_s += upper
        self.parts[what][0] += expected
        self.parts[what][1] += upper

    def line(self, checks: int) -> str:
        biggest = sorted(self.parts.items(), key=lambda kv: -kv[1][0])[:3]
        shown = ", ".join(f"{what} {duration(e)}" for what, (e, _) in biggest if e >= 1)
        return (
            f"golive: {checks} checks should take about {duration(self.expected_s)} at the profile's floors"
            + (f" ({shown})" if shown else "")
            + f"; at most {duration(self.upper_s)} by its budgets"
        )

    def as_dict(self) -> dict:
        return {
            "expected_s": round(self.expected_s, 1),
            "upper_s": round(self.upper_s, 1),
            "parts": {
                what: {"expected_s": round(e, 1), "upper_s": round(u, 1)} for what, (e, u) in sorted(self.parts.items())
            },
        }


def level_speed(load: Load, users: int) -> float | None:
    """The aggregate tok/s a station exactly at its floors gives at `users`: log-linear between the floors set
    (1 user: single-user decode; gate: aggregate; top level: peak)."""
    floors = load.floors
    known = {max(load.concurrency): floors.peak_tok_s}  # where the gate is the top level, the gate's floor wins
    known |= {
        1: floors.single_user_decode_tok_s,
        (load.gate_concurrency or max(load.concurrency)): floors.aggregate_tok_s,
    }
    points = sorted((u, s) for u, s in known.items() if s)
    if not points:
        return None
    if users <= points[0][0]:
        return points[0][1] * users / points[0][0]
    for (u0, s0), (u1, s1) in zip(points, points[1:], strict=False):
        if u0 <= users <= u1:
            t = (math.log(users) - math.log(u0)) / (math.log(u1) - math.log(u0))
            return s0 + t * (s1 - s0)
    return points[-1][1]


def sweep_seconds(load: Load) -> float:
    """The sweep's time at the floors: each level's tokens (warm-up included) ÷ its floor speed."""
    total = 0.0
    rounds = load.rounds_to_run  # each a batch at 1 user and one at the gate level
    for users in sorted(set(load.concurrency)):
        speed = level_speed(load, users)
        requests = max(load.repeats * users, load.min_requests) + load.warmup * users
        if users in (1, load.gate_level):
            requests += rounds * max(load.repeats * users, load.min_requests)
        ttft = load.floors.ttft_p50_s or load.floors.single_user_ttft_p50_s or 0.0
        if speed:
            total += requests * load.output_tokens / speed + math.ceil(requests / users) * ttft
    return total


def _battery_size(kind: str) -> int:
    try:
        if kind == "tool":
            from golive.endpoint.toolcalls import load_battery

            return len(load_battery())
        from golive.endpoint.agent import load_agent_battery

        return 3 * len(load_agent_battery())  # an agent case is a few turns
    except Exception:  # an unreadable battery fails its own check; the estimate only guesses
        return 10


def estimate(items: Iterable[pytest.Item], profile_of: Callable[[Station], Profile]) -> Estimate:
    """`profile_of(station)` → the station's Profile. One sweep per station, however many perf checks read it."""
    result = Estimate()
    swept: set[str] = set()
    batteries: set[tuple[str, str]] = set()  # a battery runs once per station, however many checks read it
    for item in items:
        station = station_of(item)
        profile: Profile | None = profile_of(station) if station is not None else None
        module = item.path.name if hasattr(item, "path") else ""
        if station is None or profile is None:
            result.add("other", OTHER_CHECK_S, OTHER_CHECK_S)
            continue
        timeout = profile.endpoint.request_timeout_s
        single = profile.load.floors.single_user_decode_tok_s if profile.load else None
        answer_s = ANSWER_TOKENS / single if single else OTHER_CHECK_S
        if item.name.startswith("test_prefill_speed") and profile.load is not None:
            prefill = profile.load.prefill
            lengths = [n for n in prefill.prompt_tokens if n < profile.vllm.max_model_len]
            speed = {
                n: prefill.floors_tok_s.get(n) or prefill.reference_tok_s.get(n) or RECIPE_LONG_PREFILL_TOK_S
                for n in lengths
            }
            result.add(
                "prefill",
                sum(prefill.requests * n / speed[n] for n in lengths),
                prefill.requests * len(lengths) * timeout,
            )
        elif module == "test_throughput.py" and profile.load is not None:
            if station.name not in swept:
                swept.add(station.name)
                result.add("throughput sweep", sweep_seconds(profile.load), profile.load.max_duration_s + timeout)
        elif module == "test_long_context.py":
            prompt = profile.vllm.max_model_len * profile.endpoint.needle_fraction_of_context
            result.add("needles", prompt / RECIPE_LONG_PREFILL_TOK_S + answer_s, timeout)
        elif module in BATTERY_MODULES:
            if (station.name, module) not in batteries:
                batteries.add((station.name, module))
                cases = _battery_size(BATTERY_MODULES[module])
                result.add("batteries", cases * answer_s, cases * timeout)
        elif layer_of(item) == "endpoint":
            result.add("other endpoint checks", answer_s, timeout)
        else:
            result.add(f"{layer_of(item) or 'other'} checks", OTHER_CHECK_S, profile.host.connect_timeout_s)
    return result
