"""The NCCL checks on the real two-GPU capture (fixtures/recorded/h200x2-device), through testinfra's local backend:
one host over P2P is not a network, so GDRDMA is not applicable and nothing fell back to sockets; the same machine
forced onto sockets fails the socket check, quoting the line."""

from pathlib import Path

import pytest
from golive_run import golive_run

REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "fixtures" / "recorded" / "h200x2-device"


def golive_nccl(tmp_path: Path, log: Path) -> dict[str, dict]:
    site = (REPO / "docs/examples/h200x2/h200x2-site.yaml").read_text()
    (tmp_path / "site.yaml").write_text(site.replace("/var/log/golive-h200x2/nccl.log", str(log)))
    (tmp_path / "inventory.yaml").write_text(
        "profile: site.yaml\nstations:\n  - {name: h200x2, role: a, host: 'local://', phase: pre-start}\n"
    )
    out = tmp_path / "out"
    run = golive_run(tmp_path / "inventory.yaml", out, "-m", "cluster", "-k", "test_nccl", "-q", timeout=120)
    assert run.results, run.output
    return {name: checks[0] for name, checks in run.by_name().items()}


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        (
            "nccl-p2p.txt",
            {
                "test_nccl_log_matches_declared_topology": "passed",
                "test_nccl_uses_gpu_direct_rdma": "not_applicable",
                "test_nccl_never_falls_back_to_sockets": "passed",
                "test_nccl_log_has_no_warnings": "passed",
                "test_nccl_version_matches_profile": "failed",
                "test_nccl_environment_is_pinned": "not_applicable",
            },
        ),
        (
            "nccl-socket.txt",
            {
                "test_nccl_log_matches_declared_topology": "passed",
                "test_nccl_uses_gpu_direct_rdma": "not_checked",
                "test_nccl_never_falls_back_to_sockets": "failed",
                "test_nccl_log_has_no_warnings": "passed",
                "test_nccl_version_matches_profile": "failed",
                "test_nccl_environment_is_pinned": "not_applicable",
            },
        ),
    ],
)
def test_nccl_checks_on_the_real_two_gpu_capture(tmp_path, log, expected):
    checks = golive_nccl(tmp_path, CAPTURE / log)
    assert {name: c["outcome"] for name, c in checks.items()} == expected
    assert "`NCCL version 2.28.9+cuda13.0`" in checks["test_nccl_version_matches_profile"]["message"]
    if log == "nccl-p2p.txt":
        assert "both ranks share one host (P2P in" in checks["test_nccl_uses_gpu_direct_rdma"]["message"]
    else:
        assert (
            "line 80: `vm:868:868 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [receive] via NET/Socket/0`"
            in checks["test_nccl_never_falls_back_to_sockets"]["message"]
        )
        assert "see test_nccl_never_falls_back_to_sockets" in checks["test_nccl_uses_gpu_direct_rdma"]["message"]
