"""The host's part of a capture: the systemd unit, its docker run line, the running container and its image, the
served vLLM flags, the checkpoint on disk and the GPUs, read through the facts the host checks read
(golive.station.host.StationFacts). Where a recipe rule decides (golive.profile.recipe), the capture asks the
rule the check asks, so a captured profile and a check never disagree.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from golive.core.secrets import hide_password
from golive.core.verdict import counted
from golive.day2.captured import CaptureError, Collector, Observed, shown
from golive.facts import FactError, bash
from golive.facts.vllm import parse_human_int, parse_serve_args, served_host, speculative_tokens
from golive.profile.inventory import Station
from golive.profile.recipe import (
    VLLM_FLAGS,
    docker_restart_policy,
    dram_pin,
    restart_does,
    restart_settings,
    running_image_not_pinned,
    span,
    start_limit_does,
    start_limit_settings,
    unit_not_enabled,
)
from golive.profile.schema import Profile, Service

if TYPE_CHECKING:  # imported where used: testinfra is slow to import
    from testinfra.host import Host

    from golive.facts.docker import ContainerFacts, DockerRun, ImageFacts
    from golive.facts.systemd import UnitFacts
    from golive.site import loader

INT_FLAGS = {"port", "tensor_parallel_size", "max_num_seqs"}
# never read a value of these into a profile, a comment or the terminal
SECRET_FLAG = re.compile(r"api-key|token|password|secret", re.IGNORECASE)


def connect_host(loaded: loader.LoadedInventory, station: Station) -> Host:
    """The station's testinfra host, reachable, or a CaptureError that says why not."""
    from golive.station.connection import connect

    spec = loaded.host_spec(station)
    if spec is None:  # a pair's other station without `host:` (connect(None) used to end in an AttributeError)
        raise CaptureError(f"station {station.name} has no `host:` in the inventory: add its testinfra host spec")
    profile = loaded.profile_of(station).profile
    connection = connect(spec, loaded.ssh_config, profile.host.connect_timeout_s, station.name)  # closed at exit
    problem = connection.unreachable()
    if problem:
        raise CaptureError(f"station {station.name}: cannot reach its host {hide_password(station.host)}: {problem}")
    return connection.host


def _flag_value(key: str, raw: str | bool) -> object:
    if isinstance(raw, bool):
        return raw
    if key == "max_model_len":
        return parse_human_int(raw)
    if key in INT_FLAGS:
        return int(raw)
    if key == "gpu_memory_utilization":
        return float(raw)
    return raw


def capture_flags(collect: Collector, observed: Observed) -> None:
    """The served vLLM flags (observed.flags), each as the profile key it pins (golive.profile.recipe.VLLM_FLAGS)."""
    flags, source = observed.flags, observed.flags_source
    for key, flag in VLLM_FLAGS.items():
        raw = flags.get(flag)
        want = getattr(collect.recipe.vllm, key)
        if raw is None:
            if want is True:  # the recipe turns it on; this station does not (the host check reads absent as off)
                collect.add("vllm", key, False, source, said=f"serves without --{flag}")
            continue
        try:
            value = _flag_value(key, raw)
        except (ValueError, FactError):
            collect.capture.cannot_keep.append(f"--{flag} {raw!r} is not a value vLLM accepts ({source})")
            continue
        amount = "" if isinstance(value, bool) else f" {shown(value, key)}"
        collect.add("vllm", key, value, source, said=f"serves --{flag}{amount}")
    if collect.recipe.vllm.host is not None or "host" in flags:
        collect.add("vllm", "host", served_host(flags), source, said=f"binds --host {served_host(flags)}")
    try:
        tokens = speculative_tokens(flags)
    except FactError as exc:
        collect.capture.cannot_keep.append(f"{exc} ({source})")
    else:
        collect.add("vllm", "speculative_num_tokens", tokens, source, said=f"drafts {tokens} speculative tokens")
    if any(SECRET_FLAG.search(name) for name in flags):
        collect.add(
            "security",
            "require_auth",
            True,
            f"{source} (--api-key is set; its value is not captured)",
            said="requires an API key",
        )


