"""A fleet from an Ansible inventory: the two network-namespace hosts (real sshd) listed in an Ansible group, golive's
inventory naming only that group (`stations_from`); `golive run -n 2` checks both through testinfra's ansible backend
and writes one report. The hosts are no GPU stations: the host checks must say so, station by station."""

import re
from pathlib import Path

import pytest
from golive_run import golive_run

pytest.importorskip("ansible", reason="ansible-core is golive's `test` extra (scripts/setup.sh installs it)")

REPO = Path(__file__).resolve().parents[2]
CHECKS = "serving_gpu_present or checkpoint_disk_space"  # two host checks: a GPU and a disk read over ssh


def test_stations_from_an_ansible_group_one_report(healthy_pair, tmp_path):
    pair = healthy_pair
    (tmp_path / "hosts.yml").write_text(
        "all:\n  children:\n    gpu_stations:\n"
        f"      hosts:\n        {pair.a.name}:\n        {pair.b.name}:\n"
        "      vars:\n        ansible_connection: ssh\n        ansible_user: root\n"
        f"        ansible_ssh_common_args: '-F {pair.ssh_config}'\n"
        "    login:\n      hosts:\n        login-01:\n"
    )
    inventory = tmp_path / "fleet.yaml"
    inventory.write_text(
        f"profile: {REPO}/fixtures/profiles/netns-rail-site.yaml\n"
        "stations_from:\n  - {ansible_inventory: hosts.yml, group: gpu_stations}\n"
    )
    out = tmp_path / "out"
    run = golive_run(
        inventory,
        out,
        "-m",
        "host",
        "-k",
        CHECKS,
        "-n",
        "2",
        "-v",
        timeout=120,
        env={"ANSIBLE_HOST_KEY_CHECKING": "False"},
    )
    output, results = run.output, run.results
    assert "Traceback" not in output and results, output
    names = [pair.a.name, pair.b.name]
    assert sorted(s["name"] for s in results["stations"]) == sorted(names)
    assert all(s["host"].startswith(f"ansible://{s['name']}?ansible_inventory=") for s in results["stations"])
    by_station = {
        name: {c["nodeid"].split("::")[-1]: c for c in results["checks"] if c["station"] == name} for name in names
    }
    assert len(results["checks"]) == 4 and all(len(checks) == 2 for checks in by_station.values()), output
    for name, checks in by_station.items():
        assert set(checks) == {f"test_serving_gpu_present[{name}]", f"test_checkpoint_disk_space[{name}]"}
        gpu = checks[f"test_serving_gpu_present[{name}]"]
        # the command ran on the host (over ssh): the failure is the host's, no nvidia-smi, not a connection error
        assert gpu["outcome"] == "failed" and f"failed on {name} (exit 127)" in gpu["message"], gpu
        assert "nvidia-smi: command not found" in gpu["message"], gpu
        disk = checks[f"test_checkpoint_disk_space[{name}]"]
        assert disk["outcome"] == "failed" and "the profile gives no checkpoint.path" in disk["message"], disk
    assert run.code == 1 and results["verdict"] == "fail", output
    workers = {name: set(re.findall(rf"^\[(gw\d+)\] .*\[{name}\]", output, flags=re.MULTILINE)) for name in names}
    assert all(len(w) == 1 for w in workers.values()), workers
    record = (out / "go-live.md").read_text()
    assert all(f"### {name}" in record for name in names)
