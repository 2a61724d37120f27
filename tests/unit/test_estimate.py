"""The time estimate said before a run: the sweep's tokens at the probe's measured speed (the floors' where nothing was
measured), the upper bound that speed at a pessimistic factor, each part capped by its budget."""

import json
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from golive.checklist import MARKER, Cost, Declaration
from golive.endpoint.load_request import RequestTiming
from golive.endpoint.target import EndpointTarget
from golive.profile.inventory import Station
from golive.run.estimate import (
    ANSWER_TOKENS,
    OTHER_CHECK_S,
    PESSIMISM,
    RECIPE_LONG_PREFILL_TOK_S,
    REPORTS_S,
    Estimate,
    Speeds,
    duration,
    estimate,
    level_speed,
    scaling,
    sweep_seconds,
)
from golive.run.probe import MIN_READS, Probe, decode_speed, probe_endpoint
from golive.site.loader import load_profile

REFERENCE = load_profile("reference-cpu").profile  # levels 1, 2, 4, 8 (gate 8); 3 repeats, ≥ 12; 1 warm-up; 7 rounds
GB300 = load_profile("glm-5.3-flash-gb300").profile


def test_sweep_time_is_tokens_over_floor_speed():
    load = GB300.load  # levels 1, 32, 256; 3 repeats + 1 warm-up; 256 tokens
    assert [level_speed(load, users) for users in (1, 32, 256)] == [145.9, 1464, 2517]
    # the levels, 8 ratio rounds (3 more requests at 1 user, 96 more at 32 users each) and the priming batch at 256
    expected = (28 * 256 / 145.9 + 28 * 0.985) + (896 * 256 / 1464 + 28 * 0.985) + (1280 * 256 / 2517 + 5 * 0.985)
    assert sweep_seconds(load) == pytest.approx(expected)
    assert sweep_seconds(load) < load.max_duration_s  # a station at its floors finishes within the budget


def test_speed_between_floors_is_log_linear():
    load = GB300.load
    assert level_speed(load, 16) == pytest.approx(145.9 + (1464 - 145.9) * 0.8)  # log2(16)/log2(32)


@pytest.mark.parametrize(
    "profile,users,expected",
    [
        (GB300, 1, 1.0),
        (GB300, 32, 1464 / 145.9),  # the floors' shape: the gate's aggregate ÷ one user's
        (GB300, 256, 2517 / 145.9),  # … and the peak's
        # the reference floors' shape falls (1.2 tok/s at 8 users < 2 at 1): the scaling-ratio floor (1.5× at the
        # gate, log-linear from 1× at 1 user) stands instead
        (REFERENCE, 2, 1 + 0.5 / 3),
        (REFERENCE, 4, 1 + 0.5 * 2 / 3),
        (REFERENCE, 8, 1.5),
    ],
    ids=["gb300-1", "gb300-32", "gb300-256", "reference-2", "reference-4", "reference-8"],
)
def test_measured_speed_scales_by_the_profiles_model(profile, users, expected):
    assert scaling(profile.load, users) == pytest.approx(expected)
    assert level_speed(profile.load, users, 100.0) == pytest.approx(100.0 * expected)