def _checkpoint_on_host(model: str, volumes: list[str]) -> str | None:
    """The host path of the container's `--model` path, through the docker run's `-v HOST:CONTAINER[:opts]`."""
    if not model.startswith("/"):
        return None  # a repository id, downloaded inside the container: no folder on the host to read
    best: tuple[int, str] | None = None
    for volume in volumes:
        parts = volume.split(":")
        if len(parts) < 2 or not parts[0].startswith("/"):
            continue  # a named volume: docker keeps it, not a host path
        host_dir, inside = parts[0], parts[1].rstrip("/") or "/"
        if model == inside or model.startswith(inside + "/"):
            if best is None or len(inside) > best[0]:
                best = (len(inside), host_dir.rstrip("/") + model[len(inside) :])
    return best[1] if best else None


def capture_host(collect: Collector, host: Host, station: Station, observed: Observed) -> None:
    """The host's values: the unit's settings, its docker run line, the running container and image, the served
    flags, the checkpoint and the log folder; each kept in the capture, or said in `cannot_keep` with why."""
    from golive.station.host import StationFacts

    recipe = collect.recipe
    service = recipe.service
    if service is None:
        _without_unit(collect)
        return
    facts = StationFacts(host, station, recipe)
    unit = facts.unit
    usource = (
        f"{unit.source} {service.unit}" if unit.source == "systemctl show" else f"{facts.unit_path or 'the unit file'}"
    )
    _capture_restart_settings(collect, unit, service, usource)
    # the prestart is the script an ExecStartPre line runs (`-/usr/bin/docker rm -f …` may come first)
    scripts = [found[0] for c in unit.exec_start_pre if (found := bash.script_run_by(c.argv, facts.read_script))]
    pre = scripts or [c.path for c in unit.exec_start_pre if c.path.startswith("/")]
    if pre:
        collect.add("service", "prestart", pre[0], f"ExecStartPre of {usource}", said=f"runs {pre[0]} before start")
    disabled = unit_not_enabled(unit, service.unit)
    if disabled:
        collect.capture.cannot_keep.append(
            f"{disabled} ({usource}); the recipe enables it [000] — `systemctl enable {service.unit}`"
        )
    run = facts.docker_run
    if run is None:
        collect.capture.cannot_keep.append(
            f"ExecStart of {service.unit} runs no `docker run`; the recipe's unit starts the container [000]"
        )
        return
    names = [v for v in run.values("--name") if v]
    if names:
        collect.add(
            "service",
            "container",
            names[0],
            f"docker run --name in ExecStart of {service.unit}",
            said=f"names its container {names[0]}",
        )
        facts = StationFacts(
            host, station, recipe.model_copy(update={"service": service.model_copy(update={"container": names[0]})})
        )
    container = facts.container
    running = container if container is not None and container.running else None
    _refuse_run_options(collect, run, container, service)
    _capture_image(collect, run, running, facts.image(running.image_id) if running else None, service)
    observed.flags = parse_serve_args(running.args if running else run.args)
    observed.flags_source = f"docker inspect {running.name} Args" if running else f"ExecStart of {service.unit}"
    capture_flags(collect, observed)
    model = observed.flags.get("model")
    if isinstance(model, str) and model:
        _capture_mounted_checkpoint(collect, host, station, model, run, service)
    saved = (
        [c for c in facts.prestart.commands if service.container in c.docker_targets("logs")]
        if facts.prestart_text is not None
        else []
    )
    _capture_log_dir(collect, [t for c in saved for op, t in c.redirects if op in (">", ">>", ">|", "&>")], service)


def _without_unit(collect: Collector) -> None:
    """A recipe that launches vLLM by a script golive does not read: only the GPUs are read; say what is not."""
    recipe = collect.recipe
    collect.capture.read_from.append(f"host: the recipe {recipe.name} has no systemd unit; only GPUs read")
    unread = [
        k for k, v in (("image.digest", recipe.image.digest), ("checkpoint.path", recipe.checkpoint.path)) if v is None
    ]
    if unread:
        collect.capture.cannot_keep.append(
            f"{' and '.join(unread)}: the recipe launches vLLM by a script golive does not read — set them by hand"
        )


