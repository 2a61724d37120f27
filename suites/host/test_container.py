"""The container systemd starts: docker flags, image pin, served vLLM flags [000][002]."""
import pytest

from golive.core.verdict import not_applicable, require
from golive.facts.vllm import (
    ALL_INTERFACES,
    VALUE_TYPES,
    RejectedValue,
    describe_tokens,
    parse_max_model_len,
    parse_serve_args,
    rejected_args,
    served_host,
    speculative_tokens,
)

pytestmark = pytest.mark.host


def _exec_start(facts, unit_name: str) -> str:
    """`ExecStart of UNIT (FILE:LINE)`: where to edit the docker run line, a drop-in's if one set it."""
    where = facts.unit.set_at.get("ExecStart")
    return f"ExecStart of {unit_name}" + (f" ({where})" if where else "")


@pytest.fixture
def docker_run(facts, service):
    run = facts.docker_run
    require(run is not None,
            found=f"ExecStart of {service.unit} does not run `docker run`: "
                  f"{[' '.join(c.argv) for c in facts.unit.exec_start]}",
            recipe="systemd starts the vLLM container with `docker run` in ExecStart [000]",
            fix=f"make {_exec_start(facts, service.unit)} the recipe's `docker run … IMAGE@sha256:… --model …` line")
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
            fix=f"remove `--restart=…` from {_exec_start(facts, profile.service.unit)} (or use --restart=no), then "
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


def test_image_pinned_by_digest(facts, docker_run, profile):
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
            fix=f"reference the image as {profile.image.repository}@{pin} in "
                f"{_exec_start(facts, profile.service.unit)}; "
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
    """Compare as vLLM reads the served value (its argparse types), not as text."""
    if isinstance(want, bool):
        return got is want or (want is False and got is None)
    if got is None or got is True or got is False:
        return False
    if flag in VALUE_TYPES:
        try:
            return VALUE_TYPES[flag](got) == want
        except (ValueError, RejectedValue):  # test_served_flags_are_accepted_by_vllm reports it
            return False
    return got == want


def _refused(flag: str, got: str) -> bool:
    try:
        VALUE_TYPES[flag](got)
    except (ValueError, RejectedValue):
        return True
    return False


def _shown(flag: str, got, want) -> str:
    """`--max-model-len: 1m = 1,000,000 tokens; the recipe serves 1,048,576`: the value as vLLM reads it."""
    if flag == "max-model-len" and isinstance(got, str):
        try:
            return f"--{flag}: {describe_tokens(got, parse_max_model_len(got))}; the recipe serves {want:,}"
        except RejectedValue:
            pass
    shown = "absent" if got is None else ("on" if got is True else "off" if got is False else got)
    return f"--{flag}: {shown}, recipe {('on' if want else 'off') if isinstance(want, bool) else want}"


def _served(facts, docker_run, profile, station) -> tuple[list[str], str]:
    """The served vLLM arguments (the running container's when serving, else the unit's), and where they came from."""
    container = facts.container
    if station.phase == "serving" and container is not None and container.running:
        return container.args, f"docker inspect {container.name} Args"
    return docker_run.args, f"ExecStart of {profile.service.unit}"


def test_served_flags_are_accepted_by_vllm(facts, docker_run, profile, station):
    """vLLM's own argument parser accepts every served flag (value types, switches, no stray words); a value it
    refuses stops `vllm serve` before it serves [000][002]."""
    args, source = _served(facts, docker_run, profile, station)
    refused = rejected_args(args)
    require(not refused,
            found=f"vLLM would refuse the served arguments ({source}): " + "; ".join(refused),
            recipe="vLLM starts with the recipe's flags; a value its parser refuses ends `vllm serve` at once [000]",
            fix=f"correct the value in {_exec_start(facts, profile.service.unit)} as vLLM spells it (lowercase "
                f"k/m/g/t = powers of 10, uppercase K/M/G/T = powers of 2, whole numbers only with K/M/G/T; switches "
                f"take no value), `systemctl daemon-reload`, restart")


def test_served_flags_match_profile(facts, docker_run, profile, station, record_finding, record_provenance):
    """vLLM is served with the recipe's flags: context, sequences, memory, prefill, caching, parsers, speculative
    decoding, bind address, port, name [000][002]; an open bind without auth is reported."""
    args, source = _served(facts, docker_run, profile, station)
    served = parse_serve_args(args)
    record_provenance(served_args=served, served_args_source=source, pinned_flags=_expected_flags(profile),
                      parsers={p: served.get(p) for p in ("tool-call-parser", "reasoning-parser")},
                      image=str(docker_run.image), image_digest=docker_run.image.digest)
    wrong, unreadable = [], []
    for flag, want in _expected_flags(profile).items():
        got = served.get(flag)
        if flag in VALUE_TYPES and isinstance(got, str) and _refused(flag, got):
            unreadable.append(f"--{flag} {got}")
            continue
        if not _same(flag, got, want):
            wrong.append(_shown(flag, got, want))
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
            fix=f"fix the flags in {_exec_start(facts, profile.service.unit)}, `systemctl daemon-reload`, restart, "
                f"then re-run the endpoint layer (tool calls are a launch blocker)")
    if unreadable:
        pytest.skip(f"not checked: {', '.join(unreadable)} (vLLM refuses the value: see "
                    f"test_served_flags_are_accepted_by_vllm); every other served flag matches")
    if host == ALL_INTERFACES and not profile.security.require_auth:
        record_finding(f"OPEN BIND: vLLM listens on every interface ({host}:{profile.vllm.port}, {source}) with no "
                       f"API key required, as published [000]. Firewall the port, add auth and TLS before wider "
                       f"exposure, or bind 127.0.0.1 behind a proxy.")
