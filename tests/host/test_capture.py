"""`golive profile capture` round trips on station trees: a healthy tree captures into a site profile that makes
`golive run -m host` GO; a broken tree's capture names the broken value in its review list."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from golive.core.secrets import hide_password
from golive.day2.captured import Capture, Collector, Observed
from golive.day2.host_values import capture_flags
from golive.day2.profile_yaml import render
from golive.site import loader
from golive_testbed.targets import build_station_trees

REPO = Path(__file__).resolve().parents[2]
INVENTORIES = REPO / "fixtures/inventories"

# broken tree -> the review line its capture must print (a value the profile could keep, or a rule it cannot)
REVIEW = {
    "tool-parser-wrong": "this station serves --tool-call-parser hermes; the recipe says glm47 — keep?",
    "restart-always": "this station has Restart=always; the recipe says on-failure — keep?",
    "start-limit-burst-5": "this station has StartLimitBurst=5; the recipe says 3 — keep?",
    "docker-restart-always": "this station's docker run has --restart=always; the recipe says no docker restart policy",
    "image-by-tag": "runs vllm/vllm-openai:nightly-aarch64 (a tag, no digest)",
    "docker-cpuset-mems-0": "the serving container is confined to memory node 0 (--cpuset-mems); CUDA init fails",
    "wrong-quantization": "this station serves a FP8 checkpoint; the recipe says NVFP4 — keep?",
}

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="station trees are reached through chroot, which needs root")


@pytest.fixture(scope="module")
def trees():
    return build_station_trees()


def golive(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "golive.cli", *args], capture_output=True, text=True, cwd=REPO, timeout=300
    )


def test_healthy_tree_captures_into_a_profile_that_goes_live(trees, tmp_path):
    site = tmp_path / "site.yaml"
    captured = golive("profile", "capture", str(INVENTORIES / "gb300-healthy.yaml"), "-o", str(site))
    assert captured.returncode == 0, captured.stderr
    assert (
        "extends glm-5.3-flash-gb300: the station has its unit glm53-flash.service, has a GB300 GPU" in captured.stdout
    )
    assert "Review: nothing differs from the recipe." in captured.stdout
    loaded = loader.load_profile(site)
    assert loaded.profile.name == "glm-5.3-flash-gb300"
    # what the bundled hand-written site profile says, read back from the station itself
    hand = yaml.safe_load((REPO / "fixtures/profiles/gb300-site.yaml").read_text())
    assert loaded.profile.image.digest == hand["image"]["digest"]
    assert loaded.profile.checkpoint.path == hand["checkpoint"]["path"]
    assert loaded.profile.checkpoint.architecture == hand["checkpoint"]["architecture"]
    assert loaded.profile.service is not None and loaded.profile.service.log_dir == hand["service"]["log_dir"]
    text = site.read_text()
    assert '  digest: "sha256:adfb5fb0' in text and "# ExecStart of glm53-flash.service" in text
    assert "# --model /models/GLM-5.3-Flash-NVFP4 through the docker run's -v" in text
    assert "gpu_memory_utilization" not in text  # equal to the recipe: not repeated
    out = tmp_path / "run"
    run = golive(
        "run", str(INVENTORIES / "gb300-healthy.yaml"), "--profile", str(site), "-o", str(out), "-m", "host", "-q"
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert '"verdict": "pass"' in (out / "results.json").read_text()


@pytest.mark.parametrize("variant", ["docker-rm-before-prestart", "docker-run-in-wrapper-script"])
def test_capture_reads_the_prestart_and_run_line_where_they_are(trees, tmp_path, variant):
    """The prestart is the script an ExecStartPre line runs, not the `docker rm` in front of it; the docker run line
    may be in a script ExecStart runs: both captured as the recipe's, so nothing to review."""
    site = tmp_path / "site.yaml"
    captured = golive("profile", "capture", str(INVENTORIES / f"{variant}.yaml"), "-o", str(site))
    assert captured.returncode == 0, captured.stderr
    assert "Review: nothing differs from the recipe." in captured.stdout, captured.stdout
    assert '  digest: "sha256:adfb5fb0' in site.read_text()


@pytest.mark.parametrize("variant", sorted(REVIEW))
def test_broken_tree_capture_names_the_broken_value(trees, tmp_path, variant):
    site = tmp_path / "site.yaml"
    captured = golive("profile", "capture", str(INVENTORIES / f"{variant}.yaml"), "-o", str(site))
    assert captured.returncode == 0, captured.stderr
    review = captured.stdout.split("Review before go-live:\n", 1)[1]
    assert REVIEW[variant] in review, captured.stdout
    assert REVIEW[variant] in site.read_text()  # the file carries its review list too
    loader.load_profile(site)


def test_no_station_no_recipe_is_one_line(trees, tmp_path):
    captured = golive("profile", "capture", str(INVENTORIES / "h200-device.yaml"), "-o", str(tmp_path / "s.yaml"))
    assert captured.returncode == 2 and captured.stderr.count("\n") == 1, captured.stderr
    assert "no shipped recipe fits this station" in captured.stderr and "--recipe" in captured.stderr
    assert not (tmp_path / "s.yaml").exists()


