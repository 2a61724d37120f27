"""`golive watch --rules`: the Prometheus alert rules of every station, thresholds from the profile in force (its
`watch:` section, else the go-live floors less `load.tolerance`); docs/day-2.md says what each alert means and what to
run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from golive.core.secrets import hide_password, scrub, scrub_data, station_secrets
from golive.day2.light_checks import LIGHT_MARKERS
from golive.endpoint.target import api_key_of
from golive.profile.inventory import Station
from golive.profile.schema import Profile
from golive.site import loader


@dataclass
class Rule:
    alert: str
    expr: str
    for_s: float
    severity: str
    summary: str
    check: str  # what to look at, the golive command to run (docs/day-2.md)
    labels: dict[str, str] = field(default_factory=dict)


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
    run = f"golive run {inventory}"
    sustained = 2 * every_s  # a speed or KV alert fires only when it holds for two rounds
    rules = [
        *_round_rules(station, profile, sel, run, every_s),
        *_decode_rules(station, profile, sel, run, sustained),
        *_restart_rules(station, profile, sel, run),
        *_kv_rules(station, profile, sel, run, sustained),
    ]
    for rule in rules:
        rule.labels = {"station": station.name, "profile": profile.name, **rule.labels}
    return rules


def _round_rules(station: Station, profile: Profile, sel: str, run: str, every_s: float) -> list[Rule]:
    """The station answers, its checks pass, and the watcher completes its rounds."""
    name = station.name
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
    return rules


def _decode_rules(station: Station, profile: Profile, sel: str, run: str, sustained: float) -> list[Rule]:
    """Decode speed below the watch thresholds: one user alone, and each of the gate's users under load."""
    name = station.name
    rules = []
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
    return rules


def _restart_rules(station: Station, profile: Profile, sel: str, run: str) -> list[Rule]:
    """Restarts one short of systemd's start limit, where one more start keeps the service down."""
    if profile.service is None or not station.host:
        return []
    service = profile.service
    burst = profile.watch.restarts_per_interval or max(1, service.start_limit_burst - 1)
    window = _duration(service.start_limit_interval_s)
    return [
        Rule(
            "GoliveRestartSpike",
            f"increase(golive_service_restarts_total{{{sel}}}[{window}]) >= {burst}",
            0,
            "critical",
            f"{station.name}: {service.unit} restarted {burst}+ times within {window}",
            f"journalctl -u {service.unit}; the saved logs in {service.log_dir or 'the log dir'}; "
            f"one more start and systemd's start limit keeps it down (`systemctl reset-failed`); `{run} -m host`",
            {"threshold": str(burst)},
        )
    ]


def _kv_rules(station: Station, profile: Profile, sel: str, run: str, sustained: float) -> list[Rule]:
    """The KV cache near full with requests waiting."""
    name = station.name
    rules = []
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
    return rules


def rules_document(loaded: loader.LoadedInventory, every_s: float, inventory: str) -> dict[str, Any]:
    """Every station's alert rules, as Prometheus reads them; every label and annotation scrubbed of the inventory's
    secrets (golive.core.secrets)."""
    secrets = station_secrets(loaded.inventory.stations, api_key_of)
    groups = []
    for station in loaded.inventory.stations:
        profile = loaded.profile_of(station).profile
        rules = []
        for rule in station_rules(station, profile, every_s, inventory):
            entry: dict[str, Any] = {"alert": rule.alert, "expr": rule.expr}
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


def rules_text(loaded: loader.LoadedInventory, every_s: float, inventory: str) -> str:
    import yaml

    header = (
        f"# Prometheus alert rules generated by `golive watch --rules` for {inventory} (every {every_s:g} s).\n"
        "# Thresholds come from each station's profile (watch:, else the go-live floors less load.tolerance).\n"
    )
    return header + yaml.safe_dump(
        rules_document(loaded, every_s, inventory), sort_keys=False, width=1000, allow_unicode=True
    )