def test_sweep_time_at_a_measured_speed():
    # one user at 100 tok/s, first token 0.1 s: (users, requests) per level, tokens ÷ that level's speed
    levels = [
        (1, 12 + 1 + 7 * 12),  # measured, warm-up, 7 ratio rounds' 1-user batches
        (2, 12 + 2),
        (4, 12 + 4),
        (8, 24 + 8 + 7 * 24 + 8),  # … the rounds' gate-level batches and the priming batch at the top level
    ]
    expected = sum(n * 32 / (100 * scaling(REFERENCE.load, users)) + -(-n // users) * 0.1 for users, n in levels)
    assert sweep_seconds(REFERENCE.load, 100.0, 0.1) == pytest.approx(expected)
    assert sweep_seconds(REFERENCE.load, 100.0, 0.1) == pytest.approx(96.49, abs=0.01)


def _station(name: str = "ref", **fields) -> Station:
    return Station(name=name, endpoint="http://127.0.0.1:1/v1", **fields)


def _item(station: Station, id: str, cost: Cost, layer: str = "endpoint", params: str = ""):
    """A collected check as the estimate reads it: its station, layer marker and declaration (golive.checklist)."""
    declaration = Declaration(id, cost)
    marks = {layer: SimpleNamespace(name=layer), MARKER: SimpleNamespace(name=MARKER, args=(declaration,))}
    name = f"test_{abs(hash(id)) % 10**6}[{station.name}{params}]"  # its function's name: nothing the estimate reads
    return SimpleNamespace(
        nodeid=f"suites/{layer}/anywhere.py::{name}",
        name=name,
        callspec=SimpleNamespace(params={"station": station}),
        iter_markers=lambda: list(marks.values()),
        get_closest_marker=lambda name: marks.get(name),
    )


def _reference_run(station: Station) -> list:
    """The checks of a run on the reference profile, by their declared costs (their files and names say nothing)."""
    return [
        _item(station, "endpoint.throughput.sweep_runs", Cost.SWEEP),
        _item(station, "endpoint.throughput.aggregate", Cost.SWEEP),
        _item(station, "endpoint.prefill.speed", Cost.PREFILL),
        *[_item(station, "endpoint.context.needle", Cost.NEEDLE, params=f"-depth{d}") for d in (1, 5)],
        _item(station, "endpoint.chat.answers", Cost.LIGHT),
        _item(station, "host.gpu.present", Cost.READ, layer="host"),  # reference-cpu has no host layer
    ]


NEEDLE_TOKENS = 16384 * 0.9
# first token 0.1 s; decode 100 tok/s; 1,024 prompt tokens 0.5 s, 4,096 tokens 2.1 s to the first token
TWO_PROMPTS = ((1024, 0.5), (4096, 2.1))
MEASURED = Probe("ref", 0.1, 100.0, 4096 / 2.1, TWO_PROMPTS, took_s=1.5)
B = (2.0 / 4096 - 0.4 / 1024) / (4096 - 1024)  # the fit through both: 0.1 + a·P + b·P²
A = 0.4 / 1024 - B * 1024
ANSWER_AT_100 = 0.1 + ANSWER_TOKENS / 100.0
ANSWER_AT_FLOORS = 4 + ANSWER_TOKENS / 2  # single-user TTFT ceiling 4 s, decode floor 2 tok/s


@pytest.mark.parametrize(
    "points,tokens,seconds",
    [
        (TWO_PROMPTS, 1024, 0.5),  # the fit goes through both prompts
        (TWO_PROMPTS, 4096, 2.1),
        (TWO_PROMPTS, NEEDLE_TOKENS, 0.1 + A * NEEDLE_TOKENS + B * NEEDLE_TOKENS**2),  # 8.23 s, not 7.5 s linear
        (((1024, 0.6), (4096, 2.1)), 8192, 0.1 + 2.0 / 4096 * 8192),  # slower per token at 1,024: linear, b = 0
        (((4096, 2.1),), 8192, 0.1 + 8192 / (4096 / 2.1)),  # one prompt: its speed
        ((), 8192, 0.1 + 8192 / RECIPE_LONG_PREFILL_TOK_S),  # none: the recipe's long-prompt speed
    ],
    ids=["fit-short", "fit-long", "fit-needle", "linear", "one-prompt", "none"],
)
def test_prefill_time_from_the_probes_prompts(points, tokens, seconds):
    prefill = points[-1][0] / points[-1][1] if points else None
    speeds = Speeds.of(REFERENCE, Probe("ref", 0.1, 100.0, prefill, points))
    assert speeds.prefill_s(tokens) == pytest.approx(seconds)


# (probe, {part: expected seconds}): the parts of _reference_run's checks on reference-cpu
CASES = {
    "measured": (
        MEASURED,
        {
            "throughput sweep": sweep_seconds(REFERENCE.load, 100.0, 0.1),
            "other endpoint checks": OTHER_CHECK_S / 10 + ANSWER_AT_100,  # a check reading the sweep; the chat
            "prefill": 2 * 0.5 + 2 * 2.1,
            "needles": 2 * (0.1 + A * NEEDLE_TOKENS + B * NEEDLE_TOKENS**2 + ANSWER_AT_100),
            "golive itself": REPORTS_S,
        },
    ),
    "measured-one-prompt": (
        Probe("ref", 0.1, 100.0, 2000.0, ((4096, 2.048),)),
        {
            "throughput sweep": sweep_seconds(REFERENCE.load, 100.0, 0.1),
            "other endpoint checks": OTHER_CHECK_S / 10 + ANSWER_AT_100,
            "prefill": 2 * (0.1 + 1024 / 2000) + 2 * (0.1 + 4096 / 2000),
            "needles": 2 * (0.1 + NEEDLE_TOKENS / 2000 + ANSWER_AT_100),
            "golive itself": REPORTS_S,
        },
    ),
    "measured-without-prefill": (
        Probe("ref", ttft_s=0.1, decode_tok_s=100.0, problem="prefill not timed"),
        {
            "throughput sweep": sweep_seconds(REFERENCE.load, 100.0, 0.1),
            "other endpoint checks": OTHER_CHECK_S / 10 + ANSWER_AT_100,
            "prefill": 2 * (0.1 + 1024 / RECIPE_LONG_PREFILL_TOK_S) + 2 * (0.1 + 4096 / RECIPE_LONG_PREFILL_TOK_S),
            "needles": 2 * (0.1 + NEEDLE_TOKENS / RECIPE_LONG_PREFILL_TOK_S + ANSWER_AT_100),
            "golive itself": REPORTS_S,
        },
    ),
    "not-probed": (  # the floors: a sweep at 2 tok/s would take hours, so its budget caps it
        None,
        {
            "throughput sweep": REFERENCE.load.max_duration_s + 120,
            "other endpoint checks": OTHER_CHECK_S / 10 + ANSWER_AT_FLOORS,
            "prefill": 2 * (4 + 1024 / RECIPE_LONG_PREFILL_TOK_S) + 2 * (4 + 4096 / RECIPE_LONG_PREFILL_TOK_S),
            "needles": 2 * (4 + NEEDLE_TOKENS / RECIPE_LONG_PREFILL_TOK_S + ANSWER_AT_FLOORS),
            "golive itself": REPORTS_S,
        },
    ),
    "probe-failed": (  # nothing says how long its checks wait: none is estimated, never hours at the floors
        Probe("ref", problem="probe failed (connection refused)"),
        {"golive itself": REPORTS_S},
    ),
}


@pytest.mark.parametrize("case", CASES, ids=str)
def test_estimate_with_a_probe(case):
    probe, parts = CASES[case]
    station = _station()
    guess = estimate(_reference_run(station), lambda s: REFERENCE, {station.name: probe} if probe else {})
    got = {what: part[0] for what, part in guess.parts.items()}
    assert got == pytest.approx(parts)  # the host check is out of reference-cpu's scope: no part at all
    assert guess.expected_s == pytest.approx(sum(parts.values()))
    for what, (expected, upper, limit) in guess.parts.items():
        assert expected <= upper <= min(limit, PESSIMISM * expected) + 1e-9, what
    assert guess.expected_s <= guess.upper_s <= PESSIMISM * guess.expected_s + 1e-9
    # each check carries its share, the sweep on the first check that reads it; they add up to the expected time
    shares = guess.per_check
    assert sum(shares.values()) + REPORTS_S == pytest.approx(guess.expected_s)  # golive itself is no check's share
    assert (guess.checks, guess.not_estimated) == (7, 6 if case == "probe-failed" else 0)
    if "throughput sweep" in parts:
        assert shares[_reference_run(station)[0].nodeid] == pytest.approx(parts["throughput sweep"])


def test_the_line_says_what_was_measured_and_the_hard_stop():
    station = _station()
    guess = estimate(_reference_run(station), lambda s: REFERENCE, {station.name: MEASURED})
    line = guess.line(7)
    assert line.startswith(
        f"golive: 7 checks should take about {duration(guess.expected_s)}, at most {duration(guess.upper_s)} "
        f"(throughput sweep {duration(guess.parts['throughput sweep'][0])}, needles "
    ), line
    assert "; measured: ref decodes 100 tok/s, first token 0.10 s, prefill 1,950 tok/s (probe 1.5 s)" in line
    assert line.endswith(f"; golive's own limits stop it by {duration(guess.limit_s)}")
    assert "from the profile's floors (nothing probed)" in estimate(_reference_run(station), lambda s: REFERENCE).line(
        7
    )


def test_a_failed_probe_gives_no_time_for_its_stations_checks():
    """The probe found the endpoint down: its checks may end at once (refused) or wait out their timeouts, and nothing
    says which; the line says how many were left out and why, and a time only for the rest (here golive's own)."""
    station = _station()
    failed = Probe("ref", problem="probe failed (connection refused)", took_s=0.1)
    guess = estimate(_reference_run(station), lambda s: REFERENCE, {station.name: failed})
    assert guess.line(7) == (
        "golive: 7 checks; 6 of 7 checks not estimated: ref: probe failed (connection refused); the other check "
        "should take about 3 s, at most 8 s (golive itself 3 s)"
    )
    assert " h " not in guess.line(7) and "limits" not in guess.line(7)
    endpoint_only = _reference_run(station)[:-1]
    assert estimate(endpoint_only, lambda s: REFERENCE, {station.name: failed}).line(6) == (
        "golive: 6 checks; no check estimated: ref: probe failed (connection refused)"
    )
    two = [*_reference_run(station), *_reference_run(_station("b"))]
    guess = estimate(two, lambda s: REFERENCE, {"ref": failed, "b": replace(MEASURED, station="b")})
    assert guess.not_estimated == 6 and guess.parts["throughput sweep"][0] > 0  # b's checks are estimated
    line = guess.line(14)
    assert line.startswith("golive: 14 checks; 6 of 14 checks not estimated: ref: probe failed (connection refused);")
    assert "the other 8 checks should take about" in line and line.endswith(
        "; measured: b decodes 100 tok/s, first token 0.10 s, prefill 1,950 tok/s (probe 1.5 s)"
    )


@pytest.mark.parametrize(
    "checks, left_out, said",
    [
        (1, 0, "golive: 1 check should take about"),
        (2, 0, "golive: 2 checks should take about"),
        (1, 1, "golive: 1 check; the check not estimated: ref: probe failed (x)"),
        (2, 1, "golive: 2 checks; 1 of 2 checks not estimated: ref: probe failed (x); the other check should take"),
        (3, 1, "golive: 3 checks; 1 of 3 checks not estimated: ref: probe failed (x); the other 2 checks should take"),
        (1200, 1200, "golive: 1,200 checks; no check estimated: ref: probe failed (x)"),
    ],
)
def test_counts_read_right_one_or_many(checks, left_out, said):
    guess = Estimate(probes=[Probe("ref", problem="probe failed (x)")] if left_out else [], not_estimated=left_out)
    guess.add("other", 2, 10)
    assert guess.line(checks).startswith(said), guess.line(checks)


@pytest.mark.parametrize("seconds,shown", [(0.2, "1 s"), (59, "59 s"), (61, "1 min 1 s"), (3700, "1 h 1 min")])
def test_durations_read_as_an_operator_says_them(seconds, shown):
    assert duration(seconds) == shown


def test_nothing_is_expected_to_outlast_its_budget():
    guess = Estimate()
    guess.add("throughput sweep", 5000, 600)  # a station at the floors would need longer than load.max_duration_s
    guess.add("other", 2, 10)
    guess.add("needles", 2, 4, upper=20)
    assert (guess.expected_s, guess.upper_s, guess.limit_s) == (604, 609, 614)
    assert guess.line(3) == (
        "golive: 3 checks should take about 10 min 4 s, at most 10 min 9 s (throughput sweep 10 min 0 s, other 2 s, "
        "needles 2 s); from the profile's floors (nothing probed); golive's own limits stop it by 10 min 14 s"
    )


class _Dies(BaseHTTPRequestHandler):
    """A station that answers its first chat request, breaks the second, and then says `HEALTH` on /health."""

    HEALTH = 503
    protocol_version = "HTTP/1.1"
    answered = 0

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._send(type(self).HEALTH, b"")

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).answered += 1
        if type(self).answered > 1:
            self._send(500, json.dumps({"error": {"message": "EngineCore encountered an issue"}}).encode())
            return
        message = {"role": "assistant", "content": "OK"}
        body = {"id": "c", "object": "chat.completion", "created": 0, "model": REFERENCE.vllm.served_model_name}
        body |= {"choices": [{"index": 0, "finish_reason": "length", "message": message}]}
        self._send(200, json.dumps(body).encode())

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.parametrize(("health", "gone"), [(503, True), (200, False)], ids=["health-503", "health-200"])
def test_a_station_that_answered_then_went_down_is_gone_not_failed(health, gone):
    """The probe's first answer came, a later one failed: with /health no longer 200 the station went down during this
    run (its checks say so, none fails); with /health still 200 the failure is the station's own answer."""
    handler = type("Dies", (_Dies,), {"HEALTH": health, "answered": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        target = EndpointTarget(f"http://127.0.0.1:{server.server_address[1]}/v1")
        probe = probe_endpoint(target, REFERENCE, "dying", budget_s=20)
    finally:
        server.shutdown()
        server.server_close()
    assert probe.problem is not None and probe.problem.startswith("probe failed"), probe
    if gone:
        assert probe.went_away is not None and "GET /health answered HTTP 503" in probe.went_away, probe
        assert probe.went_away.startswith("golive's estimate probe was answered, then probe failed"), probe
    else:
        assert probe.went_away is None, probe


def _answer(path_s: float, tok_s: float = 445.0, tokens: int = 32, buffered: bool = False) -> RequestTiming:
    """A streamed answer through a path that adds `path_s` before its first token, decoded at `tok_s`: each token's
    arrival (all at the end where a proxy buffers the stream) and the stream's end."""
    first = path_s + 0.002  # the station's own first token: 2 ms
    times = [first + n / tok_s for n in range(tokens)]
    if buffered:
        times = [times[-1]] * tokens
    return RequestTiming(sent=0.0, token_times=times, end=times[-1] + 0.0005, completion_tokens=tokens)


@pytest.mark.parametrize("path_s", [0.0, 0.04, 0.3], ids=["direct", "40ms", "300ms"])
@pytest.mark.parametrize("buffered", [False, True], ids=["streamed", "buffered"])
def test_decode_speed_is_the_stations_whatever_the_path(path_s, buffered):
    """A 445 tok/s station read through a direct, a 40 ms and a 300 ms path: the decode speed is the gaps between its
    tokens (the path is paid once, before the first), and where the tokens came together (a proxy that buffers, or a
    busy client: one read), the quickest answer's whole time less the one-token answer's round trip (which paid the
    path and the first token too). Tokens over the whole time would read 75 tok/s through 300 ms (the issue's slip);
    one answer slowed by other work on the machine does not lower it (the fastest answer is the station's)."""
    answers = [_answer(path_s, buffered=buffered), _answer(path_s, tok_s=150.0, buffered=buffered)]
    round_trip = path_s + 0.002 + 0.001  # the one-token answer: the path, the first token, its reading
    speed = decode_speed(answers, round_trip)
    assert speed is not None
    decode, read_from = speed
    assert decode == pytest.approx(445.0, rel=0.05), speed
    assert read_from == ("whole answers" if buffered else "gaps")
    naive = 32 / answers[0].end  # tokens over the whole time: what the probe said before
    if path_s >= 0.3:
        assert naive < 100  # the slip: a fast station read as slow


def test_tokens_in_a_few_reads_are_not_gaps_to_time():
    """Half an answer's events in one read (a busy client caught up): 1 ÷ TPOT would read thousands of tok/s, so it
    is read whole instead."""
    bunched = _answer(0.04)
    bunched.token_times = bunched.token_times[:3] + [bunched.token_times[-1]] * 29  # 32 events in 4 reads
    decode, read_from = decode_speed([bunched], 0.043) or (None, None)
    assert read_from == "whole answers" and decode == pytest.approx(445.0, rel=0.1), decode


def test_an_answer_without_tokens_to_time_has_no_speed():
    assert decode_speed([RequestTiming(sent=0.0)], 0.1) is None  # no first token
    assert decode_speed([RequestTiming(sent=0.0, token_times=[0.1], end=0.1, completion_tokens=1)], 0.05) is None
    assert decode_speed([_answer(0.0, buffered=True)], 1.0) is None  # quicker than the round trip: nothing to divide
    assert MIN_READS <= 32 // 4  # the probe's answers have room for the reads the gaps need


def test_a_buffered_probe_starts_each_request_at_its_round_trip():
    """Where the stream came whole, its 'first token' is its last: the estimate charges each request the one-token
    answer's round trip before decoding, not the whole answer twice."""
    probe = Probe("ref", ttft_s=0.374, decode_tok_s=445.0, round_trip_s=0.305, decode_from="whole answers")
    assert probe.first_token_s == 0.305 and Speeds.of(REFERENCE, probe).ttft_s == 0.305
    streamed = Probe("ref", ttft_s=0.302, decode_tok_s=445.0, round_trip_s=0.305, decode_from="gaps")
    assert streamed.first_token_s == 0.302
    assert "arrived whole" in probe.said() and "arrived whole" not in streamed.said()
