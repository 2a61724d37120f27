"""A real LiteLLM proxy (the `test` extra installs it) in front of the healthy reference station, its master key given
to golive as `api_key_env`: every check that can pass through a gateway passes through it with the key, health is
probed as LiteLLM expects (/health wants the key and calls every model: its own /health/readiness is probed
instead), what only vLLM serves (/metrics, /tokenize, its flags) is not checked with one reason naming the gateway,
never a false NO-GO; with `vllm_endpoint` those are checked on vLLM itself; a wrong key is one clear auth failure."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.util import find_spec
from pathlib import Path

import httpx
import pytest
from golive_run import Run, golive_run

from golive_testbed.reference.launcher import ReferenceStation
from golive_testbed.reference.model import SERVED_NAME

KEY_ENV = "GOLIVE_TEST_GATEWAY_KEY"
MASTER_KEY = "sk-golive-gateway-test-7c2e"
# the checks that matter through a gateway, a few seconds each on the reference station: health, names, the canary,
# a chat, a tool call, reasoning, auth; and those that read vLLM's own /metrics, /tokenize or flags
THROUGH = {
    "test_health_endpoint_is_ok",
    "test_models_lists_served_name",
    "test_one_token_canary_answers",
    "test_chat_answers_and_stops",
    "test_smoke_get_weather_returns_structured_tool_call",
    "test_reasoning_arrives_separately_from_content",
    "test_auth_matches_profile",
}
VLLM_OWN = {
    "test_models_max_model_len_matches_profile",
    "test_kv_cache_capacity_meets_floor",
    "test_prefix_caching_on_and_effective",
    "test_over_long_prompt_refused_cleanly",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """The proxy's process group: SIGTERM, then SIGKILL after 10 s."""
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


