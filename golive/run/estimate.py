"""How long the selected checks should take, said before any runs, from a quick probe of each station's endpoint and
the profile's workload; then how long they did take (every report shows both).

>>> guess = estimate(session.items, profile_of, {"gb300-a": probe_endpoint(target, profile, "gb300-a")})
>>> guess.line(57)
'golive: 57 checks should take about 3 min 10 s, at most 7 min 55 s (throughput sweep 2 min 5 s, …); …'

Each check is reckoned by the cost it declares (golive.checklist.Cost), never by its file or function name. The speeds
come from the probe of each station's endpoint before the first check (golive.run.probe): the decode speed from the
gaps between tokens, the first token (the path's round trip included) once per request or batch, as the run pays
them. A station that was not probed (no selected check waits on its speed) is estimated from the profile's floors,
and the line says so. A station whose endpoint did not answer the probe gives no estimate for its endpoint checks:
they may end at once (a refused connection) or wait out their timeouts, and nothing says which; the line and every
report say how many checks were left out, never a time for them.

The three figures:

- **expected** (`expected_s`): this run on these stations as the probe found them. The throughput sweep is its tokens
  ÷ the probe's speed (one user's) scaled to each level by the profile's model of scaling (the floors' shape from 1 user
  to the gate level and the peak, never below the scaling-ratio floor), plus a first token per batch; the batteries,
  the tool_choice set and every other endpoint check are answers of `ANSWER_TOKENS` at the probe's speed; the needles,
  the prefill check and the prefill-stall check are their prompts at the probe's prefill speed (fitted through its two
  prompts: a long prompt is slower per token); a host or cluster check is `HOST_CHECK_S`; golive itself is the time
  already spent before the first check (start, collection, the probe) and `REPORTS_S`. Where nothing was measured,
  the floors' speeds stand in: the time of a station exactly at its floors.
- **at most** (`upper_s`): the same at the probe's speeds × 1 / `PESSIMISM` (a station that turns out that much
  slower than its probe, or decides a floor only after extra batches), each part capped by its budget. It is at most
  `PESSIMISM` × the expected time, by construction; it is not a promise about a station that stops answering.
- **golive's limits** (`limit_s`): the sum of every budget (`load.max_duration_s`, `endpoint.request_timeout_s` per
  request, the host connect timeout per check): the hard stop, whatever the station does (`--max-run-time` sets a
  tighter one).

Each check carries its own expected share (`Estimate.per_check`): a shared measurement (the sweep, a battery, the
tool_choice set: Cost.shared) is counted on the first check of its station that reads it. golive.run.progress refines
the time left from it while the run goes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from golive.checklist import Cost, declared
from golive.core.verdict import counted
from golive.profile.inventory import Station
from golive.profile.rules import duration
from golive.profile.schema import Load, Profile
from golive.report.model import not_estimated, the_others
from golive.run.probe import Probe
from golive.run.scope import layer_scope
from golive.run.session import layer_of, station_of

# [000]: 3 needles at 968,377 prompt tokens took 37.0 / 35.8 / 33.5 s: ~27,000 prompt tok/s with the answer
RECIPE_LONG_PREFILL_TOK_S = 968_377 / 35.4
ANSWER_TOKENS = 64  # a typical battery answer: a tool call or a short text, with a little reasoning
OTHER_CHECK_S = 1.0
PESSIMISM = 2.5  # the upper bound: every measured speed at 1 / 2.5 = 40 % of the probe's
HOST_CHECK_S = 0.5  # a host or cluster check: a few commands on the station (chroot: ~0.02 s; ssh: ~0.5 s)
REPORTS_S = 3.0  # writing the four reports (the HTML's plot included)
GOLIVE_ITSELF = "golive itself"  # the part that is golive's own: start, collection, the probes, the reports
TOOL_CHOICE_REQUESTS = 10  # the tool_choice set: 5 modes, each plain and streamed, endpoint.max_concurrency at a time


@dataclass
class Speeds:
    """One station's speeds as the estimate uses them: the probe's where measured, else the profile's floors."""

    decode_tok_s: float | None  # one user
    ttft_s: float
    prefill_tok_s: float | None  # measured; None: the profile's prefill floors, else the recipe's long-prompt speed
    measured: bool
    prefill_points: tuple[tuple[int, float], ...] = ()

    @classmethod
    def of(cls, profile: Profile, probe: Probe | None) -> Speeds:
        """The probe's speeds where it measured them, else the profile's floors (a probe that failed: see
        `estimate`, which leaves that station's endpoint checks out instead)."""
        if probe is not None and probe.measured:
            return cls(probe.decode_tok_s, probe.first_token_s, probe.prefill_tok_s, True, probe.prefill_points)
        floors = profile.load.floors if profile.load else None
        ttft = (floors.single_user_ttft_p50_s or floors.ttft_p50_s or 0.0) if floors else 0.0
        return cls(floors.single_user_decode_tok_s if floors else None, ttft, None, False)

    def prefill_s(self, tokens: float, floor_tok_s: float | None = None) -> float:
        """A prompt's time to its first token. Two probe prompts: the first token's own time (the short answer's)
        plus a·P + b·P² fitted through both (attention makes a long prompt slower per token), a, b ≥ 0; one: its
        speed; none: `floor_tok_s` (the profile's), else the recipe's long-prompt speed."""
        if len(self.prefill_points) >= 2:
            (p1, t1), (p2, t2) = self.prefill_points[0], self.prefill_points[-1]
            t1, t2 = max(t1 - self.ttft_s, 1e-6), max(t2 - self.ttft_s, 1e-6)
            b = (t2 / p2 - t1 / p1) / (p2 - p1) if p2 > p1 else 0.0
            a = t1 / p1 - b * p1
            if b < 0:
                a, b = t2 / p2, 0.0
            elif a < 0:
                a, b = 0.0, t2 / p2**2
            return self.ttft_s + a * tokens + b * tokens**2
        return self.ttft_s + tokens / (self.prefill_tok_s or floor_tok_s or RECIPE_LONG_PREFILL_TOK_S)

    @property
    def answer_s(self) -> float:
        """One typical answer: a first token and `ANSWER_TOKENS` at one user's speed."""
        return self.ttft_s + ANSWER_TOKENS / self.decode_tok_s if self.decode_tok_s else OTHER_CHECK_S


