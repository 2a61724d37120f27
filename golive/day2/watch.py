"""`golive watch`: after go-live, the light checks, a liveness canary and one small timed probe per station on a
schedule, served as Prometheus metrics; `--rules` prints the alert rules of the profile in force.

Why a subprocess for the checks: each round runs `golive run INVENTORY` with the light selection below, exactly as an
operator would, so the watcher's verdict per check is the checklist's own (same fixtures, same not-checked rules), and
a round starts from fresh facts (StationFacts and the endpoint client cache per session: a long-lived process would
keep the first round's answers). The canary, the probe and the station's /metrics are read in this process: they are
three requests, timed here.

Bounded load per station and round (docs/day-2.md): the light checks (the host layer's reads, and the endpoint
checks that send a handful of short requests: /health, /v1/models, /metrics, one-token canary, short chats, one
tool call, reasoning, prefix caching), one 1-token canary, one streamed probe of `watch.probe_output_tokens` tokens.
Never the sweep (perf), the batteries (quality, tool and agent batteries), the needle (a near-full-context prompt),
the over-long prompt, nor the tool_choice set; a round's checks are cut at 80 % of the interval, at least 60 s
(`--max-run-time`); checks it did not reach are left out of that round's metrics.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from golive.core.secrets import hide_password, scrub, scrub_data, station_secrets
from golive.core.verdict import EXIT_USAGE, printable
from golive.endpoint.target import api_key_of
from golive.inventory import loader as golive_config
from golive.profile.schema import Profile, Station

if TYPE_CHECKING:  # imported where used: the client brings openai, the collector prometheus_client
    import argparse

    from prometheus_client.metrics_core import Metric

    from golive.endpoint.client import EndpointClient

LIGHT_MARKERS = "(host or endpoint) and not perf and not quality"
# heavy endpoint checks the markers leave in: the needle (a near-full-context prompt), the tool and agent batteries
# and the check that replays them, the over-long prompt (max_model_len + 1 tokens), the tool_choice set (a grammar
# per request; the smoke tool call stays and covers the launch blocker)
LIGHT_KEYWORDS = "not needle and not battery and not same_calls and not over_long and not tool_choice"
ROUND_SHARE = 0.8  # a round's checks are cut at this share of the interval …
ROUND_FLOOR_S = 60  # … but never below this: on a loaded station the light checks take tens of seconds
TIME_BOUND = "--max-run-time) was reached"  # the message of a check the round's time bound did not reach
PASSED = {"passed", "waived"}
NOT_APPLICABLE = "not_applicable"
CANARY_PROMPT = "Say OK."
PROBE_PROMPT = "Count from one to one hundred in words, separated by commas."


def light_args(layers: set[str] | None = None) -> list[str]:
    markers = LIGHT_MARKERS
    if layers is not None and layers != {"host", "endpoint"}:  # only what some station can be watched on
        markers = f"({' or '.join(sorted(layers)) or 'no_layer'}) and not perf and not quality"
    return ["-m", markers, "-k", LIGHT_KEYWORDS]


def watched_layers(station: Station) -> set[str]:
    """What the watcher can see of a station: its host where the inventory gives one, its endpoint likewise. Checks
    of a layer the station has no address for are not news about the station (go-live already said so)."""
    return {layer for layer, where in (("host", station.host), ("endpoint", station.endpoint)) if where}


# --- what one round saw ------------------------------------------------------------------------------------------


@dataclass
class StationRound:
    """One station's readings from one round; None: not read this round (the series is left out)."""

    checks: dict[tuple[str, str], bool] = field(default_factory=dict)  # (check, layer) -> passed
    canary_up: bool | None = None
    ttft_s: float | None = None
    decode_tok_s: float | None = None
    others_running: float | None = None  # requests the station was serving when the probe started
    kv_usage: float | None = None
    running: float | None = None
    waiting: float | None = None
    per_user_tok_s: float | None = None
    restarts: float | None = None
    problems: list[str] = field(default_factory=list)


@dataclass
class State:
    rounds: dict[str, StationRound] = field(default_factory=dict)
    last_success: dict[str, float] = field(default_factory=dict)
    round_s: float | None = None
    checks_exit: int | None = None


