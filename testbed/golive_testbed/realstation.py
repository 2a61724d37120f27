"""A real station on this machine: `golive station up|down|status`.

    golive station up                  # prints the inventory it wrote; then: golive run INVENTORY -m host
    golive station down

systemd 252 as PID 1 in systemd-nspawn (a debootstrap minbase bookworm root file system, cached as a tarball and
untarred per station), sshd inside on a loopback port with a key made here, the recipe's unit, drop-in and prestart;
a real dockerd (its own data root, exec root and socket, no bridge and no iptables: containers use the host's
network) whose socket is bound into the station, a real registry on loopback so the serving image is pinned by the
RepoDigest it gives, and vLLM's CPU build serving golive's reference model in the container systemd starts. `up`
writes an inventory and site profile for golive (golive_testbed.realstation_files); `down` powers the station off
(SIGRTMIN+4 to nspawn), stops dockerd and the registry, undoes every mount and removes the scratch directory (the
cached tarball stays). Needs root and the packages in APT_LINE; /work/shared/notes/real-station.md has the facts.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

from golive_testbed.realstation_host import (
    DOCKER,
    NSPAWN_RUN,
    NSPAWN_RUN_MARK,
    STATE_DIR,
    Record,
    StationError,
    alive,
    docker,
    down,
    free_port,
    http_status,
    is_mountpoint,
    leftovers,
    load,
    run,
    save,
    serving_now,
    spawn,
    ssh,
    tail,
    wait_for,
    wait_serving,
)
from golive_testbed.realstation_variants import VARIANTS, apply_variant, revert_variant

if TYPE_CHECKING:
    from typing import TypeAlias

    Subcommands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]  # as golive_testbed.commands has it

__all__ = ["Record", "StationError", "down", "leftovers", "load", "ssh", "up", "apply_variant", "revert_variant"]

PACKAGES = "docker.io systemd-container debootstrap docker-registry openssh-client"
APT_LINE = f"apt-get install -y {PACKAGES}"
# the program each package gives (the package's own 20.10 CLI: a newer one may be first on PATH)
TOOLS = {
    "dockerd": "docker.io",
    "/usr/bin/docker": "docker.io",
    "systemd-nspawn": "systemd-container",
    "debootstrap": "debootstrap",
    "docker-registry": "docker-registry",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
    "tar": "tar",
}
SUITE = "bookworm"
INCLUDE = ("systemd", "dbus", "openssh-server", "iproute2", "procps")
ROOTFS_BUILD = "1"  # bump when the root file system's build changes: a new tarball name, the old one is not used
IMAGE_BUILD = "4"  # bump when the serving image's file system changes
CACHE_DIR = Path(os.environ.get("GOLIVE_TESTBED_CACHE") or Path.home() / ".cache/golive-testbed")
SCRATCH_BASE = Path(os.environ.get("GOLIVE_STATION_SCRATCH") or "/var/tmp")


# --- what this machine must have ---------------------------------------------------------------------------------


def preflight() -> None:
    """One line naming what is missing: root, a package (with the apt-get line), vLLM in this Python."""
    if os.geteuid() != 0:
        raise StationError(
            "a real station needs root (systemd-nspawn, dockerd, mounts): run `golive station up` as root"
        )
    missing = sorted(
        {
            pkg
            for tool, pkg in TOOLS.items()
            if not (Path(tool).is_file() if tool.startswith("/") else shutil.which(tool))
        }
    )
    if missing:
        raise StationError(f"missing package(s) {', '.join(missing)}: {APT_LINE}")
    if find_spec("vllm") is None or find_spec("numpy") is None:
        raise StationError(
            "the station serves vLLM's CPU build from this Python, which has no vllm: "
            "pip install -e './testbed[reference]'"
        )


def apt_mirror() -> str:
    """The Debian mirror this machine's apt uses for bookworm (sources.list or a deb822 .sources file)."""
    candidates: list[str] = []
    lists = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.list"))]
    for path in lists:
        for line in _lines(path):
            words = [w for w in line.split() if not w.startswith("[")]
            if len(words) >= 3 and words[0] == "deb" and words[2] == SUITE:
                candidates.append(words[1])
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for stanza in "\n".join(_lines(path)).split("\n\n"):
            fields = dict(line.split(":", 1) for line in stanza.splitlines() if ":" in line and line[0] != " ")
            fields = {k.strip().lower(): v.strip() for k, v in fields.items()}
            if "deb" in fields.get("types", "").split() and SUITE in fields.get("suites", "").split():
                candidates += fields.get("uris", "").split()
    if not candidates:
        raise StationError(
            f"no apt mirror for {SUITE} in /etc/apt/sources.list or /etc/apt/sources.list.d: "
            f"debootstrap needs one (this machine's packages come from it)"
        )
    return candidates[0]