@dataclass
class Estimate:
    """The figures (module docstring): expected, upper, the parts they add up from, each check's expected share, and
    the checks left out (their station did not answer the probe)."""

    expected_s: float = 0.0
    upper_s: float = 0.0
    limit_s: float = 0.0
    parts: dict[str, list[float]] = field(default_factory=dict)  # what → [expected, upper, limit]
    per_check: dict[str, float] = field(default_factory=dict)  # nodeid → expected seconds
    probes: list[Probe] = field(default_factory=list)
    checks: int = 0
    not_estimated: int = 0

    def add(self, what: str, expected: float, limit: float, nodeid: str = "", upper: float | None = None) -> None:
        """`expected` seconds of work whose budget is `limit`; the upper bound is `upper`, else expected ×
        PESSIMISM; both capped by the limit (golive's budgets stop it there, however slow the station)."""
        upper = min(expected * PESSIMISM if upper is None else upper, limit)
        expected = min(expected, limit)
        if nodeid:
            self.per_check[nodeid] = self.per_check.get(nodeid, 0.0) + expected
        if not (expected or limit):
            return  # a check out of its station's scope: over at set-up
        self.expected_s += expected
        self.upper_s += upper
        self.limit_s += limit
        part = self.parts.setdefault(what, [0.0, 0.0, 0.0])
        part[0] += expected
        part[1] += upper
        part[2] += limit

    def leave_out(self, nodeid: str) -> None:
        """A check no figure can hold: its station did not answer the probe."""
        self.not_estimated += 1
        self.per_check[nodeid] = 0.0

    def line(self, checks: int) -> str:
        biggest = sorted(self.parts.items(), key=lambda kv: -kv[1][0])[:3]
        shown = ", ".join(f"{what} {duration(e)}" for what, (e, _, _) in biggest if e >= 1)
        said = f" ({shown})" if shown else ""
        measured = [p.said() for p in self.probes if not p.failed]
        if self.not_estimated:
            failed = "; ".join(p.said() for p in self.probes if p.failed)
            line = f"golive: {counted(checks, 'check')}; {not_estimated(self.not_estimated, checks)}: {failed}"
            others = checks - self.not_estimated
            if others > 0:
                line += (
                    f"; {the_others(others)} should take about {duration(self.expected_s)}, at most "
                    f"{duration(self.upper_s)}{said}"
                )
            return line + (f"; measured: {'; '.join(measured)}" if measured else "")
        return (
            f"golive: {counted(checks, 'check')} should take about {duration(self.expected_s)}, at most "
            f"{duration(self.upper_s)}{said}"
            + (f"; measured: {'; '.join(measured)}" if measured else "; from the profile's floors (nothing probed)")
            + f"; golive's own limits stop it by {duration(self.limit_s)}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "expected_s": round(self.expected_s, 1),
            "upper_s": round(self.upper_s, 1),
            "limit_s": round(self.limit_s, 1),
            "parts": {
                what: {"expected_s": round(e, 1), "upper_s": round(u, 1), "limit_s": round(lim, 1)}
                for what, (e, u, lim) in sorted(self.parts.items())
            },
            "probes": [p.as_dict() for p in self.probes],
            "checks": self.checks,
            "not_estimated": self.not_estimated,
        }


