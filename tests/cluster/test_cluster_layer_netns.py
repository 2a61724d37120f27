"""The cluster layer's rail checks end to end: `golive run -m cluster` against two network-namespace stations over
ssh (testinfra's ssh backend, the inventory's ssh_config). The healthy pair passes; each broken pair fails exactly
the check it breaks, with the operator message checked."""

from pathlib import Path

import pytest
from golive_run import golive_run

REPO = Path(__file__).resolve().parents[2]
RAIL_CHECKS = "rail or jumbo"  # what a veth pair can show: no RDMA, no NCCL log (station trees cover those)
# variant → {(check, station role): fragments of its failure message}
BROKEN = {
    "mtu-b-1500": {
        ("test_rail_mtu", "b"): ["rail0 MTU 1500", "Recipe: MTU 9000 on every rail [two-station recipe]"],
        ("test_jumbo_frames_cross_every_rail_both_ways", "a"): [
            "→ 10.213.0.2 on rail0: dropped on the path",
            "→ 10.213.0.1 on rail0: local MTU too small",
            "MTU 1500",
            "Recipe: link validated with jumbo-frame pings of 8972 bytes",
        ],
    },
    "rail-address-missing": {
        ("test_rail_holds_its_address", "b"): ["rail0 holds no IPv4 address, not 10.213.0.2", "Do: add the address"],
    },
    "route-wrong-interface": {
        ("test_rail_route_to_peer_leaves_by_the_rail", "a"): ["10.213.0.2 is reached via mgmt0", "(ip -j route get)"],
    },
}


def golive_rails(pair, tmp_path: Path) -> tuple[int, dict, str]:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        f"profile: {REPO}/fixtures/profiles/netns-rail-site.yaml\n"
        f"ssh_config: {pair.ssh_config}\n"
        f"stations:\n"
        f"  - {{name: {pair.a.name}, role: a, host: '{pair.a.spec}'}}\n"
        f"  - {{name: {pair.b.name}, role: b, host: '{pair.b.spec}'}}\n"
    )
    out = tmp_path / "out"
    run = golive_run(inventory, out, "-m", "cluster", "-k", RAIL_CHECKS, "-q")
    return run.code, run.results, run.output


def by_check(results: dict, pair) -> dict[tuple[str, str], dict]:
    role = {pair.a.name: "a", pair.b.name: "b"}
    return {(c["nodeid"].split("::")[-1].split("[")[0], role[c["station"]]): c for c in results["checks"]}


def test_healthy_pair_passes_every_rail_check(healthy_pair, tmp_path):
    code, results, output = golive_rails(healthy_pair, tmp_path)
    checks = by_check(results, healthy_pair)
    assert {k: c["outcome"] for k, c in checks.items() if c["outcome"] != "passed"} == {}, output
    assert len(checks) == 11 and code == 0 and results["verdict"] == "pass", output  # 5 per station + the pair's ping


@pytest.mark.parametrize(
    "variant", [pytest.param(v, marks=() if v == "mtu-b-1500" else pytest.mark.slow) for v in sorted(BROKEN)]
)  # ~25 s a run: one by default, the rest slow
def test_broken_pair_fails_exactly_its_check(station_pairs, tmp_path, variant):
    pair = station_pairs(variant)
    code, results, output = golive_rails(pair, tmp_path)
    checks = by_check(results, pair)
    failed = {k for k, c in checks.items() if c["outcome"] == "failed"}
    assert failed == set(BROKEN[variant]), output
    assert code == 1 and results["verdict"] == "fail"
    for key, fragments in BROKEN[variant].items():
        message = checks[key]["message"]
        for fragment in fragments:
            assert fragment in message, message