def _lines(path: Path) -> list[str]:
    try:
        text = path.read_text()
    except OSError:
        return []
    return [line.rstrip() for line in text.splitlines() if not line.lstrip().startswith("#")]


# --- the cached root file system -------------------------------------------------------------------------------------


def rootfs_tarball(cache_dir: Path = CACHE_DIR, say: Callable[[str], None] = print) -> tuple[Path, bool]:
    """The minbase bookworm root file system as a tarball in cache_dir, built with debootstrap when absent
    (~1.5-3 min); returns (tarball, whether it was built now)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    tarball = cache_dir / f"{SUITE}-minbase-{'-'.join(INCLUDE)}-v{ROOTFS_BUILD}.tar"
    with _locked(cache_dir / ".lock"):
        if tarball.is_file():
            return tarball, False
        mirror = apt_mirror()
        say(
            f"building the station's root file system (debootstrap {SUITE} minbase from {mirror}; once, then cached "
            f"as {tarball})"
        )
        build = Path(tempfile.mkdtemp(prefix=".build-", dir=cache_dir))
        log = cache_dir / "debootstrap.log"
        try:
            with open(log, "wb") as out:
                done = subprocess.run(
                    [
                        "debootstrap",
                        "--variant=minbase",
                        f"--include={','.join(INCLUDE)}",
                        SUITE,
                        str(build / "root"),
                        mirror,
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    check=False,
                )
            if done.returncode != 0:
                last = (tail(log, 1) or "").strip()
                raise StationError(
                    f"debootstrap {SUITE} from {mirror} failed (exit {done.returncode}): {last} (log {log})"
                )
            for key in (build / "root/etc/ssh").glob("ssh_host_*"):
                key.unlink()  # each station gets its own host key
            partial = tarball.with_name(f".{tarball.name}.partial")
            run(["tar", "--numeric-owner", "-C", str(build / "root"), "-cf", str(partial), "."])
            partial.replace(tarball)
        finally:
            shutil.rmtree(build, ignore_errors=True)
    return tarball, True


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def serving_image_tar(rootfs: Path, cache_dir: Path = CACHE_DIR) -> Path:
    """The serving image's file system (realstation_files.image_tarball), cached per root file system and venv: ldd
    over every extension module takes ~20 s."""
    from golive_testbed import realstation_files as files

    key = f"{rootfs.name}|{Path(sys.prefix).resolve()}|{Path(sys.base_prefix).resolve()}|{IMAGE_BUILD}"
    tar = cache_dir / f"serve-image-{uuid.uuid5(uuid.NAMESPACE_URL, key).hex[:12]}.tar"
    with _locked(cache_dir / ".lock"):
        if not tar.is_file():
            files.image_tarball(tar, rootfs)
    return tar


# --- up --------------------------------------------------------------------------------------------------------------


def up(
    name: str = "station",
    variant: str = "healthy",
    state_dir: Path = STATE_DIR,
    cache_dir: Path = CACHE_DIR,
    ssh_port: int | None = None,
    serve_port: int | None = None,
    registry_port: int | None = None,
    timeout: float = 480,
    say: Callable[[str], None] = print,
) -> Record:
    """Bring station `name` up and wait until it serves; on any failure everything started is undone."""
    if variant not in VARIANTS:
        raise StationError(f"unknown variant '{variant}'; the variants are: {', '.join(VARIANTS)}")
    preflight()
    old = load(name, state_dir)
    if old is not None:
        if alive(old.pids.get("nspawn"), old.scratch):
            raise StationError(
                f"station {name} is already up ({old.inventory}): `golive station down --name {name}` first"
            )
        down(name, state_dir)  # what a crashed `up` or a reboot left behind
    t0 = time.monotonic()
    tarball, built = rootfs_tarball(cache_dir, say)
    timings = {"rootfs_s": time.monotonic() - t0, "rootfs_built": float(built)}
    SCRATCH_BASE.mkdir(parents=True, exist_ok=True)
    record = Record(name, tempfile.mkdtemp(prefix=f"golive-station-{name}-", dir=SCRATCH_BASE), variant)
    record.ssh_port, record.serve_port, record.registry_port = (
        p or free_port() for p in (ssh_port, serve_port, registry_port)
    )
    record.timings = timings
    save(record, state_dir)
    try:
        step = time.monotonic()
        _start_engine(record, state_dir)
        _start_registry(record, state_dir)
        record.timings["engine_s"] = time.monotonic() - step
        step = time.monotonic()
        _build_image(record, tarball, cache_dir)
        record.timings["image_s"] = time.monotonic() - step
        step = time.monotonic()
        _make_root(record, tarball)
        save(record, state_dir)
        record.timings["root_s"] = time.monotonic() - step
        step = time.monotonic()
        _boot(record, state_dir)
        record.timings["boot_to_ssh_s"] = time.monotonic() - step
        step = time.monotonic()
        wait_serving(record, t0 + timeout)
        record.timings["serving_s"] = time.monotonic() - step
        if variant != "healthy":
            apply_variant(record, variant)
        record.timings["up_s"] = time.monotonic() - t0
        save(record, state_dir)
    except BaseException as exc:
        kept = _keep_logs(record, state_dir)
        with contextlib.suppress(Exception):
            down(name, state_dir)
        if isinstance(exc, StationError) and kept:
            raise StationError(f"{exc} [logs kept in {kept}]") from None
        raise
    return record


def _keep_logs(record: Record, state_dir: Path) -> Path | None:
    """A failed `up` removes the station; its daemons' logs (and the journal's tail) stay for reading."""
    logs = [p for p in record.dir.glob("*.log")]
    if not logs:
        return None
    keep = Path(state_dir) / f"real-station-{record.name}-logs"
    shutil.rmtree(keep, ignore_errors=True)
    keep.mkdir(parents=True)
    for log in logs:
        shutil.copy(log, keep / log.name)
    if alive(record.pids.get("nspawn"), record.scratch):
        with contextlib.suppress(Exception):
            journal = ssh(record, "journalctl -b --no-pager -n 300", check=False, timeout=20)
            (keep / "journal.log").write_text(journal.stdout)
    return keep


def _start_engine(record: Record, state_dir: Path) -> None:
    s = record.dir
    (s / "daemon.json").write_text("{}\n")  # not the machine's /etc/docker/daemon.json
    spawn(
        record,
        state_dir,
        "dockerd",
        [
            "dockerd",
            "--config-file",
            str(s / "daemon.json"),
            "--data-root",
            str(s / "docker"),
            "--exec-root",
            str(s / "dx"),
            "-H",
            f"unix://{record.docker_sock}",
            "--pidfile",
            str(s / "docker.pid"),
            "--bridge=none",
            "--iptables=false",
            "--ip-masq=false",
        ],
    )
    wait_for(
        lambda: record.docker_sock.exists() and docker(record, "version", check=False, timeout=10).returncode == 0,
        30,
        "dockerd did not answer on its socket",
        record,
        "dockerd",
    )


def _start_registry(record: Record, state_dir: Path) -> None:
    config = record.dir / "registry.yml"
    config.write_text(
        f"version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n"
        f"storage:\n  filesystem:\n    rootdirectory: {record.dir / 'registry'}\n"
        f"http:\n  addr: 127.0.0.1:{record.registry_port}\n  secret: {secrets.token_hex(16)}\n"
    )
    spawn(record, state_dir, "registry", ["docker-registry", "serve", str(config)])
    wait_for(
        lambda: http_status(f"http://127.0.0.1:{record.registry_port}/v2/") == 200,
        20,
        f"the registry did not answer on 127.0.0.1:{record.registry_port}",
        record,
        "registry",
    )


def _build_image(record: Record, rootfs: Path, cache_dir: Path) -> None:
    """Import the image, push it to the station's registry, keep the digest the registry gave (RepoDigests)."""
    from golive_testbed import realstation_files as files

    tar = serving_image_tar(rootfs, cache_dir)
    changes = [
        f"ENTRYPOINT {json.dumps(files.ENTRYPOINT)}",
        *(f"ENV {k}={v}" for k, v in files.IMAGE_ENV.items()),
        "LABEL org.golive.testbed=real-station",
    ]
    repository = f"127.0.0.1:{record.registry_port}/{files.IMAGE_NAME}"
    docker(record, "import", *(a for c in changes for a in ("--change", c)), str(tar), f"{repository}:cpu")
    docker(record, "push", f"{repository}:cpu", timeout=300)
    digests = json.loads(
        docker(record, "image", "inspect", "--format", "{{json .RepoDigests}}", f"{repository}:cpu").stdout
    )
    pinned = [d for d in digests if d.startswith(f"{repository}@sha256:")]
    if not pinned:
        raise StationError(f"the pushed image has no RepoDigest for {repository}: {digests}")
    record.image, record.digest = pinned[0], pinned[0].split("@", 1)[1]


