"""The container systemd starts: docker flags, image pin, served vLLM flags [000][002]."""
import pytest

from golive.facts.vllm import ALL_INTERFACES, parse_human_int, parse_serve_args, served_host, speculative_tokens
from golive.verdict import not_applicable, require

pytestmark = pytest.mark.host


@pytest.fixture
def docker_run(facts, service):
    run = facts.docker_run
    require(run is not None,
            found=f"ExecStart of {service.unit} does not run `docker run`: "
                  f"{[' '.join(c.argv) for c in facts.unit.exec_start]}",
            recipe="systemd starts the vLLM container with `docker run` in ExecStart [000]",
            fix=f"make ExecStart of {service.unit} the recipe's `docker run … IMAGE@sha256:… --model …` line")
    return run


def test_docker_has_no_restart_policy(facts, docker_run, profile):
    """Docker has no --restart flag: systemd owns restarts, so the prestart runs on every attempt [000]."""
    flags = [v for v in docker_run.values("--restart") if v not in ("no", None)]
    container = facts.container
    running_policy = container.restart_policy if container else "no"
    require(not flags and running_policy in ("no", ""),
            found=f"docker restart policy {flags[0] if flags else running_policy!r} "
                  f"({'docker run line' if flags else 'docker inspect HostConfig.RestartPolicy'})",
            recipe="no `--restart` on the docker run line: a docker restart skips the prestart and its drop_caches "
                   "[000]",
            fix=f"remove `--restart=…` from ExecStart of {profile.service.unit} (or use --restart=no), then "
                f"`systemctl daemon-reload && systemctl restart {profile.service.unit}`")


def test_container_not_pinned_to_dram_node(facts, docker_run, profile):
    """The vLLM container is NOT confined to the DRAM node (confined there, CUDA init fails with Error 802) [000]."""
    dram = str(profile.numa.dram_node if profile.numa else 0)
    values = [v for v in docker_run.values("--cpuset-mems") if v]
    container = facts.container
    if container and container.cpuset_mems:
        values.append(container.cpuset_mems)
    require(all(v.strip() != dram for v in values),
            found=f"the serving container is confined to memory node(s) {', '.join(sorted(set(values)))}",
            recipe=f"I/O jobs get node {dram}; the serving container gets the whole machine — pinned to node {dram} "
                   f"CUDA init fails with Error 802 [000]",
            fix=f"remove `--cpuset-mems` from the docker run line of {profile.service.unit}; keep "
                f"`numactl --membind={dram}` for downloads and copies only")


def test_image_pinned_by_digest(docker_run, profile):
    """The image is referenced by @sha256 digest, the one the profile pins [000][002]."""
    image = docker_run.image
    pin = profile.image.digest
    require(pin is not None,
            found=f"the unit runs {image}; the profile pins no digest",
            recipe="the image is pinned by digest; the suite is the post-upgrade gate [000][002]",
            fix="record the digest you validated (`docker image inspect --format '{{index .RepoDigests 0}}' IMAGE`) "
                "as image.digest in your site profile")
    require(image.digest == pin,
            found=f"the unit runs {image}" + ("" if image.digest else " (a tag: it moves under you)"),
            recipe=f"{profile.image.repository}@{pin} [000]",
            fix=f"reference the image as {profile.image.repository}@{pin} in ExecStart of {profile.service.unit}; "
                f"if you upgraded on purpose, re-run the whole suite and then update image.digest in the profile")


def test_running_container_runs_pinned_image(facts, docker_run, profile, station):
    """The running container runs the image the unit pins (docker inspect), not an older one [000]."""
    if station.phase == "pre-start":
        not_applicable("pre-start phase: no container is expected to run")
    container = facts.container
    require(container is not None and container.running,
            found=f"container {facts.container_name} is {'absent' if container is None else container.status}",
            recipe="the serving station runs the container systemd started [000]",
            fix=f"`systemctl start {profile.service.unit}` and read `journalctl -u {profile.service.unit}`")
    wanted = docker_run.image.digest or profile.image.digest
    running = facts.image(container.image_id)
    require(wanted in running.digests(),
            found=f"container {container.name} runs image {container.image_id[:19]}… with digests "
                  f"{sorted(running.digests()) or 'none'} (started as {container.config_image})",
            recipe=f"the running image is {profile.image.repository}@{wanted}, the one the unit pins [000]",
            fix=f"`systemctl restart {profile.service.unit}` so the pinned image runs (the prestart saves the old "
                f"container's logs first)")


