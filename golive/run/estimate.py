"""How long the selected checks should take, said before any runs, from a quick probe of each station's endpoint and
the profile's workload; then how long they did take (every report shows both).

>>> guess = estimate(session.items, profile_of, {"gb300-a": probe_endpoint(target, profile, "gb300-a")})
>>> guess.line(57)
'golive: 57 checks should take about 3 min 10 s, at most 7 min 55 s (throughput sweep 2 min 5 s, …); …'

The probe (`probe_endpoint`, before the first check, a few seconds, read-only): a one-token answer (the station is
warm and answers), two short streamed answers (first token: TTFT; tok/s; the better of the two) and two salted
prompts of ~1,000 and ~4,000 tokens answered with one token each (prefill). Each request may take at most
`PROBE_TIMEOUT_S` or the profile's `endpoint.request_timeout_s`, whichever is less, and all of them at most a tenth
of `--max-run-time`. A station whose endpoint layer is not selected, or whose endpoint does not answer the probe, is
estimated from the profile's floors, and the line says so.

The three figures:

- **expected** (`expected_s`): this run on these stations as the probe found them. The throughput sweep is its tokens
  ÷ the probe's speed (an answer's tokens ÷ its time) scaled to each level by the profile's model of scaling (the
  floors' shape from 1 user to the gate level and the peak, never below the scaling-ratio floor), plus a first token
  per batch; the batteries and every other endpoint check are answers of `ANSWER_TOKENS` at the probe's speed; the
  needles and the prefill check are their prompts at the probe's prefill speed (fitted through its two prompts: a
  long prompt is slower per token); a host or cluster check is `HOST_CHECK_S`; golive itself is the time already
  spent before the first check (start, collection, the probe) and `REPORTS_S`. Where nothing was measured, the
  floors' speeds stand in: the time of a station exactly at its floors.
- **at most** (`upper_s`): the same at the probe's speeds × 1 / `PESSIMISM` (a station that turns out that much
  slower than its probe, or decides a floor only after extra batches), each part capped by its budget. It is at most
  `PESSIMISM` × the expected time, by construction; it is not a promise about a station that stops answering.
- **golive's limits** (`limit_s`): the sum of every budget (`load.max_duration_s`, `endpoint.request_timeout_s` per
  request, the host connect timeout per check): the hard stop, whatever the station does (`--max-run-time` sets a
  tighter one).

Each check carries its own expected share (`Estimate.per_check`): the sweep is counted on the first check that reads
it, a battery on the first check of its module. golive.run.progress refines the time left from it while the run goes.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from golive.endpoint.target import EndpointTarget
from golive.inventory.loader import LoadedInventory
from golive.profile.rules import duration
from golive.profile.schema import Load, Profile, Station
from golive.run.scope import layer_scope
from golive.run.session import layer_of, station_of

# [000]: 3 needles at 968,377 prompt tokens took 37.0 / 35.8 / 33.5 s: ~27,000 prompt tok/s with the answer
RECIPE_LONG_PREFILL_TOK_S = 968_377 / 35.4
ANSWER_TOKENS = 64  # a typical battery answer: a tool call or a short text, with a little reasoning
OTHER_CHECK_S = 1.0
PESSIMISM = 2.5  # the upper bound: every measured speed at 1 / 2.5 = 40 % of the probe's
PROBE_TIMEOUT_S = 30.0  # the most one probe request may take (less where endpoint.request_timeout_s is less)
PROBE_OUTPUT_TOKENS = 32  # the streamed answers' length: enough tokens to time decoding
PROBE_ANSWERS = 2  # short answers timed; the best is the station's speed (load on it only ever slows one down)
PROBE_PREFILL_TOKENS = (1024, 4096)  # the prefill prompts' tokens, about (each at most a quarter of the context)
HOST_CHECK_S = 0.5  # a host or cluster check: a few commands on the station (chroot: ~0.02 s; ssh: ~0.5 s)
REPORTS_S = 3.0  # writing the four reports (the HTML's plot included)
GOLIVE_ITSELF = "golive itself"  # the part that is golive's own: start, collection, the probes, the reports
# checks that send one request per battery case: module → the battery's size (read once, lazily)
BATTERY_MODULES = {"test_tools.py": "tool", "test_agent.py": "agent"}
# the checks whose time is the station's speed: only where one is selected is the station probed
SPEED_MODULES = {"test_throughput.py", "test_long_context.py", "test_correctness_under_load.py", *BATTERY_MODULES}


@dataclass(frozen=True)
class Probe:
    """One station's endpoint timed before the run (`probe_endpoint`); None where that speed was not measured."""

    station: str
    ttft_s: float | None = None  # the short answer's first token
    decode_tok_s: float | None = None  # one user's decode speed after it
    prefill_tok_s: float | None = None  # the longest prompt's tokens ÷ its time to its one token
    prefill_points: tuple[tuple[int, float], ...] = ()  # (prompt tokens, seconds to the first token) per prompt
    took_s: float = 0.0
    problem: str | None = None  # why the probe measured nothing (or not everything)
    # the station answered the probe and then stopped answering /health: it went down during this run (the checks
    # are then not checked with this line, never failed: golive.run.outcomes.lost_way's rule); None otherwise
    went_away: str | None = None

    @property
    def measured(self) -> bool:
        return self.decode_tok_s is not None

    def said(self) -> str:
        """What the estimate line and every report say about this station (golive.report.model.ProbeRecord)."""
        from golive.report.model import ProbeRecord

        return ProbeRecord.model_validate(self.as_dict()).said()

    def as_dict(self) -> dict[str, Any]:
        def rounded(value: float | None, digits: int) -> float | None:
            return None if value is None else round(value, digits)

        return {
            "station": self.station,
            "ttft_s": rounded(self.ttft_s, 3),
            "decode_tok_s": rounded(self.decode_tok_s, 1),
            "prefill_tok_s": rounded(self.prefill_tok_s, 1),
            "prefill_points": [[tokens, round(seconds, 4)] for tokens, seconds in self.prefill_points],
            "took_s": round(self.took_s, 2),
            "problem": self.problem,
        }