def _make_root(record: Record, tarball: Path) -> None:
    """Untar the cached root file system and write the station into it: unit, drop-in, prestart, stand-in
    docker.service, sshd, keys, the docker CLI, the checkpoint; and golive's inventory and site profile."""
    from golive_testbed import realstation_files as files

    root, s = record.root, record.dir
    root.mkdir()
    run(["tar", "--numeric-owner", "-C", str(root), "-xpf", str(tarball)])
    record.machine_id = uuid.uuid4().hex
    files.write_station_files(
        root,
        image=record.image,
        serve_port=record.serve_port,
        ssh_port=record.ssh_port,
        machine_id=record.machine_id,
        hostname=f"golive-{record.name}",
    )
    shutil.copy2(DOCKER, root / "usr/bin/docker")
    run(
        [
            "ssh-keygen",
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            f"golive-{record.name}",
            "-f",
            str(root / "etc/ssh/ssh_host_ed25519_key"),
        ]
    )
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "golive-testbed", "-f", str(s / "client_key")])
    ssh_dir = root / "root/.ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    shutil.copy(s / "client_key.pub", ssh_dir / "authorized_keys")
    host_key = (root / "etc/ssh/ssh_host_ed25519_key.pub").read_text().split()
    (s / "known_hosts").write_text(f"[127.0.0.1]:{record.ssh_port} {host_key[0]} {host_key[1]}\n")
    record.ssh_config.write_text(
        files.SSH_CONFIG.format(
            name=record.name,
            path=record.ssh_config,
            port=record.ssh_port,
            key=s / "client_key",
            known_hosts=s / "known_hosts",
        )
    )
    size = files.write_checkpoint(root / files.CHECKPOINT.lstrip("/"))
    (s / "site-profile.yaml").write_text(
        files.site_profile(record.image.split("@")[0], record.digest, record.serve_port, size)
    )
    record.inventory.write_text(files.inventory(record.name, record.ssh_port, record.serve_port))


