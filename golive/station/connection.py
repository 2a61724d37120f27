"""One station's connection: golive's own object around a testinfra backend.

    connection = connect("ssh://root@gb300-a", ssh_config, connect_timeout_s=10, station="gb300-a")
    connection.unreachable()          # None, or why no command runs there (asked once, at the start)
    connection.host.file("/etc/glm53/rail.env").exists   # any testinfra module, through the guard
    connection.gone                   # the transport failure that ended it, if one did
    connection.close()                # ends the ssh master

A `Connection` owns what golive adds to testinfra: the read-only guard every command passes
(golive.station.readonly.allowed), the "station gone" record (golive.station.transport), the command log and the
ssh master. Its backend is an instance of golive's subclass of the spec's own testinfra backend class, so that every
command the backend sends itself (testinfra's encoding probe, the ansible backend's `run` → `run_ansible`) passes the
same guard; nothing is set on testinfra's objects, and testinfra's host cache is not used (a new run is a new
connection, asked afresh).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import math
import os
import selectors
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from golive.facts import FactError
from golive.station.readonly import allowed
from golive.station.transport import (
    Gone,
    TransportError,
    failure_of_ansible,
    failure_of_exception,
    failure_of_result,
    now,
)

CHROOT = "chroot://"
SSH_SCHEMES = ("ssh://", "safe-ssh://", "paramiko://")
# ssh multiplexing rather than one paramiko session: the `ssh` client keeps everything an operator's ssh_config says
# (ProxyJump/ProxyCommand, agent, certificates, known_hosts, Kerberos) and paramiko is no dependency of golive's wheel.
# testinfra's ssh backend starts one `ssh` per command and asks for ControlMaster=auto but sets no ControlPath, so
# every command was a new connection (handshake + key exchange: ~1 s each on a busy 2-core box). With a ControlPath
# the first command's ssh becomes the master (ssh_config(5) ControlMaster, ControlPersist) and every later command
# runs as a session over its connection. The socket lives in a private (0700) temp dir, one per connection, and
# close() ends the master (`ssh -O exit`) when the run ends.
MUX_SCHEMES = ("ssh://", "safe-ssh://")  # paramiko:// already keeps one client (one connection) per host
MUX_PERSIST_S = 120  # how long an idle master waits for the next command; a run that dies hard leaves it that long
# A unix socket's path has at most 107 bytes (unix(7) sun_path), and ssh first binds "PATH.<16 random chars>":
# a deep $TMPDIR (pytest's, a CI runner's) would make every ssh command fail, so the socket's dir falls back to /tmp.
MUX_PATH_MAX = 107 - 17
# Every command ends: within COMMAND_TIMEOUT_S (its whole process group killed: `sh -c`, ssh, what they started),
# past the longest command golive sends on purpose (the cluster layer's own `timeout 20`, a ping's count × 2 + 5 s);
# and an ssh master whose server stops answering (a frozen sshd, a dead link) gives up after its keepalives go
# unanswered for about the connect timeout (ServerAliveInterval × SERVER_ALIVE_COUNT): the station's commands fail
# with ssh's own line, not checked, and the run goes on. Output past COMMAND_OUTPUT_BYTES is not read (one line).
COMMAND_TIMEOUT_S = 60.0
COMMAND_OUTPUT_BYTES = 16 * 2**20
SERVER_ALIVE_COUNT = 3


# --- the typed surface of testinfra (it ships no type information) -------------------------------------------------
# What golive reads of testinfra's objects, as testinfra defines it (testinfra/host.py Host, testinfra/backend/base.py
# CommandResult, testinfra/modules/file.py File); the connection's host is typed as this, so a misspelt attribute of
# the host fails the type check.


class CommandResult(Protocol):
    """A command's answer (testinfra's CommandResult)."""

    @property
    def rc(self) -> int: ...
    @property
    def stdout(self) -> str: ...
    @property
    def stderr(self) -> str: ...


class RemoteFile(Protocol):
    """A path on the station (testinfra's File module), read as its properties are read."""

    @property
    def exists(self) -> bool: ...
    @property
    def is_file(self) -> bool: ...
    @property
    def is_directory(self) -> bool: ...
    @property
    def content(self) -> bytes: ...
    @property
    def content_string(self) -> str: ...
    @property
    def mode(self) -> int: ...


class HostBackend(Protocol):
    """The testinfra backend under a host: golive quotes a command line with it before the guard reads it."""

    def quote(self, command: str, *args: str) -> str: ...


class StationHost(Protocol):
    """A station's testinfra host, as golive uses it (`testinfra.host.Host`, its backend guarded by a Connection)."""

    @property
    def backend(self) -> HostBackend: ...
    def run(self, command: str, *args: str) -> CommandResult: ...
    def exists(self, command: str) -> bool: ...
    def file(self, path: str) -> RemoteFile: ...


def chroot_tree(spec: str | None) -> str | None:
    """The tree of a `chroot:///tree` spec, else None."""
    return spec[len(CHROOT) :] if spec and spec.startswith(CHROOT) else None


def with_connect_timeout(spec: str, seconds: float) -> str:
    """An ssh host spec with testinfra's `?timeout=N` (ssh ConnectTimeout, paramiko's connect timeout) unless it sets
    one: a host that accepts TCP but never sends its banner fails within N s instead of hanging the run."""
    if not spec.startswith(SSH_SCHEMES) or "timeout" in parse_qs(urlsplit(spec).query):
        return spec
    return f"{spec}{'&' if '?' in spec else '?'}timeout={max(1, math.ceil(seconds))}"


def _control_path() -> Path:
    """A fresh private (0700, mkdtemp) dir for one connection's control socket: only golive's user can use it."""
    base = tempfile.gettempdir()
    if len(f"{base}/golive-ssh-xxxxxxxx/master") > MUX_PATH_MAX:
        base = "/tmp"
    return Path(tempfile.mkdtemp(prefix="golive-ssh-", dir=base)) / "master"


class Connection:
    """One station's way in (any testinfra spec: local, ssh://, docker://, ansible://, chroot://): the testinfra
    host its checks use, the guard, the transport failure that ended it and the ssh master it started."""

    def __init__(
        self, spec: str, station: str | None = None, control_path: Path | None = None, **options: object
    ) -> None:
        import testinfra.backend
        import testinfra.host

        name, kw = testinfra.backend.parse_hostspec(spec)  # testinfra.backend.get_backend's own steps
        for key, value in options.items():
            kw.setdefault(key, value)
        kw.setdefault("connection", "paramiko")
        guarded = _guarded(testinfra.backend.get_backend_class(kw["connection"]))
        backend = guarded(**kw) if kw["connection"] == "local" else guarded(name, **kw)
        backend.connection = self
        self.control_path = control_path
        self.station: str = station or backend.get_pytest_id()
        name = getattr(backend, "NAME", "")
        self.via = "ssh" if name == "safe-ssh" else name or "its backend"  # what a transport failure's line names
        self.gone: Gone | None = None
        self.command_log = os.environ.get("GOLIVE_COMMAND_LOG")
        self.host: StationHost = testinfra.host.Host(backend)

    def __enter__(self) -> Connection:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    # --- every command ------------------------------------------------------------------------------------------------

    def send(self, run: Callable[..., CommandResult], command: str, *args: str, **kwargs: Any) -> CommandResult:
        """`run(command, *args)` (the testinfra backend's own) once the command passed the allow-list and the
        connection is not gone; a transport failure becomes TransportError and is remembered."""
        line = self.host.backend.quote(command, *args)
        if self.command_log:
            with open(self.command_log, "a") as out:
                out.write(line.replace("\n", "\\n") + "\n")
        if not allowed(line):
            raise FactError(
                f"golive refused to send `{line}`: it is not on golive's read-only allow-list "
                f"(golive/station/readonly.py)",
                fix="report this as a golive bug: no check may change a station",
            )
        if self.gone is not None:  # not tried again: one dead connection costs one timeout, not one a check
            raise TransportError(self.gone)
        try:
            result = run(command, *args, **kwargs)
        except TransportError:
            raise
        except CommandTimeout as exc:  # the way to the station, or the station itself, stopped answering
            raise self._lost(str(exc)) from None
        except Exception as exc:
            detail = failure_of_exception(self.via, exc)
            if detail is None:
                raise
            raise self._lost(detail) from None
        detail = failure_of_result(self.via, result)
        if detail is not None:
            raise self._lost(detail)
        return result

    def send_ansible(self, run_ansible: Callable[..., object], *args: Any, **kwargs: Any) -> object:
        """testinfra's ansible backend's `run_ansible` (what its `run` and modules use): its "unreachable" is
        transport."""
        out = run_ansible(*args, **kwargs)
        detail = failure_of_ansible(out)
        if detail is not None:
            raise self._lost(detail)
        return out

    def _lost(self, detail: str) -> TransportError:
        self.gone = Gone(self.station, self.via, now(), detail)
        return TransportError(self.gone)

    # --- the start and the end ----------------------------------------------------------------------------------------

    def unreachable(self) -> str | None:
        """Why golive cannot run a command on this host (ssh refused, timed out, authentication), or None: asked once
        per host, so a dead host costs one connect timeout, not one per check."""
        try:
            result = self.host.run("echo golive")
        except TransportError as exc:  # never answered: not "stopped answering"; the caller says so once, per check
            self.gone = None
            return exc.gone.detail
        except Exception as exc:  # testinfra's ssh backend raises RuntimeError(CommandResult); paramiko its own errors
            stderr = getattr(exc.args[0], "stderr", None) if exc.args else None
            lines = str(stderr if stderr is not None else exc).strip().splitlines() or [type(exc).__name__]
            return lines[-1].strip()
        return None if result.rc == 0 else f"`echo golive` exited {result.rc}: {result.stderr.strip()[-200:]}"

    def close(self) -> None:
        """End the ssh master, if this connection started one (no stray ssh processes after a run); idempotent."""
        control, self.control_path = self.control_path, None
        if control is None:
            return
        atexit.unregister(self.close)
        if control.exists():
            # -F /dev/null: only the socket is needed; the operator's ssh_config is not read again. Best effort: a
            # master that does not answer exits by itself after ControlPersist.
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run(
                    ["ssh", "-F", "/dev/null", "-o", f"ControlPath={control}", "-O", "exit", "golive-master"],
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=10,
                    check=False,
                )
        shutil.rmtree(control.parent, ignore_errors=True)


class _GuardedBackend(Protocol):
    """A guarded backend: the connection it sends through (set by Connection.__init__)."""

    connection: Connection


@functools.cache
def _guarded(base: type[Any]) -> type[Any]:
    """golive's subclass of one testinfra backend class: `run` (and the ansible backend's `run_ansible`) go through
    the connection's guard, also when the backend calls them itself."""

    def run(self: _GuardedBackend, command: str, *args: str, **kwargs: Any) -> CommandResult:
        return self.connection.send(functools.partial(base.run, self), command, *args, **kwargs)

    def run_local(self: Any, command: str, *args: str) -> CommandResult:
        """testinfra's own run_local (every backend but paramiko's runs its commands through it), bounded."""
        line = self.encode(self.quote(command, *args))
        rc, stdout, stderr = run_bounded(line, COMMAND_TIMEOUT_S, COMMAND_OUTPUT_BYTES)
        result: CommandResult = self.result(rc, line, stdout, stderr)
        return result

    def run_ansible(self: _GuardedBackend, *args: Any, **kwargs: Any) -> object:
        return self.connection.send_ansible(functools.partial(base.run_ansible, self), *args, **kwargs)

    methods: dict[str, Any] = {"run": run, "run_local": run_local, "__module__": __name__}
    if hasattr(base, "run_ansible"):
        methods["run_ansible"] = run_ansible
    return type(f"Guarded{base.__name__}", (base,), methods)


class CommandTimeout(Exception):
    """A command that did not end within its time (the station stopped answering, or the command hangs there)."""


class CommandOutputTooLarge(FactError):
    """A command printed more than golive reads."""


def run_bounded(command: str | bytes, timeout_s: float, cap: int) -> tuple[int, bytes, bytes]:
    """(rc, stdout, stderr) of a shell command line, as testinfra's run_local runs it, but ended within `timeout_s`
    (CommandTimeout) and read at most to `cap` bytes of output (CommandOutputTooLarge); either way its whole process
    group is killed, as it is when the run is interrupted while it waits."""
    shown = command.decode(errors="replace") if isinstance(command, bytes) else command
    proc = subprocess.Popen(
        command,
        shell=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: ssh and whatever the shell started end with it
    )
    assert proc.stdout is not None and proc.stderr is not None
    stdout: list[bytes] = []
    stderr: list[bytes] = []
    out = {proc.stdout.fileno(): stdout, proc.stderr.fileno(): stderr}
    read = 0
    ends = time.monotonic() + timeout_s
    try:
        with selectors.DefaultSelector() as selector:
            for stream in (proc.stdout, proc.stderr):
                selector.register(stream, selectors.EVENT_READ)
            while selector.get_map():
                left = ends - time.monotonic()
                if left <= 0:
                    raise CommandTimeout(
                        f"`{_short(shown)}` did not end within {timeout_s:g} s (the station stopped answering, or "
                        f"the command hangs there)"
                    )
                for key, _ in selector.select(min(left, 1.0)):
                    data = os.read(key.fd, 65536)
                    if not data:
                        selector.unregister(key.fileobj)
                        continue
                    read += len(data)
                    if read > cap:
                        raise CommandOutputTooLarge(
                            f"`{_short(shown)}` printed more than golive reads of one command ({cap // 2**20} MiB): "
                            f"golive stopped reading there",
                            fix="check what that file or command holds on the station (golive reads only)",
                        )
                    out[key.fd].append(data)
        proc.wait(timeout=max(ends - time.monotonic(), 1.0))
    except BaseException:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    finally:
        proc.stdout.close()
        proc.stderr.close()
    return proc.returncode, b"".join(stdout), b"".join(stderr)


def _short(command: str, limit: int = 200) -> str:
    line = " ".join(command.split())
    return line if len(line) <= limit else line[:limit] + " …"


def connect(
    spec: str, ssh_config: str | None = None, connect_timeout_s: float | None = None, station: str | None = None
) -> Connection:
    """A connection from a host spec; `chroot:///tree` reaches a station tree (testinfra's chroot backend);
    `ssh_config` is passed to the ssh backends (an inventory's or a station's `ssh_config:`), and so is the connect
    timeout. ssh:// hosts share one ssh connection for every command (see MUX_SCHEMES); close() it at the end.
    `station` names the station in a transport failure's line (golive.station.transport)."""
    tree = chroot_tree(spec)
    if tree:
        return Connection(tree, station, connection="chroot")
    if connect_timeout_s is not None:
        spec = with_connect_timeout(spec, connect_timeout_s)
    options: dict[str, str] = {"ssh_config": ssh_config} if ssh_config else {}
    control = None
    if spec.startswith(MUX_SCHEMES):
        control = _control_path()
        # ssh_extra_args goes into testinfra's shell line as it is: quoted here; testinfra escapes its `%` itself
        alive = max(1, math.ceil((connect_timeout_s or 10) / SERVER_ALIVE_COUNT))
        options["ssh_extra_args"] = " ".join(
            f"-o {shlex.quote(o)}"
            for o in (
                "ControlMaster=auto",
                f"ControlPath={control}",
                f"ControlPersist={MUX_PERSIST_S}s",
                f"ServerAliveInterval={alive}",
                f"ServerAliveCountMax={SERVER_ALIVE_COUNT}",
            )
        )
    connection = Connection(spec, station, control, **options)
    if control is not None:
        atexit.register(connection.close)  # a run that ends without its cleanup (an embedding caller) still closes it
    return connection
