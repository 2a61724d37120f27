"""A few seconds of each station's endpoint, timed before the first check, so the estimate (golive.run.estimate)
starts from this station's speeds rather than from the profile's floors.

The probe (`probe_endpoint`, read-only): a one-token answer (the station is warm and answers), two short streamed
answers (first token: TTFT; tok/s; the better of the two) and, where a long-context or prefill check is selected,
two salted prompts of ~1,000 and ~4,000 tokens answered with one token each (prefill). Each request may take at most
`PROBE_TIMEOUT_S` or the profile's `endpoint.request_timeout_s`, whichever is less (the first, the light timeout),
and all of them at most a tenth of `--max-run-time`. Only stations with a selected check whose time is the station's
speed are probed (`probe_stations`).

A station that answered the probe and then stopped answering /health went down during this run (`Probe.went_away`):
golive.run.plugin records it as gone, so its checks are not checked with one line and none fails.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import pytest

from golive.endpoint.target import EndpointTarget
from golive.inventory.loader import LoadedInventory
from golive.profile.schema import Profile, Station
from golive.run.scope import layer_scope
from golive.run.session import layer_of, station_of

PROBE_TIMEOUT_S = 30.0  # the most one probe request may take (less where endpoint.request_timeout_s is less)
PROBE_OUTPUT_TOKENS = 32  # the streamed answers' length: enough tokens to time decoding
PROBE_ANSWERS = 2  # short answers timed; the best is the station's speed (load on it only ever slows one down)
PROBE_PREFILL_TOKENS = (1024, 4096)  # the prefill prompts' tokens, about (each at most a quarter of the context)
# checks that send one request per battery case: module → the battery's size (read once, lazily)
BATTERY_MODULES = {"test_tools.py": "tool", "test_agent.py": "agent"}
# the checks whose time is the station's speed: only where one is selected is the station probed
SPEED_MODULES = {
    "test_throughput.py",
    "test_long_context.py",
    "test_prefill.py",
    "test_correctness_under_load.py",
    *BATTERY_MODULES,
}


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
        if module in ("test_long_context.py", "test_prefill.py") or item.name.startswith("test_prefill_speed"):
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