def _boot(record: Record, state_dir: Path) -> None:
    if not is_mountpoint(NSPAWN_RUN):
        NSPAWN_RUN.mkdir(parents=True, exist_ok=True)
        run(["mount", "-t", "tmpfs", "tmpfs", str(NSPAWN_RUN)])
        NSPAWN_RUN_MARK.write_text(f"mounted by golive's testbed for station {record.name}\n")
        record.mounted_nspawn_run = True
        save(record, state_dir)
    spawn(
        record,
        state_dir,
        "nspawn",
        [
            "systemd-nspawn",
            "-D",
            str(record.root),
            "--boot",
            "--register=no",
            "--keep-unit",
            f"--machine=golive-{record.name}",
            "--console=read-only",
            "--kill-signal=SIGRTMIN+4",
            f"--bind={record.docker_sock}:/run/docker.sock",
        ],
        env={"SYSTEMD_NSPAWN_API_VFS_WRITABLE": "1"},
    )
    wait_for(
        lambda: ssh(record, "true", timeout=10, check=False).returncode == 0,
        60,
        f"sshd in the station did not accept the key on 127.0.0.1:{record.ssh_port}",
        record,
        "nspawn",
    )


# --- `golive station` --------------------------------------------------------------------------------------------


def add_station(sub: Subcommands) -> None:
    """Entry point (group golive.commands): the `station` subcommand."""
    variants = "\n".join(f"  {name:<24} {v.what}" for name, v in VARIANTS.items())
    cmd = sub.add_parser(
        "station",
        help="bring a real station up or down (systemd, Docker, registry, sshd, vLLM on CPU; root)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="A real station on this machine: systemd 252 as PID 1 in systemd-nspawn, a real Docker engine "
        "and registry, sshd on loopback, the recipe's unit with vLLM's CPU build serving the reference "
        f"model. `up` writes an inventory for `golive run`. Needs root and: {APT_LINE}",
        epilog=f"variants (--variant):\n{variants}",
    )
    cmd.add_argument("action", choices=["up", "down", "status"])
    cmd.add_argument("--name", default="station", help="the station's name (default: %(default)s)")
    cmd.add_argument("--variant", default="healthy", choices=list(VARIANTS), help="up: how the station is (mis)set")
    cmd.add_argument("--ssh-port", type=int, help="up: sshd's port on 127.0.0.1 (default: a free one)")
    cmd.add_argument("--serve-port", type=int, help="up: vLLM's port on 127.0.0.1 (default: a free one)")
    cmd.add_argument("--timeout", type=float, default=480, help="up: seconds until it serves (default: %(default)s)")
    cmd.add_argument(
        "--state-dir",
        default=str(STATE_DIR),
        metavar="DIR",
        help="where stations are recorded (default: GOLIVE_STATE_DIR, else ~/.cache/golive)",
    )
    cmd.add_argument(
        "--cache-dir",
        default=str(CACHE_DIR),
        metavar="DIR",
        help="the root file system's tarball (default: GOLIVE_TESTBED_CACHE, else ~/.cache/golive-testbed)",
    )
    cmd.set_defaults(func=cmd_station)


