"""Hostile endpoints, served for real on loopback (golive_testbed.hostile): a gzip bomb, 50 MB and 100,000-level JSON,
a 100 MB stream line, a stream without end, an answer trickled a byte at a time, a server echoing the Authorization
header, 404/429/500 on chat, a redirect to another origin, userinfo credentials. golive ends each in one line, bounded
in time and memory as measured from its process, every report written with one verdict, and no form of the key in
any output. The run's stop (--max-run-time, SIGTERM, SIGINT) holds while requests hang in worker threads."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from hostile_judge import checks_of, judge

from golive_testbed.hostile import KEY_ENV, HostileStation, golive_command, measured

SECRET = "sk-hostile/5e1b+27"  # a `/` and a `+`: its URL-encoded and JSON-escaped forms differ from it
USER, PASSWORD = "ops", "pw-hostile/9c+e1"  # userinfo credentials in an endpoint URL: sent as HTTP Basic
CHECKS = (
    "test_health_endpoint_is_ok or test_models_lists_served_name or test_one_token_canary_answers or "
    "test_auth_matches_profile or test_chat_answers_and_stops or test_sweep_runs_every_level_without_failures or "
    "test_tool_choice_none_answers_in_text"
)
SITE = """\
extends: glm-5.3-flash-gb300
endpoint:
  light_timeout_s: 2
  connect_timeout_s: 2
  request_timeout_s: {request_timeout_s}
  stream_stall_timeout_s: {stream_stall_timeout_s}
load:
  output_tokens: 8
  concurrency: [1, 2]
  gate_concurrency: 2
  repeats: 1
  min_requests: 1
  warmup: 0
  ratio_rounds: 0
  max_requests: 20
  max_duration_s: 20
