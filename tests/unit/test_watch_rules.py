"""`golive watch`: what a round's results become as metrics, and the alert rules generated from the profile, checked
by Prometheus's own promtool: each alert fires on a synthetic series crossing its threshold and stays quiet on one
that does not."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from golive.day2.alert_rules import rules_document
from golive.day2.light_checks import WatchedCheck, check_name, checks_from_results
from golive.day2.station_readings import Latency, StationRound, per_user_speed
from golive.day2.watcher import Watcher
from golive.report.model import CheckRecord, Results
from golive.site import loader
from golive.site.loader import load_profile

REPO = Path(__file__).resolve().parents[2]
EVERY = 60
PROMTOOL = shutil.which("promtool") or "promtool"  # absent: the promtool tests skip (needs_promtool)
needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool not installed: scripts/setup.sh installs Debian's prometheus"
)


@pytest.fixture
def inventory(tmp_path):
    """Two stations, two profiles: the GB300 site profile (host and endpoint) and the reference (endpoint only)."""
    path = tmp_path / "inventory.yaml"
    path.write_text(
        f"profile: {REPO}/fixtures/profiles/gb300-site.yaml\nstations:\n"
        f"  - {{name: gb300-a, host: 'chroot:///nonexistent', endpoint: 'http://127.0.0.1:1/v1'}}\n"
        f"  - {{name: ref, endpoint: 'http://127.0.0.1:2/v1', profile: reference-cpu}}\n"
    )
    return path


def rules_of(inventory: Path) -> dict[str, dict[str, dict]]:
    loaded = loader.load_inventory(inventory)
    document = rules_document(loaded, EVERY, str(inventory))
    return {g["name"].removeprefix("golive-"): {r["alert"]: r for r in g["rules"]} for g in document["groups"]}


@pytest.mark.parametrize(
    "id, station, name",
    [
        ("endpoint.liveness.health_ok@ref", "ref", "endpoint.liveness.health_ok"),
        ("endpoint.context.needle[depth50]@gb300-a", "gb300-a", "endpoint.context.needle[depth50]"),
        ("host.unit.caps@a-b", "a-b", "host.unit.caps"),
        ("host/test_unit.py::test_plain@x", "x", "host/test_unit.py::test_plain"),  # a test that declares no id
    ],
)
def test_check_names_are_the_ids_less_the_station(id, station, name):
    """The `check` label: what `golive run INVENTORY -k NAME` runs."""
    record = CheckRecord(id=id, nodeid="suites/x.py::test_x", layer="host", rule="r", station=station)
    assert check_name(record) == name


def _declared(check: dict) -> str:
    """The id a check of these rounds declares: `layer.t.<function less test_>`, @station."""
    function = check["nodeid"].split("::")[1].partition("[")[0].removeprefix("test_")
    return f"{check['layer']}.t.{function}@{check['station']}"


def round_of(*checks: dict) -> Results:
    """A round's results.json as the watcher reads it (through the model), from its checks."""
    return Results.model_validate(
        {
            "schema": 5,
            "verdict": "fail",
            "verdict_rules": "",
            "checks": [{"rule": "r", "id": _declared(c), **c} for c in checks],
        }
    )


def test_round_results_become_passed_or_not():
    results = round_of(
        {"nodeid": "suites/endpoint/t.py::test_a[ref]", "station": "ref", "layer": "endpoint", "outcome": "passed"},
        {"nodeid": "suites/endpoint/t.py::test_b[ref]", "station": "ref", "layer": "endpoint", "outcome": "failed"},
        {
            "nodeid": "suites/endpoint/t.py::test_c[ref]",
            "station": "ref",
            "layer": "endpoint",
            "outcome": "not_checked",
        },
        {"nodeid": "suites/host/t.py::test_d[ref]", "station": "ref", "layer": "host", "outcome": "not_applicable"},
        {"nodeid": "suites/host/t.py::test_e[ref]", "station": "ref", "layer": "host", "outcome": "waived"},
    )
    assert checks_from_results(results) == {
        "ref": {
            "endpoint.t.a@ref": WatchedCheck("endpoint.t.a", "endpoint", True),
            "endpoint.t.b@ref": WatchedCheck("endpoint.t.b", "endpoint", False),
            "endpoint.t.c@ref": WatchedCheck("endpoint.t.c", "endpoint", False),
            "host.t.e@ref": WatchedCheck("host.t.e", "host", True),
        }
    }