def cmd_station(ns: argparse.Namespace, extra: list[str]) -> int:
    from golive.cli import fail

    state = Path(ns.state_dir)
    try:
        if ns.action == "up":
            record = up(
                ns.name,
                ns.variant,
                state,
                Path(ns.cache_dir),
                ssh_port=ns.ssh_port,
                serve_port=ns.serve_port,
                timeout=ns.timeout,
                say=lambda text: print(f"golive: {text}", file=sys.stderr, flush=True),
            )
            t = record.timings
            print(
                f"golive: station {record.name} ({record.variant}) up in {t['up_s']:.0f} s (root file system "
                f"{'built' if t['rootfs_built'] else 'from the cached tarball'} {t['rootfs_s']:.0f} s, engine and "
                f"registry {t['engine_s']:.0f} s, image {t['image_s']:.0f} s, boot to ssh {t['boot_to_ssh_s']:.0f} "
                f"s, vLLM serving {t['serving_s']:.0f} s)"
            )
            print(f"  host      {record.host}  (ssh -F {record.ssh_config} -p {record.ssh_port} 127.0.0.1)")
            print(f"  endpoint  {record.endpoint}")
            print(f"  image     {record.image}")
            print(f"  inventory {record.inventory}  (golive run {record.inventory} -m host)")
        elif ns.action == "down":
            started = time.monotonic()
            if down(ns.name, state):
                print(f"golive: station {ns.name} down in {time.monotonic() - started:.0f} s")
            else:
                print(f"golive: no station {ns.name} was up (none recorded in {state}); nothing to stop")
        else:
            found = load(ns.name, state)
            if found is None:
                print(f"golive: no station {ns.name} (none recorded in {state})")
                return 3
            running = {label: alive(pid, found.scratch) for label, pid in found.pids.items()}
            serving = serving_now(found)
            print(
                f"golive: station {found.name} ({found.variant}): "
                + ", ".join(f"{label} {'running' if up_ else 'stopped'}" for label, up_ in running.items())
                + f", vLLM {'serving' if serving else 'not serving'} at {found.endpoint}; "
                f"inventory {found.inventory}"
            )
            return 0 if serving and all(running.values()) else 3
    except StationError as exc:
        return fail(f"station {ns.name}: {exc}", code=1)
    return 0