def check_name(nodeid: str, station: str) -> str:
    """`suites/x.py::test_y[station]` → `test_y`; other parameters stay: `test_y[0.5]`."""
    name = nodeid.split("::")[-1]
    base, _, param = name.partition("[")
    rest = param.rstrip("]").replace(station, "").strip("-")
    return f"{base}[{rest}]" if rest else base


def checks_from_results(results: dict) -> dict[str, dict[tuple[str, str], bool]]:
    """results.json → {station: {(check, layer): passed}}; not-applicable checks are left out, and so are checks the
    round's time bound did not reach (no news about them, not a failure); anything else that did not pass (failed,
    error, not checked because the station did not answer) is 0."""
    out: dict[str, dict[tuple[str, str], bool]] = {}
    for check in results.get("checks", []):
        station = check.get("station") or ""
        if check.get("outcome") == NOT_APPLICABLE or TIME_BOUND in (check.get("message") or ""):
            continue
        out.setdefault(station, {})[(check_name(check["nodeid"], station), check.get("layer") or "")] = (
            check.get("outcome") in PASSED
        )
    return out


def round_budget_s(every_s: float) -> float:
    return max(ROUND_FLOOR_S, every_s * ROUND_SHARE)


def run_light_checks(inventory: Path, every_s: float, layers: set[str] | None = None) -> tuple[int, dict]:
    """One `golive run` of the light selection in a subprocess; its results.json (empty when none was written)."""
    with tempfile.TemporaryDirectory(prefix="golive-watch-") as out:
        command = [
            sys.executable,
            "-m",
            "golive.cli",
            "run",
            str(inventory),
            "-o",
            out,
            "-q",
            "--max-run-time",
            f"{round_budget_s(every_s):g}",
            *light_args(layers),
        ]
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=round_budget_s(every_s) + 60)
        except subprocess.TimeoutExpired:
            return 124, {}
        path = Path(out) / "results.json"
        return proc.returncode, json.loads(path.read_text()) if path.exists() else {}


# --- the station's own readings ------------------------------------------------------------------------------------


def _sample(samples: dict, *names: str) -> float | None:
    for name in names:
        values = [v for _, v in samples.get(name, [])]
        if values:
            return float(sum(values))
    return None


@dataclass
class Latency:
    """The station's inter-token latency histogram totals (vLLM: vllm:inter_token_latency_seconds; older builds
    vllm:time_per_output_token_seconds), to turn two readings into a per-user speed."""

    total_s: float
    count: float


def read_latency(samples: dict) -> Latency | None:
    for base in ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"):
        total, count = _sample(samples, f"{base}_sum"), _sample(samples, f"{base}_count")
        if total is not None and count is not None:
            return Latency(total, count)
    return None


def per_user_speed(before: Latency | None, after: Latency | None) -> float | None:
    """Tokens per second one user saw between two readings: 1 / mean inter-token latency; None without tokens."""
    if before is None or after is None or after.count <= before.count or after.total_s <= before.total_s:
        return None
    return (after.count - before.count) / (after.total_s - before.total_s)