def test_rounds_match_checks_by_id_not_by_message():
    """Two rounds whose messages differ, and whose check moved to another file under another name, are the same
    checks: they declare one id. A check of the same function name that declares another id, or the same check on
    another station, is another check."""
    first = round_of(
        {
            "nodeid": "suites/host/test_unit.py::test_caps[a]",
            "station": "a",
            "layer": "host",
            "outcome": "failed",
            "message": "Found: StartLimitBurst=5",
            "id": "host.unit.caps_starts@a",
        },
        {"nodeid": "suites/host/test_unit.py::test_caps[b]", "station": "b", "layer": "host", "outcome": "passed"},
    )
    second = round_of(
        {
            "nodeid": "../venv/golive/suites/host/test_systemd.py::test_starts_capped[a]",
            "station": "a",
            "layer": "host",
            "outcome": "failed",
            "message": "Found: StartLimitBurst=9 (edited since)",
            "id": "host.unit.caps_starts@a",
        },
        {
            "nodeid": "suites/host/test_unit.py::test_caps[b]",
            "station": "b",
            "layer": "host",
            "outcome": "passed",
            "id": "host.unit.other@b",
        },
    )
    before, after = checks_from_results(first), checks_from_results(second)
    assert set(before["a"]) == set(after["a"]) == {"host.unit.caps_starts@a"}  # matched
    assert set(before["b"]).isdisjoint(after["b"])  # another id: another check, though its function is the same
    assert before["a"]["host.unit.caps_starts@a"] == after["a"]["host.unit.caps_starts@a"]


@pytest.mark.parametrize(
    "before, after, speed",
    [
        (Latency(10.0, 1000), Latency(12.0, 1100), 50.0),  # 100 tokens in 2 s of inter-token time
        (None, Latency(12.0, 1100), None),  # first round: nothing to compare
        (Latency(10.0, 1000), Latency(10.0, 1000), None),  # no token since: no speed, not 0
        (Latency(10.0, 1000), Latency(1.0, 50), None),  # the station restarted: its counters reset
    ],
)
def test_per_user_speed_from_two_readings(before, after, speed):
    assert per_user_speed(before, after) == speed


def test_metrics_carry_station_and_check_labels(inventory):
    from prometheus_client import CollectorRegistry, generate_latest

    watcher = Watcher(inventory, EVERY)
    watcher.state.rounds = {
        "ref": StationRound(
            checks={
                "endpoint.t.a@ref": WatchedCheck("endpoint.t.a", "endpoint", True),
                "endpoint.t.b@ref": WatchedCheck("endpoint.t.b", "endpoint", False),
            },
            canary_up=True,
            ttft_s=0.05,
            decode_tok_s=120.0,
            kv_usage=0.25,
            running=3,
            waiting=0,
            restarts=2,
        )
    }
    registry = CollectorRegistry()
    registry.register(watcher)
    text = generate_latest(registry).decode()
    for line in [
        'golive_check_passed{check="endpoint.t.a",id="endpoint.t.a@ref",layer="endpoint",station="ref"} 1.0',
        'golive_check_passed{check="endpoint.t.b",id="endpoint.t.b@ref",layer="endpoint",station="ref"} 0.0',
        'golive_canary_up{station="ref"} 1.0',
        'golive_probe_decode_tokens_per_second{station="ref"} 120.0',
        'golive_station_kv_cache_usage_ratio{station="ref"} 0.25',
        'golive_station_requests_running{station="ref"} 3.0',
        'golive_service_restarts_total{station="ref"} 2.0',
    ]:
        assert line in text, text
    assert "golive_station_per_user_decode_tokens_per_second{" not in text  # not read: left out, never a made-up 0


