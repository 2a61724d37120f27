"""`golive profile capture`: a running, known-good station written down as a site profile.

The station is read read-only through the facts the checks read (golive.station.host.StationFacts, the endpoint
client), the closest shipped recipe is chosen, and the site profile `extends:` it with only what differs from the
recipe or what only the site knows, each value commented with where it was read. Values that differ from the recipe,
and station facts that break a recipe rule no profile can keep (a docker restart policy, say), make the review list
the operator reads before using the profile. Secrets (API keys, passwords in host specs) are never read into it.

This module runs the capture and the command; the jobs live apart: golive.day2.captured (what a capture holds),
recipe_fit (which recipe), endpoint_values, host_values and cluster_values (reading the station), profile_yaml
(writing it), and the rules a check shares with a capture in golive.profile.recipe.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from golive.core.secrets import hide_password, scrub, station_secrets
from golive.core.verdict import EXIT_GO, EXIT_INCOMPLETE, EXIT_USAGE, counted, printable
from golive.day2.captured import Capture, CaptureError, Collector, Observed
from golive.day2.cluster_values import capture_cluster
from golive.day2.endpoint_values import capture_endpoint, read_endpoint
from golive.day2.host_values import capture_gpus, capture_host, connect_host, gpu_names
from golive.day2.profile_yaml import render
from golive.day2.recipe_fit import choose_recipe, is_pair, units_present
from golive.endpoint.target import api_key_of
from golive.facts import FactError
from golive.site import loader

if TYPE_CHECKING:
    import argparse

__all__ = ["Capture", "CaptureError", "capture", "cmd_capture"]


def capture(inventory: Path, station_name: str | None = None, recipe: str | None = None) -> Capture:
    """Read the station and compare it with the closest shipped recipe. What a CaptureError says is scrubbed of the
    inventory's secrets (golive.core.secrets): it quotes exception text."""
    try:
        loaded = loader.load_inventory(inventory)
    except loader.ConfigError as exc:
        raise CaptureError(scrub(str(exc)), EXIT_USAGE) from None
    secrets = station_secrets(loaded.inventory.stations, api_key_of)
    try:
        result = _capture(loaded, station_name, recipe)
    except CaptureError as exc:
        raise CaptureError(scrub(str(exc), secrets), exc.code) from None
    result.secrets = secrets
    return result


def _capture(loaded: loader.LoadedInventory, station_name: str | None, recipe: str | None) -> Capture:
    stations = loaded.inventory.stations
    if station_name:
        chosen = [s for s in stations if s.name == station_name]
        if not chosen:
            raise CaptureError(
                f"--station {station_name}: the inventory has {', '.join(s.name for s in stations)}", EXIT_USAGE
            )
        station = chosen[0]
    elif len(stations) == 1:
        station = stations[0]
    elif is_pair(stations):
        station = next(s for s in stations if s.role == "a")
    else:
        raise CaptureError(
            f"the inventory has {len(stations)} stations: name one with --station "
            f"({', '.join(s.name for s in stations)})",
            EXIT_USAGE,
        )
    recipes = {name: loader.load_profile(name).profile for name in loader.shipped_profiles()}
    if recipe and recipe not in recipes and Path(recipe).is_file():  # a site's own base profile, as extends: takes
        recipe = str(Path(recipe).resolve())
        try:
            recipes[recipe] = loader.load_profile(Path(recipe)).profile
        except loader.ConfigError as exc:
            raise CaptureError(f"--recipe {recipe}: {exc}", EXIT_USAGE) from None
    if recipe and recipe not in recipes:  # before the station is read: a usage error, said at once
        raise CaptureError(
            f"--recipe {recipe}: not a shipped recipe ({', '.join(recipes)}) nor a profile file", EXIT_USAGE
        )
    observed = Observed(pair=is_pair(stations))
    read_endpoint(loaded, station, observed)
    host = connect_host(loaded, station) if station.host else None
    units: set[str] = set()
    if host is not None:
        units = units_present(host, recipes)
        if host.exists("nvidia-smi"):
            observed.gpu_names = gpu_names(host, station, next(iter(recipes.values())))
    name, why = choose_recipe(recipes, units, observed, recipe)
    result = Capture(station=station.name, recipe=name, why=why)
    result.read_from = (
        [f"station {station.name}"]
        + ([f"host {hide_password(station.host)}"] if station.host else [])
        + ([f"endpoint {hide_password(observed.endpoint)}"] if observed.endpoint else [])
    )
    collect = Collector(recipes[name], result)
    try:
        if host is not None:
            capture_host(collect, host, station, observed)
            capture_gpus(collect, host, station, observed)
        if observed.pair and recipes[name].cluster is not None:
            capture_cluster(collect, loaded, stations)
        capture_endpoint(collect, observed)
    except FactError as exc:
        raise CaptureError(f"station {station.name}: {exc}") from None
    return result


# --- the command ---------------------------------------------------------------------------------------------------


def cmd_capture(ns: argparse.Namespace) -> int:
    """`golive profile capture INVENTORY [--station NAME] [--recipe NAME] -o site.yaml`."""
    if not ns.name:
        print("golive: profile capture needs an inventory file", file=sys.stderr)
        return EXIT_USAGE
    if not ns.output:
        print("golive: profile capture needs -o FILE (where to write the site profile)", file=sys.stderr)
        return EXIT_USAGE
    out = Path(ns.output)
    if out.is_dir() or not out.parent.is_dir():  # before the station is read: a usage error, said at once
        why = "is a folder" if out.is_dir() else f"is in {out.parent}, which is not a folder that exists"
        print(
            f"golive: profile capture -o {printable(str(out))}: {why}; give the site profile's file name",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        result = capture(Path(ns.name), ns.station, ns.recipe)
    except CaptureError as exc:
        print(f"golive: {printable(scrub(str(exc)))}", file=sys.stderr)
        return exc.code
    try:
        out.write_text(render(result))
    except OSError as exc:
        print(f"golive: profile capture -o {printable(str(out))}: cannot write it ({exc.strerror})", file=sys.stderr)
        return EXIT_USAGE
    try:  # what we wrote must load as golive loads it
        loader.load_profile(out.resolve())
    except loader.ConfigError as exc:
        print(f"golive: the captured profile does not load ({exc}); please report this", file=sys.stderr)
        return EXIT_INCOMPLETE
    print(f"golive: wrote {out} (extends {result.recipe}: {printable(scrub(result.why, result.secrets))})")
    print(f"golive: {counted(len(result.values), 'value')} written, {result.matched} equal to the recipe")
    if result.review or result.cannot_keep:
        print("Review before go-live:")
        for item in result.review:
            print(f"  - {printable(scrub(item, result.secrets))}")
        for item in result.cannot_keep:
            print(f"  - {printable(scrub(item, result.secrets))}")
    else:
        print("Review: nothing differs from the recipe.")
    return EXIT_GO
