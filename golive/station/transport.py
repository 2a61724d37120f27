"""A station that stopped answering is not a station that answered wrong.

Every command golive sends goes through its station's connection (golive.station.connection.Connection.send),
which calls `failure_of_result` / `failure_of_exception` on what came back: ssh's own exit 255 ("Connection refused",
"closed by remote host", "Broken pipe"), paramiko's lost sessions, ansible's "unreachable", a docker daemon that no
longer answers. Such a failure says nothing about the station, so it becomes a `TransportError` (never a FactError:
that one blames the station), the connection remembers it (`Gone`), and every later command to that station raises
the same error at once, without trying the connection again. golive.run.outcomes classifies it: not checked, one
line naming the station, the time and the check that met it first.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

# ssh(1): "ssh exits with the exit status of the remote command or with 255 if an error occurred"
SSH_FAILED = 255
SSH_SILENT = "the ssh connection was lost (ssh exited 255 and printed no reason)"
# what a docker CLI says when the daemon or the container is gone (docker/cli: "Error response from daemon: …")
_ANSIBLE_MSG = re.compile(r'"msg": "((?:[^"\\]|\\.)*)"')
_DOCKER_GONE = ("Cannot connect to the Docker daemon", "Error response from daemon", "is not running")


@dataclass
class Gone:
    """The first transport failure seen on one station's connection; later checks quote it."""

    station: str
    via: str  # ssh, paramiko, ansible, docker, HTTP
    at: str  # HH:MM:SS, local time
    detail: str  # the transport's own last line ("ssh: connect to host … port 22: Connection refused")
    first_seen_by: str = ""  # the check that met it first (golive.run.outcomes fills it in)

    def line(self) -> str:
        seen = f" (first seen by {self.first_seen_by})" if self.first_seen_by else ""
        return f"station {self.station} stopped answering over {self.via} at {self.at}{seen}: {self.detail}"


class TransportError(Exception):
    """The way to a station failed (not the station's own answer): the check is not checked, never failed."""

    def __init__(self, gone: Gone) -> None:
        super().__init__(gone.detail)
        self.gone = gone

    def __str__(self) -> str:
        return self.gone.line()


def now() -> str:
    return time.strftime("%H:%M:%S")


def last_line(text: str | bytes | None) -> str:
    """The last non-empty line of a tool's output, trimmed, without control characters."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return "".join(ch if ch.isprintable() else " " for ch in lines[-1])[:300] if lines else ""


def failure_of_exception(backend_name: str, exc: BaseException) -> str | None:
    """The transport's own words when `exc`, raised by a testinfra backend's run, means the way to the station failed;
    None for anything else (a golive refusal, a bug)."""
    first = exc.args[0] if exc.args else None
    if isinstance(exc, RuntimeError) and getattr(first, "exit_status", None) == SSH_FAILED:
        # testinfra's ssh backends: `raise RuntimeError(out)` when ssh exits 255 (testinfra/backend/ssh.py run_ssh)
        return last_line(getattr(first, "stderr", "")) or SSH_SILENT
    if backend_name == "ansible" and isinstance(exc, AssertionError) and "UNREACHABLE!" in str(exc):
        # ansible-core ≥ 2.19 exits 4 for an unreachable host; testinfra's run_expect([0, 2, 8]) then asserts with
        # the whole CommandResult: keep ansible's own `"msg": "…"` only
        found = _ANSIBLE_MSG.search(str(exc))
        return last_line(found.group(1)) if found else "ansible: host unreachable"
    if (backend_name == "paramiko" and isinstance(exc, (EOFError, OSError))) or _is_paramiko_error(exc):
        return last_line(str(exc)) or type(exc).__name__
    return None


def _is_paramiko_error(exc: BaseException) -> bool:
    try:
        import paramiko
    except ImportError:  # paramiko is testinfra's optional backend
        return False
    return isinstance(exc, paramiko.SSHException)


def failure_of_result(backend_name: str, result: object) -> str | None:
    """The transport's own words when a command result means the command never ran on the station, else None."""
    rc = getattr(result, "rc", 0)
    if rc == 0:
        return None
    if backend_name in ("ssh", "safe-ssh") and rc == SSH_FAILED:
        return last_line(getattr(result, "stderr", "")) or SSH_SILENT
    if backend_name == "docker":
        stderr = last_line(getattr(result, "stderr", ""))
        if any(words in stderr for words in _DOCKER_GONE):
            return stderr
    return None


def failure_of_ansible(out: object) -> str | None:
    """ansible's module result for a host it could not reach (`"unreachable": true`, its `msg` says why)."""
    if isinstance(out, dict) and out.get("unreachable"):
        return last_line(str(out.get("msg") or "")) or "ansible: host unreachable"
    return None
