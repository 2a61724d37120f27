"""`golive demo`: the bundled targets — a GB300 station tree and the real vLLM reference station — checked end to
end."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the checkout
DEMO_PORT = int(os.environ.get("GOLIVE_DEMO_PORT", "8765"))


def _say(text: str) -> None:
    print(f"golive demo: {text}", file=sys.stderr, flush=True)


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


def write_inventory(out: Path, tree: Path | None, endpoint: str) -> Path:
    """Both bundled stations, always: a target that could not be brought up is listed anyway, so its checks end
    "not checked" and the verdict is INCOMPLETE — never a GO on a layer that did not run."""
    host = f"host: 'chroot://{tree}', " if tree is not None else ""
    lines = [
        "# written by `golive demo`: the bundled targets",
        "profile: reference-cpu",
        "stations:",
        f"  - {{name: gb300-tree, layers: [host], {host}profile: '{REPO / 'fixtures/profiles/gb300-site.yaml'}'}}",
        f"  - {{name: reference-vllm, endpoint: '{endpoint}'}}",
    ]
    path = out / "demo-inventory.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_demo(out: Path, pytest_args: list[str], keep: bool = False) -> int:
    from golive.cli import run_suites

    out.mkdir(parents=True, exist_ok=True)
    tree = _station_tree()
    station = None
    endpoint = f"http://127.0.0.1:{DEMO_PORT}/v1"
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
        elif station is not None:
            _say(f"reference station left running (pid {station.pid}); stop it with: kill {station.pid}")