def _expected_flags(profile) -> dict[str, object]:
    v = profile.vllm
    wanted = {"served-model-name": v.served_model_name, "port": v.port, "tensor-parallel-size": v.tensor_parallel_size,
              "max-model-len": v.max_model_len, "max-num-seqs": v.max_num_seqs,
              "gpu-memory-utilization": v.gpu_memory_utilization, "enable-chunked-prefill": v.enable_chunked_prefill,
              "enable-prefix-caching": v.enable_prefix_caching, "enable-auto-tool-choice": v.enable_auto_tool_choice,
              "tool-call-parser": v.tool_call_parser, "reasoning-parser": v.reasoning_parser,
              "kv-cache-dtype": v.kv_cache_dtype}
    return {k: val for k, val in wanted.items() if val is not None}


def _same(flag: str, got, want) -> bool:
    if isinstance(want, bool):
        return got is want or (want is False and got is None)
    if got is None or got is True or got is False:
        return False
    if flag == "max-model-len":
        return parse_human_int(got) == want
    if isinstance(want, (int, float)):
        try:
            return float(got) == float(want)
        except ValueError:
            return False
    return got == want


def test_served_flags_match_profile(facts, docker_run, profile, station, record_finding, record_provenance):
    """vLLM is served with the recipe's flags: context, sequences, memory, prefill, caching, parsers, speculative
    decoding, bind address, port, name [000][002]; an open bind without auth is reported."""
    container = facts.container
    from_container = station.phase == "serving" and container is not None and container.running
    args = container.args if from_container else docker_run.args
    source = f"docker inspect {container.name} Args" if from_container else f"ExecStart of {profile.service.unit}"
    served = parse_serve_args(args)
    record_provenance(served_args=served, served_args_source=source, pinned_flags=_expected_flags(profile),
                      parsers={p: served.get(p) for p in ("tool-call-parser", "reasoning-parser")},
                      image=str(docker_run.image), image_digest=docker_run.image.digest)
    wrong = []
    for flag, want in _expected_flags(profile).items():
        got = served.get(flag)
        if not _same(flag, got, want):
            shown = "absent" if got is None else ("on" if got is True else "off" if got is False else got)
            wrong.append(f"--{flag}: {shown}, recipe {('on' if want else 'off') if isinstance(want, bool) else want}")
    want_tokens = profile.vllm.speculative_num_tokens
    if want_tokens is not None and speculative_tokens(served) != want_tokens:
        wrong.append(f"speculative decoding: {speculative_tokens(served)} draft tokens, recipe {want_tokens}"
                     + (" (--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": "
                        f"{want_tokens}}}')" if want_tokens else " (no --speculative-config)"))
    host = served_host(served)
    if profile.vllm.host is not None and host != profile.vllm.host:
        wrong.append(f"--host: {host}{' (vLLM default: every interface)' if 'host' not in served else ''}, "
                     f"recipe {profile.vllm.host}")
    require(not wrong,
            found=f"served flags differ ({source}): " + "; ".join(wrong),
            recipe="the served flags are the recipe's; parser names are pinned to the vLLM build [000]",
            fix=f"fix the flags in ExecStart of {profile.service.unit}, `systemctl daemon-reload`, restart, then "
                f"re-run the endpoint layer (tool calls are a launch blocker)")
    if host == ALL_INTERFACES and not profile.security.require_auth:
        record_finding(f"OPEN BIND: vLLM listens on every interface ({host}:{profile.vllm.port}, {source}) with no "
                       f"API key required, as published [000]. Firewall the port, add auth and TLS before wider "
                       f"exposure, or bind 127.0.0.1 behind a proxy.")
