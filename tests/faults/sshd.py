"""A real sshd on loopback that serves a station tree: every command it is sent runs as `chroot TREE /bin/sh -c CMD`
(sshd's ForceCommand), so golive's ssh backend reads the tree exactly as testinfra's chroot backend does, through a
real ssh connection that a test can stop (sshd gone), cut (the session's sshd killed) or leave alone.

    with tree_sshd(tree, port) as sshd:
        sshd.spec        # ssh://root@127.0.0.1:PORT
        sshd.ssh_config  # the client's config (key, no host-key prompts)
        sshd.stop()      # no listener any more: "Connection refused"
        sshd.cut()       # every established session's sshd killed: "closed by remote host"

Needs root and openssh-server (scripts/setup.sh installs it); tests/cluster/netns.py runs sshd the same way.
"""
from __future__ import annotations

import contextlib
import os
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
LogLevel ERROR
MaxStartups 100
# root's login shell is bash, which reads ~/.bashrc under sshd: a session killed mid-way (the cut) must not leave a
# stale lock behind from whatever that file runs (pyenv's rehash lock made every later root session wait)
SetEnv HOME={dir}
ForceCommand exec chroot {tree} /bin/sh -c "$SSH_ORIGINAL_COMMAND"
"""

SSH_CONFIG = """\
Host *
    User root
    IdentityFile {dir}/client_key
    IdentitiesOnly yes
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    BatchMode yes
    LogLevel ERROR
    ControlMaster auto
    ControlPath {dir}/cm-%C
    ControlPersist 60
"""


def available() -> str | None:
    """Why a loopback sshd cannot run here, or None."""
    if os.geteuid() != 0:
        return "a loopback sshd serving a station tree needs root (chroot, sshd)"
    for tool in ("sshd", "ssh", "ssh-keygen", "chroot"):
        if not shutil.which(tool):
            return f"`{tool}` is not installed (scripts/setup.sh installs openssh-server)"
    return None


@dataclass
class TreeSshd:
    port: int
    workdir: Path
    process: subprocess.Popen | None

    @property
    def spec(self) -> str:
        return f"ssh://root@127.0.0.1:{self.port}"

    @property
    def ssh_config(self) -> Path:
        return self.workdir / "ssh_config"

    def stop(self) -> None:
        """The listener goes away and its sessions with it (a host going down; sshd stopped with its control group)."""
        if self.process is not None and self.process.poll() is None:
            stop_sshd(self.process.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)

    def cut(self) -> int:
        """Every established session's sshd killed: the client sees its connection closed by the remote host.
        How many processes were killed (0: no connection was open)."""
        return cut_sessions(self.process.pid if self.process is not None else None)


def stop_sshd(listener: int) -> None:
    """Stop an sshd listener and every session it holds. The listener is frozen first, so that no session it forks
    escapes the cut as an orphan."""
    with contextlib.suppress(OSError):
        os.kill(listener, signal.SIGSTOP)
        cut_sessions(listener)
        os.kill(listener, signal.SIGTERM)
        os.kill(listener, signal.SIGCONT)


def cut_sessions(listener: int | None) -> int:
    """SIGKILL every session process an sshd listener forked; how many there were."""
    killed = 0
    for pid in _children_of_sshd(listener):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed


def _children_of_sshd(listener: int | None) -> list[int]:
    """The session processes the listener forked (sshd's per-connection children and theirs)."""
    if listener is None:
        return []
    found, frontier = [], [listener]
    while frontier:
        parent = frontier.pop()
        try:
            text = Path(f"/proc/{parent}/task/{parent}/children").read_text()
        except OSError:
            continue
        for pid in map(int, text.split()):
            found.append(pid)
            frontier.append(pid)
    return found


@contextlib.contextmanager
def tree_sshd(tree: Path, port: int) -> Iterator[TreeSshd]:
    workdir = Path(tempfile.mkdtemp(prefix="golive-sshd-"))
    process = None
    try:
        for key in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(workdir / key)], check=True)
        shutil.copy(workdir / "client_key.pub", workdir / "authorized_keys")
        (workdir / "sshd_config").write_text(SSHD_CONFIG.format(port=port, dir=workdir, tree=tree))
        (workdir / "ssh_config").write_text(SSH_CONFIG.format(dir=workdir))
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation dir (systemd makes it)
        process = subprocess.Popen([shutil.which("sshd") or "sshd", "-D", "-e", "-f", str(workdir / "sshd_config")],
                                   stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not (workdir / "sshd.pid").exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"sshd on port {port} did not start (exit status {process.poll()})")
            time.sleep(0.05)
        yield TreeSshd(port, workdir, process)
    finally:
        if process is not None:
            TreeSshd(port, workdir, process).stop()
        shutil.rmtree(workdir, ignore_errors=True)
