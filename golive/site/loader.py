"""Profiles and inventories: YAML in, validated models out, every error one line with file:line."""

from __future__ import annotations

import difflib
import hashlib
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from golive.core.secrets import station_secrets
from golive.endpoint.answers import battery_ref, load_answer_battery
from golive.endpoint.target import api_key_of
from golive.profile.inventory import Inventory, Station
from golive.profile.origins import ValueOrigins, shipped_cites
from golive.profile.schema import Profile
from golive.profile.waivers import Waivers, load_waivers
from golive.profile.yamlfile import ConfigError, Located, Path_, load_yaml, read_bounded, validate
from golive.site.ansible import AnsibleError, expand
from golive.station.connection import CHROOT, chroot_tree

PROFILES_DIR = Path(__file__).parents[1] / "profile" / "profiles"


def shipped_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))


# --- profiles ------------------------------------------------------------------------------------------------------


def _merge(base: Located, over: Located) -> Located:
    """Site values override the base; mappings merge key by key, everything else replaces (and with it, where the
    base wrote what lay below it)."""

    def merge(a: Any, b: Any, at: Path_) -> Any:
        if isinstance(a, dict) and isinstance(b, dict):
            out = dict(a)
            for key, value in b.items():
                out[key] = merge(a[key], value, at + (key,)) if key in a else value
            return out
        for table in (where, comments):
            for path in [p for p in table if p[: len(at)] == at and len(p) > len(at)]:
                del table[path]
        return b

    where, comments = dict(base.where), dict(base.comments)
    data = merge(base.data, over.data, ())
    where.update(over.where)
    comments = {p: c for p, c in comments.items() if p not in over.where} | over.comments
    return Located(data, where, comments)


def is_shipped(path: Path) -> bool:
    """A profile golive ships (golive/profile/profiles/): it transcribes a recipe; any other file is a site's."""
    return path.resolve().parent == PROFILES_DIR.resolve()