def _capture_restart_settings(collect: Collector, unit: UnitFacts, service: Service, usource: str) -> None:
    """Restart=/RestartSec= and the start limit, each judged by the recipe rule the host check asks."""
    for settings, does in (
        (restart_settings(unit, service), restart_does(unit.restart, unit.restart_sec_s, service.restart)),
        (
            start_limit_settings(unit, service),
            start_limit_does(unit.start_limit_burst, unit.start_limit_interval_s, unit.restart_sec_s),
        ),
    ):
        for setting in settings:
            if setting.got is None and setting.differs:
                collect.capture.cannot_keep.append(
                    f"{usource} shows no {setting.key}; the recipe sets {setting.setting} [000]"
                )
                continue
            said = f"has {setting.key}={span(setting.got) if isinstance(setting.got, float) else setting.got}"
            collect.ruled("service", setting.field, setting.got, usource, said, differs=setting.differs, does=does)
            does = does if not setting.differs else []  # said once, on the first setting that differs


def _refuse_run_options(collect: Collector, run: DockerRun, container: ContainerFacts | None, service: Service) -> None:
    """docker run options no profile keeps (a docker restart policy, a DRAM pin): each said with how to remove it."""
    restart = docker_restart_policy(run, container)
    if restart:
        collect.capture.cannot_keep.append(
            f"this station's docker run has --restart={restart.policy}; the recipe says no docker restart policy "
            f"({restart.where}): systemd owns restarts so the prestart runs on every attempt [000] — no profile keeps "
            f"this: remove it from ExecStart of {service.unit}"
        )
    pin = dram_pin(collect.recipe, run, container)
    if pin:
        collect.capture.cannot_keep.append(
            f"{pin} (--cpuset-mems); CUDA init fails with Error 802 [000] — remove --cpuset-mems from ExecStart of "
            f"{service.unit}"
        )


def _capture_image(
    collect: Collector,
    run: DockerRun,
    running: ContainerFacts | None,
    image: ImageFacts | None,
    service: Service,
) -> None:
    """The image the unit's docker run line pins, and the running container's (`image`: its inspect)."""
    image_source = f"ExecStart of {service.unit}"
    collect.add("image", "repository", run.image.repository, image_source, said=f"runs {run.image.repository}")
    if run.image.digest:
        collect.add("image", "digest", run.image.digest, image_source, said=f"pins {run.image.digest}")
    else:
        collect.capture.cannot_keep.append(
            f"ExecStart of {service.unit} runs {run.image} (a tag, no digest); the "
            f"recipe pins the image by digest [000] — pin the digest you validated"
        )
    if running is not None and image is not None:
        ask = f"docker image inspect {running.image_id[:19]}…"
        collect.add(
            "image", "architecture", image.architecture or None, ask, said=f"runs an {image.architecture} image"
        )
        wanted = running_image_not_pinned(run, collect.recipe.image.digest, image.digests())
        if wanted is not None:
            collect.capture.cannot_keep.append(
                f"container {running.name} runs {sorted(image.digests()) or 'an image with no digest'}, not the "
                f"{wanted} its unit pins — restart it (`systemctl restart {service.unit}`) before capturing"
            )


def _capture_mounted_checkpoint(
    collect: Collector, host: Host, station: Station, model: str, run: DockerRun, service: Service
) -> None:
    """The checkpoint `--model` serves, through the docker run's `-v`: its folder on the host, and what is in it."""
    recipe = collect.recipe
    path = _checkpoint_on_host(model, [v for v in run.values("-v", "--volume") if v])
    if path and not host.file(path).is_directory:
        # a -v source is a path on the Docker engine's machine: where the engine is not the station's own (a
        # DOCKER_HOST, a bound socket), it is no folder here; the profile's path, where it is one, is read instead
        known = recipe.checkpoint.path
        readable = bool(known) and host.file(known).is_directory
        collect.capture.cannot_keep.append(
            f"--model {model} is mounted from {path} (-v in ExecStart of {service.unit}), which is not a folder "
            f"on {station.name}: the Docker engine runs elsewhere? — "
            + (
                f"the checkpoint was read from the profile's checkpoint.path, {known}"
                if readable
                else "set checkpoint.path by hand"
            )
        )
        if readable:
            capture_checkpoint(collect, host, station, recipe)
        return
    if path:
        collect.add(
            "checkpoint",
            "path",
            path,
            f"--model {model} through the docker run's -v in ExecStart of {service.unit}",
            said=f"keeps the checkpoint in {path}",
        )
        capture_checkpoint(
            collect,
            host,
            station,
            recipe.model_copy(update={"checkpoint": recipe.checkpoint.model_copy(update={"path": path})}),
        )