def _floor_speed(load: Load, users: int) -> float | None:
    """The aggregate tok/s a station exactly at its floors gives at `users`: log-linear between the floors set
    (1 user: single-user decode; gate: aggregate; top level: peak)."""
    floors = load.floors
    known = {max(load.concurrency): floors.peak_tok_s}  # where the gate is the top level, the gate's floor wins
    known |= {
        1: floors.single_user_decode_tok_s,
        (load.gate_concurrency or max(load.concurrency)): floors.aggregate_tok_s,
    }
    return _log_linear(sorted((u, s) for u, s in known.items() if s), users)


def _log_linear(points: list[tuple[int, float]], users: int) -> float | None:
    if not points:
        return None
    if users <= points[0][0]:
        return points[0][1] * users / points[0][0]
    for (u0, s0), (u1, s1) in zip(points, points[1:], strict=False):
        if u0 <= users <= u1:
            t = (math.log(users) - math.log(u0)) / (math.log(u1) - math.log(u0))
            return s0 + t * (s1 - s0)
    return points[-1][1]


def scaling(load: Load, users: int) -> float:
    """The profile's model of scaling: aggregate at `users` ÷ one user's, from the floors' shape (1 user, gate,
    peak), never below the scaling-ratio floor (log-linear from 1× at 1 user to the floor at the gate level) nor 1."""
    single = load.floors.single_user_decode_tok_s
    shape = (_floor_speed(load, users) or 0.0) / single if single else 0.0
    ratio = load.floors.scaling_ratio
    gate = load.gate_level
    floor = _log_linear([(1, 1.0), (gate, ratio)], min(users, gate)) if ratio and gate > 1 else 1.0
    return max(shape, floor or 1.0, 1.0)


def level_speed(load: Load, users: int, single_tok_s: float | None = None) -> float | None:
    """The aggregate tok/s at `users`: one user's measured speed × `scaling`, or (nothing measured) the floors'
    speed, log-linear between the floors set."""
    if single_tok_s is None:
        return _floor_speed(load, users)
    return single_tok_s * scaling(load, users)


def sweep_seconds(load: Load, single_tok_s: float | None = None, ttft_s: float | None = None) -> float:
    """The sweep's time: the priming batch, each level's tokens (warm-up included) and the ratio rounds ÷ the level's
    speed (`level_speed`), plus one first token per batch of `users` requests."""
    total = 0.0
    rounds = load.rounds_to_run  # each a batch at 1 user and one at the gate level
    if ttft_s is None:
        ttft_s = load.floors.ttft_p50_s or load.floors.single_user_ttft_p50_s or 0.0
    top = max(load.concurrency)
    for users in sorted(set(load.concurrency)):
        speed = level_speed(load, users, single_tok_s)
        requests = max(load.repeats * users, load.min_requests) + load.warmup * users
        if users in (1, load.gate_level):
            requests += rounds * max(load.repeats * users, load.min_requests)
        if users == top:
            requests += load.warmup * top  # the station primed once at the top level first
        if speed:
            total += requests * load.output_tokens / speed + math.ceil(requests / users) * ttft_s
    return total


def _battery_size(cost: Cost) -> int:
    """The requests a battery sends: each tool case plain and streamed; an agent case a few turns."""
    try:
        if cost == Cost.TOOL_BATTERY:
            from golive.endpoint.toolcalls import load_battery

            return 2 * len(load_battery())
        from golive.endpoint.agent import load_agent_battery

        return 3 * len(load_agent_battery())
    except Exception:  # an unreadable battery fails its own check; the estimate only guesses
        return 10


