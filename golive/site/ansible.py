"""Stations from an Ansible inventory: each host of a group becomes a station, reached through testinfra's ansible
backend (`ansible://HOST?ansible_inventory=/abs/path`). The hosts are read with testinfra's own AnsibleRunner, which
runs `ansible-inventory --list` (ansible-core: `pip install 'golive[ansible]'`)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Protocol
from urllib.parse import quote

from pydantic import ValidationError

from golive.profile.inventory import AnsibleStations, Station, StationSettings

EXTRA = "pip install 'golive[ansible]'"
# The ansible_connection types testinfra's ansible backend runs commands through itself
# (testinfra/utils/ansible_runner.py get_ansible_host); any other falls back to `ansible -m shell`, whose answer
# testinfra cannot read (a chroot host ends in KeyError 'stdout'), so golive refuses it before the run.
SUPPORTED_CONNECTIONS = ("ssh", "smart", "paramiko_ssh", "local", "docker", "community.docker.docker", "lxc", "lxd")


class _Inventory(Protocol):
    """What golive reads of testinfra's AnsibleRunner (testinfra/utils/ansible_runner.py; it ships no types)."""

    def get_hosts(self, pattern: str = "all") -> list[str]: ...
    def get_variables(self, host: str) -> dict[str, object]: ...


class AnsibleError(Exception):
    """Why a group could not be expanded; str() is one line, the caller adds file:line."""


def host_spec(host: str, inventory: Path) -> str:
    return f"ansible://{host}?ansible_inventory={quote(str(inventory), safe='/')}"


def _find_ansible_inventory() -> None:
    """A venv's console scripts lie beside its python, on PATH or not (`.venv/bin/golive` run without activating)."""
    if shutil.which("ansible-inventory"):
        return
    beside = Path(sys.executable).parent
    if (beside / "ansible-inventory").exists():
        os.environ["PATH"] = f"{beside}{os.pathsep}{os.environ.get('PATH', '')}"
        return
    raise AnsibleError(f"stations_from reads Ansible inventories with ansible-core, which is not installed: {EXTRA}")


def group_hosts(inventory: Path, group: str) -> list[str]:
    """The hosts of an Ansible group (or host pattern), sorted."""
    try:
        from testinfra.utils.ansible_runner import AnsibleRunner
    except ImportError:  # testinfra is golive's own dependency: only a broken install gets here
        raise AnsibleError("testinfra is not installed: pip install golive") from None
    _find_ansible_inventory()
    if not inventory.is_file():
        raise AnsibleError(f"Ansible inventory {inventory} not found")
    try:
        reader: _Inventory = AnsibleRunner(str(inventory))
        hosts = reader.get_hosts(group)
    except RuntimeError:  # testinfra: ansible-inventory parsed no source ("missing file ?"; the file is there)
        raise AnsibleError(
            f"Ansible cannot parse {inventory} as an inventory (`ansible-inventory -i {inventory} --list` says why)"
        ) from None
    except Exception as exc:  # ansible-inventory failed (testinfra raises AssertionError/RuntimeError with its output)
        lines = [line for line in str(exc).splitlines() if line.strip()]
        raise AnsibleError(
            f"ansible-inventory cannot read {inventory}: {lines[-1] if lines else type(exc).__name__}"
        ) from None
    if not hosts:
        raise AnsibleError(f"Ansible group '{group}' has no hosts in {inventory}")
    runner: _Inventory = AnsibleRunner(str(inventory))
    for host in hosts:
        connection = str(runner.get_variables(host).get("ansible_connection") or "ssh")
        if connection not in SUPPORTED_CONNECTIONS:
            raise AnsibleError(
                f"Ansible host '{host}' of group '{group}' has ansible_connection: {connection}, which "
                f"golive cannot run commands through; supported: {', '.join(SUPPORTED_CONNECTIONS)}"
            )
    return hosts


def expand(source: AnsibleStations, relative_to: Path) -> list[Station]:
    """One station per host of the group; the host's name is the station's name."""
    inventory = (relative_to.parent / source.ansible_inventory).resolve()
    stations = []
    for host in group_hosts(inventory, source.group):
        fields = source.model_dump(include=set(StationSettings.model_fields), exclude_none=True)
        for key in ("endpoint", "vllm_endpoint"):  # each host's own server
            if fields.get(key):
                fields[key] = fields[key].replace("{host}", host)
        try:
            stations.append(Station(name=host, host=host_spec(host, inventory), **fields))
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"])
            raise AnsibleError(f"Ansible host '{host}' of group '{source.group}': {where}: {error['msg']}") from None
    return stations