def _capture_log_dir(collect: Collector, targets: list[str], service: Service) -> None:
    """The folder the prestart saves `docker logs` into (`targets`: where its redirects write)."""
    if targets and "/" in targets[0]:
        log_dir = targets[0].rsplit("/", 1)[0]
        if "$" not in log_dir:  # a path computed at run time is no folder golive can name
            collect.add(
                "service",
                "log_dir",
                log_dir,
                f"`docker logs` redirect in {service.prestart}",
                said=f"saves container logs into {log_dir}",
            )


def capture_checkpoint(collect: Collector, host: Host, station: Station, profile: Profile) -> None:
    from golive.station.host import StationFacts

    facts = StationFacts(host, station, profile)
    where = facts.checkpoint_dir
    config = facts.checkpoint_json("config.json")
    if config is None:
        collect.capture.cannot_keep.append(f"{where}/config.json does not exist: not a complete checkpoint")
        return
    source = f"{where}/config.json"
    arch = (config.get("architectures") or [None])[0]
    collect.add("checkpoint", "architecture", arch, source, said=f"serves a {arch} checkpoint")
    quant = config.get("quantization_config") or {}
    hf_quant = (facts.checkpoint_json("hf_quant_config.json") or {}).get("quantization") or {}
    qsource = source if quant.get("quant_algo") else f"{where}/hf_quant_config.json"
    collect.add(
        "checkpoint",
        "quant_algo",
        quant.get("quant_algo") or hf_quant.get("quant_algo"),
        qsource,
        said=f"serves a {quant.get('quant_algo') or hf_quant.get('quant_algo')} checkpoint",
    )
    kv = quant.get("kv_cache_quant_algo") or hf_quant.get("kv_cache_quant_algo")
    collect.add("checkpoint", "kv_cache_quant_algo", kv, qsource, said=f"has a {kv} KV cache config")
    shards = facts.shards
    counts = {m.group(1) for s in shards if (m := re.fullmatch(r"model-\d+-of-(\d+)\.safetensors", s.name))}
    if len(counts) == 1:
        total = int(counts.pop())
        manifest = f"{len(shards)} shards on disk, manifest sha256 {facts.shard_manifest_sha256[:16]}…"
        if len(shards) != total:
            collect.capture.cannot_keep.append(
                f"{where}: {len(shards)} of {total} shards on disk — not a known-good "
                f"checkpoint: re-download before capturing"
            )
        else:
            collect.add(
                "checkpoint", "shard_count", total, f"{where} ({manifest})", said=f"has {total} checkpoint shards"
            )


def capture_gpus(collect: Collector, host: Host, station: Station, observed: Observed) -> None:
    recipe = collect.recipe
    if recipe.gpu.per_station == 0 or not observed.gpu_names:
        return
    source = "nvidia-smi --query-gpu=index,name,…"
    matching = [n for n in observed.gpu_names if recipe.gpu.name_contains.lower() in n.lower()]
    if not matching:
        name = observed.gpu_names[0].removeprefix("NVIDIA ").strip()
        collect.add("gpu", "name_contains", name, source, said=f"has {observed.gpu_names[0]} GPUs")
        matching = [n for n in observed.gpu_names if name.lower() in n.lower()]
    collect.add("gpu", "per_station", len(matching), source, said=f"has {counted(len(matching), 'serving GPU')}")


def gpu_names(host: Host, station: Station, any_recipe: Profile) -> list[str]:
    from golive.station.host import StationFacts

    # the query the GPU checks run (StationFacts.gpus), so a recorded station answers it too
    return [g["name"] for g in StationFacts(host, station, any_recipe).gpus]
