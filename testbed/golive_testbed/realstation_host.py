"""The real station's side of this machine: its record, its daemons, commands into it, and `down`, which leaves nothing.

For golive_testbed.realstation: its record, the daemons it starts and how they are stopped, commands into the
station, and `down`, which leaves nothing behind: the station powered off
(SIGRTMIN+4 to its systemd), the serving container removed, dockerd and the registry stopped, every mount under the
scratch directory undone, the nspawn runtime tmpfs unmounted when this station mounted it and no other uses it, the
scratch directory removed. Processes are found by their id and checked against the station (their command line names
its scratch directory; the station's systemd carries its machine id), never by name.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

DOCKER = "/usr/bin/docker"
STATE_DIR = Path(os.environ.get("GOLIVE_STATE_DIR") or Path.home() / ".cache/golive")
NSPAWN_RUN = Path("/run/systemd/nspawn")  # nspawn wants it; where PID 1 is not systemd, a tmpfs here (the note)
NSPAWN_RUN_MARK = NSPAWN_RUN / ".golive-testbed-tmpfs"  # in the tmpfs a station mounted: any station's down may take it


class StationError(RuntimeError):
    """The station cannot come up (or go down) here; str() is one line saying what to do."""


@dataclass
class Record:
    """One station, as `up` leaves it and `down` reads it (STATE_DIR/real-station-NAME.json)."""

    name: str
    scratch: str
    variant: str = "healthy"
    ssh_port: int = 0
    serve_port: int = 0
    registry_port: int = 0
    pids: dict[str, int] = field(default_factory=dict)  # dockerd, registry, nspawn
    mounted_nspawn_run: bool = False
    image: str = ""
    digest: str = ""
    machine_id: str = ""  # the station's /etc/machine-id: nspawn gives its init container_uuid=<this>
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def dir(self) -> Path:
        return Path(self.scratch)

    @property
    def root(self) -> Path:
        return self.dir / "root"

    @property
    def docker_sock(self) -> Path:
        return self.dir / "docker.sock"

    @property
    def inventory(self) -> Path:
        return self.dir / "inventory.yaml"

    @property
    def ssh_config(self) -> Path:
        return self.dir / "ssh_config"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.serve_port}/v1"

    @property
    def host(self) -> str:
        return f"ssh://root@127.0.0.1:{self.ssh_port}"


def _record_path(state_dir: Path, name: str) -> Path:
    return Path(state_dir) / f"real-station-{name}.json"


def save(record: Record, state_dir: Path) -> None:
    path = _record_path(state_dir, record.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(record), indent=2) + "\n")


def load(name: str, state_dir: Path = STATE_DIR) -> Record | None:
    try:
        return Record(**json.loads(_record_path(state_dir, name).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_STARTED: dict[int, subprocess.Popen[bytes]] = {}  # the daemons this process started (their exit is seen at once)


def spawn(record: Record, state_dir: Path, label: str, command: list[str], env: dict[str, str] | None = None) -> int:
    """Start a daemon in its own session, its output in SCRATCH/LABEL.log; its pid is recorded at once."""
    with open(record.dir / f"{label}.log", "wb") as log:
        proc = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    record.pids[label] = proc.pid
    _STARTED[proc.pid] = proc
    save(record, state_dir)
    return proc.pid


def docker(record: Record, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The package's 20.10 CLI against this station's engine (its own client config, not ~/.docker)."""
    env = {**os.environ, "DOCKER_CONFIG": str(record.dir / "docker-cli")}
    done = subprocess.run(
        [DOCKER, "-H", f"unix://{record.docker_sock}", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    if check and done.returncode != 0:
        raise StationError(
            f"docker {' '.join(args[:3])} failed (exit {done.returncode}): "
            f"{(done.stderr or done.stdout).strip().splitlines()[-1:] or ''}"
        )
    return done


def ssh(
    record: Record, command: str, *, timeout: float = 60, check: bool = True, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a command in the station over its sshd, with the ssh_config `up` wrote."""
    done = subprocess.run(
        [
            "ssh",
            "-F",
            str(record.ssh_config),
            "-p",
            str(record.ssh_port),
            "-o",
            "ConnectTimeout=5",
            "127.0.0.1",
            command,
        ],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and done.returncode != 0:
        raise StationError(
            f"`{command[:80]}` in station {record.name} failed (exit {done.returncode}): "
            f"{(done.stderr or done.stdout).strip()[-300:]}"
        )
    return done


def down(name: str = "station", state_dir: Path = STATE_DIR, timeout: float = 60) -> bool:
    """Power the station off, stop its engine and registry, undo its mounts, remove its scratch directory; False
    when none was recorded. What the station left (a process, a mount) is stopped by its id, never by name."""
    record = load(name, state_dir)
    if record is None:
        return False
    scratch = record.scratch
    _power_off(record, timeout)
    if record.docker_sock.exists() and alive(record.pids.get("dockerd"), scratch):
        ids = docker(record, "ps", "-aq", check=False).stdout.split()
        if ids:
            docker(record, "rm", "-f", *ids, check=False)
    for label in ("nspawn", "dockerd", "registry"):
        pid = record.pids.get(label)
        if alive(pid, scratch) and pid is not None:
            _stop(pid, scratch, 30)
    for pid in _processes_under(scratch) + _station_inits(record):  # containerd and its shims if dockerd died
        with contextlib.suppress(ProcessLookupError):  # without them; an init nspawn lost
            os.kill(pid, signal.SIGKILL)
    for pid in _processes_under(scratch):
        _reap_wait(pid, scratch, 5)
    deadline = time.monotonic() + 10
    while _station_inits(record) and time.monotonic() < deadline:
        time.sleep(0.2)
    for mount in sorted(_mounts_under(scratch), key=len, reverse=True):
        if subprocess.run(["umount", mount], capture_output=True, check=False).returncode != 0:
            subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
    deadline = time.monotonic() + 15  # this station's nspawn may still be tearing down: it must not count as another
    while _processes_under(scratch) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _nspawn_run_is_ours(record) and not _nspawn_running() and is_mountpoint(NSPAWN_RUN):
        subprocess.run(["umount", str(NSPAWN_RUN)], capture_output=True, check=False)
        with contextlib.suppress(OSError):
            NSPAWN_RUN.rmdir()  # up made it (empty now); nspawn makes it again where it needs it
    shutil.rmtree(scratch, ignore_errors=True)
    _record_path(state_dir, name).unlink(missing_ok=True)
    return True


def _power_off(record: Record, timeout: float) -> None:
    """`kill -s SIGRTMIN+4` to the station's systemd (PID 1 inside, nspawn's child): it powers off, running every
    unit's ExecStop, and nspawn exits. (SIGRTMIN+4 to nspawn itself would kill nspawn and leave the container running;
    SIGTERM to nspawn forwards its --kill-signal, SIGRTMIN+4, where no init is found.) SIGKILL after `timeout`."""
    nspawn = record.pids.get("nspawn")
    if nspawn is None or not alive(nspawn, record.scratch):
        return
    inits = _station_inits(record)
    with contextlib.suppress(ProcessLookupError):
        if inits:
            os.kill(inits[0], signal.SIGRTMIN + 4)
        else:
            os.kill(nspawn, signal.SIGTERM)
    if not _reap_wait(nspawn, record.scratch, timeout):
        for pid in _station_inits(record):  # SIGKILL to a PID namespace's init ends every process in it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _stop(nspawn, record.scratch, 10)


def _station_inits(record: Record) -> list[int]:
    """The station's systemd as the host sees it: PID 1 of its PID namespace (NSpid ends in 1), with the
    container_uuid nspawn derived from the station's machine id (so found even if nspawn is gone)."""
    if not record.machine_id:
        return []
    want = f"container_uuid={uuid.UUID(record.machine_id)}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            nspid = next(line for line in (proc / "status").read_text().splitlines() if line.startswith("NSpid:"))
            if nspid.split()[-1] == "1" and len(nspid.split()) > 2 and want in (proc / "environ").read_bytes():
                found.append(int(proc.name))
        except (OSError, StopIteration):
            continue
    return found


def leftovers(record: Record) -> list[str]:
    """What a station left on this machine after `down`: processes, mounts, its directory (empty: nothing)."""
    found = [f"process {pid}" for pid in _processes_under(record.scratch)]
    found += [f"station init {pid}" for pid in _station_inits(record)]
    found += [f"mount {m}" for m in _mounts_under(record.scratch)]
    if Path(record.scratch).exists():
        found.append(f"directory {record.scratch}")
    if _nspawn_run_is_ours(record) and is_mountpoint(NSPAWN_RUN) and not _nspawn_running():
        found.append(f"mount {NSPAWN_RUN}")
    for port in (record.ssh_port, record.serve_port, record.registry_port):
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                found.append(f"listener on 127.0.0.1:{port}")
    return found


def _nspawn_running() -> bool:
    """Whether any systemd-nspawn still runs on this machine (another station, recorded in any state directory, or
    not golive's at all): the tmpfs under /run/systemd/nspawn is theirs too, so it stays mounted. A zombie has
    exited; `down` waits for this station's own nspawn before it asks."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            text = stat.read_text()
            comm, state = text[text.index("(") + 1 : text.rindex(")")], text.rsplit(")", 1)[1].split()[0]
            if comm == "systemd-nspawn" and state != "Z":
                return True
    return False


def _nspawn_run_is_ours(record: Record) -> bool:
    """The tmpfs under /run/systemd/nspawn is a station's to take down: this one mounted it, or another station did
    (its mark), which left it mounted because this one's nspawn still ran: the last station down takes it."""
    return record.mounted_nspawn_run or NSPAWN_RUN_MARK.exists()


def alive(pid: int | None, scratch: str) -> bool:
    """The pid runs and is ours: its command line names the station's scratch directory (not a recycled pid)."""
    if not pid:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and scratch.encode() in cmdline


def _reap_wait(pid: int, scratch: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if not alive(pid, scratch):
            return True
        time.sleep(0.2)
    return False


def _stop(pid: int, scratch: str, timeout: float) -> None:
    for sig, bound in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        if _reap_wait(pid, scratch, bound):
            return


def _processes_under(scratch: str) -> list[int]:
    """Processes whose command line names the scratch directory (dockerd, containerd, shims, registry, nspawn)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid() and alive(int(proc.name), scratch):
            found.append(int(proc.name))
    return found


def _mounts_under(scratch: str) -> list[str]:
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    points = [line.split()[4].encode().decode("unicode_escape") for line in lines if len(line.split()) > 4]
    return [p for p in points if p == scratch or p.startswith(scratch.rstrip("/") + "/")]


def is_mountpoint(path: Path) -> bool:
    return str(path) in {line.split()[4] for line in _mountinfo() if len(line.split()) > 4}


def _mountinfo() -> list[str]:
    try:
        return Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []


def run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise StationError(
            f"`{' '.join(command[:4])} …` failed (exit {done.returncode}): "
            f"{(done.stderr or done.stdout).strip()[-300:]}"
        )


def http_status(url: str) -> int | None:
    import urllib.request  # here, not at the top: `golive` imports this module at every start (its subcommand)

    try:
        with urllib.request.urlopen(url, timeout=2) as answer:  # noqa: S310 - a loopback URL built here
            return int(answer.status)
    except OSError:
        return None


def wait_for(ready: Callable[[], bool], timeout: float, what: str, record: Record, label: str) -> None:
    deadline = time.monotonic() + timeout
    proc = _STARTED[record.pids[label]]
    while not ready():
        exited = proc.poll() is not None
        if exited or time.monotonic() > deadline:
            raise StationError(
                f"{what} ({label} {f'exited with {proc.returncode}' if exited else 'timed out'}: "
                f"{last_lines(record, label)})"
            )
        time.sleep(0.3)


def tail(path: Path, lines: int = 5) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def last_lines(record: Record, label: str) -> str:
    log = record.dir / f"{label}.log"
    return f"{' | '.join(tail(log, 3).splitlines()) or 'no output'}; log {log}"


def serving_now(record: Record) -> bool:
    """vLLM in the station answers GET /health with 200."""
    return http_status(f"http://127.0.0.1:{record.serve_port}/health") == 200


def wait_serving(record: Record, deadline: float) -> None:
    """GET /health 200 from the container systemd started; fail early when the unit or the container fails."""
    from golive_testbed import realstation_files as files  # the unit's and container's names

    last_look = 0.0
    while not serving_now(record):
        now = time.monotonic()
        if not alive(record.pids.get("nspawn"), record.scratch):
            raise StationError(f"the station powered off while starting: {last_lines(record, 'nspawn')}")
        if now - last_look > 5:
            last_look = now
            state = ssh(record, f"systemctl is-active {files.UNIT}", check=False, timeout=15).stdout.strip()
            inspect = docker(
                record, "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", files.CONTAINER, check=False
            )
            status = inspect.stdout.split()
            if state == "failed" or (status and status[0] == "exited"):
                logs = docker(record, "logs", files.CONTAINER, check=False)
                (record.dir / "container.log").write_text(logs.stdout + logs.stderr)
                errors = [line for line in (logs.stdout + logs.stderr).splitlines() if "Error" in line]
                tail = " | ".join(errors[:2] + (logs.stdout + logs.stderr).strip().splitlines()[-1:])
                raise StationError(
                    f"{files.UNIT} is {state}, container {files.CONTAINER} {' '.join(status) or 'absent'}: {tail}"
                )
        if now > deadline:
            listing = " ".join(docker(record, "ps", "-a", check=False).stdout.split())
            raise StationError(
                f"vLLM in the station did not serve http://127.0.0.1:{record.serve_port}/health in time; containers: "
                f"{listing[-200:]}"
            )
        time.sleep(1)
