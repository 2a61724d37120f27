"""The host layer end to end: `golive run` on every station tree through testinfra's chroot backend.

The healthy trees pass every host check; each broken tree fails exactly the check it breaks, with an operator message.
"""

import re
from pathlib import Path

import pytest
from e2e import needs_chroot
from golive_run import check_name, golive_run

from golive_testbed.targets import build_station_trees, load_variants

REPO = Path(__file__).resolve().parents[2]
HOST_CHECKS = {
    "test_hbm_node_page_cache_is_near_empty",
    "test_prestart_is_what_the_unit_runs_before_start",
    "test_prestart_syncs_then_drops_page_cache",
    "test_prestart_saves_logs_before_removing_container",
    "test_prestart_saved_the_dead_containers_logs",
    "test_unit_restarts_on_failure_after_delay",
    "test_unit_caps_starts_per_interval",
    "test_unit_is_enabled_and_active",
    "test_unit_runs_as_its_files_say",
    "test_docker_has_no_restart_policy",
    "test_container_not_pinned_to_dram_node",
    "test_image_pinned_by_digest",
    "test_running_container_runs_pinned_image",
    "test_served_flags_match_profile",
    "test_served_flags_are_accepted_by_vllm",
    "test_next_start_serves_what_runs_now",
    "test_checkpoint_shards_complete",
    "test_checkpoint_config_matches_profile",
    "test_checkpoint_disk_space",
    "test_serving_gpu_present",
    "test_gpu_compute_processes_belong_to_serving_container",
    "test_idle_hbm_below_ceiling_before_start",
}
# What each broken tree's failure message must tell the operator (found / recipe / do).
MESSAGES = {
    "prestart-no-drop-caches": [
        "nothing in /usr/local/sbin/glm53-flash-prestart.sh or the unit drops the page cache",
        "Do: put `sync` then `echo 1 > /proc/sys/vm/drop_caches`",
    ],
    "drop-caches-after-start": ["AFTER the container starts", "ExecStartPost of glm53-flash.service"],
    "prestart-rm-before-logs": ["runs `docker rm -f glm53-flash` before saving logs", "[single-station recipe]"],
    "prestart-not-wired": [
        "ExecStartPre runs nothing",
        "Do: add `ExecStartPre=/usr/local/sbin/glm53-flash-prestart.sh`",
    ],
    "prestart-failure-ignored": ["the `-` prefix ignores the prestart's failure", "Do: remove the `-` in front of"],
    "prestart-not-executable": ["has mode 0644: not executable", "203/EXEC", "Do: chmod 0755"],
    "prestart-drops-slab-only": [
        "glm53-flash-prestart.sh:31 writes drop_caches with another value (2 frees slab only)"
    ],
    "prestart-drop-caches-never-runs": [
        "glm53-flash-prestart.sh:33 drops the page cache, but never runs",
        "inside the `if` at /usr/local/sbin/glm53-flash-prestart.sh:31, on a branch "
        "that never runs (`false` is always false)",
        "Do: move `echo 1 > /proc/sys/vm/drop_caches` out of that condition",
    ],
    # the prestart's steps in files it sources or runs: followed, with the same control-flow rules
    "prestart-sources-missing-file": [
        "glm53-flash-prestart.sh:31 sources /usr/local/lib/glm53-flash/page-cache.sh, which does not exist on the "
        "station: with `set -euo pipefail`",
        "bash stops the script there with an error, so the start fails",
        "Do: install /usr/local/lib/glm53-flash/page-cache.sh on the station",
    ],
    "prestart-drop-in-one-arm": [
        "glm53-flash-prestart.sh:34 drops the page cache, but may not run: it is inside the `case` at "
        "/usr/local/sbin/glm53-flash-prestart.sh:31: it runs only on the branch that matches",
    ],
    "prestart-drop-after-exit": [
        "glm53-flash-prestart.sh:32 drops the page cache, but never runs: it comes after `exit 0` at "
        "/usr/local/sbin/glm53-flash-prestart.sh:30, which ends the script first",
        "Do: move `echo 1 > /proc/sys/vm/drop_caches` above line 30's `exit 0` in "
        "/usr/local/sbin/glm53-flash-prestart.sh",
    ],
    "prestart-drop-in-uncalled-function": [
        "glm53-flash-prestart.sh:32 drops the page cache, but never runs: it is in function `drop_page_cache`",
        "which the script never calls",
        "Do: call `drop_page_cache` in /usr/local/sbin/glm53-flash-prestart.sh after "
        "its definition (line 30), or put its steps at top level",
    ],
    "prestart-drop-script-backgrounded": [
        "/usr/local/sbin/glm53-flash-drop-caches.sh:5 (run as its own process at "
        "/usr/local/sbin/glm53-flash-prestart.sh:31) drops the page cache, but may not run: it runs in the background",
        "it may not finish before the container starts",
        "Do: remove the `&` after `nohup "
        "/usr/local/sbin/glm53-flash-drop-caches.sh >/dev/null 2>&1` (line 31 of "
        "/usr/local/sbin/glm53-flash-prestart.sh), so it finishes before the prestart does",
    ],
    "prestart-logs-saved-only-when-debugging": [
        "runs `docker rm -f glm53-flash` but the save at line 27 may not run",
        "on the right of `&&`",
    ],
    # nothing else removes the dead container first: an Exec line of the unit, or docker itself (--rm)
    "docker-rm-before-prestart": [
        "ExecStartPre of glm53-flash.service (/etc/systemd/system/glm53-flash.service:16) runs `/usr/bin/docker rm -f "
        "glm53-flash` before saving logs (first `docker logs` at line 2",
        "Do: remove `/usr/bin/docker rm -f glm53-flash` from ExecStartPre of glm53-flash.service "
        "(/etc/systemd/system/glm53-flash.service:16), then `systemctl daemon-reload`: the prestart removes "
        "glm53-flash after saving its logs",
    ],
    "docker-rm-in-exec-stop-post": [
        "ExecStopPost of glm53-flash.service (/etc/systemd/system/glm53-flash.service:37) runs `/usr/bin/docker rm "
        "glm53-flash` before saving logs",
        "remove it nowhere else: the crash evidence goes with it [single-station recipe]",
    ],
    "docker-run-rm": [
        "ExecStart of glm53-flash.service (/etc/systemd/system/glm53-flash.service:19) runs `docker run --rm`: "
        "docker deletes glm53-flash the moment it exits",
        "Do: remove `--rm` from ExecStart of glm53-flash.service",
    ],
    "docker-restart-always": ["docker restart policy 'always'", "Do: remove `--restart=…`"],
    "wrapper-script-restart-always": [
        "docker restart policy 'always'",
        "Do: remove `--restart=…` from /usr/local/bin/glm53-flash-run.sh:11 (the `docker run` that ExecStart of "
        "glm53-flash.service runs)",
    ],
    "docker-cpuset-mems-0": ["confined to memory node 0", "Error 802"],
    "image-by-tag": ["vllm/vllm-openai:nightly-aarch64 (a tag: it moves under you)"],
    "image-wrong-digest": [
        "sha256:6fd5bb80ea3bc534e29daf8353968b760e8a33d972e061b31a2bfaa05bc3851e",
        "Recipe: vllm/vllm-openai@sha256:adfb5fb0",
    ],
    "container-stale-image": [
        "sha256:6fd5bb80ea3bc534e29daf8353968b760e8a33d972e061b31a2bfaa05bc3851e",
        "Do: `systemctl restart glm53-flash.service`",
    ],
    "start-limit-burst-5": [
        "StartLimitBurst=5 (set at /etc/systemd/system/glm53-flash.service:10) within StartLimitIntervalSec=3600 s",
        "reset-failed",
        "Do: in [Unit]: set `StartLimitBurst=3` in /etc/systemd/system/glm53-flash.service (line 10)",
    ],
    "restart-always": [
        "Restart=always (set at /etc/systemd/system/glm53-flash.service:36), RestartSec=60 s",
        "Do: set `Restart=on-failure` in /etc/systemd/system/glm53-flash.service (line 36)",
    ],
    # a value that switches a safety off says so; every key that differs is in the Do; the Recipe names its source
    "start-limit-interval-0": [
        "StartLimitIntervalSec=0 s (set at /etc/systemd/system/glm53-flash.service:9",
        "StartLimitIntervalSec=0 switches the start limit off (systemd.unit(5): 0 disables rate limiting)",
        "Recipe: at most 3 starts per 3600 s [single-station recipe]",
        "Do: in [Unit]: set `StartLimitIntervalSec=3600` in /etc/systemd/system/glm53-flash.service (line 9)",
    ],
    "restart-sec-0": [
        "RestartSec=0 s (set at /etc/systemd/system/glm53-flash.service:37",
        "RestartSec=0: systemd restarts it at once after a crash, no delay between attempts (a crash loop with no "
        "pause)",
        "Recipe: Restart=on-failure, RestartSec=60 s [single-station recipe]",
        "Do: set `RestartSec=60` in /etc/systemd/system/glm53-flash.service (line 37)",
    ],
    "unit-edited-not-reloaded": [
        "glm53-flash.service's files changed since systemd loaded them (`systemctl show`: NeedDaemonReload=yes)",
        "Restart=always on disk (/etc/systemd/system/glm53-flash.service:36), on-failure as loaded",
        "Do: `systemctl daemon-reload`",
    ],
    "start-limit-interval-in-service": [
        "StartLimitIntervalSec=10 s (systemd's default: the `StartLimitIntervalSec=` at "
        "/etc/systemd/system/glm53-flash.service:13 is in [Service], where systemd does not know it and ignores it "
        "(it belongs in [Unit])",
        "Do: in [Unit]: set `StartLimitIntervalSec=3600` in /etc/systemd/system/glm53-flash.service",
    ],
    "start-limit-both-keys-differ": [
        "StartLimitBurst=5 (set at /etc/systemd/system/glm53-flash.service:10) within StartLimitIntervalSec=10 s "
        "(set at /etc/systemd/system/glm53-flash.service:9",
        "the cap never triggers: with RestartSec=60 s, 5 restarts take at least 300 s, longer than "
        "StartLimitIntervalSec=10 s",
        "Do: in [Unit]: set `StartLimitBurst=3` in /etc/systemd/system/glm53-flash.service (line 10), then "
        "`systemctl daemon-reload`; and set `StartLimitIntervalSec=3600` in /etc/systemd/system/glm53-flash.service "
        "(line 9)",
    ],
    "restart-always-drop-in": [
        "Restart=always (set at /etc/systemd/system/glm53-flash.service.d/override.conf:2)",
        "Do: the drop-in /etc/systemd/system/glm53-flash.service.d/override.conf sets it (line 2)",
        "`systemctl revert glm53-flash.service`",
    ],
    "restart-always-drop-in-no-systemd": [
        "Restart=always (set at /etc/systemd/system/glm53-flash.service.d/override.conf:2)",
        "unit file and drop-ins of glm53-flash.service",
        "`systemctl revert glm53-flash.service`",
    ],
    "prestart-unwired-by-drop-in": [
        "ExecStartPre runs nothing",
        "ExecStartPre emptied by `ExecStartPre=` at /etc/systemd/system/glm53-flash.service.d/10-no-prestart.conf:3",
        "Do: the drop-in /etc/systemd/system/glm53-flash.service.d/10-no-prestart.conf sets it (line 3)",
    ],
    "unit-disabled": ["glm53-flash.service is disabled", "Do: systemctl enable glm53-flash.service"],
    "hbm-filepages-high": [
        "NUMA node 1 (the GPU's HBM, found by driver numa_status of 0009:01:00.0)",
        "numactl --membind=0",
    ],
    "shard-missing": ["1 missing (model-000", "model.safetensors.index.json"],
    "wrong-quantization": ["quant_algo 'FP8', expected 'NVFP4'"],
    "max-model-len-1m-decimal": ["--max-model-len: 1m = 1,000,000 tokens; the recipe serves 1,048,576"],
    "max-model-len-refused-by-vllm": [
        "--max-model-len 1.5M: Decimals are not allowed with binary suffixes like M",
        "uppercase K/M/G/T = powers of 2",
    ],
    "tool-parser-wrong": ["--tool-call-parser: hermes, recipe glm47"],
    "stray-gpu-process": ["pid 52210", "not in a container"],
    "gpu-missing": ["nvidia-smi lists", "1 × GB300 per station"],
    "stopped-hbm-busy": ["GiB in use with the service stopped"],
    # a served value set through the unit's environment: the finding names that file and line, the Do edits it there
    "max-model-len-wrong-in-env-file": [
        "--max-model-len: 1m = 1,000,000 tokens; the recipe serves 1,048,576 (/etc/default/glm53-flash:3 sets "
        "MAX_MODEL_LEN=1m (EnvironmentFile= at /etc/systemd/system/glm53-flash.service:16), expanded in ExecStart "
        "(/etc/systemd/system/glm53-flash.service:24))",
        "Do: fix the flags in `MAX_MODEL_LEN=` in /etc/default/glm53-flash (line 3), then "
        "`systemctl daemon-reload && systemctl restart glm53-flash.service`",
    ],
    "served-flag-given-twice": [
        "--max-model-len is given 2 times: 1048576 (written in ExecStart "
        "(/etc/systemd/system/glm53-flash.service:20)), then 1m (`Environment=` at "
        "/etc/systemd/system/glm53-flash.service.d/10-context.conf:3 sets "
        "VLLM_EXTRA_ARGS=--max-model-len 1m",
        "vLLM's argparse keeps the last, 1m",
        "Do: fix the flags in `Environment=VLLM_EXTRA_ARGS=…` in "
        "/etc/systemd/system/glm53-flash.service.d/10-context.conf (line 3)",
        "delete the others",
    ],
    # one cause, one failure: the start limit stopped the unit; the exited container is not checked on that cause
    "start-limit-hit": [
        "glm53-flash.service is failed: systemd's start limit stopped it. It restarted the unit 3 times (NRestarts; "
        "StartLimitBurst=3 within StartLimitIntervalSec=3600 s), then refused the next start (journal: "
        '"2026-11-29T13:32:09+0000 gb300-a systemd[1]: glm53-flash.service: Start request repeated too quickly.")',
        "so container glm53-flash is not running",
        "Do: read why it crashed",
        "`systemctl reset-failed glm53-flash.service` (it clears the start limit) and `systemctl start "
        "glm53-flash.service`",
    ],
    # a relative path is the current directory's: where systemd starts the prestart (no WorkingDirectory=: `/`)
    "prestart-relative-from-root": [
        "/usr/local/sbin/glm53-flash-prestart.sh:31 sources `./page-cache.sh` relative to the current directory / "
        "(where systemd runs the unit's commands: glm53-flash.service sets no WorkingDirectory=), that is "
        "/page-cache.sh, which does not exist on the station",
    ],
    # the next start judged beside what runs now: an env file deleted without a restart (issue 40)
    "env-file-gone-not-restarted": [
        "vLLM serves now (docker inspect glm53-flash Args), but after a restart it stops at start: --max-model-len : "
        "invalid human_readable_int value: ''",
        "`${MAX_MODEL_LEN}` is set by no Environment= or EnvironmentFile=",
        "EnvironmentFile=-/etc/default/glm53-flash (/etc/systemd/system/glm53-flash.service:16) names a file that "
        "does not exist, and its `-` makes systemd skip it without a word",
        "Do: correct it in /etc/default/glm53-flash (EnvironmentFile=- at /etc/systemd/system/glm53-flash.service:16)",
        "put the file back (or set the variable in an `Environment=` line)",
    ],
    # one root cause, one failure: the first check that needs the missing piece fails, the others are not checked
    "unit-missing": ["unit glm53-flash.service not found", "install the recipe's unit"],
    "prestart-missing": ["prestart script /usr/local/sbin/glm53-flash-prestart.sh does not exist", "mode 0755"],
    "checkpoint-missing": ["checkpoint folder /srv/models/GLM-5.3-Flash-NVFP4 does not exist", "huggingface-cli"],
    "nvidia-smi-missing": ["nvidia-smi: not found", "install `nvidia-smi`"],
}
# variants whose one missing piece every dependent check needs: each of those is not checked, naming the failed one
ONE_ROOT_CAUSE = {"unit-missing", "prestart-missing", "checkpoint-missing", "nvidia-smi-missing", "start-limit-hit"}

