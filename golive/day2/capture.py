"""`golive profile capture`: a running, known-good station written down as a site profile.

The station is read read-only through the facts the checks read (golive.inventory.station.StationFacts, the endpoint
client), the closest shipped recipe is chosen, and the site profile `extends:` it with only what differs from the
recipe or what only the site knows, each value commented with where it was read. Values that differ from the recipe,
and station facts that break a recipe rule no profile can keep (a docker restart policy, say), make the review list
the operator reads before using the profile. Secrets (API keys, passwords in host specs) are never read into it.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from golive.core.secrets import hide_password, scrub, station_secrets
from golive.core.verdict import EXIT_GO, EXIT_INCOMPLETE, EXIT_USAGE, printable
from golive.endpoint.target import api_key_of
from golive.facts import FactError
from golive.facts.vllm import parse_human_int, parse_serve_args, served_host, speculative_tokens
from golive.inventory import loader as golive_config
from golive.profile.schema import Profile, Station

if TYPE_CHECKING:  # imported where used: the client brings openai, a host testinfra
    import argparse

    from testinfra.host import Host

    from golive.endpoint.client import EndpointClient

# profile key -> the vLLM flag it pins (suites/host/test_container.py reads the same flags)
VLLM_FLAGS = {
    "served_model_name": "served-model-name",
    "port": "port",
    "tensor_parallel_size": "tensor-parallel-size",
    "max_model_len": "max-model-len",
    "max_num_seqs": "max-num-seqs",
    "gpu_memory_utilization": "gpu-memory-utilization",
    "enable_chunked_prefill": "enable-chunked-prefill",
    "enable_prefix_caching": "enable-prefix-caching",
    "enable_auto_tool_choice": "enable-auto-tool-choice",
    "tool_call_parser": "tool-call-parser",
    "reasoning_parser": "reasoning-parser",
    "kv_cache_dtype": "kv-cache-dtype",
}
INT_FLAGS = {"port", "tensor_parallel_size", "max_num_seqs"}
# never read a value of these into a profile, a comment or the terminal
SECRET_FLAG = re.compile(r"api-key|token|password|secret", re.IGNORECASE)
SECTION_ORDER = ("service", "image", "vllm", "checkpoint", "gpu", "endpoint", "security", "cluster")


class CaptureError(Exception):
    """The station cannot be captured; str() is the one line the operator sees, `code` the exit status (bad usage,
    or a station that cannot be read: INCOMPLETE)."""

    def __init__(self, message: str, code: int = EXIT_INCOMPLETE):
        super().__init__(message)
        self.code = code


@dataclass
class Value:
    """One captured profile value: where it goes, what the station has, where it was read."""

    section: str
    key: str
    value: object
    source: str
    said: str = ""  # how the review list says it: "serves --tool-call-parser hermes"

    @property
    def dotted(self) -> str:
        return f"{self.section}.{self.key}"


@dataclass
class Capture:
    station: str
    recipe: str
    why: str
    values: list[Value] = field(default_factory=list)  # only what differs from the recipe or what it leaves to sites
    review: list[str] = field(default_factory=list)  # values that differ from the recipe, to keep or fix
    cannot_keep: list[str] = field(default_factory=list)  # station facts breaking recipe rules no profile can keep
    matched: int = 0  # captured values equal to the recipe's (not written)
    read_from: list[str] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list, repr=False)  # the inventory's: scrubbed from comments and lines


def _shown(value: object) -> str:
    if value is True:
        return "on"
    if value is False:
        return "off"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int):
        return f"{value:,}" if value >= 10000 else str(value)
    return str(value)


# --- reading the station ---------------------------------------------------------------------------------------------


@dataclass
class Observed:
    """What the station showed, before any recipe is compared: flags, endpoint answers, host facts."""

    flags: dict[str, str | bool] = field(default_factory=dict)
    flags_source: str = ""
    models: list[dict] = field(default_factory=list)
    cache_info: dict = field(default_factory=dict)
    endpoint: str | None = None
    gpu_names: list[str] = field(default_factory=list)
    pair: bool = False  # the inventory has two stations, roles a and b


def _endpoint_client(loaded: golive_config.LoadedInventory, station: Station, profile: Profile) -> EndpointClient:
    from golive.endpoint.client import EndpointClient
    from golive.endpoint.target import EndpointTarget

    return EndpointClient(EndpointTarget.of(station, profile.endpoint, loaded.tls_ca_file(station)))


def read_endpoint(loaded: golive_config.LoadedInventory, station: Station, observed: Observed) -> None:
    """Served models and the KV cache's configuration (GET /v1/models, GET /metrics), read-only."""
    from golive.endpoint.errors import EndpointError

    if not station.endpoint:
        return
    client = _endpoint_client(loaded, station, loaded.profile_of(station).profile)
    try:
        observed.models = client.models()
        cache = client.metrics().get("vllm:cache_config_info", [])
        observed.cache_info = dict(cache[0][0]) if cache else {}
        observed.endpoint = client.root
    except EndpointError as exc:
        raise CaptureError(
            f"station {station.name}: the endpoint did not answer ({exc}); capture a station that serves"
        ) from None
    finally:
        client.close()