def not_probed(station: str, why: str) -> Probe:
    return Probe(station, problem=why)


def probe_endpoint(
    target: EndpointTarget, profile: Profile, station: str, budget_s: float = PROBE_TIMEOUT_S, long_prompts: bool = True
) -> Probe:
    """Five requests, one after another (read-only; salted, so no cached prefix helps): a one-token answer,
    `PROBE_ANSWERS` streamed answers of `PROBE_OUTPUT_TOKENS` (`ignore_eos`), prompts of about
    `PROBE_PREFILL_TOKENS` tokens answered with one token. Each may take min(endpoint.request_timeout_s,
    PROBE_TIMEOUT_S, what is left of `budget_s`); the first, the light timeout (a hung station stops it there).
    Never raises: a failure is the Probe's `problem`. `long_prompts=False`: they are left out (no selected
    check reads a long prompt's time)."""
    from golive.endpoint.client import EndpointClient  # openai: only where an endpoint is probed

    started = time.perf_counter()

    def client_for_what_is_left(cap_s: float) -> EndpointClient:
        left = budget_s - (time.perf_counter() - started)
        if left <= 0.05:
            raise TimeoutError(f"the probe's {budget_s:g} s were spent")
        limit = min(profile.endpoint.request_timeout_s, cap_s, left)
        return EndpointClient(
            replace(
                target,
                request_timeout_s=limit,
                connect_timeout_s=min(target.connect_timeout_s, limit),
                stream_stall_timeout_s=min(target.stream_stall_timeout_s, limit),
                light_timeout_s=min(target.light_timeout_s, limit),
            )
        )

    def ask(content: str, cap_s: float = PROBE_TIMEOUT_S, **params: Any) -> Any:
        client = client_for_what_is_left(cap_s)
        try:
            return client.chat(model, [{"role": "user", "content": content}], temperature=0, **params)
        finally:
            client.close()

    model = profile.vllm.served_model_name
    salt = uuid.uuid4().hex[:12]
    answered_once = False
    try:
        # the first answer within the light timeout: a station that hangs costs the run seconds, not PROBE_TIMEOUT_S
        ask(f"{salt}: say OK.", cap_s=target.light_timeout_s, max_tokens=1)
        answered_once = True
        timed = [_timed_answer(ask, f"{salt}-{n}") for n in range(PROBE_ANSWERS)]
    except Exception as exc:  # an endpoint that does not answer fails its own checks; the estimate only guesses
        failed = f"probe failed ({_short(exc)})"
        return Probe(
            station,
            took_s=time.perf_counter() - started,
            problem=failed,
            went_away=_went_away(target, failed) if answered_once else None,
        )
    answered = [(first, speed) for first, speed in timed if speed is not None]
    if not answered:
        return Probe(station, took_s=time.perf_counter() - started, problem="the probe's answer had no tokens to time")
    # a shared or busy station only ever slows an answer down: the best of the answers is its speed
    first = min(first for first, _ in answered)
    decode = max(speed for _, speed in answered)
    points: list[tuple[int, float]] = []
    problem: str | None = None
    went_away: str | None = None
    try:
        for tokens in sorted(
            {min(n, profile.vllm.max_model_len // 4) for n in PROBE_PREFILL_TOKENS} if long_prompts else ()
        ):
            text = "lorem ipsum dolor sit " * (tokens // 12)  # ~12 tokens each (the server counts them: usage)
            long = ask(f"{uuid.uuid4().hex[:12]} {text}", stream=True, max_tokens=1)
            prompt = (long.usage or {}).get("prompt_tokens") or 0
            if long.first_token_s and prompt:
                points.append((prompt, long.first_token_s))
    except Exception as exc:  # the short answer was timed: the needles fall back to the recipe's prefill speed
        problem = f"prefill not timed ({_short(exc)})"
        went_away = _went_away(target, problem)
    prefill = points[-1][0] / points[-1][1] if points else None
    took = time.perf_counter() - started
    return Probe(station, first, decode, prefill, tuple(points), took, problem, went_away)


def _went_away(target: EndpointTarget, problem: str) -> str | None:
    """After an answer, a failed one: the station going down (its /health no longer 200, as vLLM's once its engine
    died) or the station's own answer (/health still 200: the checks judge it). The line for the first case."""
    from golive.endpoint.client import EndpointClient

    client = EndpointClient(target)
    try:
        health = client.probe_health()
    except Exception as exc:  # no answer at all: gone as well
        return f"golive's estimate probe was answered, then {problem}; GET /health: {_short(exc)}"
    finally:
        client.close()
    if health.ok:
        return None
    return f"golive's estimate probe was answered, then {problem}; GET /health answered HTTP {health.status}"


def _timed_answer(ask: Callable[..., Any], salt: str) -> tuple[float, float | None]:
    """(first token s, tok/s; None: too few tokens to time) of one short streamed answer. The speed is its tokens ÷
    its whole time: a lagging stream's tokens may reach the client in one read, and tokens ÷ the time after the first
    would then read thousands of tok/s."""
    began = time.perf_counter()
    answer = ask(
        f"{salt}: count from one to one hundred in words.", stream=True, max_tokens=PROBE_OUTPUT_TOKENS, ignore_eos=True
    )
    total = time.perf_counter() - began
    tokens = (answer.usage or {}).get("completion_tokens") or 0
    first = answer.first_token_s
    if first is None or tokens < 4:
        return (first or total, None)
    return first, tokens / total


def probe_stations(
    items: Iterable[pytest.Item], loaded: LoadedInventory, budget_s: float = PROBE_TIMEOUT_S
) -> dict[str, Probe]:
    """Every station with a selected endpoint check whose time is the station's speed (SPEED_MODULES), in its scope,
    probed at once (threads): name → Probe. A run of quick checks only sends no probe: its estimate needs none;
    the long prompts are sent only where a long-context or prefill check is selected."""
    stations: dict[str, Station] = {}
    long_prompts: set[str] = set()
    for item in items:
        station = station_of(item)
        module = item.path.name if hasattr(item, "path") else ""
        if station is None or layer_of(item) != "endpoint" or module not in SPEED_MODULES:
            continue
        if module == "test_long_context.py" or item.name.startswith("test_prefill_speed"):
            long_prompts.add(station.name)
        profile = loaded.profile_of(station).profile
        if station.name not in stations and layer_scope("endpoint", station, profile, profile.name) is None:
            stations[station.name] = station
    if not stations:
        return {}

    def one(station: Station) -> Probe:
        profile = loaded.profile_of(station).profile
        target = EndpointTarget.of(station, profile.endpoint, loaded.tls_ca_file(station))
        return probe_endpoint(target, profile, station.name, budget_s, long_prompts=station.name in long_prompts)

    with ThreadPoolExecutor(max_workers=min(len(stations), 16)) as pool:
        return dict(zip(stations, pool.map(one, stations.values()), strict=True))


def _short(exc: Exception) -> str:
    what = getattr(exc, "what", None) or str(exc) or type(exc).__name__
    return " ".join(str(what).split())[:120]


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
        if probe is not None and probe.measured:
            return cls(probe.decode_tok_s, probe.ttft_s or 0.0, probe.prefill_tok_s, True, probe.prefill_points)
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
    """The figures (module docstring): expected, upper, the parts they add up from, each check's expected share."""

    expected_s: float = 0.0
    upper_s: float = 0.0
    limit_s: float = 0.0
    parts: dict[str, list[float]] = field(default_factory=dict)  # what → [expected, upper, limit]
    per_check: dict[str, float] = field(default_factory=dict)  # nodeid → expected seconds
    probes: list[Probe] = field(default_factory=list)

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

    def line(self, checks: int) -> str:
        biggest = sorted(self.parts.items(), key=lambda kv: -kv[1][0])[:3]
        shown = ", ".join(f"{what} {duration(e)}" for what, (e, _, _) in biggest if e >= 1)
        measured = [p.said() for p in self.probes]
        return (
            f"golive: {checks} checks should take about {duration(self.expected_s)}, at most "
            f"{duration(self.upper_s)}"
            + (f" ({shown})" if shown else "")
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


def _battery_size(kind: str) -> int:
    try:
        if kind == "tool":
            from golive.endpoint.toolcalls import load_battery

            return 2 * len(load_battery())  # each case plain and streamed
        from golive.endpoint.agent import load_agent_battery

        return 3 * len(load_agent_battery())  # an agent case is a few turns
    except Exception:  # an unreadable battery fails its own check; the estimate only guesses
        return 10


def estimate(
    items: Iterable[pytest.Item],
    profile_of: Callable[[Station], Profile],
    probes: dict[str, Probe] | None = None,
    spent_s: float = 0.0,
) -> Estimate:
    """`profile_of(station)` → the station's Profile; `probes` by station name (a station without one: its floors);
    `spent_s`: the run's time before its first check (start, collection, the probes), already known.
    One sweep per station, however many perf checks read it; one battery per station and module."""
    probes = probes or {}
    result = Estimate(probes=list(probes.values()))
    result.add(GOLIVE_ITSELF, spent_s, spent_s, upper=spent_s)
    result.add(GOLIVE_ITSELF, REPORTS_S, REPORTS_S * PESSIMISM)
    swept: set[str] = set()
    batteries: set[tuple[str, str]] = set()
    for item in items:
        nodeid = getattr(item, "nodeid", "")
        station = station_of(item)
        profile: Profile | None = profile_of(station) if station is not None else None
        module = item.path.name if hasattr(item, "path") else ""
        if station is None or profile is None:
            result.add("other", OTHER_CHECK_S, OTHER_CHECK_S, nodeid)
            continue
        layer = layer_of(item)
        if layer is not None and layer_scope(layer, station, profile, profile.name) is not None:
            result.add("checks out of scope", 0.0, 0.0, nodeid)  # not applicable / not checked at set-up
            continue
        speeds = Speeds.of(profile, probes.get(station.name))
        timeout = profile.endpoint.request_timeout_s
        load = profile.load
        if item.name.startswith("test_prefill_speed") and load is not None:
            lengths = [n for n in load.prefill.prompt_tokens if n < profile.vllm.max_model_len]
            floors = load.prefill.reference_tok_s | load.prefill.floors_tok_s  # a floor wins
            result.add(
                "prefill",
                sum(load.prefill.requests * speeds.prefill_s(n, floors.get(n)) for n in lengths),
                load.prefill.requests * len(lengths) * timeout,
                nodeid,
            )
        elif module == "test_throughput.py" and load is not None:
            if station.name not in swept and "swept" in getattr(item, "fixturenames", ("swept",)):
                swept.add(station.name)
                seconds = sweep_seconds(load, speeds.decode_tok_s if speeds.measured else None, speeds.ttft_s)
                result.add("throughput sweep", seconds, load.max_duration_s + timeout, nodeid)
            else:
                result.add("other endpoint checks", OTHER_CHECK_S / 10, timeout, nodeid)  # reads the sweep
        elif module == "test_correctness_under_load.py" and load is not None:
            from golive.endpoint.underload import PROBES  # the questions asked while the gate level's load runs

            # the gate level's load, and the probes answering beside it: one answer at that many users' pace
            users = load.gate_level + len(PROBES)
            speed = level_speed(
                load, min(users, max(load.concurrency)), speeds.decode_tok_s if speeds.measured else None
            )
            seconds = speeds.ttft_s + ANSWER_TOKENS * users / speed if speed else speeds.answer_s
            result.add("other endpoint checks", seconds, load.max_duration_s, nodeid)
        elif module == "test_long_context.py":
            prompt = profile.vllm.max_model_len * profile.endpoint.needle_fraction_of_context
            result.add("needles", speeds.prefill_s(prompt) + speeds.answer_s, timeout, nodeid)
        elif module in BATTERY_MODULES:
            if (station.name, module) not in batteries:
                batteries.add((station.name, module))
                cases = _battery_size(BATTERY_MODULES[module])
                result.add("batteries", cases * speeds.answer_s, cases * timeout, nodeid)
            else:
                result.add("other endpoint checks", OTHER_CHECK_S / 10, timeout, nodeid)
        elif layer == "endpoint":
            result.add("other endpoint checks", speeds.answer_s, timeout, nodeid)
        else:
            result.add(f"{layer or 'other'} checks", HOST_CHECK_S, profile.host.connect_timeout_s, nodeid)
    return result
