"""The host layer over ssh: one ssh connection per host for every command, closed at the end of the run.

A real sshd on loopback (golive_testbed.sshd) chroots every command into the healthy GB300 station tree, so the run
over ssh sees the station that `chroot://` sees and must say GO, as it does there.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from golive.site.loader import load_inventory
from golive.station.connection import connect
from golive_testbed.sshd import available, loopback_sshd
from golive_testbed.targets import build_station_trees


def _free_port() -> int:
    """A port nothing listens on now (the kernel's pick), so parallel sessions' sshds never collide."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PROFILE = Path(__file__).resolve().parents[2] / "fixtures" / "profiles" / "gb300-site.yaml"


@pytest.fixture(scope="module")
def healthy_over_ssh():
    reason = available()
    if reason:
        pytest.skip(reason)
    with loopback_sshd(_free_port(), tree=build_station_trees()["gb300-healthy"]) as sshd:
        yield sshd


def _no_sessions_left(sshd) -> bool:
    deadline = time.monotonic() + 10  # sshd ends a connection's processes once the client side has gone
    while sshd.sessions() and time.monotonic() < deadline:
        time.sleep(0.1)
    return sshd.sessions() == 0


def test_host_layer_over_ssh_uses_one_connection_and_closes_it(tmp_path, healthy_over_ssh):
    sshd = healthy_over_ssh
    (tmp_path / "ssh").mkdir()
    config = tmp_path / "ssh" / "config"
    config.write_text(sshd.ssh_config.read_text())
    # the station's own ssh_config, relative to the inventory (the inventory has none)
    (tmp_path / "inventory.yaml").write_text(
        f"profile: {PROFILE}\nstations:\n  - name: gb300-a\n"
        f"    host: {sshd.spec}\n    phase: serving\n    ssh_config: ssh/config\n"
    )
    private_tmp = Path(tempfile.mkdtemp(prefix="gl-", dir="/tmp"))  # short: the control socket's dir lands here
    log = tmp_path / "commands.log"
    before = sshd.connections()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(GOLIVE_COMMAND_LOG=str(log), TMPDIR=str(private_tmp))
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "golive.cli",
                "run",
                "inventory.yaml",
                "-o",
                "out",
                "-m",
                "host",
                "-p",
                "no:cacheprovider",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        left = list(private_tmp.glob("golive-ssh-*"))
    finally:
        shutil.rmtree(private_tmp, ignore_errors=True)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["verdict"] == "pass" and len(results["checks"]) >= 15, results["verdict"]
    commands = log.read_text().splitlines()
    assert len(commands) > 20, commands
    assert sshd.connections() - before == 1, f"{len(commands)} commands took {sshd.connections() - before} connections"
    assert _no_sessions_left(sshd), "the ssh master outlived the run"
    assert not left, "the control socket's directory was left behind"


def test_without_multiplexing_every_command_would_connect(healthy_over_ssh):
    """The other way: the same sshd counts one connection per command when no master is shared."""
    sshd = healthy_over_ssh
    before = sshd.connections()
    for _ in range(3):
        subprocess.run(
            ["ssh", "-F", str(sshd.ssh_config), "-o", "ControlMaster=no", "golive-loopback", "echo hi"],
            check=True,
            capture_output=True,
            timeout=60,
        )
    assert sshd.connections() - before == 3


def test_connect_shares_one_master_and_close_ends_it(healthy_over_ssh, tmp_path, monkeypatch):
    sshd = healthy_over_ssh
    deep = tmp_path / ("deep" * 20)  # a $TMPDIR too deep for a unix socket's path: the socket goes to /tmp
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    before = sshd.connections()
    connection = connect(sshd.spec, str(sshd.ssh_config), 10)
    host, control = connection.host, connection.control_path
    assert control is not None
    assert str(control).startswith("/tmp/golive-ssh-")
    assert control.parent.stat().st_mode & 0o077 == 0  # only golive's user may use the master
    assert [host.run("echo %s", str(i)).stdout.strip() for i in range(5)] == ["0", "1", "2", "3", "4"]
    assert host.run("cat /etc/hostname").rc in (0, 1)  # inside the tree, through the same connection
    assert sshd.connections() - before == 1
    connection.close()
    connection.close()  # idempotent: the run's cleanup and atexit may both call it
    assert not control.parent.exists()
    assert _no_sessions_left(sshd)


def test_station_ssh_config_wins_over_the_inventorys_and_is_relative_to_it(tmp_path):
    inventory = tmp_path / "inv" / "inventory.yaml"
    inventory.parent.mkdir()
    inventory.write_text(
        "profile: glm-5.3-flash-gb300\nssh_config: site_ssh\nstations:\n"
        "  - {name: a, host: 'ssh://a', ssh_config: ../a_ssh}\n  - {name: b, host: 'ssh://b'}\n"
    )
    loaded = load_inventory(inventory)
    a, b = loaded.inventory.stations
    assert loaded.ssh_config_of(a) == str(tmp_path / "a_ssh")
    assert loaded.ssh_config_of(b) == str(tmp_path / "inv" / "site_ssh")


def test_the_control_socket_carries_no_credentials_and_closing_an_unused_one_is_quiet():
    """The socket's path names neither user, host nor password (not ssh's %r@%h:%p), and close() of a connection that
    never connected removes its private dir without a word."""
    connection = connect("ssh://admin:hunter2@gb300-a.example:2222", None, 1)
    control = connection.control_path
    assert control is not None
    extra = connection.host.backend.ssh_extra_args
    for secret in ("admin", "hunter2", "gb300-a", "2222"):
        assert secret not in str(control) and secret not in extra, (control, extra)
    assert "ControlMaster=auto" in extra and f"ControlPath={control}" in extra and "ControlPersist=120s" in extra
    assert control.parent.is_dir() and not control.exists()
    connection.close()
    assert not control.parent.exists()