def read_station_metrics(client: EndpointClient, reading: StationRound) -> Latency | None:
    samples = client.metrics()
    # vllm:kv_cache_usage_perc is a fraction (1 = full), whatever its name says
    reading.kv_usage = _sample(samples, "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    reading.running = _sample(samples, "vllm:num_requests_running")
    reading.waiting = _sample(samples, "vllm:num_requests_waiting")
    return read_latency(samples)


def probe(client: EndpointClient, profile: Profile, reading: StationRound) -> None:
    """The canary (one token, not streamed) then one timed streamed answer: TTFT and decode speed."""

    model = profile.vllm.served_model_name
    try:
        answer = client.chat(model, [{"role": "user", "content": CANARY_PROMPT}], max_tokens=1, temperature=0)
        reading.canary_up = bool(answer.content or answer.reasoning or answer.tool_calls or answer.finish_reason)
    except Exception as exc:  # any failure to answer is "not answering"; the checks say why
        reading.canary_up = False
        reading.problems.append(f"canary: {printable(str(exc))[:200]}")
        return
    started = time.perf_counter()
    try:
        answer = client.chat(
            model,
            [{"role": "user", "content": PROBE_PROMPT}],
            stream=True,
            temperature=0,
            max_tokens=profile.watch.probe_output_tokens,
        )
    except Exception as exc:
        reading.problems.append(f"probe: {printable(str(exc))[:200]}")
        return
    total = time.perf_counter() - started
    tokens = (answer.usage or {}).get("completion_tokens") or 0
    reading.ttft_s = answer.first_token_s
    if answer.first_token_s is not None and tokens >= 2 and total > answer.first_token_s:
        reading.decode_tok_s = (tokens - 1) / (total - answer.first_token_s)  # TPOT from the end of the stream


def read_restarts(loaded: golive_config.LoadedInventory, station: Station, profile: Profile) -> float | None:
    """systemd's NRestarts of the unit (`systemctl show`), where the host is reachable and systemd runs."""
    if not station.host or profile.service is None:
        return None
    from golive.facts import systemd
    from golive.inventory.connection import connect

    with connect(
        loaded.host_spec(station) or "", loaded.ssh_config, profile.host.connect_timeout_s, station.name
    ) as connection:
        if connection.unreachable():
            return None
        result = connection.host.run("systemctl show %s", profile.service.unit)
    if result.rc != 0:
        return None
    values = systemd.parse_show(result.stdout).get("NRestarts")
    return float(values[-1]) if values and values[-1].isdigit() else None


# --- the watcher ---------------------------------------------------------------------------------------------------


class Watcher:
    def __init__(self, inventory: Path, every_s: float):
        self.inventory = Path(inventory)
        self.every_s = every_s
        self.loaded = golive_config.load_inventory(self.inventory)
        self.secrets = station_secrets(self.loaded.inventory.stations, api_key_of)  # out of every line and label
        self.state = State()
        self._latency: dict[str, Latency | None] = {}
        self._lock = threading.Lock()

    def read_station(self, station: Station) -> StationRound:
        from golive.endpoint.client import EndpointClient
        from golive.endpoint.errors import EndpointError
        from golive.endpoint.target import EndpointTarget

        profile = self.loaded.profile_of(station).profile
        reading = StationRound()
        if station.endpoint:
            target = EndpointTarget.of(station, profile.endpoint, self.loaded.tls_ca_file(station))
            # a probe never outlasts the round: a generation is bounded by the interval too
            client = EndpointClient(replace(target, request_timeout_s=min(target.request_timeout_s, self.every_s)))
            try:
                try:
                    latency = read_station_metrics(client, reading)
                    reading.others_running = reading.running
                    reading.per_user_tok_s = per_user_speed(self._latency.get(station.name), latency)
                    self._latency[station.name] = latency
                except EndpointError as exc:
                    reading.problems.append(f"/metrics: {exc}")
                probe(client, profile, reading)
            finally:
                client.close()
        try:
            reading.restarts = read_restarts(self.loaded, station, profile)
        except Exception as exc:  # an unreachable host is the host checks' finding; here it is one missing series
            reading.problems.append(f"restarts: {printable(str(exc))[:200]}")
        return reading

    def one_round(self) -> State:
        started = time.time()
        stations = self.loaded.inventory.stations
        layers = set().union(*(watched_layers(s) for s in stations))
        code, results = run_light_checks(self.inventory, self.every_s, layers)
        checks = checks_from_results(results)
        rounds = {}
        for station in stations:
            reading = self.read_station(station)
            reading.checks = {
                key: ok for key, ok in checks.get(station.name, {}).items() if key[1] in watched_layers(station)
            }
            if not results:
                reading.problems.append(f"the light checks wrote no results (golive run exited {code})")
            reading.problems = [scrub(problem, self.secrets) for problem in reading.problems]  # quote exceptions
            rounds[station.name] = reading
        with self._lock:
            self.state.rounds = rounds
            self.state.checks_exit = code
            self.state.round_s = time.time() - started
            for name, reading in rounds.items():
                if reading.checks and all(reading.checks.values()) and reading.canary_up is not False:
                    self.state.last_success[name] = time.time()
        return self.state

    def collect(self) -> Iterator[Metric]:
        """prometheus_client collector: one consistent snapshot of the last round."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        with self._lock:
            state = self.state
            rounds = dict(state.rounds)
            last_success = dict(state.last_success)
        passed = GaugeMetricFamily(
            "golive_check_passed",
            "1 when the check passed in the last round, 0 when it failed or could not be checked",
            labels=["station", "check", "layer"],
        )
        gauges = {
            "canary_up": GaugeMetricFamily(
                "golive_canary_up", "1 when a one-token answer came back", labels=["station"]
            ),
            "ttft_s": GaugeMetricFamily(
                "golive_probe_ttft_seconds", "the probe's time to first token", labels=["station"]
            ),
            "decode_tok_s": GaugeMetricFamily(
                "golive_probe_decode_tokens_per_second",
                "the probe's decode speed, one user (tokens after the first / time after the first)",
                labels=["station"],
            ),
            "others_running": GaugeMetricFamily(
                "golive_probe_others_running",
                "requests the station was serving when the probe started",
                labels=["station"],
            ),
            "kv_usage": GaugeMetricFamily(
                "golive_station_kv_cache_usage_ratio",
                "KV cache in use, 0..1 (vllm:kv_cache_usage_perc)",
                labels=["station"],
            ),
            "running": GaugeMetricFamily(
                "golive_station_requests_running", "vllm:num_requests_running", labels=["station"]
            ),
            "waiting": GaugeMetricFamily(
                "golive_station_requests_waiting", "vllm:num_requests_waiting", labels=["station"]
            ),
            "per_user_tok_s": GaugeMetricFamily(
                "golive_station_per_user_decode_tokens_per_second",
                "1 / mean inter-token latency since the last round (vLLM's histogram)",
                labels=["station"],
            ),
        }
        restarts = CounterMetricFamily(
            "golive_service_restarts", "systemd NRestarts of the serving unit", labels=["station"]
        )
        success = GaugeMetricFamily(
            "golive_last_success_timestamp_seconds",
            "when every light check passed and the canary answered",
            labels=["station"],
        )
        for station, reading in rounds.items():
            name = scrub(station, self.secrets)  # a label value is an output too
            for (check, layer), ok in sorted(reading.checks.items()):
                passed.add_metric([name, scrub(check, self.secrets), layer], 1.0 if ok else 0.0)
            for attr, family in gauges.items():
                value = getattr(reading, attr)
                if value is not None:
                    family.add_metric([name], float(value))
            if reading.restarts is not None:
                restarts.add_metric([name], reading.restarts)
            if station in last_success:
                success.add_metric([name], last_success[station])
        yield passed
        yield from gauges.values()
        yield restarts
        yield success
        if state.round_s is not None:
            yield GaugeMetricFamily("golive_watch_round_seconds", "how long the last round took", value=state.round_s)

    def loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            started = time.monotonic()
            self.one_round()
            self.report()
            stop.wait(max(0.0, self.every_s - (time.monotonic() - started)))

    def report(self) -> None:
        """One line per station and round on stderr (stdout carries `--once`'s metrics)."""
        for name, reading in self.state.rounds.items():
            failing = sorted(c for (c, _), ok in reading.checks.items() if not ok)
            line = (
                f"golive watch: {name}: {len(reading.checks) - len(failing)}/{len(reading.checks)} checks passed"
                + (f", failing: {', '.join(failing[:5])}" if failing else "")
                + f"; canary {'up' if reading.canary_up else 'DOWN' if reading.canary_up is False else '-'}"
                + (f"; TTFT {reading.ttft_s:.3f} s" if reading.ttft_s is not None else "")
                + (f"; decode {reading.decode_tok_s:.1f} tok/s" if reading.decode_tok_s is not None else "")
                + "".join(f"; {p}" for p in reading.problems[:2])
            )
            print(scrub(line, self.secrets), file=sys.stderr, flush=True)


# --- alert rules ---------------------------------------------------------------------------------------------------


@dataclass
class Rule:
    alert: str
    expr: str
    for_s: float
    severity: str
    summary: str
    check: str  # what to look at, the golive command to run (docs/day-2.md)
    labels: dict = field(default_factory=dict)


def _duration(seconds: float) -> str:
    return f"{max(0, round(seconds))}s"


def _at(profile: Profile, floor: float | None) -> float | None:
    if floor is None:
        return None
    tolerance = profile.load.tolerance if profile.load else 0.0
    return round(floor * (1 - tolerance), 3)


def station_rules(station: Station, profile: Profile, every_s: float, inventory: str) -> list[Rule]:
    """The alerts of one station, thresholds from its profile (`watch:`, else the go-live floors less tolerance)."""
    sel = f'station="{station.name}"'
    name = station.name
    run = f"golive run {inventory}"
    sustained = 2 * every_s
    unit = profile.service.unit if profile.service else None
    rules = []
    if station.endpoint:
        health = (hide_password(station.endpoint) or "").removesuffix("/v1") + "/health"
        rules.append(
            Rule(
                "GoliveStationNotAnswering",
                f"golive_canary_up{{{sel}}} == 0",
                0,
                "critical",
                f"{name} does not answer a one-token request",
                f"curl -i {health}"
                + (f"; systemctl status {unit}; journalctl -u {unit}" if unit else "")
                + f"; then `{run} -m endpoint`",
            )
        )
    rules += [
        Rule(
            "GoliveCheckFailing",
            f"golive_check_passed{{{sel}}} == 0",
            0,
            "critical",
            f"a go-live check fails on {name}",
            f"the failing check is in the alert's `check` label; `{run} -k <check>` prints what was found and "
            f"what to do",
        ),
        Rule(
            "GoliveNoRecentSuccess",
            f"time() - golive_last_success_timestamp_seconds{{{sel}}} > {3 * every_s:g}",
            0,
            "warning",
            f"{name} has not passed a whole round for 3 intervals",
            f'the watcher\'s own log; `{run} -m "{LIGHT_MARKERS}"`',
        ),
    ]
    decode = profile.watch.single_user_decode_tok_s or _at(
        profile, profile.load.floors.single_user_decode_tok_s if profile.load else None
    )
    if decode and station.endpoint:
        rules.append(
            Rule(
                "GoliveSingleUserDecodeSlow",
                f"golive_probe_decode_tokens_per_second{{{sel}}} < {decode:g} and on(station) "
                f"golive_probe_others_running{{{sel}}} == 0",
                sustained,
                "warning",
                f"{name}: single-user decode below {decode:g} tok/s",
                "nvidia-smi (clocks, other processes on the GPU), page cache on the HBM node; "
                f"`{run} -m perf` off-peak",
                {"threshold": f"{decode:g}"},
            )
        )
    users = profile.load.gate_concurrency if profile.load else None
    per_user = profile.watch.per_user_tok_s or _at(
        profile, profile.load.floors.per_user_tok_s_p50 if profile.load else None
    )
    if per_user and users and station.endpoint:
        rules.append(
            Rule(
                "GolivePerUserDecodeSlow",
                f"golive_station_per_user_decode_tokens_per_second{{{sel}}} < {per_user:g} and on(station) "
                f"golive_station_requests_running{{{sel}}} >= {users}",
                sustained,
                "warning",
                f"{name}: per-user decode below {per_user:g} tok/s with {users}+ users",
                f"load on the station (running/waiting requests), prefix cache hit rate; `{run} -m perf` off-peak",
                {"threshold": f"{per_user:g}", "users": str(users)},
            )
        )
    if profile.service is not None and station.host:
        burst = profile.watch.restarts_per_interval or max(1, profile.service.start_limit_burst - 1)
        window = _duration(profile.service.start_limit_interval_s)
        rules.append(
            Rule(
                "GoliveRestartSpike",
                f"increase(golive_service_restarts_total{{{sel}}}[{window}]) >= {burst}",
                0,
                "critical",
                f"{name}: {profile.service.unit} restarted {burst}+ times within {window}",
                f"journalctl -u {profile.service.unit}; the saved logs in {profile.service.log_dir or 'the log dir'}; "
                f"one more start and systemd's start limit keeps it down (`systemctl reset-failed`); `{run} -m host`",
                {"threshold": str(burst)},
            )
        )
    ceiling = profile.watch.kv_usage_ceiling
    if station.endpoint:
        rules.append(
            Rule(
                "GoliveKvCacheExhausted",
                f"golive_station_kv_cache_usage_ratio{{{sel}}} >= {ceiling:g} and on(station) "
                f"golive_station_requests_waiting{{{sel}}} > 0",
                sustained,
                "warning",
                f"{name}: KV cache {ceiling:.0%}+ full with requests waiting",
                f"running vs max_num_seqs ({profile.vllm.max_num_seqs}), long prompts; KV capacity: "
                f"`{run} -k kv_cache_capacity`",
                {"threshold": f"{ceiling:g}"},
            )
        )
    for rule in rules:
        rule.labels = {"station": name, "profile": profile.name, **rule.labels}
    return rules


def rules_document(loaded: golive_config.LoadedInventory, every_s: float, inventory: str) -> dict:
    """Every station's alert rules, as Prometheus reads them; every label and annotation scrubbed of the inventory's
    secrets (golive.core.secrets)."""
    secrets = station_secrets(loaded.inventory.stations, api_key_of)
    groups = []
    for station in loaded.inventory.stations:
        profile = loaded.profile_of(station).profile
        rules = []
        for rule in station_rules(station, profile, every_s, inventory):
            entry: dict = {"alert": rule.alert, "expr": rule.expr}
            if rule.for_s:
                entry["for"] = _duration(rule.for_s)
            entry["labels"] = {"severity": rule.severity, **rule.labels}
            entry["annotations"] = {
                "summary": rule.summary,
                "check": rule.check,
                "runbook": f"docs/day-2.md#{rule.alert.lower()}",
            }
            rules.append(scrub_data(entry, secrets))  # expr, labels and annotations alike: they must agree
        groups.append({"name": scrub(f"golive-{station.name}", secrets), "rules": rules})
    return {"groups": groups}


def rules_text(loaded: golive_config.LoadedInventory, every_s: float, inventory: str) -> str:
    import yaml

    header = (
        f"# Prometheus alert rules generated by `golive watch --rules` for {inventory} (every {every_s:g} s).\n"
        "# Thresholds come from each station's profile (watch:, else the go-live floors less load.tolerance).\n"
    )
    return header + yaml.safe_dump(
        rules_document(loaded, every_s, inventory), sort_keys=False, width=1000, allow_unicode=True
    )


# --- command -------------------------------------------------------------------------------------------------------


def parse_listen(text: str) -> tuple[str, int]:
    """`:9109` → all addresses; `127.0.0.1:9109`, `[::1]:9109` (IPv6 in brackets, as in a URL)."""
    host, _, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--listen takes [HOST]:PORT, not {text!r}")
    if ":" in host and not text.startswith("["):
        raise ValueError(f"--listen takes [HOST]:PORT, not {text!r}: an IPv6 host goes in brackets, [::1]:9109")
    return host or "0.0.0.0", int(port)


def cmd_watch(ns: argparse.Namespace) -> int:
    if not 0 < ns.every < float("inf"):
        print(f"golive: --every takes seconds above 0, not {ns.every}", file=sys.stderr)
        return EXIT_USAGE
    try:
        address, port = parse_listen(ns.listen)
        loaded = golive_config.load_inventory(Path(ns.inventory))
    except (ValueError, golive_config.ConfigError) as exc:
        print(f"golive: {printable(scrub(str(exc)))}", file=sys.stderr)
        return EXIT_USAGE
    if ns.rules:
        print(rules_text(loaded, ns.every, ns.inventory), end="")
        return 0
    from prometheus_client import CollectorRegistry, generate_latest, start_http_server

    watcher = Watcher(Path(ns.inventory), ns.every)
    registry = CollectorRegistry()
    registry.register(watcher)  # a collector: it has collect()
    if ns.once:
        watcher.one_round()
        watcher.report()
        print(generate_latest(registry).decode(), end="")
        return 0
    where = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    try:
        server, thread = start_http_server(port, addr=address, registry=registry)
    except OSError as exc:
        print(f"golive: cannot listen on {where}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    print(
        f"golive watch: serving metrics on http://{where}/metrics, a round every {ns.every:g} s "
        f"({len(loaded.inventory.stations)} station(s))",
        flush=True,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())  # a service manager's stop: finish the round, exit 0
    try:
        watcher.loop(stop)
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
    return 0