pytestmark = needs_chroot


@pytest.fixture(scope="module")
def trees():
    return build_station_trees()


def golive_host(inventory: Path, out: Path, *pytest_args: str) -> tuple[int, dict, str]:
    run = golive_run(inventory, out, "-m", "host", "-q", *pytest_args)
    return run.code, run.results, run.output


def outcomes(results: dict) -> dict[str, dict]:
    return {check_name(c): c for c in results["checks"]}


# trees where golive cannot resolve what decides a rule: that check is not checked, with the reason, never failed
NOT_CHECKED = {
    "prestart-sources-unresolved": (
        "test_prestart_syncs_then_drops_page_cache",
        "not checked: /usr/local/sbin/glm53-flash-prestart.sh:31 sources `$GLM53_LIB/page-cache.sh`, a path that "
        "depends on a variable golive cannot work out: not read (the drop of the page cache may be in it)",
    ),
}


def variants():
    return [v for v in load_variants() if (v.name in MESSAGES or v.breaks is None) and v.name not in NOT_CHECKED]


@pytest.mark.parametrize("name", list(NOT_CHECKED))
def test_what_golive_cannot_resolve_is_not_checked_never_failed(trees, tmp_path, name):
    """A path golive cannot work out leaves the rule it decides not checked, the reason said (issue 40): the run is
    INCOMPLETE, never NO-GO on a guess nor GO on what was not read."""
    check, said = NOT_CHECKED[name]
    code, results, output = golive_host(REPO / f"fixtures/inventories/{name}.yaml", tmp_path)
    checks = outcomes(results)
    assert {n for n, c in checks.items() if c["outcome"] == "failed"} == set(), output
    assert checks[check]["outcome"] == "not_checked" and said in checks[check]["message"], checks[check]
    assert code == 2 and results["verdict"] == "incomplete", output


