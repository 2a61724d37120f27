"""The watcher: a round over every station (the light checks, then each station's own readings), the last round's
state, and that state as Prometheus metrics (a prometheus_client collector) and as one line per station on stderr.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from golive.core.secrets import scrub, station_secrets
from golive.core.verdict import printable
from golive.day2.light_checks import checks_from_results, run_light_checks, watched_layers
from golive.day2.station_readings import (
    Latency,
    StationRound,
    per_user_speed,
    probe,
    read_restarts,
    read_station_metrics,
)
from golive.endpoint.target import api_key_of
from golive.profile.inventory import Station
from golive.site import loader

if TYPE_CHECKING:  # imported where used: the collector brings prometheus_client
    from prometheus_client.metrics_core import Metric


@dataclass
class State:
    """The last round per station, when each station last passed a whole round, and how the round went."""

    rounds: dict[str, StationRound] = field(default_factory=dict)
    last_success: dict[str, float] = field(default_factory=dict)
    round_s: float | None = None
    checks_exit: int | None = None


class Watcher:
    """Rounds over an inventory's stations every `every_s` seconds; a prometheus_client collector of the last one."""

    def __init__(self, inventory: Path, every_s: float):
        self.inventory = Path(inventory)
        self.every_s = every_s
        self.loaded = loader.load_inventory(self.inventory)
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
        unreadable = ""
        try:
            code, results = run_light_checks(self.inventory, self.every_s, layers)
        except ValueError as exc:  # a results.json this golive cannot read: one line per station, no series
            code, results, unreadable = 1, None, str(exc)
        checks = checks_from_results(results) if results is not None else {}
        rounds = {}
        for station in stations:
            reading = self.read_station(station)
            reading.checks = {
                key: check
                for key, check in checks.get(station.name, {}).items()
                if check.layer in watched_layers(station)
            }
            if results is None:
                reading.problems.append(
                    f"the light checks wrote no results (golive run exited {code})"
                    + (f": {printable(unreadable)[:200]}" if unreadable else "")
                )
            reading.problems = [scrub(problem, self.secrets) for problem in reading.problems]  # quote exceptions
            rounds[station.name] = reading
        with self._lock:
            self.state.rounds = rounds
            self.state.checks_exit = code
            self.state.round_s = time.time() - started
            for name, reading in rounds.items():
                passed = all(check.passed for check in reading.checks.values())
                if reading.checks and passed and reading.canary_up is not False:
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
            labels=["station", "check", "layer", "id"],
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
            for key, check in sorted(reading.checks.items()):
                labels = [name, scrub(check.name, self.secrets), check.layer, scrub(key, self.secrets)]
                passed.add_metric(labels, 1.0 if check.passed else 0.0)
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
            failing = sorted(check.name for check in reading.checks.values() if not check.passed)
            line = (
                f"golive watch: {name}: {len(reading.checks) - len(failing)}/{len(reading.checks)} checks passed"
                + (f", failing: {', '.join(failing[:5])}" if failing else "")
                + f"; canary {'up' if reading.canary_up else 'DOWN' if reading.canary_up is False else '-'}"
                + (f"; TTFT {reading.ttft_s:.3f} s" if reading.ttft_s is not None else "")
                + (f"; decode {reading.decode_tok_s:.1f} tok/s" if reading.decode_tok_s is not None else "")
                + "".join(f"; {p}" for p in reading.problems[:2])
            )
            print(scrub(line, self.secrets), file=sys.stderr, flush=True)
