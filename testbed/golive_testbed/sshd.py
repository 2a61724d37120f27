"""A real sshd on loopback, for measuring and testing golive's host layer over ssh.

    with loopback_sshd(8821, tree=built_trees["gb300-healthy"]) as sshd:
        inventory: host: sshd.spec, ssh_config: sshd.ssh_config
        sshd.connections()     # how many ssh connections sshd accepted so far

With `tree`, every command runs inside that station tree (sshd's ForceCommand chroots into it, as testinfra's chroot
backend does), so the host layer over ssh sees exactly what `chroot://TREE` sees. sshd runs with its own config, host
key, authorized key and log (LogLevel VERBOSE logs one "Connection from" line per accepted TCP connection), as
tests/cluster/netns.py runs its sshds. Needs root and openssh-server.
"""
from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SSHD_CONFIG = """\
ListenAddress 127.0.0.1:{port}
HostKey {dir}/host_key
PidFile {dir}/sshd.pid
AuthorizedKeysFile {dir}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
UsePAM no
StrictModes no
MaxStartups 100
LogLevel VERBOSE
"""

SSH_CONFIG = """\
Host golive-loopback
    HostName 127.0.0.1
    Port {port}
    User root
    IdentityFile {dir}/client_key
    IdentitiesOnly yes
    BatchMode yes
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
"""


def available() -> str | None:
    """Why a loopback sshd cannot run here, or None."""
    if os.geteuid() != 0:
        return "a loopback sshd with its own host key needs root"
    for tool in ("sshd", "ssh", "ssh-keygen", "chroot", "unshare"):
        if not shutil.which(tool):
            return f"`{tool}` is not installed (scripts/setup.sh installs openssh-server)"
    if subprocess.run(["unshare", "--mount", "true"], check=False, capture_output=True).returncode != 0:
        return "`unshare --mount` fails here (no mount namespaces for the sshd's own view of ~/.bashrc)"
    return None


@dataclass(frozen=True)
class LoopbackSshd:
    port: int
    workdir: Path
    pid: int

    @property
    def spec(self) -> str:
        """testinfra host spec; pass `ssh_config` too (an inventory's `ssh_config:`)."""
        return "ssh://golive-loopback"

    @property
    def ssh_config(self) -> Path:
        return self.workdir / "ssh_config"

    @property
    def log(self) -> Path:
        return self.workdir / "sshd.log"

    def connections(self) -> int:
        """TCP connections sshd accepted (sshd.c logs "Connection from A port P on B port Q" at VERBOSE)."""
        text = self.log.read_text() if self.log.exists() else ""
        return sum(1 for line in text.splitlines() if "Connection from " in line)

    def sessions(self) -> int:
        """sshd processes serving a connection now (one per open connection, and its session children)."""
        return len(_descendants(self.pid))


def _sh(*cmd: str) -> None:
    result = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {result.stderr.strip()}")


@contextlib.contextmanager
def loopback_sshd(port: int, tree: Path | str | None = None, login_rc: bool = False) -> Iterator[LoopbackSshd]:
    """Start sshd on 127.0.0.1:port (commands chrooted into `tree` when given); always stop it again.
    `login_rc`: let root's login shell read this machine's ~/.bashrc (see below), as a station with that file would."""
    workdir = Path(tempfile.mkdtemp(prefix="golive-sshd-"))
    sshd = None
    try:
        for key in ("host_key", "client_key"):
            _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(workdir / key))
        shutil.copy(workdir / "client_key.pub", workdir / "authorized_keys")
        config = SSHD_CONFIG.format(port=port, dir=workdir)
        if tree is not None:
            # sshd runs ForceCommand through the user's shell with the client's command in SSH_ORIGINAL_COMMAND
            chroot = shlex.join([shutil.which("chroot") or "chroot", str(Path(tree).resolve()), "/bin/sh", "-c"])
            config += f'ForceCommand exec {chroot} "$SSH_ORIGINAL_COMMAND"\n'
        (workdir / "sshd_config").write_text(config)
        (workdir / "ssh_config").write_text(SSH_CONFIG.format(port=port, dir=workdir))
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation dir (systemd makes it)
        command = [shutil.which("sshd") or "sshd", "-D", "-f", str(workdir / "sshd_config"),
                   "-E", str(workdir / "sshd.log")]
        rc_file = Path.home() / ".bashrc"
        if not login_rc and rc_file.is_file():
            # sshd runs every command through root's login shell, and Debian's bash reads ~/.bashrc when sshd starts
            # it (SSH_SOURCE_BASHRC): this machine's `pyenv init` there costs ~0.4 s a command. A station's default
            # .bashrc returns at once for a non-interactive shell; show sshd an empty one, in its own mount namespace
            # (the machine's file is not touched).
            command = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                       f"mount --bind /dev/null {shlex.quote(str(rc_file))} && exec {shlex.join(command)}"]
        sshd = subprocess.Popen(command, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not (workdir / "sshd.pid").exists():  # sshd writes its PidFile once it listens
            if sshd.poll() is not None or time.monotonic() > deadline:
                log = (workdir / "sshd.log").read_text() if (workdir / "sshd.log").exists() else ""
                raise RuntimeError(f"sshd on 127.0.0.1:{port} did not start (exit {sshd.poll()}): {log.strip()[-300:]}")
            time.sleep(0.05)
        yield LoopbackSshd(port, workdir, sshd.pid)
    finally:
        if sshd is not None:
            sessions = _descendants(sshd.pid)  # per-connection sshd processes outlive the listener
            sshd.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                sshd.wait(timeout=5)
            for pid in sessions:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(workdir, ignore_errors=True)


def _descendants(root: int) -> list[int]:
    """Every process below `root`, from /proc/PID/stat's ppid field (proc(5))."""
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(proc.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
