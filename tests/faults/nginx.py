"""A real nginx (Debian's, scripts/setup.sh installs it) on a free loopback port in front of a server, as operators put
one in front of vLLM: a reverse proxy with `proxy_buffering` on or off, optionally terminating TLS with a certificate
the test made; and "under load": its worker given the CPU `run_s` in every `run_s + stop_s` (SIGSTOP/SIGCONT), as a
worker starved by other work on its host gets it.

    with Nginx(tmp_path, upstream_port, buffering=True) as proxy:           # http://127.0.0.1:PORT/v1
        with proxy.loaded(run_s=0.05, stop_s=0.45): ...                     # its worker runs 10 % of the time
    with Nginx(tmp_path, upstream_port, tls=(cert, key)) as proxy: ...       # https://127.0.0.1:PORT/v1

Its own prefix, config, pid file, logs and temp folders under the test's folder; stopped (its process group) when the
block ends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    def __init__(
        self, folder: Path, upstream_port: int, buffering: bool = True, tls: tuple[Path, Path] | None = None
    ) -> None:
        if not os.access(NGINX, os.X_OK):
            pytest.skip("nginx is not installed: scripts/setup.sh installs Debian's (apt-get install nginx)")
        self.folder = folder / f"nginx-{_free_port()}"
        self.upstream_port, self.buffering, self.tls = upstream_port, buffering, tls
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}/v1"

    def config(self) -> str:
        temps = "".join(
            f"  {name}_temp_path {self.folder / name};\n"
            for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        listen = f"127.0.0.1:{self.port}" + (" ssl" if self.tls else "")
        tls = f"    ssl_certificate {self.tls[0]};\n    ssl_certificate_key {self.tls[1]};\n" if self.tls else ""
        # root runs its worker as root (the test's files are the test user's); any other user runs it as itself
        user = "user root;\n" if os.geteuid() == 0 else ""
        return (
            f"{user}worker_processes 1;\ndaemon off;\npid {self.folder / 'nginx.pid'};\n"
            f"error_log {self.folder / 'error.log'} warn;\nevents {{ worker_connections 512; }}\n"
            f"http {{\n  access_log off;\n{temps}  server {{\n    listen {listen};\n{tls}"
            f"    location / {{\n      proxy_pass http://127.0.0.1:{self.upstream_port};\n"
            f"      proxy_buffering {'on' if self.buffering else 'off'};\n      proxy_read_timeout 300s;\n"
            "    }\n  }\n}\n"
        )

    def __enter__(self) -> Nginx:
        self.folder.mkdir(parents=True)
        (self.folder / "nginx.conf").write_text(self.config())
        self.proc = subprocess.Popen(
            [NGINX, "-p", str(self.folder), "-c", str(self.folder / "nginx.conf"), "-e", str(self.folder / "err")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.proc.poll() is None:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return self
            time.sleep(0.05)
        log = (self.folder / "error.log").read_text(errors="replace") if (self.folder / "error.log").exists() else ""
        self.__exit__()
        raise RuntimeError(f"nginx did not start on :{self.port}: {log[-2000:]}")

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGCONT)  # a worker stopped by `loaded` must see the TERM
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        self.proc = None

    def workers(self) -> list[int]:
        assert self.proc is not None
        found = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True, check=False)
        return [int(pid) for pid in found.stdout.split()]

    @contextlib.contextmanager
    def loaded(self, run_s: float, stop_s: float) -> Iterator[None]:
        """Its worker gets the CPU `run_s` in every `run_s + stop_s`: the events vLLM sends meanwhile wait in the
        socket and leave together when it runs."""
        workers, done = self.workers(), threading.Event()
        assert workers, "nginx has no worker process"

        def cycle() -> None:
            while not done.is_set():
                for pid in workers:
                    os.kill(pid, signal.SIGSTOP)
                done.wait(stop_s)
                for pid in workers:
                    os.kill(pid, signal.SIGCONT)
                done.wait(run_s)

        thread = threading.Thread(target=cycle, daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join(5)
            for pid in workers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
