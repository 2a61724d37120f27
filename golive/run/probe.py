"""A few seconds of each station's endpoint, timed before the first check, so the estimate (golive.run.estimate)
starts from this station's speeds rather than from the profile's floors.

The probe (`probe_endpoint`, read-only): a one-token answer (the station is warm and answers), then two one-token
streamed answers (the quicker one's whole time is the round trip: the path and the first token) and four short
streamed answers, sent as the load generator sends them (golive.endpoint.load_request: each token event timed when
its bytes arrive) and, where a check whose time is a long prompt's prefill is selected, two salted prompts of ~1,000
and ~4,000 tokens answered with one token each (prefill). Each request may take at most `PROBE_TIMEOUT_S` or the
profile's `endpoint.request_timeout_s`, whichever is less (the one-token ones, the light timeout), and all of them at
most a tenth of `--max-run-time`. Only stations with a selected check whose time is the station's speed
(golive.checklist.Cost.at_station_speed) are probed (`probe_stations`).

The path between golive and the station costs every request the same time, once, before its first token; the
station's decode speed is the time between its tokens. So the decode speed is read from the gaps between token events
(`(end − first token) ÷ (tokens − 1)`, as the sweep reads a user's speed), never from an answer's tokens over its
whole time: through a 300 ms path the latter reads a 445 tok/s station as 75. Where the tokens arrived in too few
reads to have gaps (a proxy that buffers the stream, or a client too busy to read each event as it came), the decode
time is an answer's whole time less the one-token answer's: both paid the path and the first token once
(`decode_speed`).

A station that answered the probe and then stopped answering /health went down during this run (`Probe.went_away`):
golive.run.plugin records it as gone, so its checks are not checked with one line and none fails.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import pytest

from golive.checklist import declared
from golive.endpoint.target import EndpointTarget
from golive.endpoint.timeline import reads
from golive.profile.inventory import Station
from golive.profile.schema import Profile
from golive.run.scope import layer_scope
from golive.run.session import layer_of, station_of
from golive.site.loader import LoadedInventory

if TYPE_CHECKING:
    from golive.endpoint.load_request import RequestTiming

PROBE_TIMEOUT_S = 30.0  # the most one probe request may take (less where endpoint.request_timeout_s is less)
PROBE_OUTPUT_TOKENS = 32  # the streamed answers' length: enough tokens to time decoding
PROBE_ANSWERS = 4  # short answers timed; the best is the station's speed (load on it only ever slows one down)
PROBE_ROUND_TRIPS = 2  # one-token answers timed whole; the quickest is the round trip
PROBE_PREFILL_TOKENS = (1024, 4096)  # the prefill prompts' tokens, about (each at most a quarter of the context)
# an answer whose tokens came in fewer reads than this, or than half its token events, has no gaps to time (a proxy
# that buffers, or a client too busy to read each event as it came): the answers' whole time less the round trip
MIN_READS = 4
DecodeFrom = Literal["gaps", "whole answers"]


@dataclass(frozen=True)
class Probe:
    """One station's endpoint timed before the run (`probe_endpoint`); None where that speed was not measured."""

    station: str
    ttft_s: float | None = None  # the short streamed answer's first token (the path's round trip included)
    decode_tok_s: float | None = None  # one user's decode speed after it, from the gaps between its tokens
    prefill_tok_s: float | None = None  # the longest prompt's tokens ÷ its time to its one token
    prefill_points: tuple[tuple[int, float], ...] = ()  # (prompt tokens, seconds to the first token) per prompt
    took_s: float = 0.0
    problem: str | None = None  # why the probe measured nothing (or not everything)
    # the station answered the probe and then stopped answering /health: it went down during this run (the checks
    # are then not checked with this line, never failed: golive.run.outcomes.lost_way's rule); None otherwise
    went_away: str | None = None
    round_trip_s: float | None = None  # a one-token streamed answer's whole time: the path and the first token
    decode_from: DecodeFrom | None = None  # "whole answers": the tokens came in too few reads to have gaps

    @property
    def measured(self) -> bool:
        return self.decode_tok_s is not None

    @property
    def failed(self) -> bool:
        """The station did not answer the probe as a serving station does: nothing to estimate its checks from."""
        return self.problem is not None and not self.measured

    @property
    def first_token_s(self) -> float:
        """What a request pays before its first token (the estimate's): the streamed answer's first token, or where
        the stream was buffered (its first token came with its last), the one-token answer's round trip."""
        if self.decode_from == "whole answers" and self.round_trip_s is not None:
            return self.round_trip_s
        return self.ttft_s or self.round_trip_s or 0.0

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
            "round_trip_s": rounded(self.round_trip_s, 3),
            "decode_tok_s": rounded(self.decode_tok_s, 1),
            "decode_from": self.decode_from,
            "prefill_tok_s": rounded(self.prefill_tok_s, 1),
            "prefill_points": [[tokens, round(seconds, 4)] for tokens, seconds in self.prefill_points],
            "took_s": round(self.took_s, 2),
            "problem": self.problem,
        }


