"""A real sshd with its own config, keys and log: the one harness behind every test and bench that needs an sshd.

    with loopback_sshd(8821, tree=built_trees["gb300-healthy"]) as sshd:
        inventory: host: sshd.spec, ssh_config: sshd.ssh_config
        sshd.connections()     # how many ssh connections sshd accepted so far
        sshd.sessions()        # sshd processes serving a connection now
        sshd.cut()             # every established session's sshd killed: "closed by remote host"
        sshd.stop()            # no listener any more: "Connection refused"

    with loopback_sshd(22, address="0.0.0.0", netns="glA-1a2b3c", alias="glA-1a2b3c") as sshd:
        ...                    # sshd inside a network namespace; ssh reaches it through `ip netns exec NS busybox nc`

With `tree`, every command runs inside that station tree (sshd's ForceCommand chroots into it, as testinfra's chroot
backend does), so the host layer over ssh sees exactly what `chroot://TREE` sees. sshd runs with its own host key,
authorized key (the client key made here, or the one passed in) and log: LogLevel VERBOSE logs one "Connection from"
line per accepted TCP connection. The client's ssh_config (sshd.ssh_config; one `Host ALIAS` block, sshd.host_block,
for a caller that joins several) carries the key, no host-key prompts and no password prompts. Needs root and
openssh-server (scripts/setup.sh installs it); in a namespace also iproute2 and busybox (nc).
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
ListenAddress {listen}
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

# root's login shell is bash, and Debian's bash reads ~/.bashrc when sshd starts it (SSH_SOURCE_BASHRC): this
# machine's `pyenv init` there costs ~0.4 s a command, and a session killed mid-way (a cut) left pyenv's rehash lock
# held for every later root session. A station's default .bashrc returns at once for a non-interactive shell; here
# HOME is sshd's own directory, which holds no .bashrc (the machine's file is not touched).
NO_LOGIN_RC = "SetEnv HOME={dir}\n"

SSH_HOST = """\
Host {alias}
    HostName {host}
    Port {port}
    User root
    IdentityFile {key}
    IdentitiesOnly yes
    BatchMode yes
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
    ConnectTimeout 10
"""

# the TCP connection made inside the namespace: its addresses exist only there
PROXY = "    ProxyCommand ip netns exec {netns} busybox nc {host} {port}\n"


def available() -> str | None:
    """Why an sshd of its own cannot run here, or None."""
    if os.geteuid() != 0:
        return "an sshd with its own host key needs root (sshd, chroot)"
    for tool in ("sshd", "ssh", "ssh-keygen", "chroot"):
        if not shutil.which(tool):
            return f"`{tool}` is not installed (scripts/setup.sh installs openssh-server)"
    return None


def keygen(path: Path) -> Path:
    """An ed25519 key pair without passphrase at `path` and `path`.pub; the private key's path."""
    _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path))
    return path


@dataclass
class Sshd:
    port: int
    address: str  # sshd's ListenAddress
    workdir: Path  # its config, keys, PidFile and log
    process: subprocess.Popen[bytes]
    alias: str  # the ssh_config's Host
    client_key: Path  # the key the client logs in with (its .pub is sshd's authorized_keys)
    netns: str | None = None  # the network namespace it listens in (None: this machine's)

    @property
    def pid(self) -> int:
        """The listener's pid (sshd's PidFile holds the same: `ip netns exec` execs sshd)."""
        return self.process.pid

    @property
    def spec(self) -> str:
        """testinfra host spec; pass `ssh_config` too (an inventory's `ssh_config:`)."""
        return f"ssh://{self.alias}"

    @property
    def ssh_config(self) -> Path:
        return self.workdir / "ssh_config"

    @property
    def host_block(self) -> str:
        """This sshd's `Host ALIAS` block of ssh_config, to join with other hosts' blocks in one file."""
        host = "127.0.0.1" if self.address in ("0.0.0.0", "::") else self.address
        block = SSH_HOST.format(alias=self.alias, host=host, port=self.port, key=self.client_key)
        if self.netns is not None:
            block += PROXY.format(netns=self.netns, host=host, port=self.port)
        return block

    @property
    def log(self) -> Path:
        return self.workdir / "sshd.log"

    def connections(self) -> int:
        """TCP connections sshd accepted (sshd.c logs "Connection from A port P on B port Q" at VERBOSE)."""
        text = self.log.read_text() if self.log.exists() else ""
        return sum(1 for line in text.splitlines() if "Connection from " in line)

    def sessions(self) -> int:
        """sshd processes serving a connection now (one per open connection, and its session children)."""
        return len(descendants(self.pid))

    def cut(self) -> int:
        """Every established session's sshd killed: the client sees its connection closed by the remote host; the
        listener stays. Each session process is frozen first (SIGSTOP), so that none forks a child that escapes as an
        orphan, then killed (SIGKILL). How many processes were killed (0: no connection was open)."""
        frozen: list[int] = []
        for _ in range(10):  # until no unfrozen one is left (the listener may fork a session meanwhile)
            new = [pid for pid in descendants(self.pid) if pid not in frozen]
            if not new:
                break
            for pid in new:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGSTOP)
            frozen += new
        killed = 0
        for pid in frozen:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        return killed

    def stop(self) -> None:
        """The listener goes away and its sessions with it (a host going down; sshd stopped with its control group):
        the client sees "Connection refused". The listener is frozen first, so that no session it forks escapes the
        cut as an orphan. Idempotent."""
        if self.process.poll() is not None:
            return
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGSTOP)
            self.cut()
            os.kill(self.pid, signal.SIGTERM)
            os.kill(self.pid, signal.SIGCONT)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