def estimate(
    items: Iterable[pytest.Item],
    profile_of: Callable[[Station], Profile],
    probes: dict[str, Probe] | None = None,
    spent_s: float = 0.0,
) -> Estimate:
    """`profile_of(station)` → the station's Profile; `probes` by station name (a station without one: its floors;
    one that failed: its endpoint checks left out); `spent_s`: the run's time before its first check (start,
    collection, the probes), already known. Each check by the cost it declares (golive.checklist.Cost); a shared
    measurement once per station, however many checks read it."""
    probes = probes or {}
    result = Estimate(probes=list(probes.values()))
    result.add(GOLIVE_ITSELF, spent_s, spent_s, upper=spent_s)
    result.add(GOLIVE_ITSELF, REPORTS_S, REPORTS_S * PESSIMISM)
    shared: set[tuple[str, Cost]] = set()
    for item in items:
        result.checks += 1
        nodeid = getattr(item, "nodeid", "")
        station = station_of(item)
        profile: Profile | None = profile_of(station) if station is not None else None
        if station is None or profile is None:
            result.add("other", OTHER_CHECK_S, OTHER_CHECK_S, nodeid)
            continue
        layer = layer_of(item)
        if layer is not None and layer_scope(layer, station, profile, profile.name) is not None:
            result.add("checks out of scope", 0.0, 0.0, nodeid)  # not applicable / not checked at set-up
            continue
        declaration = declared(item)
        cost = declaration.cost if declaration is not None else Cost.LIGHT if layer == "endpoint" else Cost.READ
        if cost == Cost.READ:
            result.add(f"{layer or 'other'} checks", HOST_CHECK_S, profile.host.connect_timeout_s, nodeid)
            continue
        probe = probes.get(station.name)
        if probe is not None and probe.failed:
            result.leave_out(nodeid)
            continue
        if cost.shared and (station.name, cost) in shared:  # reads a measurement an earlier check made
            result.add("other endpoint checks", OTHER_CHECK_S / 10, profile.endpoint.request_timeout_s, nodeid)
            continue
        shared.add((station.name, cost))
        what, expected, limit = _endpoint_check(cost, profile, Speeds.of(profile, probe))
        result.add(what, expected, limit, nodeid)
    return result


def _endpoint_check(cost: Cost, profile: Profile, speeds: Speeds) -> tuple[str, float, float]:
    """(part, expected seconds, budget) of one endpoint check of this cost (a shared one: its whole measurement)."""
    timeout = profile.endpoint.request_timeout_s
    load = profile.load
    if cost == Cost.SWEEP and load is not None:
        seconds = sweep_seconds(load, speeds.decode_tok_s if speeds.measured else None, speeds.ttft_s)
        return "throughput sweep", seconds, load.max_duration_s + timeout
    if cost == Cost.PREFILL and load is not None:
        lengths = [n for n in load.prefill.prompt_tokens if n < profile.vllm.max_model_len]
        floors = load.prefill.reference_tok_s | load.prefill.floors_tok_s  # a floor wins
        seconds = sum(load.prefill.requests * speeds.prefill_s(n, floors.get(n)) for n in lengths)
        return "prefill", seconds, load.prefill.requests * len(lengths) * timeout
    if cost == Cost.UNDER_LOAD and load is not None:
        from golive.endpoint.underload import PROBES  # the questions asked while the gate level's load runs

        # the gate level's load, and the probes answering beside it: one answer at that many users' pace
        users = load.gate_level + len(PROBES)
        speed = level_speed(load, min(users, max(load.concurrency)), speeds.decode_tok_s if speeds.measured else None)
        seconds = speeds.ttft_s + ANSWER_TOKENS * users / speed if speed else speeds.answer_s
        return "other endpoint checks", seconds, load.max_duration_s
    if cost == Cost.PREFILL_STALL and load is not None and load.prefill_stall.prompt_tokens:
        # one round (streams started, the long prompt prefilled beside them, a few tokens more); a second only
        # where the first froze
        long_prompt = min(load.prefill_stall.prompt_tokens, profile.vllm.max_model_len)
        seconds = speeds.prefill_s(long_prompt) + speeds.answer_s
        return "prefill stall", seconds, 2 * (timeout + seconds)
    if cost == Cost.NEEDLE:
        prompt = profile.vllm.max_model_len * profile.endpoint.needle_fraction_of_context
        return "needles", speeds.prefill_s(prompt) + speeds.answer_s, timeout
    if cost in (Cost.TOOL_BATTERY, Cost.AGENT_BATTERY):
        cases = _battery_size(cost)
        return "batteries", cases * speeds.answer_s, cases * timeout
    if cost == Cost.TOOL_CHOICE:
        batches = math.ceil(TOOL_CHOICE_REQUESTS / profile.endpoint.max_concurrency)
        return "other endpoint checks", batches * speeds.answer_s, batches * timeout
    # light, over-long, site batteries (the site's own size, unknown here), or a cost whose section the profile
    # lacks (the check is not applicable at once)
    return "other endpoint checks", speeds.answer_s, timeout