# Cost, beside the healthy reference station the session boots anyway: ~25 s on an idle 2-core machine (LiteLLM's
# start about half of it, then three short golive runs of a few checks each), ~60 s with that machine 5× loaded.
@pytest.fixture(scope="module")
def litellm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., str]]:
    """start(station, name) → the /v1 URL of a LiteLLM proxy on a free loopback port in front of `station` that
    offers its model to clients as `name` (vLLM's own served name unless given: a gateway that renames it otherwise),
    one per station and name in the module, master key from the environment, no database; stopped when the module
    ends."""
    if find_spec("litellm") is None:
        pytest.skip("litellm is not installed: install the test extra (`pip install -e '.[test]'`, scripts/setup.sh)")
    started: dict[tuple[str, str], tuple[subprocess.Popen[bytes], str]] = {}

    def start(station: ReferenceStation, name: str = SERVED_NAME) -> str:
        if (station.base_url, name) in started:
            return started[station.base_url, name][1]
        folder = tmp_path_factory.mktemp("litellm")
        config = folder / "config.yaml"
        config.write_text(
            "model_list:\n"
            f"  - model_name: {name}\n"
            "    litellm_params:\n"
            f"      model: hosted_vllm/{SERVED_NAME}\n"
            f"      api_base: {station.base_url}\n"
            "general_settings:\n"
            f"  master_key: os.environ/{KEY_ENV}\n"
        )
        port, log = _free_port(), folder / "litellm.log"
        # no model-cost map from the internet (a 3-try fetch at start); the key only through the environment. LiteLLM
        # ends a stream whose chunk repeats 100 times ("The model is repeating the same chunk"): the reference model's
        # dummy weights do past its script, where the prefill-stall probe's 4,096-token streams decode (ignore_eos)
        env = os.environ | {
            KEY_ENV: MASTER_KEY,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_LOG": "ERROR",
            "REPEATED_STREAMING_CHUNK_LIMIT": "1000000",
        }
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "litellm.proxy.proxy_cli", "--config", str(config)]
                + ["--host", "127.0.0.1", "--port", str(port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        url = f"http://127.0.0.1:{port}"
        started[station.base_url, name] = proc, f"{url}/v1"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpx.get(f"{url}/health/liveliness", timeout=2).status_code == 200:
                    return f"{url}/v1"
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"LiteLLM did not come up on :{port} (exit {proc.poll()}); its log ends:\n{tail}")

    yield start
    for proc, _ in started.values():
        _stop(proc)


def _run(folder: Path, station: str, key: str, *names: str, profile: str = "reference-cpu") -> Run:
    """`golive run -m endpoint` on one station line (`station`: its YAML mapping), only the checks `names`; `profile`:
    a shipped profile's name, or a site profile's text."""
    folder.mkdir()
    if "\n" in profile:
        (folder / "site.yaml").write_text(profile)
        profile = "site.yaml"
    (folder / "inventory.yaml").write_text(f"profile: {profile}\nstations:\n  - {station}\n")
    selection = " or ".join(sorted(names))
    return golive_run(folder / "inventory.yaml", folder / "out", "-m", "endpoint", "-k", selection, env={KEY_ENV: key})


def _outcomes(run: Run) -> dict[str, str]:
    return {name: checks[0]["outcome"] for name, checks in run.by_name().items()}


def test_checks_pass_through_a_litellm_gateway(
    reference: ReferenceStation, litellm: Callable[..., str], tmp_path: Path
) -> None:
    gateway = litellm(reference)
    # LiteLLM's /health, as golive met it before: it wants the key (and calls every model), so it is not the probe
    assert httpx.get(gateway.removesuffix("/v1") + "/health", timeout=10).status_code in (401, 500)

    # the inventory says nothing of the gateway: golive finds it by its own probe
    run = _run(
        tmp_path / "found",
        f"{{name: gw, endpoint: '{gateway}', api_key_env: {KEY_ENV}}}",
        MASTER_KEY,
        *THROUGH,
        *VLLM_OWN,
    )
    outcomes = _outcomes(run)
    assert set(outcomes) == THROUGH | VLLM_OWN, run.output
    assert run.failed() == set(), run.output  # never a false NO-GO
    assert {n for n, o in outcomes.items() if o == "passed"} == THROUGH, run.output
    assert run.results["verdict"] == "incomplete" and run.code == 2, run.output
    reasons = {run.check(name)["message"] for name in VLLM_OWN}
    assert len(reasons) == 1, reasons  # one reason, the same line for each: the report lists it once
    [reason] = reasons
    assert "gateway" in reason and "/health/readiness" in reason and "vllm_endpoint" in reason, reason
    verdict = run.output[run.output.index("golive verdict") :]
    [line] = [line for line in verdict.splitlines() if "not checked (" in line]
    assert line.strip().startswith(f"not checked ({len(VLLM_OWN)}):") and line.count("a gateway") == 1, line
    assert "/health/readiness answers 200" in (run.check("test_health_endpoint_is_ok").get("note") or ""), run.output
    assert MASTER_KEY not in run.output, "the key reached golive's output"

    # named, with the vLLM behind it: vLLM's own /health, /metrics, /tokenize and flags are checked there
    behind = (
        f"{{name: gw, endpoint: '{gateway}', api_key_env: {KEY_ENV}, gateway: litellm, "
        f"vllm_endpoint: '{reference.base_url}'}}"
    )
    direct = {"test_health_endpoint_is_ok", *VLLM_OWN} - {"test_prefix_caching_on_and_effective"}  # /metrics: kv
    run = _run(tmp_path / "named", behind, MASTER_KEY, *direct)
    assert _outcomes(run) == dict.fromkeys(direct, "passed"), run.output
    assert run.results["verdict"] == "pass" and run.code == 0, run.output


def test_wrong_gateway_key_is_one_auth_failure(
    reference: ReferenceStation, litellm: Callable[..., str], tmp_path: Path
) -> None:
    gateway = litellm(reference)
    station = f"{{name: gw, endpoint: '{gateway}', api_key_env: {KEY_ENV}, gateway: litellm}}"
    names = ("test_auth_matches_profile", "test_models_lists_served_name", "test_one_token_canary_answers")
    run = _run(tmp_path / "wrong", station, "sk-not-the-master-key", *names)
    assert run.failed() == {"test_auth_matches_profile"}, run.output
    assert run.results["verdict"] == "fail" and run.code == 1, run.output
    auth = run.check("test_auth_matches_profile")
    assert "refused the key" in auth["finding"]["found"] and "gateway `litellm`" in auth["finding"]["fix"], auth
    for name in names[1:]:
        check = run.check(name)
        assert check["outcome"] == "not_checked" and "see the auth check" in check["message"], check


RENAMED = "glm-5.3"  # the name clients ask the renaming gateway for; it routes to vLLM's `golive-reference`
# the clients' name in a site profile, as the README says; the sweep short (two levels, one ratio round) and the
# needles a quarter of the context: what is proven here is which name each request carries, not the sizes
RENAMING_SITE = (
    f"extends: reference-cpu\nvllm:\n  served_model_name: {RENAMED}\nendpoint:\n  needle_fraction_of_context: 0.25\n"
    "load:\n  concurrency: [1, 2]\n  gate_concurrency: 2\n  ratio_rounds: 1\n  max_requests: 200\n"
    "  floors: {scaling_ratio: 1.0}\n  prefill: {prompt_tokens: []}\n"
)
# what the issue saw fail through a renaming gateway: vLLM's own /tokenize (the over-long prompt, the needles, the
# prefill-stall probe), its /v1/models (max_model_len) and the model_name label of its /metrics (the sweep's two
# comparisons with vLLM's own counts)
BY_VLLMS_NAME = {
    "test_models_max_model_len_matches_profile",
    "test_over_long_prompt_refused_cleanly",
    "test_needle_retrieved_near_full_context",
    "test_streams_keep_decoding_during_long_prefill",
    "test_latency_is_vllms_own",
    "test_gate_level_is_never_held_back",
}


# ~60-90 s beside the session's station: a second LiteLLM (~12 s), three short runs, the sweep ~20 s of them
@pytest.mark.slow
def test_renaming_gateway_reaches_go_with_both_names(
    reference: ReferenceStation, litellm: Callable[..., str], tmp_path: Path
) -> None:
    """Clients ask the gateway for `glm-5.3`; it routes to vLLM's `golive-reference`. With the profile naming the
    clients' name and `vllm_endpoint` given, every request through the gateway carries the clients' name and every
    request to vLLM's own server vLLM's: GO, whether the inventory names vLLM's (`vllm_model`) or golive learns it
    from vLLM's own /v1/models; without `vllm_endpoint`, INCOMPLETE with one reason."""
    gateway = litellm(reference, RENAMED)
    station = f"{{name: gw, endpoint: '{gateway}', api_key_env: {KEY_ENV}, gateway: litellm"
    behind = f"{station}, vllm_endpoint: '{reference.base_url}'"
    checks = {*THROUGH, *VLLM_OWN, *BY_VLLMS_NAME} - {"test_auth_matches_profile"}  # auth: the profile's, unchanged

    declared = _run(
        tmp_path / "declared", f"{behind}, vllm_model: {SERVED_NAME}}}", MASTER_KEY, *checks, profile=RENAMING_SITE
    )
    assert set(_outcomes(declared)) == checks, declared.output
    assert set(_outcomes(declared).values()) == {"passed"}, declared.output
    assert declared.results["verdict"] == "pass" and declared.code == 0, declared.output
    note = declared.check("test_models_lists_served_name")["note"] or ""
    assert f"clients ask for `{RENAMED}`; vLLM serves it as `{SERVED_NAME}`" in note, note
    assert "as the inventory's `vllm_model` says" in note, note

    own = {"test_models_lists_served_name", "test_models_max_model_len_matches_profile"}
    own |= {"test_over_long_prompt_refused_cleanly", "test_kv_cache_capacity_meets_floor"}
    learned = _run(tmp_path / "learned", f"{behind}}}", MASTER_KEY, *own, profile=RENAMING_SITE)
    assert _outcomes(learned) == dict.fromkeys(own, "passed"), learned.output
    assert learned.code == 0, learned.output
    assert "the one model it serves" in (learned.check("test_models_lists_served_name")["note"] or ""), learned.output

    unseen = _run(tmp_path / "unseen", f"{station}}}", MASTER_KEY, *own, profile=RENAMING_SITE)
    assert unseen.failed() == set(), unseen.output
    assert unseen.results["verdict"] == "incomplete" and unseen.code == 2, unseen.output
    reasons = {c["message"] for c in unseen.checks if c["outcome"] == "not_checked"}
    assert len(reasons) == 1 and "vllm_endpoint" in next(iter(reasons)), reasons


def test_renaming_gateway_findings_name_the_names(
    reference: ReferenceStation, litellm: Callable[..., str], tmp_path: Path
) -> None:
    """A name that matches nothing is one finding saying which name, where, and which names exist: the profile
    naming vLLM's name through a gateway that renames it is not "serve with --served-model-name" (vLLM does); a
    `vllm_model` vLLM does not serve names the inventory's line; the checks that need vLLM's name point at it."""
    gateway = litellm(reference, RENAMED)
    behind = (
        f"{{name: gw, endpoint: '{gateway}', api_key_env: {KEY_ENV}, gateway: litellm, "
        f"vllm_endpoint: '{reference.base_url}'"
    )
    names = ("test_models_lists_served_name", "test_over_long_prompt_refused_cleanly")

    vllms = _run(tmp_path / "vllms", f"{behind}}}", MASTER_KEY, *names)  # reference-cpu: vLLM's own name
    assert vllms.failed() == {"test_models_lists_served_name"} and vllms.code == 1, vllms.output
    finding = vllms.check("test_models_lists_served_name")["finding"]
    assert f"lists `{RENAMED}`; `{SERVED_NAME}` is not among them" in finding["found"], finding
    fix = finding["fix"]
    assert "--served-model-name" not in fix and "the gateway `litellm` does not offer it by that name" in fix, fix
    assert f"If clients ask for `{RENAMED}`, that is the name to check" in fix, fix
    assert f"`vllm_model: {SERVED_NAME}` in the inventory (" in fix and "inventory.yaml:3" in fix, fix

    wrong = _run(tmp_path / "wrong", f"{behind}, vllm_model: glm-5.3-fp8}}", MASTER_KEY, *names, profile=RENAMING_SITE)
    assert wrong.failed() == {"test_models_lists_served_name"} and wrong.code == 1, wrong.output
    finding = wrong.check("test_models_lists_served_name")["finding"]
    assert f"/v1/models lists `{SERVED_NAME}`, not `glm-5.3-fp8`" in finding["found"], finding
    assert "correct `vllm_model: glm-5.3-fp8` (" in finding["fix"] and f"as: `{SERVED_NAME}`" in finding["fix"]
    skipped = wrong.check("test_over_long_prompt_refused_cleanly")
    assert skipped["outcome"] == "not_checked" and "see the served-name check" in skipped["message"], skipped
    for run in (vllms, wrong):
        assert "check the endpoint URL" not in run.output and MASTER_KEY not in run.output, run.output


class _BareGateway(BaseHTTPRequestHandler):
    """A gateway with no health probe at all (every path but /v1/… is 404) that wants a key: /v1/models and a
    one-token chat, as a gateway passes them from vLLM (no max_model_len: a gateway lists the names it routes)."""

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._answer({"object": "list", "data": [{"id": SERVED_NAME, "object": "model"}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        message = {"role": "assistant", "content": "Hi"}
        usage = {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
        choice = {"index": 0, "message": message, "finish_reason": "length"}
        self._answer(
            {
                "id": "c1",
                "object": "chat.completion",
                "created": 0,
                "model": SERVED_NAME,
                "choices": [choice],
                "usage": usage,
            }
        )

    def _answer(self, body: dict) -> None:
        status = (
            404
            if not self.path.startswith("/v1/")
            else 401
            if self.headers.get("Authorization") != f"Bearer {MASTER_KEY}"
            else 200
        )
        raw = json.dumps(body if status == 200 else {"error": "no"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


def test_declared_gateway_without_a_health_probe_is_no_false_no_go(tmp_path: Path) -> None:
    """`gateway:` in the inventory, and a gateway that answers /health (and every probe golive knows) with 404: the
    checks through it run; vLLM's own /health and flags are not checked, with one reason naming the gateway."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _BareGateway)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        station = f"{{name: bare, endpoint: '{url}', api_key_env: {KEY_ENV}, gateway: edge-proxy}}"
        own = ("test_health_endpoint_is_ok", "test_models_max_model_len_matches_profile")
        run = _run(
            tmp_path / "bare",
            station,
            MASTER_KEY,
            *own,
            "test_models_lists_served_name",
            "test_one_token_canary_answers",
        )
    finally:
        server.shutdown()
        server.server_close()
    assert run.failed() == set(), run.output
    assert _outcomes(run) == {
        "test_health_endpoint_is_ok": "not_checked",
        "test_models_max_model_len_matches_profile": "not_checked",
        "test_models_lists_served_name": "passed",
        "test_one_token_canary_answers": "passed",
    }, run.output
    [reason] = {run.check(name)["message"] for name in own}
    assert "the gateway `edge-proxy`" in reason and "vllm_endpoint" in reason, reason
    assert run.results["verdict"] == "incomplete" and run.code == 2, run.output
