"""Broken real stations: each variant breaks one host rule of a running station the way an operator really does it,
and `revert_variant` puts the healthy station back.

    apply_variant(record, "docker-restart-always")          # edit the run line, daemon-reload, restart the unit
    revert_variant(record)                                  # the healthy files back; the container serving again

A break in the unit's settings is a `systemctl edit` drop-in (override.conf, written by systemd 252 itself), a
`systemctl disable`, or an edit of the prestart script; a break that lives in the container (docker's --restart and
--cpuset-mems, the image, a served vLLM flag) edits the docker run line in the drop-in that sets it (testbed.conf)
and restarts the unit, so systemd's prestart removes the old container and the new one is what Docker reports; a
re-pushed tag is a changed image built and pushed to the station's registry under the serving tag. Each variant names
the checks it fails (`breaks`): tests/real_station/test_broken_real_station.py holds every variant to that.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass

from golive_testbed import realstation_files as files
from golive_testbed.realstation_host import Record, StationError, docker, serving_now, ssh, wait_serving

UNIT_DIR = f"/etc/systemd/system/{files.UNIT}.d"
SERVING_DROPIN = f"{UNIT_DIR}/{files.DROPIN}"  # the drop-in with the docker run line
OVERRIDE = f"{UNIT_DIR}/override.conf"  # what `systemctl edit` writes
TAG = "cpu"  # the serving image's tag in the station's registry (the station's `up` builds and pushes it)
REPUSHED_LABEL = "org.golive.testbed.repushed"


@dataclass(frozen=True)
class Variant:
    """One way the station is (mis)set: what an operator did, and the host checks it fails."""

    what: str
    breaks: tuple[str, ...] = ()  # the checks it fails; the endpoint's ones are in `endpoint_breaks`
    recreates: bool = False  # the break lives in the container: the unit is restarted, a new container runs
    endpoint_breaks: tuple[str, ...] = ()


VARIANTS = {
    "healthy": Variant("the recipe's unit, drop-in and prestart: every host check passes or does not apply"),
    "restart-always-drop-in": Variant(
        "`systemctl edit` adds Restart=always in glm53-flash.service.d/override.conf",
        ("test_unit_restarts_on_failure_after_delay",),
    ),
    "start-limit-burst-raised": Variant(
        "`systemctl edit` raises StartLimitBurst to 10 in [Unit] of override.conf",
        ("test_unit_caps_starts_per_interval",),
    ),
    "prestart-errors-ignored": Variant(
        "`systemctl edit` makes it ExecStartPre=-/usr/local/sbin/glm53-flash-prestart.sh (failure ignored)",
        ("test_prestart_is_what_the_unit_runs_before_start",),
    ),
    "docker-rm-before-prestart": Variant(
        "`systemctl edit` puts the docker idiom `-/usr/bin/docker rm -f glm53-flash ;` in front of the prestart on its "
        "ExecStartPre= line (a lone `;` starts a second command)",
        ("test_prestart_saves_logs_before_removing_container",),
    ),
    "docker-rm-after-stop": Variant(
        "`systemctl edit` adds ExecStopPost=-/usr/bin/docker rm glm53-flash (it runs after a crash too)",
        ("test_prestart_saves_logs_before_removing_container",),
    ),
    "dropin-not-reloaded": Variant(
        "override.conf written with Restart=always by hand (an editor, config management), no `systemctl "
        "daemon-reload`: systemd runs the unit as loaded",
        ("test_unit_runs_as_its_files_say",),
    ),
    "unit-disabled": Variant("`systemctl disable glm53-flash.service`", ("test_unit_is_enabled_and_active",)),
    "prestart-without-drop": Variant(
        "the prestart's `echo 1 > /proc/sys/vm/drop_caches` line deleted (sync stays)",
        ("test_prestart_syncs_then_drops_page_cache",),
    ),
    "docker-restart-always": Variant(
        "`--restart always` added to the docker run line (testbed.conf); the unit restarted",
        ("test_docker_has_no_restart_policy",),
        recreates=True,
    ),
    "cpuset-mems-dram": Variant(
        "`--cpuset-mems 0` (the DRAM node) added to the docker run line; the unit restarted",
        ("test_container_not_pinned_to_dram_node",),
        recreates=True,
    ),
    "image-by-tag": Variant(
        f"the docker run line names the image by its tag (:{TAG}) instead of its digest; the unit restarted",
        ("test_image_pinned_by_digest",),
        recreates=True,
    ),
    "tag-repushed": Variant(
        f"the run line names the tag :{TAG}, a changed image is pushed under that tag; the unit restarted: the "
        f"container runs an image that is not the pin",
        ("test_image_pinned_by_digest", "test_running_container_runs_pinned_image"),
        recreates=True,
    ),
    "env-file-removed-not-restarted": Variant(
        "the serving line takes --max-num-seqs ${MAX_NUM_SEQS} from `EnvironmentFile=-/etc/default/glm53-flash`; "
        "the unit restarted with it, then the file deleted without a restart: vLLM serves 16, the next start passes "
        "an empty value",
        ("test_next_start_serves_what_runs_now",),
        recreates=True,
    ),
    "max-num-seqs-1": Variant(
        "the docker run line serves --max-num-seqs 1 (recipe 16); the unit restarted",
        ("test_served_flags_match_profile",),
        recreates=True,
        endpoint_breaks=("test_gate_level_is_never_held_back",),
    ),
}


# --- how an operator breaks it -----------------------------------------------------------------------------------


def _systemctl_edit(record: Record, lines: str) -> None:
    """`systemctl edit UNIT` with an editor that writes `lines` below systemd's "Anything between here" marker, as an
    operator types them: systemctl saves the result as override.conf and reloads (script(1) gives it a terminal)."""
    editor = "/root/golive-edit.sh"
    edit = f"SYSTEMD_EDITOR={editor} systemctl edit {files.UNIT}"
    ssh(
        record,
        f"cat > {editor} && chmod 0755 {editor} && script -qec {shlex.quote(edit)} /dev/null >/dev/null && rm {editor}",
        stdin=files.systemctl_editor(lines),
    )


def _edit_run_line(record: Record, sed: str) -> None:
    """Edit the docker run line where it is set (the serving drop-in) with `sed -i`, then daemon-reload."""
    ssh(record, f"sed -i {shlex.quote(sed)} {SERVING_DROPIN} && systemctl daemon-reload")


def _repository(record: Record) -> str:
    return record.image.split("@", 1)[0]


def _repush_tag(record: Record) -> None:
    """Build a changed image on the pinned one (a label: new config, new digest) and push it under the serving tag,
    from inside the station, as an upstream re-push of the tag arrives."""
    repo = _repository(record)
    dockerfile = f"FROM {record.image}\nLABEL {REPUSHED_LABEL}={int(time.time())}\n"
    ssh(
        record,
        f"docker build -q -t {repo}:{TAG} - >/dev/null && docker push {repo}:{TAG} >/dev/null",
        stdin=dockerfile,
        timeout=180,
    )


def _by_tag(record: Record, repushed: bool) -> None:
    """The docker run line names the serving tag instead of the digest; with `repushed`, a changed image is pushed
    under that tag first."""
    if repushed:
        _repush_tag(record)
    _edit_run_line(record, f"s|{record.image}|{_repository(record)}:{TAG}|")


_BREAKS: dict[str, Callable[[Record], object]] = {
    "restart-always-drop-in": lambda r: _systemctl_edit(r, "[Service]\nRestart=always"),
    "start-limit-burst-raised": lambda r: _systemctl_edit(r, "[Unit]\nStartLimitBurst=10"),
    "prestart-errors-ignored": lambda r: _systemctl_edit(
        r, f"[Service]\nExecStartPre=\nExecStartPre=-{files.PRESTART}"
    ),
    "docker-rm-before-prestart": lambda r: _systemctl_edit(
        r, f"[Service]\nExecStartPre=\nExecStartPre=-/usr/bin/docker rm -f {files.CONTAINER} ; {files.PRESTART}"
    ),
    "docker-rm-after-stop": lambda r: _systemctl_edit(
        r, f"[Service]\nExecStopPost=-/usr/bin/docker rm {files.CONTAINER}"
    ),
    "dropin-not-reloaded": lambda r: ssh(r, f"cat > {OVERRIDE}", stdin="[Service]\nRestart=always\n"),
    "unit-disabled": lambda r: ssh(r, f"systemctl disable --quiet {files.UNIT}"),
    "prestart-without-drop": lambda r: ssh(
        r, f"sed -i '/^echo 1 > \\/proc\\/sys\\/vm\\/drop_caches$/d' {files.PRESTART}"
    ),
    "docker-restart-always": lambda r: _edit_run_line(r, f"s|--name {files.CONTAINER} |&--restart always |"),
    "cpuset-mems-dram": lambda r: _edit_run_line(r, f"s|--name {files.CONTAINER} |&--cpuset-mems 0 |"),
    "image-by-tag": lambda r: _by_tag(r, repushed=False),
    "tag-repushed": lambda r: _by_tag(r, repushed=True),
    "max-num-seqs-1": lambda r: _edit_run_line(r, r"s|--max-num-seqs [0-9]*|--max-num-seqs 1|"),
    "env-file-removed-not-restarted": lambda r: _env_file_then_gone(r),
}
ENV_FILE = "/etc/default/glm53-flash"


def _env_file_then_gone(record: Record) -> None:
    """The serving line reads --max-num-seqs from an optional env file; the unit restarts with it (the same 16 the
    healthy line serves); then the file is deleted, without a restart."""
    ssh(
        record,
        f"printf 'MAX_NUM_SEQS=16\\n' > {ENV_FILE} && sed -i "
        f"-e 's|--max-num-seqs [0-9]*|--max-num-seqs ${{MAX_NUM_SEQS}}|' "
        f"-e 's|^ExecStart=$|EnvironmentFile=-{ENV_FILE}\\nExecStart=|' {SERVING_DROPIN} && systemctl daemon-reload",
    )
    _restart(record, serving=False, timeout=300)
    ssh(record, f"rm -f {ENV_FILE}")


# --- the serving run's own NCCL log (the cluster layer, issue 40) -----------------------------------------------------

NCCL_LOG_DIR = "/var/log/glm53"  # where the container's NCCL writes, bound from the station's own /var/log/glm53
NCCL_DEBUG_FILE = f"{NCCL_LOG_DIR}/nccl.%h.%p.log"  # NCCL expands %h (host name) and %p (pid): src/debug.cc


def serve_with_nccl_debug_file(record: Record, timeout: float = 300) -> None:
    """The docker run line gets `-e NCCL_DEBUG_FILE=/var/log/glm53/nccl.%h.%p.log` (written `%%h.%%p` in the drop-in:
    systemd expands `%h` itself, to root's home) and a bind of the station's /var/log/glm53 there; the unit restarted
    (running, not serving: the cluster layer reads `docker inspect` and the files). The station's Docker engine is the
    host's (realstation_files.serving_dropin), so the bind's source is a host path, ROOT/var/log/glm53: inside the
    station that path is made a link to /var/log/glm53, as the source is the station's own path where its engine is
    its own. vLLM's CPU build writes no NCCL log: the caller writes the files NCCL would have."""
    host_dir = f"{record.root}{NCCL_LOG_DIR}"
    debug_file = NCCL_DEBUG_FILE.replace("%", "%%")
    ssh(
        record,
        f"mkdir -p {NCCL_LOG_DIR} {shlex.quote(str(record.root) + '/var/log')} && "
        f"ln -sfn {NCCL_LOG_DIR} {shlex.quote(host_dir)} && "
        f"sed -i 's|--name {files.CONTAINER} |&-e NCCL_DEBUG_FILE={debug_file} -v {host_dir}:{NCCL_LOG_DIR} |' "
        f"{SERVING_DROPIN} && systemctl daemon-reload",
    )
    _restart(record, serving=False, timeout=timeout)


# --- a prestart that sources its steps by a relative path (issue 40: what golive cannot resolve is not checked) ----

PRESTART_LIB = "/usr/local/lib/glm53-flash"  # where the sourced steps live
PAGE_CACHE_STEPS = "sync\necho 1 > /proc/sys/vm/drop_caches\n"  # the prestart's own lines, moved to page-cache.sh
SOURCED_BY = {
    # how the prestart reaches page-cache.sh in place of its sync and drop lines; the unit's drop-in for it
    "cd-then-relative": (f"cd {PRESTART_LIB}\n. ./lib.sh\n", ""),
    "working-directory": (". ./page-cache.sh\n", f"[Service]\nWorkingDirectory={PRESTART_LIB}"),
    "relative-from-root": (". ./page-cache.sh\n", ""),
    "unknown-variable": ('. "$GLM53_LIB/page-cache.sh"\n', ""),
}


def prestart_sources_steps(record: Record, how: str) -> int:
    """The prestart's sync and drop_caches lines moved to PRESTART_LIB/page-cache.sh (and a lib.sh there that sources
    it from its folder), and sourced as `how` says (SOURCED_BY): a `cd` then `. ./lib.sh`, `. ./page-cache.sh` with
    the unit's WorkingDirectory= there (`systemctl edit`) or without one, or through a variable no file sets. The
    station is not restarted: golive reads the files. The line number of the source line in the prestart."""
    lines, dropin = SOURCED_BY[how]
    script = files.PRESTART_SCRIPT
    if PAGE_CACHE_STEPS not in script:
        raise StationError(f"the station's prestart has no `{PAGE_CACHE_STEPS!r}` to move")
    before = script.split(PAGE_CACHE_STEPS, 1)[0]
    ssh(
        record,
        f"mkdir -p {PRESTART_LIB} && printf '%s' {shlex.quote(PAGE_CACHE_STEPS)} > {PRESTART_LIB}/page-cache.sh && "
        f"printf '. ./page-cache.sh\\n' > {PRESTART_LIB}/lib.sh && cat > {files.PRESTART}",
        stdin=script.replace(PAGE_CACHE_STEPS, lines, 1),
    )
    if dropin:
        _systemctl_edit(record, dropin)
    return before.count("\n") + lines.count("\n")


def apply_variant(record: Record, variant: str, serving: bool = True, timeout: float = 300) -> None:
    """Break the running station the way the variant says (the station stays up). A variant that lives in the
    container restarts the unit and waits for the new container: serving (GET /health 200) when `serving`, else only
    running (what `docker inspect` reports needs no serving vLLM)."""
    if variant not in VARIANTS:
        raise StationError(f"unknown variant '{variant}'; the variants are: {', '.join(VARIANTS)}")
    if variant == "healthy":
        return
    _BREAKS[variant](record)
    if VARIANTS[variant].recreates and variant != "env-file-removed-not-restarted":  # that one restarts itself
        _restart(record, serving, timeout)


# --- back to healthy -------------------------------------------------------------------------------------------------


def revert_variant(record: Record, serving: bool = True, timeout: float = 300) -> None:
    """Undo any variant, from what the station has (not from what was applied): override.conf removed, the serving
    drop-in and the prestart as `up` wrote them, the unit enabled, the serving tag on the pinned image again (the
    re-pushed image removed), systemd reloaded; where the container differs from what the healthy unit runs, the
    unit restarted. With `serving` it returns once vLLM serves again."""
    healthy_dropin = files.serving_dropin(record.image, record.serve_port, record.root)
    recreate = _restore(record, SERVING_DROPIN, healthy_dropin)
    _restore(record, files.PRESTART, files.PRESTART_SCRIPT, mode="0755")
    recreate = _restore_tag(record) or recreate
    ssh(
        record,
        f"rm -rf {OVERRIDE} {ENV_FILE} {NCCL_LOG_DIR} {PRESTART_LIB} && "
        f"rm -f {shlex.quote(str(record.root) + NCCL_LOG_DIR)} && "
        f"systemctl enable --quiet {files.UNIT} && systemctl daemon-reload",
    )
    if recreate or not _container_is_healthy(record):
        _restart(record, serving, timeout)
    elif serving:
        wait_serving(record, time.monotonic() + timeout)


def _restore(record: Record, path: str, text: str, mode: str = "0644") -> bool:
    """Write `text` to the station's `path` where it differs; True when it did."""
    if (record.root / path.lstrip("/")).read_text() == text:
        return False
    ssh(record, f"cat > {path} && chmod {mode} {path}", stdin=text)
    return True


def _restore_tag(record: Record) -> bool:
    """The serving tag back on the pinned image in the engine and the registry, the re-pushed image removed; True when
    the tag had moved."""
    repo = _repository(record)
    pinned = docker(record, "image", "inspect", "--format", "{{.Id}}", record.image).stdout.strip()
    tagged = docker(record, "image", "inspect", "--format", "{{.Id}}", f"{repo}:{TAG}", check=False).stdout.strip()
    if tagged == pinned:
        return False
    docker(record, "tag", pinned, f"{repo}:{TAG}")
    docker(record, "push", f"{repo}:{TAG}", timeout=180)
    repushed = docker(record, "images", "-q", "--filter", f"label={REPUSHED_LABEL}").stdout.split()
    for image in dict.fromkeys(repushed):
        docker(record, "rmi", "-f", image, check=False)
    return True


def _container(record: Record) -> dict | None:
    """`docker inspect` of the serving container; None when there is none."""
    done = docker(record, "inspect", files.CONTAINER, check=False)
    if done.returncode != 0:
        return None
    found = json.loads(done.stdout)
    return found[0] if found else None


def _container_is_healthy(record: Record) -> bool:
    """The container runs what the healthy unit starts: the pinned image, no restart policy, no cpuset, the flags."""
    c = _container(record)
    if c is None or not c["State"]["Running"]:
        return False
    host = c["HostConfig"]
    return (
        c["Config"]["Image"] == record.image
        and (host.get("RestartPolicy") or {}).get("Name") in ("no", "")
        and not host.get("CpusetMems")
        and c["Args"][1:] == files.serve_flags(record.serve_port)
    )


def _restart(record: Record, serving: bool, timeout: float) -> None:
    """`systemctl restart` the unit (after `reset-failed`: every start counts against its StartLimitBurst=3 per hour,
    a manual one too) and wait for the new container to run, and with `serving` to serve."""
    deadline = time.monotonic() + timeout
    old = _container(record)
    if old is not None and old["State"]["Running"] and not serving_now(record):
        # a vLLM still starting runs as the container's PID 1 without a SIGTERM handler: the unit's `docker stop`
        # would wait its 10 s for nothing
        docker(record, "stop", "-t", "1", files.CONTAINER, check=False)
    ssh(record, f"systemctl reset-failed {files.UNIT}; systemctl restart {files.UNIT}", timeout=timeout)
    while True:
        c = _container(record)
        if c is not None and c["State"]["Running"] and (old is None or c["Id"] != old["Id"]):
            break
        if time.monotonic() > deadline:
            state = ssh(record, f"systemctl is-active {files.UNIT}", check=False).stdout.strip()
            raise StationError(f"no new {files.CONTAINER} container ran after `systemctl restart` ({state})")
        time.sleep(0.5)
    if serving:
        wait_serving(record, deadline)