def resolve_profile_ref(ref: str, relative_to: Path | None = None) -> Path:
    """A shipped profile name, or a path (relative to the file that names it)."""
    if ref.endswith((".yaml", ".yml")) or "/" in ref:
        path = Path(ref)
        if relative_to is not None and not path.is_absolute():
            path = relative_to.parent / path
        return path
    shipped = PROFILES_DIR / f"{ref}.yaml"
    if not shipped.exists():
        close = difflib.get_close_matches(ref, shipped_profiles(), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else f"; shipped profiles: {', '.join(shipped_profiles())}"
        raise ConfigError(f"unknown profile '{ref}'{hint}")
    return shipped


def _load_profile_chain(
    path: Path, seen: tuple[Path, ...] = (), cites: dict[tuple[str, Path_], str] | None = None
) -> tuple[Located, list[Path]]:
    """The profile at `path` with every profile it `extends:` merged below it, and the chain of files (base first);
    `cites` collects the recipe citations of every key of the shipped files in the chain."""
    path = path.resolve()
    if path in seen:
        raise ConfigError(f"{path}: 'extends' loops back to itself")
    located = load_yaml(path)
    if not isinstance(located.data, dict):
        raise ConfigError(f"{path}:1: a profile must be a mapping of keys to values")
    if cites is not None and is_shipped(path):
        cites.update(shipped_cites(located, str(path)))
    parent_ref = located.data.pop("extends", None)
    if parent_ref is None:
        return located, [path]
    if not isinstance(parent_ref, str):
        file, line = located.where[("extends",)]
        raise ConfigError(f"{file}:{line}: 'extends' must name a shipped profile or a profile file")
    try:
        parent_path = resolve_profile_ref(parent_ref, path)
    except ConfigError as exc:
        file, line = located.where[("extends",)]
        raise ConfigError(f"{file}:{line}: {exc}") from None
    parent, chain = _load_profile_chain(parent_path, seen + (path,), cites)
    return _smoke_keeps_its_numbers(_merge(parent, located), located), chain + [path]


def _smoke_keeps_its_numbers(merged: Located, over: Located) -> Located:
    """A floor is a smoke floor (load.smoke) only with the number of the profile that said so: a profile that sets its
    own number for one, and does not restate load.smoke, judges it (it leaves the inherited list)."""
    load, own = merged.data.get("load"), over.data.get("load")
    if not isinstance(load, dict) or not isinstance(own, dict) or "smoke" in own:
        return merged
    smoke = load.get("smoke")
    floors = {**(own.get("floors") or {})} if isinstance(own.get("floors") or {}, dict) else {}
    if "slo" in own:  # goodput's number is its share and the objectives a request must meet
        floors["goodput_share"] = True
    if not isinstance(smoke, dict) or not floors or not isinstance(smoke.get("floors"), list):
        return merged
    kept = [gate for gate in smoke["floors"] if gate not in floors]
    if kept:
        load["smoke"] = {**smoke, "floors": kept}
    else:
        del load["smoke"]
    return merged


@dataclass
class LoadedProfile:
    profile: Profile
    files: list[Path]
    sha256: str


def load_profile(ref: str | Path, relative_to: Path | None = None) -> LoadedProfile:
    path = ref if isinstance(ref, Path) else resolve_profile_ref(ref, relative_to)
    cites: dict[tuple[str, Path_], str] = {}
    located, chain = _load_profile_chain(path, cites=cites)
    profile = validate(Profile, located, "profile", str(path)).written_at(ValueOrigins(located.where, cites))
    _check_batteries(profile, chain)
    digest = hashlib.sha256(yaml.safe_dump(located.data, sort_keys=True).encode()).hexdigest()
    return LoadedProfile(profile=profile, files=chain, sha256=digest)


def _check_batteries(profile: Profile, chain: list[Path]) -> None:
    """Site batteries are the site's YAML too: a typo in one is a config error (file:line) before anything runs."""
    for ref in profile.endpoint.site_batteries:
        load_answer_battery(battery_ref(ref, chain[-1]))


def _check_inventory_batteries(inventory: Inventory, path: Path, located: Located) -> None:
    """Site batteries the inventory names: each a file relative to the inventory, valid before anything runs."""
    for i, ref in enumerate(inventory.site_batteries):
        try:
            battery = battery_ref(ref, path)
        except (ConfigError, ValueError, OSError):  # no such file, or no possible path (a NUL byte)
            file, line = located.where.get(("site_batteries", i), (str(path), 1))
            raise ConfigError(f"{file}:{line}: site battery {ref!r}: no such file ({path.parent / ref})") from None
        load_answer_battery(battery)  # its own problems name its own file:line


MAX_CA_FILE_BYTES = 4 * 2**20  # a CA bundle (certifi's is ~300 KiB)


def _check_ca_files(inventory: Inventory, path: Path, located: Located, where_of: list[Path_]) -> None:
    """A site CA that golive cannot read or use is a config error (file:line) before anything runs."""
    for i, station in enumerate(inventory.stations):
        if not station.tls_ca_file:
            continue
        ca_file = path.parent / station.tls_ca_file
        file, line = located.where.get(where_of[i] + ("tls_ca_file",), located.where.get(where_of[i], (path, 1)))
        try:
            read_bounded(ca_file, MAX_CA_FILE_BYTES, "a CA file")  # never /dev/zero or a FIFO handed to OpenSSL
            ssl.create_default_context(cafile=str(ca_file))
        except ConfigError as exc:
            problem = str(exc).removeprefix(f"{ca_file}: ").replace("file not found", "no such file")
        except ssl.SSLError:
            problem = "not a PEM CA certificate"
        except FileNotFoundError:
            problem = "no such file"
        except (OSError, ValueError) as exc:  # unreadable, a folder, a NUL byte in the name
            problem = f"cannot read it ({getattr(exc, 'strerror', None) or exc})"
        else:
            continue
        raise ConfigError(
            f"{file}:{line}: station {station.name}: tls_ca_file {station.tls_ca_file!r}: {problem} ({ca_file})"
        )


# --- inventories ---------------------------------------------------------------------------------------------------


@dataclass
class LoadedInventory:
    inventory: Inventory
    path: Path
    profile: LoadedProfile
    station_profiles: dict[str, LoadedProfile] = field(default_factory=dict)
    waivers: Waivers | None = None  # where the inventory names a waiver file
    lines: dict[tuple[str, str], str] = field(default_factory=dict)  # (station, key) → "file:line" it was written at

    def profile_of(self, station: Station) -> LoadedProfile:
        return self.station_profiles.get(station.name, self.profile)

    def host_spec(self, station: Station) -> str | None:
        """testinfra host spec; chroot:// paths are relative to the inventory file."""
        tree = chroot_tree(station.host)
        if tree is None:
            return station.host
        return f"{CHROOT}{(self.path.parent / tree).resolve()}"  # an absolute tree stays as it is

    def written_at(self, station: Station, key: str) -> str:
        """Where the inventory says a station's `key` ("inventory.yaml:7"), or the station itself where the key is
        not written; for a finding's Do that names the line to change."""
        return self.lines.get((station.name, key)) or self.lines.get((station.name, ""), str(self.path))

    def secrets(self) -> list[str]:
        """Every secret the run knows of these stations (golive.core.secrets.station_secrets: each API key as the
        environment holds it now, and its encodings), longest first: scrubbed from every output."""
        return station_secrets(self.inventory.stations, api_key_of)

    def tls_ca_file(self, station: Station) -> str | None:
        """The station's site CA for https, relative to the inventory file."""
        return str((self.path.parent / station.tls_ca_file).resolve()) if station.tls_ca_file else None

    @property
    def ssh_config(self) -> str | None:
        """The inventory's ssh_config, relative to the inventory file."""
        path = self.inventory.ssh_config
        return str((self.path.parent / path).resolve()) if path else None

    def ssh_config_of(self, station: Station) -> str | None:
        """The station's own ssh_config, else the inventory's; relative to the inventory file."""
        if station.ssh_config:
            return str((self.path.parent / station.ssh_config).resolve())
        return self.ssh_config


def _profile_at(ref: str, inventory: Path, located: Located, at: Path_) -> LoadedProfile:
    try:
        return load_profile(ref, relative_to=inventory)
    except ConfigError as exc:
        if str(exc).startswith("unknown profile"):
            file, line = located.where.get(at, (str(inventory), 1))
            raise ConfigError(f"{file}:{line}: {exc}") from None
        raise


def _expand_stations_from(inventory: Inventory, path: Path, located: Located) -> tuple[Inventory, list[Path_]]:
    """The inventory with each `stations_from` group's hosts as stations, and where each station was written."""
    where_of: list[Path_] = [("stations", i) for i in range(len(inventory.stations))]
    if not inventory.stations_from:
        return inventory, where_of
    stations = list(inventory.stations)
    for i, source in enumerate(inventory.stations_from):
        try:
            expanded = expand(source, path)
        except AnsibleError as exc:
            file, line = located.where[("stations_from", i)]
            raise ConfigError(f"{file}:{line}: {exc}") from None
        stations += expanded
        where_of += [("stations_from", i)] * len(expanded)
    return inventory.model_copy(update={"stations": stations}), where_of


def load_inventory(path: Path, profile_override: str | None = None) -> LoadedInventory:
    path = Path(path)
    located = load_yaml(path)
    inventory = validate(Inventory, located, "inventory", str(path))
    inventory, where_of = _expand_stations_from(inventory, path, located)
    if profile_override:
        profile = load_profile(profile_override)
    else:
        profile = _profile_at(inventory.profile, path, located, ("profile",))
    names = [s.name for s in inventory.stations]
    station_profiles = {}
    for i, station in enumerate(inventory.stations):
        if names.index(station.name) != i:
            file, line = located.where[where_of[i]]
            raise ConfigError(f"{file}:{line}: station name '{station.name}' is used twice")
        if station.profile and not profile_override:
            station_profiles[station.name] = _profile_at(station.profile, path, located, where_of[i] + ("profile",))
    waivers = None
    if inventory.waivers:
        waivers_path = path.parent / inventory.waivers
        if not waivers_path.is_file():
            file, line = located.where[("waivers",)]
            raise ConfigError(f"{file}:{line}: waiver file {waivers_path} not found")
        waivers = load_waivers(waivers_path)
    _check_inventory_batteries(inventory, path, located)
    _check_ca_files(inventory, path, located, where_of)
    lines = {
        (station.name, key): f"{file}:{line}"
        for station, at in zip(inventory.stations, where_of, strict=True)
        for key in ("", *type(station).model_fields)
        if (found := located.where.get(at + (key,) if key else at)) is not None
        for file, line in [found]
    }
    return LoadedInventory(
        inventory=inventory,
        path=path.resolve(),
        profile=profile,
        station_profiles=station_profiles,
        waivers=waivers,
        lines=lines,
    )
