"""Broken real stations: each host rule broken on the session's real station (tests/real_station/conftest.py) the way an
operator breaks it (testbed/golive_testbed/realstation_variants.py: a `systemctl edit` drop-in, `systemctl disable`,
an edited prestart, an edited docker run line and a restarted unit, a re-pushed tag), and golive fails exactly the
checks the variant names, its finding naming the cause as real systemd 252 and Docker 20.10 report it: the drop-in's
file and line, the digest running against the one pinned, the flag and where it is set.

Every variant is tried (test_every_variant_is_tried). Cost: one `golive run -m host` a break (~2 s); the breaks that
live in the container recreate it and read `docker inspect` without waiting for vLLM to serve (a few s each); only
--max-num-seqs 1 waits for vLLM to serve, runs the endpoint's batch check, and serves the healthy flags again after.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from golive_run import Run, golive_run

from golive_testbed import realstation, realstation_files
from golive_testbed.realstation_files import CONTAINER, PRESTART, UNIT
from golive_testbed.realstation_variants import TAG, VARIANTS, revert_variant

from .common import NAME, TIMINGS

pytestmark = pytest.mark.slow
D = f"/etc/systemd/system/{UNIT}.d"


def _run_line(station: realstation.Record) -> str:
    """`FILE:LINE` of the docker run line: the ExecStart= that follows the drop-in's clearing `ExecStart=`."""
    text = realstation_files.serving_dropin(station.image, station.serve_port, station.root)
    line = next(i for i, said in enumerate(text.splitlines(), 1) if said.startswith("ExecStart=/"))
    return f"{D}/{realstation_files.DROPIN}:{line}"


def _tag(station: realstation.Record) -> str:
    return f"{station.image.split('@')[0]}:{TAG}"


@dataclass(frozen=True)
class Said:
    """What a failed check's finding must say: text in Found, text in Do."""

    found: tuple[str, ...]
    fix: tuple[str, ...]


Expected = Callable[[realstation.Record], dict[str, Said]]