def test_healthy_station_passes_every_host_check(trees, tmp_path):
    code, results, output = golive_host(REPO / "fixtures/inventories/gb300-healthy.yaml", tmp_path)
    assert code == 0, output
    checks = outcomes(results)
    assert set(checks) == HOST_CHECKS
    not_passed = {n: c["outcome"] for n, c in checks.items() if c["outcome"] != "passed"}
    assert not_passed == {
        "test_idle_hbm_below_ceiling_before_start": "not_applicable",
        "test_prestart_saved_the_dead_containers_logs": "not_applicable",  # NRestarts=0: no restart to look at
    }, output
    assert results["verdict"] == "pass" and results["schema"] == 5
    assert results["profile"]["name"] == "glm-5.3-flash-gb300" and len(results["profile"]["sha256"]) == 64
    for report in ("go-live.html", "go-live.md", "junit.xml", "results.json"):
        assert (tmp_path / report).stat().st_size > 0
    assert "GO-LIVE: GO<" in (tmp_path / "go-live.html").read_text()
    # provenance gathered from the station (nvidia-smi -q, the checkpoint on disk), not typed into the profile
    [station] = results["stations"]
    provenance = station["provenance"]
    assert (provenance["gpu"], provenance["driver"], provenance["cuda"]) == ("NVIDIA GB300", "580.159.04", "13.0")
    assert all(len(provenance[k]) == 64 for k in ("checkpoint_manifest_sha256", "checkpoint_config_sha256"))
    assert "| driver | 580.159.04 |" in (tmp_path / "go-live.md").read_text()
    assert "<td>driver</td><td>580.159.04</td>" in (tmp_path / "go-live.html").read_text()