def _fit(recipe: Profile, host_units: set[str], observed: Observed) -> tuple[int, list[str]]:
    """How well a recipe fits what the station showed: points, and the reasons said to the operator."""
    points, why = 0, []
    if recipe.cluster is not None and observed.pair:
        points += 2
        why.append("is one of two stations (roles a and b)")
    served = [m.get("id") for m in observed.models] + [observed.flags.get("served-model-name")]
    if recipe.vllm.served_model_name in served:
        points += 3
        why.append(f"serves {recipe.vllm.served_model_name}")
    if recipe.service and recipe.service.unit in host_units:
        points += 2
        why.append(f"has its unit {recipe.service.unit}")
    if observed.gpu_names and any(recipe.gpu.name_contains.lower() in n.lower() for n in observed.gpu_names):
        points += 2
        why.append(f"has a {recipe.gpu.name_contains} GPU")
    lengths = {m.get("max_model_len") for m in observed.models} | {observed.flags.get("max-model-len")}
    if recipe.vllm.max_model_len in lengths or str(recipe.vllm.max_model_len) in lengths:
        points += 1
        why.append(f"max_model_len {recipe.vllm.max_model_len:,}")
    tp = observed.flags.get("tensor-parallel-size")
    if isinstance(tp, str) and tp.isdigit() and int(tp) == recipe.vllm.tensor_parallel_size:
        points += 1
        why.append(f"tensor parallel {tp}")
    return points, why


def choose_recipe(
    recipes: dict[str, Profile], host_units: set[str], observed: Observed, forced: str | None
) -> tuple[str, str]:
    if forced:
        if forced not in recipes:
            raise CaptureError(f"--recipe {forced}: not a shipped recipe ({', '.join(recipes)})", EXIT_USAGE)
        return forced, "named with --recipe"
    scored = sorted(
        ((_fit(p, host_units, observed), name) for name, p in recipes.items()), key=lambda item: (-item[0][0], item[1])
    )
    (points, why), name = scored[0]
    if points == 0:
        raise CaptureError(
            "no shipped recipe fits this station (served name, unit, GPU, context length, tensor "
            f"parallel all differ from {', '.join(recipes)}); name one with --recipe"
        )
    runner_up = f"; next: {scored[1][1]} ({scored[1][0][0]} points)" if len(scored) > 1 else ""
    return name, f"the station {', '.join(why)} ({points} points{runner_up})"


