"""An ssh host that accepts TCP and never sends its banner: golive gives up within the profile's connect timeout."""

import socket
import time

import pytest
from golive_run import golive_run

from golive.station.connection import with_connect_timeout


def test_ssh_specs_get_the_connect_timeout_unless_they_set_one():
    assert with_connect_timeout("ssh://root@h:22", 2.5) == "ssh://root@h:22?timeout=3"
    assert with_connect_timeout("paramiko://h?sudo=true", 10) == "paramiko://h?sudo=true&timeout=10"
    assert with_connect_timeout("safe-ssh://h", 0.2) == "safe-ssh://h?timeout=1"
    assert with_connect_timeout("ssh://h?timeout=30", 10) == "ssh://h?timeout=30"  # the spec's own wins
    assert with_connect_timeout("docker://vllm", 10) == "docker://vllm"
    assert with_connect_timeout("local://", 10) == "local://"


@pytest.fixture
def bannerless_sshd():
    """Accepts TCP connections (the kernel does, from the backlog) and never sends an SSH banner."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield sock.getsockname()[1]
    sock.close()


def test_host_that_never_finishes_its_handshake_fails_within_connect_timeout(tmp_path, bannerless_sshd):
    (tmp_path / "site.yaml").write_text("extends: glm-5.3-flash-gb300\nhost:\n  connect_timeout_s: 2\n")
    (tmp_path / "ssh_config").write_text(
        "Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  BatchMode yes\n"
    )
    host = f"ssh://root@127.0.0.1:{bannerless_sshd}"
    (tmp_path / "inventory.yaml").write_text(
        f"profile: site.yaml\nssh_config: ssh_config\nstations:\n  - name: mute\n    host: {host}\n"
    )
    started = time.monotonic()
    run = golive_run(
        tmp_path / "inventory.yaml", tmp_path / "out", "-m", "host", "-p", "no:cacheprovider", cwd=tmp_path, timeout=120
    )
    took = time.monotonic() - started
    output = run.output
    assert run.code == 2, output[-3000:]
    checks = run.checks
    assert len(checks) > 10 and {c["outcome"] for c in checks} == {"not_checked"}, checks
    reasons = {c["message"] for c in checks}
    assert len(reasons) == 1, reasons  # asked once: one reason, one connect timeout
    [reason] = reasons
    assert "\n" not in reason and f"station mute's host {host}" in reason and "host.connect_timeout_s" in reason, reason
    assert "banner" in reason or "timed out" in reason.lower(), reason  # ssh's own words: what happened
    [verdict_line] = [line for line in output.splitlines() if line.startswith("  not checked (")]
    assert host in verdict_line, verdict_line
    assert "Traceback" not in output and "CommandResult" not in output, output[-3000:]
    # 2 s connect timeout, once; the rest is starting Python and pytest (slow on a busy 2-core CI box)
    assert took < 2 + 20, f"an unanswering ssh host took {took:.0f}s"