def test_secrets_are_never_captured(tmp_path):
    recipe = loader.load_profile("glm-5.3-flash-gb300").profile
    result = Capture(station="s", recipe=recipe.name, why="test")
    observed = Observed(
        flags={"served-model-name": "glm-5.3-flash", "api-key": "sk-not-for-files", "gpu-memory-utilization": "0.95"},
        flags_source="docker inspect x Args",
    )
    capture_flags(Collector(recipe, result), observed)
    result.read_from = [f"host {hide_password('ssh://ops:hunter2@gb300-a:2222')}"]
    text = render(result)
    assert "sk-not-for-files" not in text and "hunter2" not in text
    assert "ssh://ops:***@gb300-a:2222" in text
    assert "require_auth: true  # docker inspect x Args (--api-key is set; its value is not captured)" in text
    assert "this station serves --gpu-memory-utilization 0.95; the recipe says 0.94 — keep?" in "\n".join(result.review)
    site = tmp_path / "site.yaml"
    site.write_text(text)
    assert loader.load_profile(site).profile.vllm.gpu_memory_utilization == 0.95


@pytest.mark.parametrize(
    "spec, shown",
    [
        ("ssh://ops:pw@host", "ssh://ops:***@host"),
        ("ssh://ops@host", "ssh://ops@host"),
        ("chroot:///t", "chroot:///t"),
        ("paramiko://root:p%40ss@10.0.0.1:22?timeout=5", "paramiko://root:***@10.0.0.1:22?timeout=5"),
        (None, None),
    ],
)
def test_captured_host_specs_hide_the_password(spec, shown):
    assert hide_password(spec) == shown


CLUSTER = REPO / "fixtures/cluster-stations"


@pytest.fixture(scope="module")
def cluster_trees():
    return build_station_trees(CLUSTER, CLUSTER / ".built")


@pytest.mark.parametrize(
    "a, b, review",
    [
        ("gb300-rail-a", "gb300-rail-b", None),
        (
            "a-nccl-2.28.3",
            "gb300-rail-b",
            "the stations load different NCCL versions (2.28.3 on gb300-a, 2.30.7 on gb300-b)",
        ),
    ],
)
def test_two_station_capture_reads_nccl_and_rails(cluster_trees, tmp_path, a, b, review):
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        f"profile: {REPO}/fixtures/profiles/gb300-rail-site.yaml\nstations:\n"
        f"  - {{name: gb300-a, role: a, host: 'chroot://{cluster_trees[a]}'}}\n"
        f"  - {{name: gb300-b, role: b, host: 'chroot://{cluster_trees[b]}'}}\n"
    )
    site = tmp_path / "site.yaml"
    captured = golive("profile", "capture", str(inventory), "-o", str(site))
    assert captured.returncode == 0, captured.stderr
    assert "extends glm-5.3-2x-station-tp2: the station is one of two stations (roles a and b)" in captured.stdout
    assert (
        "image.digest and checkpoint.path: the recipe launches vLLM by a script golive does not read" in captured.stdout
    )
    if review is None:  # NCCL 2.30.7 and both rails' addresses and MTU as the recipe says: nothing written
        assert "golive: 0 values written, 3 equal to the recipe" in captured.stdout
    else:
        assert review in captured.stdout
    loader.load_profile(site)


@pytest.mark.parametrize(
    "info, written, review",
    [
        (
            {"kv_cache_size_tokens": "5000000"},
            5000000,
            "this station holds 5,000,000 tokens of KV cache; the recipe says 5,933,986 — keep?",
        ),
        ({"num_gpu_blocks": "50000", "block_size": "128"}, None, None),  # 6.4 M tokens: the recipe's floor stays
        ({}, None, None),  # no capacity published: nothing captured, nothing made up
    ],
)
def test_kv_capacity_below_the_recipe_is_reviewed_never_tightened(info, written, review):
    from golive.day2.endpoint_values import capture_endpoint

    recipe = loader.load_profile("glm-5.3-flash-gb300").profile
    result = Capture(station="s", recipe=recipe.name, why="test")
    observed = Observed(
        endpoint="http://u:secret@gb300-a:8888",
        cache_info=info,
        models=[{"id": "glm-5.3-flash", "max_model_len": 1048576}],
    )
    capture_endpoint(Collector(recipe, result), observed)
    values = {v.dotted: v.value for v in result.values}
    assert values.get("endpoint.kv_cache_tokens_floor") == written
    assert result.review == (
        [
            f"{review} (endpoint.kv_cache_tokens_floor, read from GET "
            f"http://u:***@gb300-a:8888/metrics vllm:cache_config_info)"
        ]
        if review
        else []
    )
    assert result.matched == 2  # served name and max_model_len equal the recipe's
    assert "secret" not in render(result)


@pytest.mark.parametrize(
    "args, message",
    [
        (["profile", "capture"], "profile capture needs an inventory file"),
        (["profile", "capture", "INVENTORY"], "profile capture needs -o FILE"),
        (["profile", "capture", "missing.yaml", "-o", "x.yaml"], "missing.yaml"),
        (["profile", "capture", "INVENTORY", "--station", "nope", "-o", "x.yaml"], "--station nope: the inventory has"),
        (
            ["profile", "capture", "INVENTORY", "--recipe", "nope", "-o", "x.yaml"],
            "--recipe nope: not a shipped recipe",
        ),
    ],
)
def test_bad_capture_usage_is_one_line(trees, tmp_path, args, message):
    result = golive(*[str(INVENTORIES / "gb300-healthy.yaml") if a == "INVENTORY" else a for a in args])
    assert result.returncode == 4 and message in result.stderr and result.stderr.count("\n") == 1, result.stderr