def probe_endpoint(
    target: EndpointTarget, profile: Profile, station: str, budget_s: float = PROBE_TIMEOUT_S, long_prompts: bool = True
) -> Probe:
    """Nine requests, one after another (read-only; salted, so no cached prefix helps): a one-token answer (the
    station answers), `PROBE_ROUND_TRIPS` one-token streamed answers (the quickest's whole time: the round trip),
    `PROBE_ANSWERS` streamed answers of `PROBE_OUTPUT_TOKENS` (`ignore_eos`, as the load generator sends them),
    prompts of about `PROBE_PREFILL_TOKENS` tokens answered with one token. Each may take
    min(endpoint.request_timeout_s, PROBE_TIMEOUT_S, what is left of `budget_s`); the one-token ones, the light
    timeout (a hung station stops it there). Never raises: a failure is the Probe's `problem`. `long_prompts=False`:
    they are left out (no selected check reads a long prompt's time)."""
    from golive.endpoint.client import EndpointClient  # noqa: F401 (imported before the budget's clock starts)

    budget = _ProbeBudget(target, profile, budget_s)
    model = profile.vllm.served_model_name
    salt = uuid.uuid4().hex[:12]
    answered_once = False
    try:
        # the first answer within the light timeout: a station that hangs costs the run seconds, not PROBE_TIMEOUT_S
        budget.ask(f"{salt}: say OK.", cap_s=target.light_timeout_s, max_tokens=1)
        answered_once = True
        trips = [_streamed(target, model, budget.left_s(target.light_timeout_s), 1) for _ in range(PROBE_ROUND_TRIPS)]
        answers = [
            _streamed(target, model, budget.left_s(PROBE_TIMEOUT_S), PROBE_OUTPUT_TOKENS) for _ in range(PROBE_ANSWERS)
        ]
    except Exception as exc:  # an endpoint that does not answer fails its own checks; the estimate only guesses
        failed = f"probe failed ({_short(exc)})"
        return Probe(
            station,
            took_s=budget.spent_s(),
            problem=failed,
            went_away=_went_away(target, failed) if answered_once else None,
        )
    round_trip = min(trip.end or trip.ttft or 0.0 for trip in trips)
    speed = decode_speed(answers, round_trip)
    if speed is None:
        return Probe(
            station,
            took_s=budget.spent_s(),
            problem="the probe's answers had no tokens to time",
            round_trip_s=round_trip,
        )
    decode, decode_from = speed
    first = min(answer.ttft for answer in answers if answer.ttft is not None)
    points, problem, went_away = _prefill_points(budget, target, profile, long_prompts)
    prefill = points[-1][0] / points[-1][1] if points else None
    took = budget.spent_s()
    return Probe(
        station,
        first,
        decode,
        prefill,
        tuple(points),
        took,
        problem,
        went_away,
        round_trip_s=round_trip,
        decode_from=decode_from,
    )


class _ProbeBudget:
    """The probe's time: each request gets min(endpoint.request_timeout_s, its own cap, what is left of the budget)."""

    def __init__(self, target: EndpointTarget, profile: Profile, budget_s: float) -> None:
        self.target, self.profile, self.budget_s = target, profile, budget_s
        self.started = time.perf_counter()

    def spent_s(self) -> float:
        return time.perf_counter() - self.started

    def left_s(self, cap_s: float) -> float:
        left = self.budget_s - self.spent_s()
        if left <= 0.05:
            raise TimeoutError(f"the probe's {self.budget_s:g} s were spent")
        return min(self.profile.endpoint.request_timeout_s, cap_s, left)

    def ask(self, content: str, cap_s: float = PROBE_TIMEOUT_S, **params: Any) -> Any:
        """One chat request, its every timeout within what is left."""
        from golive.endpoint.client import EndpointClient  # openai: only where an endpoint is probed (loaded by now)

        limit = self.left_s(cap_s)
        target = self.target
        client = EndpointClient(
            replace(
                target,
                request_timeout_s=limit,
                connect_timeout_s=min(target.connect_timeout_s, limit),
                stream_stall_timeout_s=min(target.stream_stall_timeout_s, limit),
                light_timeout_s=min(target.light_timeout_s, limit),
            )
        )
        try:
            return client.chat(
                self.profile.vllm.served_model_name, [{"role": "user", "content": content}], temperature=0, **params
            )
        finally:
            client.close()