def _sh(*cmd: str) -> None:
    result = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {result.stderr.strip()}")


@contextlib.contextmanager
def loopback_sshd(
    port: int,
    tree: Path | str | None = None,
    login_rc: bool = False,
    *,
    address: str = "127.0.0.1",
    netns: str | None = None,
    alias: str = "golive-loopback",
    client_key: Path | None = None,
    workdir: Path | None = None,
) -> Iterator[Sshd]:
    """Start sshd on address:port (commands chrooted into `tree` when given); always stop it again, with every
    session it still holds, and remove its directory.
    `login_rc`: let root's login shell read this machine's ~/.bashrc (see NO_LOGIN_RC), as a station with that file
    would. `netns`: run sshd inside that network namespace (`ip netns exec`), listening on `address` there (the
    namespace's own address, or 0.0.0.0); the ssh_config reaches it through the namespace. `alias`: the ssh_config's
    Host (sshd.spec). `client_key`: the key the client logs in with (a private key beside its .pub; several sshds
    may share one); made here when None. `workdir`: sshd's directory (created, and removed at the end); a fresh
    temp directory when None."""
    if workdir is None:
        workdir = Path(tempfile.mkdtemp(prefix="golive-sshd-"))
    else:
        workdir.mkdir(parents=True)
    listen = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    where = f"{listen} in {netns}" if netns else listen
    sshd: Sshd | None = None
    try:
        keygen(workdir / "host_key")
        key = client_key if client_key is not None else keygen(workdir / "client_key")
        shutil.copy(f"{key}.pub", workdir / "authorized_keys")
        config = SSHD_CONFIG.format(listen=listen, dir=workdir)
        if not login_rc:
            config += NO_LOGIN_RC.format(dir=workdir)
        if tree is not None:
            # sshd runs ForceCommand through the user's shell with the client's command in SSH_ORIGINAL_COMMAND
            chroot = shlex.join([shutil.which("chroot") or "chroot", str(Path(tree).resolve()), "/bin/sh", "-c"])
            config += f'ForceCommand exec {chroot} "$SSH_ORIGINAL_COMMAND"\n'
        (workdir / "sshd_config").write_text(config)
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation dir (systemd makes it)
        command = [
            shutil.which("sshd") or "sshd",
            "-D",
            "-f",
            str(workdir / "sshd_config"),
            "-E",
            str(workdir / "sshd.log"),
        ]
        if netns is not None:
            command = ["ip", "netns", "exec", netns, *command]
        sshd = Sshd(port, address, workdir, subprocess.Popen(command, stderr=subprocess.DEVNULL), alias, key, netns)
        deadline = time.monotonic() + 10
        while not (workdir / "sshd.pid").exists():  # sshd writes its PidFile once it listens
            if sshd.process.poll() is not None or time.monotonic() > deadline:
                log = sshd.log.read_text() if sshd.log.exists() else ""
                raise RuntimeError(f"sshd on {where} did not start (exit {sshd.process.poll()}): {log.strip()[-300:]}")
            time.sleep(0.05)
        sshd.ssh_config.write_text(sshd.host_block)
        yield sshd
    finally:
        if sshd is not None:
            sshd.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def descendants(root: int) -> list[int]:
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