def test_thresholds_come_from_each_stations_profile(inventory, tmp_path):
    rules = rules_of(inventory)
    gb300, ref = rules["gb300-a"], rules["ref"]
    # the GB300 recipe's watch: values [001]
    assert gb300["GoliveSingleUserDecodeSlow"]["expr"].startswith(
        'golive_probe_decode_tokens_per_second{station="gb300-a"} < 100 '
    )
    assert (
        'golive_station_per_user_decode_tokens_per_second{station="gb300-a"} < 55.6 and on(station) '
        'golive_station_requests_running{station="gb300-a"} >= 32' == gb300["GolivePerUserDecodeSlow"]["expr"]
    )
    assert (
        gb300["GoliveRestartSpike"]["expr"] == 'increase(golive_service_restarts_total{station="gb300-a"}[3600s]) >= 2'
    )
    # the reference has no watch: section: its go-live floors less its tolerance, no unit so no restart alert
    load = load_profile("reference-cpu").profile.load
    assert load is not None
    single = load.floors.single_user_decode_tok_s * (1 - load.tolerance)
    per_user_floor = load.floors.per_user_tok_s_p50 * (1 - load.tolerance)
    assert ref["GoliveSingleUserDecodeSlow"]["expr"].startswith(
        f'golive_probe_decode_tokens_per_second{{station="ref"}} < {single:g} '
    )
    per_user = ref["GolivePerUserDecodeSlow"]["expr"]
    assert f"< {per_user_floor:g} and on(station)" in per_user and per_user.endswith(f">= {load.gate_level}")
    assert "GoliveRestartSpike" not in ref
    assert {r["labels"]["station"] for r in ref.values()} == {"ref"}
    assert {r["labels"]["profile"] for r in gb300.values()} == {"glm-5.3-flash-gb300"}
    # a site's own numbers win
    site = tmp_path / "site.yaml"
    site.write_text(
        f"extends: {REPO}/fixtures/profiles/gb300-site.yaml\nwatch:\n  single_user_decode_tok_s: 120\n"
        "  kv_usage_ceiling: 0.9\n  restarts_per_interval: 1\n"
    )
    inventory.write_text(inventory.read_text().replace(f"{REPO}/fixtures/profiles/gb300-site.yaml", str(site)))
    gb300 = rules_of(inventory)["gb300-a"]
    assert " < 120 " in gb300["GoliveSingleUserDecodeSlow"]["expr"]
    assert " >= 0.9 " in gb300["GoliveKvCacheExhausted"]["expr"]
    assert gb300["GoliveRestartSpike"]["expr"].endswith(">= 1")