def _host(loaded: golive_config.LoadedInventory, station: Station) -> Host:
    from golive.inventory.connection import connect

    spec = loaded.host_spec(station)
    if spec is None:  # a pair's other station without `host:` (connect(None) used to end in an AttributeError)
        raise CaptureError(f"station {station.name} has no `host:` in the inventory: add its testinfra host spec")
    profile = loaded.profile_of(station).profile
    connection = connect(spec, loaded.ssh_config, profile.host.connect_timeout_s, station.name)  # closed at exit
    problem = connection.unreachable()
    if problem:
        raise CaptureError(f"station {station.name}: cannot reach its host {hide_password(station.host)}: {problem}")
    return connection.host


def _units_present(host: Host, recipes: dict[str, Profile]) -> set[str]:
    from golive.inventory.station import UNIT_DIRS

    found = set()
    for profile in recipes.values():
        unit = profile.service.unit if profile.service else None
        if unit and any(host.file(f"{folder}/{unit}").exists for folder in UNIT_DIRS):
            found.add(unit)
    return found


# --- capture against the chosen recipe -------------------------------------------------------------------------------


class _Collector:
    def __init__(self, recipe: Profile, capture: Capture):
        self.recipe, self.capture = recipe, capture
        self.seen: set[str] = set()

    def add(self, section: str, key: str, value: object, source: str, said: str = "") -> None:
        if value is None or f"{section}.{key}" in self.seen:
            return  # the first source read wins (the host's flags before the endpoint's answer)
        self.seen.add(f"{section}.{key}")
        model = getattr(self.recipe, section, None)
        want = getattr(model, key, None) if model is not None else None
        if want is not None and _equal(want, value):
            self.capture.matched += 1
            return
        self.capture.values.append(Value(section, key, value, source, said))
        if want is not None:
            how = said or f"has {section}.{key} {_shown(value)}"
            self.capture.review.append(
                f"this station {how}; the recipe says {_shown(want)} — keep? ({section}.{key}, read from {source})"
            )


def _equal(want: object, got: object) -> bool:
    if isinstance(want, list):
        want = [w.model_dump(mode="json") if hasattr(w, "model_dump") else w for w in want]
    if isinstance(want, bool) or isinstance(got, bool):
        return want is got
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return float(want) == float(got)
    return want == got


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


def capture_flags(collect: _Collector, observed: Observed) -> None:
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
        shown = "" if isinstance(value, bool) else f" {_shown(value)}"
        collect.add("vllm", key, value, source, said=f"serves --{flag}{shown}")
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


def kv_capacity_tokens(info: dict) -> int | None:
    """KV cache capacity from `vllm:cache_config_info` labels, as the KV capacity check reads it."""
    tokens = info.get("kv_cache_size_tokens")
    if tokens in (None, "", "None") and info.get("num_gpu_blocks") not in (None, "", "None"):
        return int(info["num_gpu_blocks"]) * int(info.get("block_size") or 0)
    try:
        return int(str(tokens)) if tokens not in (None, "", "None") else None
    except ValueError:
        return None


def capture_endpoint(collect: _Collector, observed: Observed) -> None:
    if not observed.endpoint:
        return
    root = hide_password(observed.endpoint)
    source = f"GET {root}/v1/models"
    ids = [m.get("id") for m in observed.models if isinstance(m.get("id"), str)]
    if ids:
        name = collect.recipe.vllm.served_model_name
        served = name if name in ids else ids[0]
        collect.add("vllm", "served_model_name", served, source, said=f"serves the model as {served!r}")
        lengths = [m.get("max_model_len") for m in observed.models if m.get("id") == served]
        if lengths and isinstance(lengths[0], int):
            collect.add("vllm", "max_model_len", lengths[0], source, said=f"serves max_model_len {lengths[0]:,}")
    tokens = kv_capacity_tokens(observed.cache_info)
    floor = collect.recipe.endpoint.kv_cache_tokens_floor
    metrics = f"GET {root}/metrics vllm:cache_config_info"
    if tokens is not None and floor is not None and tokens < floor:
        # above the floor the recipe's floor stays: a capture never tightens a gate the recipe set
        collect.add("endpoint", "kv_cache_tokens_floor", tokens, metrics, said=f"holds {tokens:,} tokens of KV cache")
    elif tokens is not None:
        collect.capture.read_from.append(f"KV cache {tokens:,} tokens ({metrics}): at or above the recipe's floor")


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