"""
# station → {check: (outcome, words its line must hold)}; every other selected check of that station passes or is
# not checked (never a failure the station does not have)
EXPECTED: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {
    "healthy": {},
    "gzip-bomb-models": {
        "test_auth_matches_profile": (
            "failed",
            ("/v1/models", "larger than golive's cap of 16 MiB (endpoint.max_body_bytes)", "gzip-compressed"),
        )
    },
    "huge-models": {
        "test_auth_matches_profile": ("failed", ("/v1/models", "larger than golive's cap of 16 MiB")),
    },
    "models-2mb": {"test_models_lists_served_name": ("failed", ("/v1/models lists", "other-model-000000"))},
    "deep-json": {
        "test_models_lists_served_name": (
            "failed",
            ("/v1/models", "JSON nested deeper than golive's cap of 64 levels (endpoint.max_json_depth)"),
        )
    },
    "sse-huge-line": {
        "test_sweep_runs_every_level_without_failures": ("failed", ("the stream passed its budget",)),
        "test_tool_choice_none_answers_in_text": (
            "not_checked",
            ("/v1/chat/completions", "one line of the stream passed golive's cap of 1 MiB (endpoint.max_event_bytes)"),
        ),
    },
    "sse-endless": {
        "test_sweep_runs_every_level_without_failures": (
            "failed",
            ("past its max_tokens of 8 and golive's slack of 64 (endpoint.stream_token_slack)",),
        ),
        "test_tool_choice_none_answers_in_text": ("not_checked", ("/v1/chat/completions", "within its deadline")),
    },
    "trickle": {
        "test_chat_answers_and_stops": (
            "failed",
            ("/v1/chat/completions", "the answer did not end within its deadline of 5 s"),
        ),
        "test_one_token_canary_answers": ("failed", ("did not end within its deadline of 5 s",)),
    },
    "echo-auth": {
        "test_chat_answers_and_stops": ("failed", ("/v1/chat/completions", "HTTP 400", "Authorization: Bearer ***")),
        "test_one_token_canary_answers": ("failed", ("HTTP 400",)),
        "test_sweep_runs_every_level_without_failures": ("failed", ("HTTP 400",)),
        "test_tool_choice_none_answers_in_text": ("failed", ("HTTP 400",)),
    },
    **{
        f"chat-{status}": {
            "test_chat_answers_and_stops": (
                "failed",
                ("/v1/chat/completions", f"HTTP {status}", f"the chat failed (chat-{status})"),
            ),
            "test_one_token_canary_answers": ("failed", (f"HTTP {status}: the chat failed",)),
            "test_sweep_runs_every_level_without_failures": ("failed", (f"HTTP {status}",)),
            "test_tool_choice_none_answers_in_text": ("failed", (f"HTTP {status}",)),
        }
        for status in (404, 429, 500)
    },
    "redirect-chat": {
        "test_chat_answers_and_stops": (
            "failed",
            ("HTTP 307", "a redirect to 'http://127.0.0.1:", "golive follows no"),
        ),
        "test_one_token_canary_answers": ("failed", ("HTTP 307: a redirect to",)),
        "test_sweep_runs_every_level_without_failures": ("failed", ("HTTP 307: a redirect to",)),
        "test_tool_choice_none_answers_in_text": ("failed", ("HTTP 307: a redirect to",)),
    },
    "userinfo": {  # echo-auth behind HTTP Basic from the URL's userinfo
        "test_chat_answers_and_stops": ("failed", ("HTTP 400", "Authorization: Basic ***")),
        "test_one_token_canary_answers": ("failed", ("HTTP 400",)),
        "test_sweep_runs_every_level_without_failures": ("failed", ("HTTP 400",)),
        "test_tool_choice_none_answers_in_text": ("failed", ("HTTP 400",)),
    },
}


def _inventory(tmp_path: Path, stations: dict[str, str], request_timeout_s: float = 5, stall_s: float = 3) -> Path:
    """An inventory of the stations (name → endpoint URL) held to a site profile with short timeouts and a small
    sweep; the key in KEY_ENV for each station but one whose URL carries its own userinfo."""
    (tmp_path / "site.yaml").write_text(
        SITE.format(request_timeout_s=request_timeout_s, stream_stall_timeout_s=stall_s)
    )
    lines = [
        f"  - {{name: {name}, endpoint: '{url}'" + ("" if "@" in url else f", api_key_env: {KEY_ENV}") + "}\n"
        for name, url in stations.items()
    ]
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("profile: site.yaml\nstations:\n" + "".join(lines))
    return inventory


def test_every_hostile_endpoint_ends_in_one_line_bounded_and_leaks_no_key(tmp_path):
    """One run, one station per hostile behaviour (and a healthy one): each station's checks end in the one line its
    behaviour earns, within the run's announced limit, under 300 MiB of peak RSS for all of them at once; the four
    reports well-formed with one verdict; no traceback, SDK exception or repr; the key in no form anywhere; the
    other origin of a redirect never reached; userinfo credentials never sent without the key."""
    servers = {name: HostileStation(name, key=SECRET) for name in EXPECTED if name != "userinfo"}
    servers["userinfo"] = HostileStation("echo-auth", basic=f"{USER}:{PASSWORD}")
    urls = {name: server.url for name, server in servers.items()}
    urls["userinfo"] = urls["userinfo"].replace("http://", f"http://{USER}:{PASSWORD.replace('/', '%2F')}@")
    out = tmp_path / "out"
    try:
        run = measured(
            golive_command(
                "run", _inventory(tmp_path, urls), "-o", out, "-m", "endpoint", "-k", CHECKS, "--max-run-time", "180"
            ),
            env={KEY_ENV: SECRET},
            cwd=tmp_path,
            timeout=300,
        )
    finally:
        for server in servers.values():
            server.close()
    results = judge(run, out, code=1, wall_s=180 + 10, secrets=[SECRET, PASSWORD])
    for station, expected in EXPECTED.items():
        checks = checks_of(results, station)
        assert checks, f"no check ran on {station}"
        for name, check in checks.items():
            outcome, words = expected.get(name, ("passed", ()))
            allowed = {outcome} if name in expected else {"passed", "not_checked", "not_applicable"}
            assert check["outcome"] in allowed, f"{station} {name}: {check['outcome']}: {check['message']}"
            missing = [w for w in words if w not in check["message"]]
            assert not missing, f"{station} {name} lacks {missing}: {check['message']}"
            assert "\n" not in check["message"].split("\nRecipe:")[0], check["message"]
            assert len(check["message"]) < 4000, f"{station} {name}: {len(check['message'])} characters"
    assert not servers["redirect-chat"].other_seen, "golive followed a redirect to another origin"
    anonymous = [auth for method, path, auth in servers["userinfo"].seen if path == "/v1/models"]
    assert None in anonymous and any(a and a.startswith("Basic ") for a in anonymous), anonymous
    # a station's answers are not copied into the reports: a 2 MB model list costs each report a few KiB
    for name in ("go-live.html", "go-live.md", "results.json", "junit.xml"):
        assert (out / name).stat().st_size < 1_000_000, f"{name}: {(out / name).stat().st_size:,} bytes"


def test_max_run_time_ends_the_run_while_a_stream_never_ends(tmp_path):
    """A stream that sends a comment every second forever (no token: no budget ends it; the request's deadline is
    300 s): `--max-run-time 12` ends the run within 12 + 10 s, the estimate probe's request abandoned in its worker
    thread; every report INCOMPLETE, the banner and the exit code say so."""
    with HostileStation("sse-keepalive", key=SECRET) as station:
        inventory = _inventory(tmp_path, {"keepalive": station.url}, request_timeout_s=300, stall_s=300)
        out = tmp_path / "out"
        run = measured(
            golive_command("run", inventory, "-o", out, "-m", "endpoint", "-k", CHECKS, "--max-run-time", "12"),
            env={KEY_ENV: SECRET},
            cwd=tmp_path,
            timeout=120,
        )
    judge(run, out, code=2, wall_s=12 + 10, secrets=[SECRET])
    assert "the run's time bound (12 s, --max-run-time) was reached: reports written, verdict INCOMPLETE (exit 2)" in (
        run.output
    ), run.output[-3000:]


PROBE, CHECK_POOL = CHECKS, "test_tool_choice_none_answers_in_text"  # (no speed check: no probe before it)


@pytest.mark.parametrize(
    "signum, checks",
    [
        pytest.param(signal.SIGTERM, PROBE, id="SIGTERM-probe"),  # the estimate probe's stream, in its thread pool
        pytest.param(signal.SIGINT, CHECK_POOL, id="SIGINT-check-pool"),  # a check's own thread pool
        pytest.param(signal.SIGINT, PROBE, id="SIGINT-probe", marks=pytest.mark.slow),
        pytest.param(signal.SIGTERM, CHECK_POOL, id="SIGTERM-check-pool", marks=pytest.mark.slow),
    ],
)
def test_a_signal_ends_the_run_within_10_s_whatever_waits(tmp_path, signum, checks):
    """SIGTERM or SIGINT 6 s into a run whose requests hang in worker threads (a stream of keep-alive comments, a
    300 s deadline): the run ends within 10 s of the signal, every report written INCOMPLETE, exit 2, one line."""
    with HostileStation("sse-keepalive", key=SECRET) as station:
        inventory = _inventory(tmp_path, {"keepalive": station.url}, request_timeout_s=300, stall_s=300)
        out = tmp_path / "out"
        run = measured(
            golive_command("run", inventory, "-o", out, "-m", "endpoint", "-k", checks),
            env={KEY_ENV: SECRET},
            cwd=tmp_path,
            timeout=120,
            signal_at=(6.0, signum),
        )
    assert run.signals, run.output[-3000:]
    judge(run, out, code=2, wall_s=run.signals[0][0] + 10, secrets=[SECRET])
    assert "the run was interrupted (Ctrl-C or SIGTERM): reports written, verdict INCOMPLETE (exit 2)" in run.output


@pytest.mark.slow
def test_a_signal_ends_the_run_while_the_sweep_waits_in_its_event_loop(tmp_path):
    """SIGTERM while the load generator's streams hang (its event loop in the main thread, keep-alive comments, a
    300 s deadline): the run ends within 10 s, reports INCOMPLETE."""
    with HostileStation("sse-keepalive", key=SECRET) as station:
        inventory = _inventory(tmp_path, {"keepalive": station.url}, request_timeout_s=300, stall_s=300)
        out = tmp_path / "out"
        run = measured(
            # --max-run-time 40: the estimate probe gets a tenth (4 s), then the sweep starts and hangs
            golive_command(
                "run", inventory, "-o", out, "-m", "endpoint", "-k", "test_sweep_runs", "--max-run-time", "40"
            ),
            env={KEY_ENV: SECRET},
            cwd=tmp_path,
            timeout=120,
            signal_at=(15.0, signal.SIGTERM),
        )
    results = judge(run, out, code=2, wall_s=15 + 10, secrets=[SECRET])
    stopped = checks_of(results, "keepalive")["test_sweep_runs_every_level_without_failures"]
    assert stopped["message"].endswith("was interrupted (Ctrl-C or SIGTERM) while this check ran"), stopped


def test_a_signal_while_golive_starts_still_writes_the_reports(tmp_path):
    """SIGTERM the moment pytest's header is out (golive configuring, no check collected yet: pytest itself writes no
    report for an interrupt there): the signal is deferred to the collection, every report written INCOMPLETE,
    every check not checked, exit 2."""
    with HostileStation("healthy", key=SECRET) as station:
        inventory = _inventory(tmp_path, {"early": station.url})
        out = tmp_path / "out"
        run = measured(
            golive_command("run", inventory, "-o", out, "-m", "endpoint", "-k", CHECKS),
            env={KEY_ENV: SECRET},
            cwd=tmp_path,
            timeout=120,
            signal_on=("test session starts", signal.SIGTERM),
        )
    assert run.signals, run.output[-3000:]
    results = judge(run, out, code=2, wall_s=run.signals[0][0] + 10, secrets=[SECRET])
    assert results["checks"] and {c["outcome"] for c in results["checks"]} == {"not_checked"}, results["checks"]