# variant -> the finding of each check it fails (the checks: VARIANTS[variant].breaks), as the station's facts give it
HOST_BREAKS: dict[str, Expected] = {
    "restart-always-drop-in": lambda s: {
        "test_unit_restarts_on_failure_after_delay": Said(
            (f"Restart=always (set at {D}/override.conf:2)",), (f"{D}/override.conf sets it (line 2)",)
        )
    },
    "start-limit-burst-raised": lambda s: {
        "test_unit_caps_starts_per_interval": Said(
            (f"StartLimitBurst=10 (set at {D}/override.conf:2)", "StartLimitIntervalSec=3600 s"),
            (f"{D}/override.conf sets it (line 2): write `StartLimitBurst=3` there",),
        )
    },
    "prestart-errors-ignored": lambda s: {
        "test_prestart_is_what_the_unit_runs_before_start": Said(
            (f"`ExecStartPre=-{PRESTART}` ({D}/override.conf:3)", "ignores the prestart's failure"),
            (f"remove the `-` in front of `ExecStartPre={PRESTART}` in {D}/override.conf (line 3)",),
        )
    },
    # real systemd 252 splits the `;` line into two ExecStartPre entries; golive finds the line in override.conf
    "docker-rm-before-prestart": lambda s: {
        "test_prestart_saves_logs_before_removing_container": Said(
            (
                f"ExecStartPre of {UNIT} ({D}/override.conf:3) runs `/usr/bin/docker rm -f {CONTAINER}` before saving "
                f"logs (first `docker logs` at line ",
            ),
            (f"remove `/usr/bin/docker rm -f {CONTAINER}` from ExecStartPre of {UNIT} ({D}/override.conf:3)",),
        )
    },
    "docker-rm-after-stop": lambda s: {
        "test_prestart_saves_logs_before_removing_container": Said(
            (f"ExecStopPost of {UNIT} ({D}/override.conf:2) runs `/usr/bin/docker rm {CONTAINER}` before saving",),
            (f"remove `/usr/bin/docker rm {CONTAINER}` from ExecStopPost of {UNIT} ({D}/override.conf:2)",),
        )
    },
    # systemd 252's own NeedDaemonReload=yes: a drop-in it has not loaded
    "dropin-not-reloaded": lambda s: {
        "test_unit_runs_as_its_files_say": Said(
            (
                "NeedDaemonReload=yes",
                f"Restart=always on disk ({D}/override.conf:2), on-failure as loaded",
                f"not loaded yet: {D}/override.conf",
            ),
            ("`systemctl daemon-reload`",),
        )
    },
    # issue 40: the next start judged beside what runs now, on real systemd 252 (the `-` env file gone, no restart)
    "env-file-removed-not-restarted": lambda s: {
        "test_next_start_serves_what_runs_now": Said(
            (
                "vLLM serves now (docker inspect glm53-flash Args), but after a restart it stops at start: "
                "--max-num-seqs : not an integer",
                "`${MAX_NUM_SEQS}` is set by no Environment= or EnvironmentFile=",
                f"EnvironmentFile=-/etc/default/glm53-flash ({D}/{realstation_files.DROPIN}:7) names a file that "
                "does not exist, and its `-` makes systemd skip it without a word",
            ),
            (f"/etc/default/glm53-flash (EnvironmentFile=- at {D}/{realstation_files.DROPIN}:7): put the file back",),
        )
    },
    "unit-disabled": lambda s: {
        "test_unit_is_enabled_and_active": Said((f"{UNIT} is disabled",), (f"systemctl enable {UNIT}",))
    },
    "prestart-without-drop": lambda s: {
        "test_prestart_syncs_then_drops_page_cache": Said(
            (f"nothing in {PRESTART} or the unit drops the page cache",),
            (f"`echo 1 > /proc/sys/vm/drop_caches` in {PRESTART}",),
        )
    },
    "docker-restart-always": lambda s: {
        "test_docker_has_no_restart_policy": Said(
            ("docker restart policy 'always' (docker run line)",),
            (f"remove `--restart=…` from ExecStart of {UNIT} ({_run_line(s)})", f"systemctl restart {UNIT}"),
        )
    },
    "cpuset-mems-dram": lambda s: {
        "test_container_not_pinned_to_dram_node": Said(
            (
                "confined to memory node 0 (docker run --cpuset-mems 0; "
                f"docker inspect {CONTAINER} HostConfig.CpusetMems '0')",
            ),
            (f"remove `--cpuset-mems` from ExecStart of {UNIT} ({_run_line(s)})",),
        )
    },
    "image-by-tag": lambda s: {
        "test_image_pinned_by_digest": Said(
            (f"the unit runs {_tag(s)} (a tag: it moves under you)",),
            (f"reference the image as {s.image} in ExecStart of {UNIT} ({_run_line(s)})", "daemon-reload"),
        )
    },
    "tag-repushed": lambda s: {
        "test_image_pinned_by_digest": Said(
            (f"the unit runs {_tag(s)} (a tag",), (f"reference the image as {s.image} in ExecStart",)
        ),
        "test_running_container_runs_pinned_image": Said(
            (f"(started as {_tag(s)}; the tag {_tag(s)} names this image now",),
            (
                f"a restart alone runs the tag {_tag(s)} again: reference the image as {s.image} in ExecStart of "
                f"{UNIT} ({_run_line(s)})",
            ),
        ),
    },
}
ENDPOINT_BREAKS = ("max-num-seqs-1",)


@pytest.fixture(scope="module", autouse=True)
def healthy_after(station: realstation.Record) -> Iterator[None]:
    """The breaks that live in the container are reverted without waiting for vLLM; the next module gets it serving."""
    yield
    started = time.monotonic()
    revert_variant(station)
    TIMINGS["broken_stations_serving_again_s"] = time.monotonic() - started


def test_every_variant_is_tried():
    """A new variant fails here until this module says what golive must find on it."""
    assert set(VARIANTS) - {"healthy"} == set(HOST_BREAKS) | set(ENDPOINT_BREAKS)
    assert all(not VARIANTS[v].endpoint_breaks for v in HOST_BREAKS)
    assert all(VARIANTS[v].endpoint_breaks for v in ENDPOINT_BREAKS)