@pytest.mark.parametrize("variant", variants(), ids=lambda v: v.name)
def test_each_tree_fails_exactly_its_rule(trees, tmp_path, variant):
    code, results, output = golive_host(REPO / f"fixtures/inventories/{variant.name}.yaml", tmp_path)
    checks = outcomes(results)
    failed = {n for n, c in checks.items() if c["outcome"] == "failed"}
    if variant.breaks is None:
        assert code == 0 and not failed, output
        return
    assert failed == {variant.breaks}, output
    assert code == 1 and results["verdict"] == "fail"
    message = checks[variant.breaks]["message"]
    assert message.startswith("Found: ") and "\nRecipe: " in message and "\nDo: " in message
    for fragment in MESSAGES[variant.name]:
        assert fragment in message, message
    same_cause = [c for c in checks.values() if "failed on the same cause" in c["message"]]
    if variant.name in ONE_ROOT_CAUSE:
        dependents = [
            c
            for name, c in checks.items()
            if name != variant.breaks and c["outcome"] not in ("passed", "not_applicable")
        ]
        assert dependents and dependents == same_cause, output
    assert all(c["outcome"] == "not_checked" for c in same_cause), output
    assert all(
        c["message"].startswith(f"not checked because {variant.breaks} failed on the same cause: ") for c in same_cause
    ), output
    [counts] = [line for line in output.splitlines() if re.search(r"\d+ failed.* in [\d.]+s", line)]
    assert "1 failed" in counts and "error" not in counts, counts  # pytest's own summary counts what golive counts


