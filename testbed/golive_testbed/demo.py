"""`golive demo`: golive's bundled targets checked end to end, into one report.

Where this machine can run one (root and the packages of realstation.APT_LINE), the demo's station is a **real
station** (golive_testbed.realstation): systemd 252 as PID 1, a real Docker engine and registry, sshd, the recipe's
unit and prestart, vLLM's CPU build serving in the container systemd started — its host layer over ssh and its endpoint
in one report. Beside it, the healthy GB300 station tree (host layer through chroot) shows the GPU checks a machine
without a GB300 cannot. Where a real station cannot run, the demo says why in one line and checks the bundled targets
of old: the GB300 tree and the reference station (real vLLM on CPU, endpoint layer only).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from golive_testbed.realstation_host import Record

REPO = Path(__file__).resolve().parents[2]  # the checkout
DEMO_PORT = int(os.environ.get("GOLIVE_DEMO_PORT", "8765"))
# the real station's name (`golive station … --name`)
DEMO_STATION = os.environ.get("GOLIVE_DEMO_STATION", "real-station")
TARGETS = ("auto", "real-station", "bundled")
GB300_SITE = REPO / "fixtures/profiles/gb300-site.yaml"


def _say(text: str) -> None:
    print(f"golive demo: {text}", file=sys.stderr, flush=True)


def choose_targets(asked: str) -> str:
    """ "real-station" or "bundled": `auto` takes a real station where this machine can run one and says why not where
    it cannot; `real-station` asked for where it cannot run is one line (realstation.StationError)."""
    from golive_testbed import realstation

    if asked == "bundled":
        return "bundled"
    try:
        realstation.preflight()
    except realstation.StationError as exc:
        if asked == "real-station":
            raise
        _say(f"no real station on this machine ({exc}); checking the bundled targets instead")
        return "bundled"
    return "real-station"


def _station_tree() -> Path | None:
    """The healthy GB300 tree, when this machine may chroot into it (root + busybox-static)."""
    from golive_testbed.targets import TargetsError, build_station_trees

    if os.geteuid() != 0:
        _say("host layer not checked: station trees are reached through chroot, which needs root")
        return None
    try:
        return build_station_trees()["gb300-healthy"]
    except TargetsError as exc:
        _say(f"host layer not checked: {exc}")
        return None


def _tree_line(tree: Path | None) -> str:
    host = f"host: 'chroot://{tree}', " if tree is not None else ""
    return f"  - {{name: gb300-tree, layers: [host], {host}profile: '{GB300_SITE}'}}"


def write_inventory(out: Path, tree: Path | None, endpoint: str) -> Path:
    """The bundled targets, always both: a target that could not be brought up is listed anyway, so its checks end
    "not checked" and the verdict is INCOMPLETE — never a GO on a layer that did not run."""
    lines = [
        "# written by `golive demo`: the bundled targets (GB300 station tree, reference station)",
        "profile: reference-cpu",
        "stations:",
        _tree_line(tree),
        f"  - {{name: reference-vllm, endpoint: '{endpoint}'}}",
    ]
    path = out / "demo-inventory.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_station_inventory(out: Path, tree: Path | None, station: Record | None, profile: Path) -> Path:
    """The real station (host over ssh and endpoint: one station, both layers) beside the GB300 tree. A station that
    did not come up is listed with its endpoint refused, so its checks end "not checked" (INCOMPLETE)."""
    from golive_testbed.realstation_host import free_port

    lines = ["# written by `golive demo`: a real station and the GB300 station tree", f"profile: '{profile}'"]
    if station is not None:
        lines.append(f"ssh_config: '{station.ssh_config}'")
        entry = f"host: '{station.host}', endpoint: '{station.endpoint}', phase: serving"
    else:
        entry = f"endpoint: 'http://127.0.0.1:{free_port()}/v1'"
    lines += ["stations:", _tree_line(tree), f"  - {{name: {DEMO_STATION}, {entry}}}"]
    path = out / "demo-inventory.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _mark_gone(out: Path, what: str) -> None:
    """The inventory stays beside the reports as the record of what was checked; its first lines say that the station
    it names is gone, and how to check one again."""
    path = out / "demo-inventory.yaml"
    if path.is_file():
        path.write_text(
            f"# {what}: this inventory is the record of what the demo checked, not a station to check now.\n"
            f"# To check the demo's targets again: `golive demo --keep` leaves them up, then `golive run {path}` or\n"
            f"# `python -m pytest --pyargs golive.suites --golive-inventory {path}`.\n" + path.read_text()
        )


def run_demo(out: Path, pytest_args: list[str], keep: bool = False, targets: str = "auto") -> int:
    out.mkdir(parents=True, exist_ok=True)
    if choose_targets(targets) == "real-station":
        return _real_station_demo(out, pytest_args, keep)
    return _bundled_demo(out, pytest_args, keep)


def _real_station_demo(out: Path, pytest_args: list[str], keep: bool) -> int:
    from golive.cli import run_suites
    from golive_testbed import realstation
    from golive_testbed.realstation_files import PROFILE

    tree = _station_tree()
    _say(
        f"targets: real station {DEMO_STATION} (systemd 252 in systemd-nspawn, Docker engine and registry, sshd, vLLM "
        f"on CPU: host and endpoint layers) and the GB300 station tree (host layer); the station is up in about 1 min "
        f"with its root file system and image cached, about 6 min the first time"
    )
    station = None
    try:
        try:
            station = realstation.up(DEMO_STATION, say=_say)
            # kept beside the reports: the station's own folder goes when it is taken down
            profile = (out / "demo-site-profile.yaml").resolve()
            profile.write_text((station.dir / "site-profile.yaml").read_text())
        except realstation.StationError as exc:
            _say(f"real station not checked: {exc}")
            profile = PROFILE
        return run_suites(write_station_inventory(out, tree, station, profile), out, pytest_args)
    finally:
        if station is not None and not keep:
            realstation.down(DEMO_STATION)
            _say(f"real station {DEMO_STATION} down")
            _mark_gone(out, f"the real station {DEMO_STATION} was taken down after the demo (its ssh_config with it)")
        elif station is not None:
            _say(f"real station {DEMO_STATION} left up; take it down with: golive station down --name {DEMO_STATION}")


def _bundled_demo(out: Path, pytest_args: list[str], keep: bool) -> int:
    from golive.cli import run_suites

    tree = _station_tree()
    station = None
    endpoint = f"http://127.0.0.1:{DEMO_PORT}/v1"
    _say("targets: the GB300 station tree (host layer) and the reference station (endpoint layer)")
    try:
        try:
            from golive_testbed.reference.launcher import ReferenceStation, ReferenceStationError
        except ImportError as exc:
            _say(
                f"endpoint layer not checked: the reference station needs vLLM ({exc.name} is missing): "
                f"bash scripts/setup.sh"
            )
        else:
            _say(f"starting the reference station (real vLLM on CPU) on 127.0.0.1:{DEMO_PORT}; ~1-2 min")
            station = ReferenceStation(port=DEMO_PORT, log_path=out / "reference-station.log")
            try:
                station.start()
                endpoint = station.base_url
            except ReferenceStationError as exc:
                _say(f"endpoint layer not checked: {exc}")
                station = None
        return run_suites(write_inventory(out, tree, endpoint), out, pytest_args)
    finally:
        if station is not None and not keep:
            station.stop()
            _say("reference station stopped")
            _mark_gone(out, "the reference station was stopped after the demo")
        elif station is not None:
            _say(f"reference station left running (pid {station.pid}); stop it with: kill {station.pid}")
