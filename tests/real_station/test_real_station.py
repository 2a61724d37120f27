"""golive against a real station: systemd 252 as PID 1 (systemd-nspawn), a real Docker 20.10 engine and registry, sshd,
the recipe's unit, drop-in and prestart, and vLLM's CPU build serving the reference model in the container systemd
started (testbed/golive_testbed/realstation.py, `golive station up|down`).

One station for the session (tests/real_station/conftest.py; up ~2 min with the root file system cached, ~1.5-3 min
more the first time: debootstrap), shared with the other modules here: healthy host layer, host and endpoint in one
report (both read from the session's demo run), and last `down`, which must leave nothing behind; the broken
stations are tests/real_station/test_broken_real_station.py.
The preflight tests (not root, a package missing: one line each) need no station.
Needs root and `apt-get install -y docker.io systemd-container debootstrap docker-registry openssh-client`
(scripts/setup.sh); skipped elsewhere, a failure under GOLIVE_REQUIRE_E2E=1 (CI).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from golive_run import Run, check_name

from golive_testbed import realstation

from .common import DEMO, NAME, TIMINGS, assert_go

slow = pytest.mark.slow  # the station's tests (minutes); the two preflight tests below take milliseconds


def _demo_run() -> Run:
    proc, out = DEMO["proc"], DEMO["out"]
    return Run(proc, out, json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else {})


@slow
def test_host_layer_is_go_on_the_real_station(station):
    """Every host check passes against real systemd, Docker and sshd; the GPU checks do not apply (no GPU), the
    rest read the real thing: the drop-in's ExecStart, the RepoDigest pin, the prestart, the start limit. Read from
    the session's demo run (tests/real_station/conftest.py), which checked this station's host layer over ssh."""
    run = _demo_run()
    assert run.results, run.output[-6000:]
    checks = {check_name(c): c for c in run.checks if c["layer"] == "host" and c["station"] == NAME}
    for name in (
        "test_unit_restarts_on_failure_after_delay",
        "test_unit_caps_starts_per_interval",
        "test_unit_is_enabled_and_active",
        "test_prestart_syncs_then_drops_page_cache",
        "test_prestart_saves_logs_before_removing_container",
        "test_image_pinned_by_digest",
        "test_running_container_runs_pinned_image",
        "test_served_flags_match_profile",
        "test_checkpoint_shards_complete",
        "test_checkpoint_config_matches_profile",
    ):
        assert checks[name]["outcome"] == "passed", checks[name]
    for name in (
        "test_serving_gpu_present",
        "test_gpu_compute_processes_belong_to_serving_container",
        "test_idle_hbm_below_ceiling_before_start",
        "test_hbm_node_page_cache_is_near_empty",
    ):
        assert checks[name]["outcome"] == "not_applicable", checks[name]
    # the pin is the registry's real digest of the image the container runs
    assert station.digest in (run.out / "go-live.md").read_text(), run.output[-2000:]
    assert not {n: c["outcome"] for n, c in checks.items() if c["outcome"] not in ("passed", "not_applicable")}


@slow
def test_demo_checks_one_real_station_host_and_endpoint_into_one_go_report(station):
    """`golive demo` where a real station can run: it says which targets it used, brings the station up, checks its
    host layer over ssh and the endpoint it serves under one station name, beside the GB300 tree, and every output
    says GO (terminal, go-live.md, results.json, JUnit, HTML)."""
    run = _demo_run()
    said, out = run.output, run.out
    assert run.code == 0, said[-6000:]
    assert f"golive demo: targets: real station {NAME} (systemd 252 in systemd-nspawn" in said, said[:3000]
    assert f"real station {NAME} left up; take it down with: golive station down --name {NAME}" in said
    assert_go(run, ("host", "endpoint"))
    layers = {(c["station"], c["layer"]) for c in run.checks if c["outcome"] == "passed"}
    assert {(NAME, "host"), (NAME, "endpoint"), ("gb300-tree", "host")} <= layers, layers
    # one station: the served flags golive read from the real container are the endpoint's station's
    flags = run.check("test_served_flags_match_profile", NAME)
    assert flags["outcome"] == "passed" and run.check("test_models_lists_served_name", NAME)["outcome"] == "passed"
    assert "verdict: GO" in said and "**GO**" in (out / "go-live.md").read_text()
    assert 'name="golive_verdict" value="GO"' in (out / "junit.xml").read_text()
    assert "GO" in (out / "go-live.html").read_text()
    assert station.digest in (out / "go-live.md").read_text()


@slow
@pytest.mark.ends_station
def test_down_leaves_nothing(station, state_dir):
    """`down`: the station powered off, dockerd and the registry stopped, mounts undone, the scratch directory gone,
    the ports closed; the cached root file system stays."""
    started = time.monotonic()
    assert realstation.down(NAME, state_dir)
    TIMINGS["down_s"] = time.monotonic() - started
    assert realstation.leftovers(station) == []
    assert not station.docker_sock.exists() and not Path(station.scratch).exists()
    assert realstation.load(NAME, state_dir) is None
    assert list(realstation.CACHE_DIR.glob("bookworm-minbase-*.tar"))
    print(f"[real station] timings: {station.timings | TIMINGS}")


def test_not_root_is_one_line(monkeypatch):
    monkeypatch.setattr(realstation.os, "geteuid", lambda: 1000)
    with pytest.raises(
        realstation.StationError,
        match=r"^a real station needs root \(systemd-nspawn, dockerd, "
        r"mounts\): run `golive station up` as root$",
    ):
        realstation.preflight()


def test_missing_package_names_the_apt_line(monkeypatch):
    monkeypatch.setattr(realstation.os, "geteuid", lambda: 0)
    which = realstation.shutil.which
    monkeypatch.setattr(realstation.shutil, "which", lambda tool: None if tool == "debootstrap" else which(tool))
    with pytest.raises(realstation.StationError) as raised:
        realstation.preflight()
    message = str(raised.value)
    assert message.startswith("missing package(s) debootstrap") and "\n" not in message, message
    assert message.endswith(
        ": apt-get install -y docker.io systemd-container debootstrap docker-registry openssh-client"
    ), message