def test_needs_more_disk_than_there_is(trees, tmp_path):
    inventory = tmp_path / "inventory.yaml"
    healthy = trees["gb300-healthy"]
    inventory.write_text(
        f"profile: {REPO}/fixtures/profiles/gb300-site-needs-more-disk.yaml\n"
        f"stations:\n  - {{name: gb300-a, host: 'chroot://{healthy}'}}\n"
    )
    code, results, output = golive_host(inventory, tmp_path / "out", "-k", "disk_space")
    [check] = results["checks"]
    assert check["outcome"] == "failed" and "at least 1e+06 GB for the checkpoint alone" in check["message"], output
    assert "GB of shards" in check["message"]
    assert code == 1 and results["verdict"] == "fail", output  # a failed check is NO-GO, exit code 1


def test_no_coherent_memory_skips_the_numa_check(trees, tmp_path):
    """A real H200 host (recorded): no numa_status, Addressing Mode None, no memory-only node → SKIP with the reason."""
    inventory = REPO / "fixtures/inventories/h200-device.yaml"  # committed, with its tree in fixtures/stations
    code, results, output = golive_host(inventory, tmp_path, "-k", "hbm_node_page_cache")
    [check] = results["checks"]
    assert check["outcome"] == "not_applicable" and "no coherent GPU memory" in check["message"], output
    # the only check selected does not apply: golive says so in one line and exits 5, never GO on nothing checked
    assert code == 5 and "golive: no selected check applies to these stations" in output, output