def _said(run: Run, check: str, said: Said) -> None:
    finding = run.check(check)["finding"]
    for text in said.found:
        assert text in finding["found"], (text, finding)
    for text in said.fix:
        assert text in finding["fix"], (text, finding)


@pytest.mark.parametrize("variant", list(HOST_BREAKS))
def test_broken_host_rule_fails_naming_the_real_cause(station, variant, tmp_path):
    """The variant applied to the running station: the host layer is NO-GO, exactly the variant's checks fail, each
    finding names the real cause. A break in the container is read from the container systemd recreated (not yet
    serving: `docker inspect` needs no vLLM)."""
    realstation.apply_variant(station, variant, serving=False)
    try:
        run = golive_run(station.inventory, tmp_path / "out", "-m", "host", timeout=300)
    finally:
        revert_variant(station, serving=False)
    expected = HOST_BREAKS[variant](station)
    assert set(expected) == set(VARIANTS[variant].breaks)
    assert run.code == 1 and run.failed() == set(expected), run.output[-4000:]
    for check, said in expected.items():
        _said(run, check, said)
    if variant == "tag-repushed":  # the registry's new digest runs, not the pin
        found = run.check("test_running_container_runs_pinned_image")["finding"]["found"]
        assert "with digests ['sha256:" in found and station.digest not in found, found


def test_max_num_seqs_1_is_one_cause_at_host_and_endpoint(station, tmp_path):
    """--max-num-seqs 1 served: the host's served-flags check finds the flag (from `docker inspect` Args, edited at the
    drop-in's line), the endpoint's batch check finds requests held back; the reports tie the two as one root cause
    (golive.report.causes) in results.json, go-live.md, the HTML summary and the terminal's verdict."""
    variant = VARIANTS["max-num-seqs-1"]
    realstation.apply_variant(station, "max-num-seqs-1")  # serving: the endpoint check needs vLLM
    try:
        run = golive_run(
            station.inventory,
            tmp_path / "out",
            "-m",
            "host or endpoint",
            "-k",
            " or ".join(variant.breaks + variant.endpoint_breaks),
            timeout=600,
        )
    finally:
        revert_variant(station)
    host, endpoint = variant.breaks[0], variant.endpoint_breaks[0]
    assert run.code == 1 and run.failed() == {host, endpoint}, run.output[-4000:]
    _said(
        run,
        host,
        Said(
            (f"(docker inspect {CONTAINER} Args): --max-num-seqs: 1, recipe 16",),
            (f"ExecStart of {UNIT} ({_run_line(station)})",),
        ),
    )
    _said(run, endpoint, Said(("vLLM ran at most 1 at once",), ("--max-num-seqs",)))
    flagged, explained = run.check(host)["finding"], run.check(endpoint)["finding"]
    assert flagged["flags"] == ["max-num-seqs"] and "max-num-seqs" in explained["suspects"], (flagged, explained)
    assert flagged["same_cause_checks"] == [run.check(endpoint)["id"]], flagged
    assert explained["same_cause_checks"] == [run.check(host)["id"]], explained
    host_id, endpoint_id = run.check(host)["id"], run.check(endpoint)["id"]  # the declared ids, @station
    assert host_id.endswith(f"@{NAME}") and endpoint_id.endswith(f"@{NAME}"), (host_id, endpoint_id)
    assert f"the same root cause as {host_id} (host), which found the served --max-num-seqs" in explained["same_cause"]
    assert f"the same root cause as {endpoint_id} (endpoint)" in flagged["same_cause"]
    assert (
        f"same cause on {NAME}: the served --max-num-seqs, found by {host_id} (host); it explains "
        f"{endpoint_id} (endpoint)" in run.output
    )
    assert (run.out / "go-live.md").read_text().count("**Same cause:** the same root cause as") == 2
    assert (run.out / "go-live.html").read_text().count("<dt>Same cause</dt>") == 2