def capture_host(collect: _Collector, host: Host, station: Station, observed: Observed) -> None:
    from golive.inventory.station import StationFacts

    recipe = collect.recipe
    service = recipe.service
    if service is None:
        collect.capture.read_from.append(f"host: the recipe {recipe.name} has no systemd unit; only GPUs read")
        unread = [
            k
            for k, v in (("image.digest", recipe.image.digest), ("checkpoint.path", recipe.checkpoint.path))
            if v is None
        ]
        if unread:
            collect.capture.cannot_keep.append(
                f"{' and '.join(unread)}: the recipe launches vLLM by a script golive does not read — set them by hand"
            )
        return
    facts = StationFacts(host, station, recipe)
    unit = facts.unit
    usource = (
        f"{unit.source} {service.unit}" if unit.source == "systemctl show" else f"{facts.unit_path or 'the unit file'}"
    )
    collect.add("service", "restart", unit.restart, usource, said=f"has Restart={unit.restart}")
    collect.add(
        "service", "restart_sec_s", unit.restart_sec_s, usource, said=f"has RestartSec={_shown(unit.restart_sec_s)}"
    )
    collect.add(
        "service",
        "start_limit_burst",
        unit.start_limit_burst,
        usource,
        said=f"has StartLimitBurst={unit.start_limit_burst}",
    )
    collect.add(
        "service",
        "start_limit_interval_s",
        unit.start_limit_interval_s,
        usource,
        said=f"has StartLimitIntervalSec={_shown(unit.start_limit_interval_s)}",
    )
    pre = [c.path for c in unit.exec_start_pre if c.path.startswith("/")]
    if pre:
        collect.add("service", "prestart", pre[0], f"ExecStartPre of {usource}", said=f"runs {pre[0]} before start")
    if unit.enabled not in (None, "enabled"):
        collect.capture.cannot_keep.append(
            f"{service.unit} is {unit.enabled} ({usource}); the recipe enables it "
            f"[000] — `systemctl enable {service.unit}`"
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
    restart = [v for v in run.values("--restart") if v not in (None, "no")]
    container = facts.container
    running = container if container is not None and container.running else None
    if restart or (container and container.restart_policy not in ("no", "")):
        policy = restart[0] if restart else container.restart_policy if container else ""
        collect.capture.cannot_keep.append(
            f"this station's docker run has --restart={policy}; the recipe says no docker restart policy: systemd "
            f"owns restarts so the prestart runs on every attempt [000] — no profile keeps this: remove it from "
            f"ExecStart of {service.unit}"
        )
    dram = str(recipe.numa.dram_node) if recipe.numa else None
    if dram is not None and dram in [(v or "").strip() for v in run.values("--cpuset-mems")]:
        collect.capture.cannot_keep.append(
            f"the container is confined to memory node {dram} (--cpuset-mems); CUDA "
            f"init fails with Error 802 [000] — remove --cpuset-mems"
        )
    image_source = f"ExecStart of {service.unit}"
    collect.add("image", "repository", run.image.repository, image_source, said=f"runs {run.image.repository}")
    if run.image.digest:
        collect.add("image", "digest", run.image.digest, image_source, said=f"pins {run.image.digest}")
    else:
        collect.capture.cannot_keep.append(
            f"ExecStart of {service.unit} runs {run.image} (a tag, no digest); the "
            f"recipe pins the image by digest [000] — pin the digest you validated"
        )
    if running:
        image = facts.image(running.image_id)
        ask = f"docker image inspect {running.image_id[:19]}…"
        collect.add(
            "image", "architecture", image.architecture or None, ask, said=f"runs an {image.architecture} image"
        )
        if run.image.digest and run.image.digest not in image.digests():
            collect.capture.cannot_keep.append(
                f"container {running.name} runs {sorted(image.digests()) or 'an image with no digest'}, not the "
                f"{run.image.digest} its unit pins — restart it (`systemctl restart {service.unit}`) before capturing"
            )
    observed.flags = parse_serve_args(running.args if running else run.args)
    observed.flags_source = f"docker inspect {running.name} Args" if running else f"ExecStart of {service.unit}"
    capture_flags(collect, observed)
    model = observed.flags.get("model")
    model = model if isinstance(model, str) else None
    if model:
        path = _checkpoint_on_host(model, [v for v in run.values("-v", "--volume") if v])
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
    saved = (
        [c for c in facts.prestart.commands if service.container in c.docker_targets("logs")]
        if facts.prestart_text is not None
        else []
    )
    targets = [t for c in saved for op, t in c.redirects if op in (">", ">>", ">|", "&>")]
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


def capture_checkpoint(collect: _Collector, host: Host, station: Station, profile: Profile) -> None:
    from golive.inventory.station import StationFacts

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


def _pair(stations: list[Station]) -> bool:
    return len(stations) == 2 and {s.role for s in stations} == {"a", "b"} and all(s.host for s in stations)


def capture_cluster(collect: _Collector, loaded: golive_config.LoadedInventory, stations: list[Station]) -> None:
    """NCCL version from each station's NCCL log and the rails' addresses and MTU, read the way the cluster checks
    read them (golive.inventory.cluster.ClusterFacts). Rails are written whole when any address differs: a list
    replaces."""
    from golive.inventory.cluster import ClusterFacts
    from golive.inventory.station import StationFacts

    recipe = collect.recipe
    cluster = recipe.cluster
    assert cluster is not None
    facts = {s.role: ClusterFacts(StationFacts(_host(loaded, s), s, recipe), cluster) for s in stations}
    names = {s.role: s.name for s in stations}
    versions = {}
    for role, cf in facts.items():
        try:
            versions[role] = cf.nccl_log.version
        except FactError as exc:
            collect.capture.cannot_keep.append(f"NCCL version not read on {names[role]}: {exc}")
    if versions and len(set(versions.values())) == 1 and None not in versions.values():
        version = versions["a"] if "a" in versions else next(iter(versions.values()))
        collect.add(
            "cluster",
            "nccl_version",
            version,
            f"`NCCL version` in {cluster.nccl_log} on {' and '.join(names[r] for r in sorted(versions))}",
            said=f"loads NCCL {version}",
        )
    elif len(versions) == 2:
        collect.capture.cannot_keep.append(
            f"the stations load different NCCL versions ({versions['a']} on "
            f"{names['a']}, {versions['b']} on {names['b']}): both must load the same"
        )
    rails, mtus, missing = [], set(), []
    for rail in cluster.rails:
        addresses = {}
        for role, cf in facts.items():
            interface = cf.interfaces.get(rail.interface)
            if interface is None or not interface.ipv4:
                missing.append(f"{rail.interface} on {names[role]}")
                continue
            addresses[role] = str(interface.ipv4[0].ip)
            mtus.add(interface.mtu)
        rails.append(rail.model_dump(mode="json") | {"addresses": addresses})
    if missing:
        collect.capture.cannot_keep.append(
            f"rail interface(s) missing or without an IPv4 address: "
            f"{', '.join(missing)} — the recipe's rails are not this station's"
        )
        return
    collect.add(
        "cluster",
        "rails",
        rails,
        "`ip -j addr show` on both stations",
        said="has rail addresses "
        + ", ".join(f"{r['interface']} {r['addresses']['a']}/{r['addresses']['b']}" for r in rails),
    )
    if len(mtus) == 1:
        mtu = mtus.pop()
        collect.add("cluster", "mtu", mtu, "`ip -j addr show` on both stations", said=f"runs its rails at MTU {mtu}")


def capture_gpus(collect: _Collector, host: Host, station: Station, observed: Observed) -> None:
    recipe = collect.recipe
    if recipe.gpu.per_station == 0 or not observed.gpu_names:
        return
    source = "nvidia-smi --query-gpu=index,name,…"
    matching = [n for n in observed.gpu_names if recipe.gpu.name_contains.lower() in n.lower()]
    if not matching:
        name = observed.gpu_names[0].removeprefix("NVIDIA ").strip()
        collect.add("gpu", "name_contains", name, source, said=f"has {observed.gpu_names[0]} GPUs")
        matching = [n for n in observed.gpu_names if name.lower() in n.lower()]
    collect.add("gpu", "per_station", len(matching), source, said=f"has {len(matching)} serving GPU(s)")


def _gpu_names(host: Host, station: Station, any_recipe: Profile) -> list[str]:
    from golive.inventory.station import StationFacts

    # the query the GPU checks run (StationFacts.gpus), so a recorded station answers it too
    return [g["name"] for g in StationFacts(host, station, any_recipe).gpus]


def capture(inventory: Path, station_name: str | None = None, recipe: str | None = None) -> Capture:
    """Read the station and compare it with the closest shipped recipe. What a CaptureError says is scrubbed of the
    inventory's secrets (golive.core.secrets): it quotes exception text."""
    try:
        loaded = golive_config.load_inventory(inventory)
    except golive_config.ConfigError as exc:
        raise CaptureError(scrub(str(exc)), EXIT_USAGE) from None
    secrets = station_secrets(loaded.inventory.stations, api_key_of)
    try:
        result = _capture(loaded, station_name, recipe)
    except CaptureError as exc:
        raise CaptureError(scrub(str(exc), secrets), exc.code) from None
    result.secrets = secrets
    return result


def _capture(loaded: golive_config.LoadedInventory, station_name: str | None, recipe: str | None) -> Capture:
    stations = loaded.inventory.stations
    if station_name:
        chosen = [s for s in stations if s.name == station_name]
        if not chosen:
            raise CaptureError(
                f"--station {station_name}: the inventory has {', '.join(s.name for s in stations)}", EXIT_USAGE
            )
        station = chosen[0]
    elif len(stations) == 1:
        station = stations[0]
    elif _pair(stations):
        station = next(s for s in stations if s.role == "a")
    else:
        raise CaptureError(
            f"the inventory has {len(stations)} stations: name one with --station "
            f"({', '.join(s.name for s in stations)})",
            EXIT_USAGE,
        )
    recipes = {name: golive_config.load_profile(name).profile for name in golive_config.shipped_profiles()}
    if recipe and recipe not in recipes:  # before the station is read: a usage error, said at once
        raise CaptureError(f"--recipe {recipe}: not a shipped recipe ({', '.join(recipes)})", EXIT_USAGE)
    observed = Observed(pair=_pair(stations))
    read_endpoint(loaded, station, observed)
    host = _host(loaded, station) if station.host else None
    units: set[str] = set()
    if host is not None:
        units = _units_present(host, recipes)
        if host.exists("nvidia-smi"):
            observed.gpu_names = _gpu_names(host, station, next(iter(recipes.values())))
    name, why = choose_recipe(recipes, units, observed, recipe)
    result = Capture(station=station.name, recipe=name, why=why)
    result.read_from = (
        [f"station {station.name}"]
        + ([f"host {hide_password(station.host)}"] if station.host else [])
        + ([f"endpoint {hide_password(observed.endpoint)}"] if observed.endpoint else [])
    )
    collect = _Collector(recipes[name], result)
    try:
        if host is not None:
            capture_host(collect, host, station, observed)
            capture_gpus(collect, host, station, observed)
        if observed.pair and recipes[name].cluster is not None:
            capture_cluster(collect, loaded, stations)
        capture_endpoint(collect, observed)
    except FactError as exc:
        raise CaptureError(f"station {station.name}: {exc}") from None
    return result


# --- writing ---------------------------------------------------------------------------------------------------------


def yaml_scalar(value: object) -> str:
    """A scalar as YAML reads it back: JSON strings are YAML double-quoted scalars."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value)  # JSON is YAML's flow style
    return json.dumps(str(value))


def _comment(text: str, secrets: list[str]) -> str:
    return printable(scrub(text.replace("\n", " "), secrets))


def render(result: Capture, when: datetime | None = None) -> str:
    when = when or datetime.now(UTC)
    lines = [
        f"# Site profile captured by `golive profile capture` from station {result.station} on "
        f"{when:%Y-%m-%d %H:%M} UTC.",
        f"# Read from: {_comment('; '.join(result.read_from), result.secrets)}.",
        f"# Extends {result.recipe}: {_comment(result.why, result.secrets)}.",
        f"# {result.matched} captured value(s) equal the recipe's and are not repeated here.",
        "# Secrets (API keys, passwords in host specs) are never captured.",
    ]
    if result.review or result.cannot_keep:
        lines.append("# REVIEW before go-live:")
        lines += [f"#   - {_comment(item, result.secrets)}" for item in result.review + result.cannot_keep]
    lines.append(f"extends: {result.recipe}")
    by_section: dict[str, list[Value]] = {}
    for value in result.values:
        by_section.setdefault(value.section, []).append(value)
    for section in sorted(by_section, key=lambda s: SECTION_ORDER.index(s) if s in SECTION_ORDER else 99):
        lines.append(f"{section}:")
        for value in by_section[section]:
            lines.append(f"  {value.key}: {yaml_scalar(value.value)}  # {_comment(value.source, result.secrets)}")
    return "\n".join(lines) + "\n"


def cmd_capture(ns: argparse.Namespace) -> int:
    """`golive profile capture INVENTORY [--station NAME] [--recipe NAME] -o site.yaml`."""
    if not ns.name:
        print("golive: profile capture needs an inventory file", file=sys.stderr)
        return EXIT_USAGE
    if not ns.output:
        print("golive: profile capture needs -o FILE (where to write the site profile)", file=sys.stderr)
        return EXIT_USAGE
    out = Path(ns.output)
    if out.is_dir() or not out.parent.is_dir():  # before the station is read: a usage error, said at once
        why = "is a folder" if out.is_dir() else f"is in {out.parent}, which is not a folder that exists"
        print(
            f"golive: profile capture -o {printable(str(out))}: {why}; give the site profile's file name",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        result = capture(Path(ns.name), ns.station, ns.recipe)
    except CaptureError as exc:
        print(f"golive: {printable(scrub(str(exc)))}", file=sys.stderr)
        return exc.code
    try:
        out.write_text(render(result))
    except OSError as exc:
        print(f"golive: profile capture -o {printable(str(out))}: cannot write it ({exc.strerror})", file=sys.stderr)
        return EXIT_USAGE
    try:  # what we wrote must load as golive loads it
        golive_config.load_profile(out.resolve())
    except golive_config.ConfigError as exc:
        print(f"golive: the captured profile does not load ({exc}); please report this", file=sys.stderr)
        return EXIT_INCOMPLETE
    print(f"golive: wrote {out} (extends {result.recipe}: {printable(scrub(result.why, result.secrets))})")
    print(f"golive: {len(result.values)} value(s) written, {result.matched} equal to the recipe")
    if result.review or result.cannot_keep:
        print("Review before go-live:")
        for item in result.review:
            print(f"  - {printable(scrub(item, result.secrets))}")
        for item in result.cannot_keep:
            print(f"  - {printable(scrub(item, result.secrets))}")
    else:
        print("Review: nothing differs from the recipe.")
    return EXIT_GO
