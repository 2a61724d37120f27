"""Read-only, proven: the host layer leaves a station tree exactly as it was, and every command it sends is on the
read-only allow-list (golive/station/readonly.py), which refuses anything that could write."""

import hashlib
import os
from pathlib import Path

import pytest
from e2e import needs_chroot
from golive_run import golive_run

from golive.station.connection import connect
from golive.station.readonly import allowed
from golive_testbed.targets import build_station_trees

REPO = Path(__file__).resolve().parents[2]


def tree_state(root: Path) -> str:
    """Every path's type, mode, size, mtime, ctime and (small files) content or link target: any write changes it.
    Checkpoint shards are large sparse files: ctime (which no write can avoid changing) stands for their content."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            path = Path(dirpath, name)
            st = path.lstat()
            digest.update(
                f"{path.relative_to(root)}|{st.st_mode}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}".encode()
            )
            if path.is_symlink():
                digest.update(os.readlink(path).encode())
            elif path.is_file() and st.st_size <= 1 << 20:
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


@needs_chroot
def test_host_layer_changes_nothing_and_sends_only_allowed_commands(tmp_path):
    trees = build_station_trees()
    tree = trees["gb300-healthy"]
    before = tree_state(tree)
    log = tmp_path / "commands.log"
    run = golive_run(
        REPO / "fixtures/inventories/gb300-healthy.yaml",
        tmp_path / "out",
        "-m",
        "host",
        "-q",
        "-p",
        "no:cacheprovider",
        env={"GOLIVE_COMMAND_LOG": str(log)},
    )
    assert run.code == 0, run.output[-3000:]
    assert tree_state(tree) == before
    sent = set(log.read_text().splitlines())
    assert {"systemctl show glm53-flash.service", "docker inspect glm53-flash"} <= sent  # the log saw the checks
    assert [c for c in sent if not allowed(c)] == []


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf /srv/models",
        "echo 1 > /proc/sys/vm/drop_caches",
        "sync",
        "cat /a > /b",
        "cat /a >> /b",
        "cat /a | tee /b",
        "cat /a; rm /b",
        "cat /a && reboot",
        "ls `rm /b`",
        "cat $(rm /b)",
        "ls | sh",
        "systemctl restart glm53-flash",
        "systemctl stop glm53-flash",
        "docker rm -f glm53-flash",
        "docker run --rm alpine",
        "find / -delete",
        "find / -exec rm {} +",
        "ip link set eth0 mtu 1500",
        "ip netns exec x reboot",
        "ethtool -K eth0 tso off",
        "sysctl -w vm.drop_caches=1",
        "nvidia-smi -r",
        "nvidia-smi -pm 1",
        "cat /a\nrm /b",
        "cat 'unterminated",
        "journalctl --vacuum-time=1s",
        "journalctl --rotate",
        "journalctl --flush",
        "python3 -c 'import os;os.remove(\"/etc/x\")'",
        "python3 -c 'import locale;print(locale.getpreferredencoding())' > /etc/x",
    ],
)
def test_allow_list_refuses_anything_that_could_write(command):
    assert not allowed(command)


@pytest.mark.parametrize(
    "command",
    [
        "ls -1 /proc/driver/nvidia/gpus 2>/dev/null",
        "find /srv/m -maxdepth 1 -name '*.safetensors' -exec stat -c '%n|%s' {} +",
        "nvidia-smi --query-gpu=index,name --format=csv,noheader",
        "ip -j link show",
        "ethtool -i eth0",
        "cat -- /etc/os-release",
        "journalctl -u glm53-flash.service -n 200 --no-pager -o short-iso 2>/dev/null",
        "python3 -c 'import locale;print(locale.getpreferredencoding())'",  # testinfra's, on an answer not ASCII
    ],
)
def test_allow_list_lets_reads_through(command):
    assert allowed(command)


def test_an_answer_that_is_not_ascii_is_read(tmp_path):
    """testinfra asks the station's encoding (its own probe, on the allow-list) the first time an answer is not ASCII:
    a journal with vLLM's progress bars, a UTF-8 Description=. It was refused, and the check said "a golive bug"."""
    (tmp_path / "unit.txt").write_text("Description=GLM-5.3 — serving █▌\n", encoding="utf-8")
    connection = connect("local://")
    try:
        assert connection.host.file(str(tmp_path / "unit.txt")).content_string == "Description=GLM-5.3 — serving █▌\n"
    finally:
        connection.close()