def test_open_bind_is_a_finding_on_a_passing_check(trees, tmp_path):
    """The healthy tree serves on 0.0.0.0 without auth, as published: the check passes and carries the finding."""
    code, results, output = golive_host(
        REPO / "fixtures/inventories/gb300-healthy.yaml", tmp_path, "-k", "served_flags_match"
    )
    [check] = results["checks"]
    assert check["outcome"] == "passed", output
    assert check["note"].startswith("OPEN BIND: vLLM listens on every interface"), output


# A site profile that disagrees with the healthy tree in each value a check reads: every such check must fail on it.
PROFILE_VALUES = {  # field -> (override, check, what its message must say)
    "vllm.host": ("vllm:\n  host: 127.0.0.1\n", "test_served_flags_match_profile", "--host: 0.0.0.0, recipe 127.0.0.1"),
    "vllm.speculative_num_tokens": (
        "vllm:\n  speculative_num_tokens: 4\n",
        "test_served_flags_match_profile",
        "speculative decoding: 0 draft tokens, recipe 4",
    ),
    "service.log_dir": (
        "service:\n  log_dir: /srv/crash-logs\n",
        "test_prestart_saves_logs_before_removing_container",
        "saves the logs to /var/log/glm53-flash/glm53-flash-",
    ),
    "checkpoint.size_gb": (
        "checkpoint:\n  size_gb: 464\n",
        "test_checkpoint_shards_complete",
        "191 GB of shards, the recipe's checkpoint is 464 GB",
    ),
}