def _prefill_points(
    budget: _ProbeBudget, target: EndpointTarget, profile: Profile, long_prompts: bool
) -> tuple[list[tuple[int, float]], str | None, str | None]:
    """The long prompts' (prompt tokens, seconds to the first token), and why they stopped where one failed (with
    whether the station went away)."""
    points: list[tuple[int, float]] = []
    problem: str | None = None
    went_away: str | None = None
    try:
        for tokens in sorted(
            {min(n, profile.vllm.max_model_len // 4) for n in PROBE_PREFILL_TOKENS} if long_prompts else ()
        ):
            text = "lorem ipsum dolor sit " * (tokens // 12)  # ~12 tokens each (the server counts them: usage)
            long = budget.ask(f"{uuid.uuid4().hex[:12]} {text}", stream=True, max_tokens=1)
            prompt = (long.usage or {}).get("prompt_tokens") or 0
            if long.first_token_s and prompt:
                points.append((prompt, long.first_token_s))
    except Exception as exc:  # the short answer was timed: the needles fall back to the recipe's prefill speed
        problem = f"prefill not timed ({_short(exc)})"
        went_away = _went_away(target, problem)
    return points, problem, went_away


def decode_speed(answers: list[RequestTiming], round_trip_s: float) -> tuple[float, DecodeFrom] | None:
    """One user's decode speed from the probe's short answers (the load generator's timelines, docs/metrics.md), and
    how it was read; None where no answer had two tokens.

    From the gaps between tokens, `1 ÷ TPOT` ((end − first token) ÷ (tokens − 1), as the sweep reads a user's speed),
    of the answers whose tokens came spread over their reads (at least `MIN_READS`, and half their token events): the
    fastest of them (load on the station or the client only ever slows one down). Where none did (a buffered stream,
    or a client too busy to read each event as it came: the tokens then arrive together), from the quickest answer's
    whole time less `round_trip_s`, the quickest one-token answer's: both paid the path and the first token once.
    Never an answer's tokens over its whole time: that counts the path as decoding."""
    timed = [a for a in answers if a.ttft is not None and a.end is not None and _tokens(a) >= 2]
    spread = [1 / a.tpot for a in timed if a.tpot and reads(a.token_times) >= max(MIN_READS, len(a.token_times) / 2)]
    if spread:
        return max(spread), "gaps"
    if not timed:
        return None
    quickest = min(timed, key=lambda a: a.end or 0.0)
    decoding = (quickest.end or 0.0) - round_trip_s
    if decoding <= 0:  # quicker than a one-token answer: nothing to divide
        return None
    return (_tokens(quickest) - 1) / decoding, "whole answers"


def _tokens(answer: RequestTiming) -> int:
    return answer.completion_tokens or answer.client_tokens


def _streamed(target: EndpointTarget, model: str, limit_s: float, tokens: int) -> RequestTiming:
    """One streamed answer of `tokens` tokens through the load generator's client (golive.endpoint.load_request),
    each event timed when its bytes arrived; RuntimeError with its error (an HTTP status, a broken stream)."""
    from golive.endpoint.load_request import Workload, one_request
    from golive.endpoint.timed_http import Lane

    async def answer() -> RequestTiming:
        async with Lane(target.chat_url, limit_s, target.ca_file) as lane:
            return await asyncio.wait_for(one_request(lane, workload, target.headers()), limit_s)

    workload = Workload(model=model, prompt_tokens=0, output_tokens=tokens)
    try:
        timing = asyncio.run(answer())
    except TimeoutError:
        raise TimeoutError(f"a short answer took over {limit_s:g} s") from None
    if timing.error is not None:
        raise RuntimeError(timing.error)
    return timing


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


def probe_stations(
    items: Iterable[pytest.Item], loaded: LoadedInventory, budget_s: float = PROBE_TIMEOUT_S
) -> dict[str, Probe]:
    """Every station with a selected endpoint check whose time is the station's speed (its declared cost:
    golive.checklist.Cost.at_station_speed), in its scope, probed at once (threads): name → Probe. A run of quick
    checks only sends no probe: its estimate needs none; the long prompts are sent only where a check whose time is
    a long prompt's prefill is selected (Cost.long_prompts)."""
    stations: dict[str, Station] = {}
    long_prompts: set[str] = set()
    for item in items:
        station = station_of(item)
        declaration = declared(item)
        if station is None or declaration is None or layer_of(item) != "endpoint":
            continue
        if not declaration.cost.at_station_speed:
            continue
        if declaration.cost.long_prompts:
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
    """The failure in one short line: an endpoint error's own (URL, what, status, first bytes of the answer)."""
    what = getattr(exc, "found", None) or str(exc) or type(exc).__name__
    return " ".join(str(what).split())[:240]