# alert -> (series that cross the threshold, [series that do not]); `t` is the threshold from the rule's labels
def scenarios(station: str, rule: dict) -> tuple[dict, list[dict]]:
    sel = f'{{station="{station}"}}'
    t = float(rule["labels"].get("threshold", 0))
    users = int(rule["labels"].get("users", 0))
    steady = "x10"
    return {
        "GoliveStationNotAnswering": (
            {f"golive_canary_up{sel}": f"0{steady}"},
            [{f"golive_canary_up{sel}": f"1{steady}"}],
        ),
        "GoliveCheckFailing": (
            {f'golive_check_passed{{station="{station}",check="test_x",layer="endpoint"}}': f"0{steady}"},
            [{f'golive_check_passed{{station="{station}",check="test_x",layer="endpoint"}}': f"1{steady}"}],
        ),
        # timestamps in seconds since the test's time 0; evaluated at 10 min
        "GoliveNoRecentSuccess": (
            {f"golive_last_success_timestamp_seconds{sel}": f"0{steady}"},
            [{f"golive_last_success_timestamp_seconds{sel}": f"0+60{steady}"}],
        ),
        "GoliveSingleUserDecodeSlow": (
            {
                f"golive_probe_decode_tokens_per_second{sel}": f"{t * 0.9:g}{steady}",
                f"golive_probe_others_running{sel}": f"0{steady}",
            },
            [
                {
                    f"golive_probe_decode_tokens_per_second{sel}": f"{t * 1.1:g}{steady}",
                    f"golive_probe_others_running{sel}": f"0{steady}",
                },
                {
                    f"golive_probe_decode_tokens_per_second{sel}": f"{t * 0.9:g}{steady}",  # slow because others ran
                    f"golive_probe_others_running{sel}": f"5{steady}",
                },
            ],
        ),
        "GolivePerUserDecodeSlow": (
            {
                f"golive_station_per_user_decode_tokens_per_second{sel}": f"{t * 0.9:g}{steady}",
                f"golive_station_requests_running{sel}": f"{users}{steady}",
            },
            [
                {
                    f"golive_station_per_user_decode_tokens_per_second{sel}": f"{t * 1.1:g}{steady}",
                    f"golive_station_requests_running{sel}": f"{users}{steady}",
                },
                {
                    f"golive_station_per_user_decode_tokens_per_second{sel}": f"{t * 0.9:g}{steady}",
                    f"golive_station_requests_running{sel}": f"{users - 1}{steady}",
                },
            ],
        ),
        "GoliveRestartSpike": (
            {f"golive_service_restarts_total{sel}": " ".join(str(min(i // 2, int(t))) for i in range(11))},
            [{f"golive_service_restarts_total{sel}": " ".join(str(min(i // 5, int(t) - 1)) for i in range(11))}],
        ),
        "GoliveKvCacheExhausted": (
            {
                f"golive_station_kv_cache_usage_ratio{sel}": f"{min(1.0, t + 0.01):g}{steady}",
                f"golive_station_requests_waiting{sel}": f"3{steady}",
            },
            [
                {
                    f"golive_station_kv_cache_usage_ratio{sel}": f"{min(1.0, t + 0.01):g}{steady}",
                    f"golive_station_requests_waiting{sel}": f"0{steady}",
                },
                {
                    f"golive_station_kv_cache_usage_ratio{sel}": f"{t - 0.1:g}{steady}",
                    f"golive_station_requests_waiting{sel}": f"3{steady}",
                },
            ],
        ),
    }[rule["alert"]]


def _labels(series: str) -> dict:
    inside = series.split("{", 1)[1].rstrip("}")
    return dict((k, v.strip('"')) for k, v in (part.split("=", 1) for part in inside.split(",")))


def promtool_tests(rules: dict[str, dict[str, dict]], swap: bool = False) -> list[dict]:
    tests = []
    for station, alerts in rules.items():
        for alert, rule in alerts.items():
            firing, quiet = scenarios(station, rule)
            first = next(iter(firing))
            # the alert's labels: the series' (for `a and on() b` the left one's), the rule's; never __name__
            labels = {k: v for k, v in _labels(first).items()} | rule["labels"]
            expected = [{"exp_labels": labels, "exp_annotations": rule["annotations"]}]
            for series, exp in [(firing, expected)] + [(q, []) for q in quiet]:
                if swap:
                    exp = [] if exp else expected
                tests.append(
                    {
                        "interval": "1m",
                        "input_series": [{"series": s, "values": v} for s, v in series.items()],
                        "alert_rule_test": [{"eval_time": "10m", "alertname": alert, "exp_alerts": exp}],
                    }
                )
    return tests


@needs_promtool
def test_generated_rules_pass_promtool_check(inventory, tmp_path, capsys):
    from golive.cli import main

    assert main(["watch", str(inventory), "--rules", "--every", str(EVERY)]) == 0
    rules = tmp_path / "golive.profile.rules.yml"
    rules.write_text(capsys.readouterr().out)
    result = subprocess.run([PROMTOOL, "check", "rules", str(rules)], capture_output=True, text=True)
    assert result.returncode == 0 and "SUCCESS: 13 rules found" in result.stdout, result.stdout + result.stderr


@needs_promtool
def test_each_alert_fires_on_its_threshold_and_not_below(inventory, tmp_path):
    rules = rules_of(inventory)
    every_alert = {
        "GoliveStationNotAnswering",
        "GoliveCheckFailing",
        "GoliveNoRecentSuccess",
        "GoliveSingleUserDecodeSlow",
        "GolivePerUserDecodeSlow",
        "GoliveRestartSpike",
        "GoliveKvCacheExhausted",
    }
    assert set(rules["gb300-a"]) == every_alert  # a new alert without a scenario fails here
    loaded = loader.load_inventory(inventory)
    rules_file = tmp_path / "golive.profile.rules.yml"
    rules_file.write_text(yaml.safe_dump(rules_document(loaded, EVERY, str(inventory)), sort_keys=False))
    for swap in (False, True):  # swapped expectations must fail: the scenarios really decide
        tests = tmp_path / f"tests-{swap}.yml"
        tests.write_text(
            yaml.safe_dump(
                {"rule_files": [rules_file.name], "evaluation_interval": "1m", "tests": promtool_tests(rules, swap)},
                sort_keys=False,
            )
        )
        result = subprocess.run([PROMTOOL, "test", "rules", str(tests)], capture_output=True, text=True, cwd=tmp_path)
        if not swap:
            assert result.returncode == 0, result.stdout + result.stderr
            assert "SUCCESS" in result.stdout
        else:
            assert result.returncode == 1
            failed = (result.stdout + result.stderr).count("alertname: ")
            assert failed == len(promtool_tests(rules)), result.stderr  # every case turned around fails


def test_checks_the_time_bound_did_not_reach_are_no_news():
    """`stopped_by` decides, not the message: an interrupted check and one whose message only quotes the time bound
    are news (0); the checks the round's time bound stopped are left out."""
    results = round_of(
        {"nodeid": "s::test_a[ref]", "station": "ref", "layer": "endpoint", "outcome": "passed", "message": ""},
        {
            "nodeid": "s::test_b[ref]",
            "station": "ref",
            "layer": "endpoint",
            "outcome": "not_checked",
            "message": "not checked because the run's time bound (48 s, --max-run-time) was reached",
            "stopped_by": "time_bound",
        },
        {
            "nodeid": "s::test_c[ref]",
            "station": "ref",
            "layer": "endpoint",
            "outcome": "not_checked",
            "message": "not checked because http://127.0.0.1:1/health does not answer 200 (--max-run-time) was reached",
        },
        {
            "nodeid": "s::test_d[ref]",
            "station": "ref",
            "layer": "endpoint",
            "outcome": "not_checked",
            "message": "not checked because the run was interrupted (Ctrl-C or SIGTERM)",
            "stopped_by": "interrupted",
        },
    )
    assert checks_from_results(results) == {
        "ref": {
            "endpoint.t.a@ref": WatchedCheck("endpoint.t.a", "endpoint", True),
            "endpoint.t.c@ref": WatchedCheck("endpoint.t.c", "endpoint", False),
            "endpoint.t.d@ref": WatchedCheck("endpoint.t.d", "endpoint", False),
        }
    }


@pytest.mark.parametrize(
    "args, message",
    [
        (["watch", "missing.yaml", "--rules"], "missing.yaml"),
        (["watch", "INVENTORY", "--listen", "localhost"], "--listen takes [HOST]:PORT, not 'localhost'"),
        (["watch", "INVENTORY", "--every", "0"], "--every takes seconds above 0"),
    ],
)
def test_bad_watch_usage_is_one_line(inventory, capsys, args, message):
    from golive.cli import main

    assert main([str(inventory) if a == "INVENTORY" else a for a in args]) == 4
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_no_secret_in_the_watchers_rules_lines_or_labels(tmp_path, monkeypatch, capsys):
    """The endpoint's password (an IPv6 host: brackets and port kept) and the station's key (env) appear in no
    generated rule, no round's line on stderr and no metric label: golive.core.secrets scrubs all three."""
    from prometheus_client import CollectorRegistry, generate_latest

    monkeypatch.setenv("GOLIVE_TEST_WATCH_KEY", "sk-watch-secret")
    path = tmp_path / "inventory.yaml"
    path.write_text(
        "profile: reference-cpu\nstations:\n  - {name: ref, endpoint: 'http://ops:hunter2@[fe80::1]:8888/v1',"
        " api_key_env: GOLIVE_TEST_WATCH_KEY}\n"
    )
    loaded = loader.load_inventory(path)
    rules = yaml.safe_dump(rules_document(loaded, EVERY, str(path)))
    assert "curl -i http://ops:***@[fe80::1]:8888/health" in rules and "hunter2" not in rules
    watcher = Watcher(path, EVERY)
    watcher.state.rounds = {
        "ref": StationRound(
            checks={"endpoint/t.py::test_sk-watch-secret@ref": WatchedCheck("test_sk-watch-secret", "endpoint", False)},
            canary_up=False,
            problems=[
                "canary: GET http://ops:hunter2@[fe80::1]:8888/v1 with Authorization: Bearer sk-watch-secret refused"
            ],
        )
    }
    watcher.report()
    line = capsys.readouterr().err
    assert "canary DOWN; canary: GET http://ops:***@[fe80::1]:8888/v1 with Authorization: Bearer ***" in line, line
    registry = CollectorRegistry()
    registry.register(watcher)
    metrics = generate_latest(registry).decode()
    assert 'check="test_[REDACTED]",id="endpoint/t.py::test_[REDACTED]@ref"' in metrics
    for text in (rules, line, metrics):
        assert "hunter2" not in text and "sk-watch-secret" not in text


def test_a_round_reads_the_light_checks_results_through_the_model(inventory, monkeypatch, capsys):
    """A round's results.json read: each station gets its own checks by id, on the layers it is watched on. One this
    golive cannot read: no series, and the round's line says why."""
    from golive.day2 import watcher as watcher_module

    results = round_of(
        {"nodeid": "suites/endpoint/t.py::test_a[ref]", "station": "ref", "layer": "endpoint", "outcome": "passed"},
        {"nodeid": "suites/host/t.py::test_b[ref]", "station": "ref", "layer": "host", "outcome": "failed"},
        {"nodeid": "suites/host/t.py::test_b[gb300-a]", "station": "gb300-a", "layer": "host", "outcome": "passed"},
    )
    monkeypatch.setattr(Watcher, "read_station", lambda self, station: StationRound(canary_up=True))
    monkeypatch.setattr(watcher_module, "run_light_checks", lambda *args: (1, results))
    watcher = Watcher(inventory, EVERY)
    state = watcher.one_round()
    assert {name: set(r.checks) for name, r in state.rounds.items()} == {
        "gb300-a": {"host.t.b@gb300-a"},
        "ref": {"endpoint.t.a@ref"},  # ref has no host: its host check is not news about it
    }
    assert set(state.last_success) == {"gb300-a", "ref"} and not state.rounds["ref"].problems

    def unreadable(*args: object) -> None:
        raise ValueError("/tmp/x/results.json: not a golive results.json of schema 2, 3 or 4 (got schema 9)")

    monkeypatch.setattr(watcher_module, "run_light_checks", unreadable)
    state = watcher.one_round()
    assert all(not r.checks for r in state.rounds.values())
    watcher.report()
    err = capsys.readouterr().err
    assert "ref: 0/0 checks passed; canary up; the light checks wrote no results (golive run exited 1): " in err, err
    assert "(got schema 9)" in err
