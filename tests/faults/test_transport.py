"""Transport is not the station: a way to a station that fails (ssh's exit 255, an ansible "unreachable") is a
TransportError naming the station, remembered, and raised again without trying the connection; the station's own
answer (any exit status of a command that ran) stays the station's. Real backends, real ssh and ansible."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import testinfra

from golive.station.connection import Connection, connect
from golive.station.transport import TransportError, failure_of_ansible, failure_of_result

REPO = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the block ends: nothing listens there


@pytest.fixture
def ssh_config(tmp_path) -> str:
    path = tmp_path / "ssh_config"
    path.write_text(
        "Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  BatchMode yes\n  LogLevel ERROR\n"
    )
    return str(path)


def test_ssh_exit_255_is_the_way_not_the_station(ssh_config):
    """ssh's own failure (exit 255) raises TransportError with ssh's words and the station's name, once: the next
    command raises the same record at once, without a second connection."""
    if not shutil.which("ssh"):
        pytest.skip("openssh-client is not installed")
    port = _closed_port()
    connection = connect(f"ssh://root@127.0.0.1:{port}", ssh_config, 2, station="gb300-a")
    host = connection.host
    with pytest.raises(TransportError) as first:
        host.run("cat /etc/hostname")
    gone = first.value.gone
    assert (gone.station, gone.via) == ("gb300-a", "ssh")
    assert gone.detail == f"ssh: connect to host 127.0.0.1 port {port}: Connection refused", gone.detail
    assert connection.gone is gone  # the connection owns the record; nothing is set on testinfra's objects
    assert not any(name.startswith("golive") for name in vars(host.backend))
    gone.first_seen_by = "test_unit_is_enabled_and_active"
    started = time.monotonic()
    with pytest.raises(TransportError) as again:
        assert host.file("/etc/hostname").exists  # testinfra's own modules go through the same door
    assert again.value.gone is gone and time.monotonic() - started < 0.5
    line = str(again.value)
    assert line.startswith("station gb300-a stopped answering over ssh at ") and line.endswith(
        f"(first seen by test_unit_is_enabled_and_active): ssh: connect to host 127.0.0.1 port {port}: "
        "Connection refused"
    ), line
    assert "CommandResult" not in line and "0x" not in line
    # a new run (connect again) forgets it: the station is asked afresh
    fresh = connect(f"ssh://root@127.0.0.1:{port}", ssh_config, 2, station="gb300-a")
    assert fresh.gone is None and fresh.host is not host


def test_a_station_never_reached_is_not_a_station_gone(ssh_config):
    """The first contact failing is "cannot run commands" (golive.run.fixtures), not "stopped answering"."""
    port = _closed_port()
    connection = connect(f"ssh://root@127.0.0.1:{port}", ssh_config, 2, station="gb300-a")
    assert connection.unreachable() == f"ssh: connect to host 127.0.0.1 port {port}: Connection refused"
    assert connection.gone is None


def test_a_command_that_ran_is_the_stations_answer():
    """Any exit status of a command that ran, 255 included, is the station's: only ssh's 255 is the way's."""
    result = testinfra.get_host("local://").run("exit 255")  # unguarded: the raw result testinfra gives
    assert result.rc == 255
    assert failure_of_result("local", result) is None and failure_of_result("chroot", result) is None
    assert failure_of_result("ssh", result) == "the ssh connection was lost (ssh exited 255 and printed no reason)"
    ran = testinfra.get_host("local://").run("echo oops >&2; exit 1")
    assert failure_of_result("ssh", ran) is None and failure_of_result("docker", ran) is None


def test_a_gone_docker_daemon_is_the_way():
    docker = testinfra.get_host("local://").run(
        "echo 'Error response from daemon: container 3f2a is not running' >&2; exit 1"
    )
    assert failure_of_result("docker", docker) == "Error response from daemon: container 3f2a is not running"


def test_paramiko_lost_session_is_the_way(ssh_config):
    pytest.importorskip("paramiko", reason="paramiko is testinfra's optional backend")
    port = _closed_port()
    connection = connect(f"paramiko://root@127.0.0.1:{port}", ssh_config, 2, station="gb300-a")
    with pytest.raises(TransportError) as lost:
        connection.host.run("cat /etc/hostname")
    assert lost.value.gone.via == "paramiko" and str(port) in lost.value.gone.detail


def _ansible_bin() -> str | None:
    """The `ansible` command: on PATH, beside this Python, or where ansible-core's distribution installed it."""
    found = shutil.which("ansible") or shutil.which("ansible", path=str(Path(sys.executable).parent))
    if found:
        return found
    try:
        files = importlib.metadata.distribution("ansible-core").files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    scripts = [f.locate() for f in files if f.name == "ansible" and "bin" in f.parts]
    return str(Path(str(scripts[0])).resolve()) if scripts else None


def test_ansible_unreachable_is_the_way(tmp_path):
    """testinfra's ansible backend through ansible itself (force_ansible): ansible's "unreachable" result."""
    pytest.importorskip("ansible", reason="ansible-core is golive's `test` extra")
    if _ansible_bin() is None:
        pytest.skip("the ansible command is not installed")
    os.environ["PATH"] = f"{Path(str(_ansible_bin())).parent}{os.pathsep}{os.environ['PATH']}"
    port = _closed_port()
    (tmp_path / "hosts.yml").write_text(
        f"all:\n  hosts:\n    dead:\n      ansible_host: 127.0.0.1\n      ansible_port: {port}\n"
        "      ansible_connection: ssh\n      ansible_user: root\n"
        "      ansible_ssh_common_args: '-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'\n"
    )
    connection = Connection(f"ansible://dead?ansible_inventory={tmp_path}/hosts.yml&force_ansible=true", "dead")
    with pytest.raises(TransportError) as lost:
        connection.host.run("cat /etc/hostname")  # the ansible backend's run → its run_ansible: the same guard
    assert lost.value.gone.via == "ansible", lost.value.gone
    assert lost.value.gone.detail == (
        "Task failed: Failed to connect to the host via ssh: ssh: connect to host "
        f"127.0.0.1 port {port}: Connection refused"
    ), lost.value.gone
    assert failure_of_ansible({"changed": False, "rc": 1, "stdout": ""}) is None


def test_an_ansible_connection_golive_cannot_drive_is_one_line_at_start(tmp_path):
    """A host whose ansible_connection testinfra cannot drive (chroot) is a usage error naming the host, its
    connection and the supported ones, before any check runs."""
    pytest.importorskip("ansible", reason="ansible-core is golive's `test` extra")
    (tmp_path / "hosts.yml").write_text(
        "all:\n  children:\n    gpu:\n      hosts:\n        st-1:\n"
        "          ansible_connection: chroot\n        st-2:\n"
    )
    (tmp_path / "fleet.yaml").write_text(
        f"profile: {REPO}/fixtures/profiles/gb300-site.yaml\n"
        "stations_from:\n  - {ansible_inventory: hosts.yml, group: gpu}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    if _ansible_bin():
        env["PATH"] = f"{Path(str(_ansible_bin())).parent}{os.pathsep}{env['PATH']}"
    result = subprocess.run(
        [sys.executable, "-m", "golive.cli", "run", "fleet.yaml", "-o", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env=env,
    )
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 4, output
    assert output == (
        "golive: fleet.yaml:3: Ansible host 'st-1' of group 'gpu' has ansible_connection: chroot, which "
        "golive cannot run commands through; supported: ssh, smart, paramiko_ssh, local, docker, "
        "community.docker.docker, lxc, lxd"
    ), output