def test_every_profile_value_is_checked(trees, tmp_path):
    # one YAML mapping per section, so that two overrides of one section merge instead of repeating a key
    sections: dict[str, str] = {}
    for override, _, _ in PROFILE_VALUES.values():
        head, body = override.split("\n", 1)
        sections[head] = sections.get(head, "") + body
    (tmp_path / "site.yaml").write_text(
        f"extends: {REPO}/fixtures/profiles/gb300-site.yaml\n"
        + "".join(head + "\n" + body for head, body in sections.items())
    )
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        f"profile: site.yaml\nstations:\n  - {{name: gb300-a, host: 'chroot://{trees['gb300-healthy']}'}}\n"
    )
    code, results, output = golive_host(
        inventory, tmp_path / "out", "-k", "served_flags or saves_logs or shards_complete"
    )
    checks = outcomes(results)
    failed = {n for n, c in checks.items() if c["outcome"] == "failed"}
    assert failed == {c for _, c, _ in PROFILE_VALUES.values()}, output
    for field, (_, check, fragment) in PROFILE_VALUES.items():
        assert fragment in checks[check]["message"], (field, checks[check]["message"])


def test_recipe_line_names_the_site_profile_that_set_the_number(trees, tmp_path):
    """A number a site profile sets is cited by its file, line and key; one it inherits from the shipped profile
    through `extends:` is cited as the recipe's."""
    site = tmp_path / "site.yaml"
    site.write_text(f"extends: {REPO}/fixtures/profiles/gb300-site.yaml\nservice:\n  restart_sec_s: 30\n")
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        f"profile: site.yaml\nstations:\n  - {{name: gb300-a, host: 'chroot://{trees['gb300-healthy']}'}}\n"
    )
    code, results, output = golive_host(inventory, tmp_path / "out", "-k", "restarts_on_failure or caps_starts")
    checks = outcomes(results)
    assert {n: c["outcome"] for n, c in checks.items()} == {
        "test_unit_restarts_on_failure_after_delay": "failed",
        "test_unit_caps_starts_per_interval": "passed",
    }, output
    message = checks["test_unit_restarts_on_failure_after_delay"]["message"]
    assert (
        f"Recipe: Restart=on-failure [single-station recipe], RestartSec=30 s [site profile {site.resolve()}:3 "
        "service.restart_sec_s]"
    ) in message, message
    assert "Do: set `RestartSec=30` in /etc/systemd/system/glm53-flash.service (line 37)" in message, message
    assert code == 1


def test_a_gateway_that_renames_the_model_holds_the_served_name_to_vllm_model(trees, tmp_path):
    """Behind a gateway that renames the model (clients ask for the profile's `glm-5.3`, vLLM serves
    `glm-5.3-flash`), the host layer holds --served-model-name to the station's `vllm_model:`, as the endpoint layer
    does (issue 41); without `vllm_model` the served name is the profile's, and a different one fails naming both."""
    (tmp_path / "site.yaml").write_text(
        f"extends: {REPO}/fixtures/profiles/gb300-site.yaml\nvllm:\n  served_model_name: glm-5.3\n"
    )
    station = f"name: gb300-a, host: 'chroot://{trees['gb300-healthy']}'"
    checks = {}
    for case, extra in (("declared", ", vllm_model: glm-5.3-flash"), ("undeclared", "")):
        inventory = tmp_path / f"{case}.yaml"
        inventory.write_text(f"profile: site.yaml\nstations:\n  - {{{station}{extra}}}\n")
        _, results, output = golive_host(inventory, tmp_path / case, "-k", "served_flags_match_profile")
        [checks[case]] = results["checks"]
    assert checks["declared"]["outcome"] == "passed", checks["declared"]
    assert checks["undeclared"]["outcome"] == "failed", checks["undeclared"]
    message = checks["undeclared"]["message"]
    assert "served-model-name" in message and "glm-5.3-flash" in message and "glm-5.3" in message, message
