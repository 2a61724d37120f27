"""Inventory `stations_from`: an Ansible group's hosts become stations (read by testinfra's AnsibleRunner, i.e. the
real `ansible-inventory`), and every way it can go wrong is one line with file:line."""

import sys
from pathlib import Path

import pytest

from golive.site.loader import ConfigError, load_inventory

pytest.importorskip("ansible", reason="ansible-core is golive's `test` extra (scripts/setup.sh installs it)")

HOSTS = """\
all:
  children:
    gpu_stations:
      hosts:
        gpu-01: {ansible_host: 10.0.0.1}
        gpu-02: {ansible_host: 10.0.0.2}
    login:
      hosts:
        login-01:
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error_of(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_inventory(path)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def inventory(tmp_path: Path, stations_from: str, stations: str = "") -> Path:
    return write(tmp_path, "fleet.yaml", f"profile: glm-5.3-flash-gb300\n{stations}stations_from:\n{stations_from}")


def test_each_host_of_the_group_becomes_a_station(tmp_path):
    hosts = write(tmp_path, "hosts.yml", HOSTS)
    path = inventory(
        tmp_path,
        "  - {ansible_inventory: hosts.yml, group: gpu_stations, role: b,\n"
        "     endpoint: 'http://{host}:8888/v1', api_key_env: SITE_KEY}\n",
        stations="stations:\n  - {name: local-a, host: 'local://'}\n",
    )
    loaded = load_inventory(path)
    stations = loaded.inventory.stations
    assert [s.name for s in stations] == ["local-a", "gpu-01", "gpu-02"]
    gpu = stations[1]
    assert loaded.host_spec(gpu) == f"ansible://gpu-01?ansible_inventory={hosts.resolve()}"
    assert (gpu.role, gpu.endpoint, gpu.api_key_env) == ("b", "http://gpu-01:8888/v1", "SITE_KEY")
    assert (stations[0].role, stations[0].host) == ("a", "local://")


def test_hosts_behind_a_gateway_keep_the_gateway_keys(tmp_path):
    """A group of stations each behind its own gateway: every key a listed station takes, `{host}` in both URLs."""
    write(tmp_path, "hosts.yml", HOSTS)
    path = inventory(
        tmp_path,
        "  - {ansible_inventory: hosts.yml, group: gpu_stations, endpoint: 'http://{host}:4000/v1',\n"
        "     gateway: litellm, gateway_health: /health/readiness, vllm_endpoint: 'http://{host}:8888/v1',\n"
        "     ssh_config: ssh_config}\n",
    )
    gpu = load_inventory(path).inventory.stations[1]
    assert (gpu.gateway, gpu.gateway_health, gpu.ssh_config) == ("litellm", "/health/readiness", "ssh_config")
    assert (gpu.endpoint, gpu.vllm_endpoint) == ("http://gpu-02:4000/v1", "http://gpu-02:8888/v1")


def test_a_gateway_health_that_is_not_a_path_names_the_line(tmp_path):
    """A station's key is checked where it is written, as a station's is (the fields are declared once,
    StationSettings): file:line, before Ansible is asked for the hosts."""
    write(tmp_path, "hosts.yml", HOSTS)
    path = inventory(
        tmp_path,
        "  - {ansible_inventory: hosts.yml, group: gpu_stations, endpoint: 'http://{host}:4000/v1',\n"
        "     gateway_health: health}\n",
    )
    message = error_of(path)
    assert message.startswith(f"{path}:4: 'stations_from.0.gateway_health': gateway_health 'health' is a path"), message


def test_the_host_spec_reaches_the_host_through_testinfras_ansible_backend(tmp_path):
    import testinfra

    write(tmp_path, "hosts.yml", "all:\n  hosts:\n    here: {ansible_connection: local}\n")
    loaded = load_inventory(inventory(tmp_path, "  - {ansible_inventory: hosts.yml, group: all}\n"))
    host = testinfra.get_host(loaded.host_spec(loaded.inventory.stations[0]))
    assert host.backend.NAME == "ansible" and host.run("echo reached").stdout.strip() == "reached"


def test_an_unknown_group_names_the_line(tmp_path):
    hosts = write(tmp_path, "hosts.yml", HOSTS)
    path = inventory(tmp_path, "  - {ansible_inventory: hosts.yml, group: gpu_statoins}\n")
    assert error_of(path) == f"{path}:3: Ansible group 'gpu_statoins' has no hosts in {hosts.resolve()}"


def test_a_missing_ansible_inventory_names_the_line(tmp_path):
    path = inventory(tmp_path, "  - {ansible_inventory: nowhere.yml, group: all}\n")
    assert error_of(path) == f"{path}:3: Ansible inventory {tmp_path.resolve()}/nowhere.yml not found"


def test_a_file_ansible_cannot_parse_names_the_line(tmp_path):
    hosts = write(tmp_path, "hosts.yml", "all:\n  hosts: [oops\n")
    path = inventory(tmp_path, "  - {ansible_inventory: hosts.yml, group: all}\n")
    assert error_of(path) == (
        f"{path}:3: Ansible cannot parse {hosts.resolve()} as an inventory "
        f"(`ansible-inventory -i {hosts.resolve()} --list` says why)"
    )


def test_a_host_named_like_a_station_already_listed_is_used_twice(tmp_path):
    write(tmp_path, "hosts.yml", HOSTS)
    path = inventory(
        tmp_path,
        "  - {ansible_inventory: hosts.yml, group: gpu_stations}\n",
        stations="stations:\n  - {name: gpu-02, host: 'local://'}\n",
    )
    assert error_of(path) == f"{path}:5: station name 'gpu-02' is used twice"


def test_a_misspelt_key_and_an_empty_inventory(tmp_path):
    path = inventory(tmp_path, "  - {ansible_inventory: hosts.yml, grop: all}\n")
    assert error_of(path) == f"{path}:3: unknown key 'stations_from.0.grop'; did you mean 'group'?"
    empty = write(tmp_path, "empty.yaml", "profile: glm-5.3-flash-gb300\n")
    assert error_of(empty) == f"{empty}:1: '(top level)': an inventory needs 'stations' or 'stations_from'"


def test_without_ansible_core_the_line_names_the_extra(tmp_path, monkeypatch):
    write(tmp_path, "hosts.yml", HOSTS)
    path = inventory(tmp_path, "  - {ansible_inventory: hosts.yml, group: all}\n")
    monkeypatch.setenv("PATH", str(tmp_path))  # no ansible-inventory on PATH, none beside python
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    assert error_of(path) == (
        f"{path}:3: stations_from reads Ansible inventories with ansible-core, which is not "
        f"installed: pip install 'golive[ansible]'"
    )
