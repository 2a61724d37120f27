"""The testbed's subcommands of `golive` (entry points in group golive.commands): `demo` and `reference`."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from golive.cli import _fail


def add_demo(sub) -> None:
    demo = sub.add_parser("demo", help="bring up the bundled reference station and station trees, run, report")
    demo.add_argument("--output", "-o", default="reports")
    demo.add_argument("--keep", action="store_true", help="leave the reference station running afterwards")
    demo.set_defaults(func=cmd_demo)


def add_reference(sub) -> None:
    ref = sub.add_parser("reference", help="start or stop the reference station (real vLLM on CPU)")
    ref.add_argument("action", choices=["up", "down"])
    ref.add_argument("--variant", default="healthy")
    ref.add_argument("--port", type=int, default=8765)
    ref.add_argument("--state-dir", default=os.environ.get("GOLIVE_STATE_DIR", str(Path.home() / ".cache/golive")))
    ref.set_defaults(func=cmd_reference)


def cmd_demo(ns: argparse.Namespace, extra: list[str]) -> int:
    from golive_testbed.demo import run_demo

    return run_demo(Path(ns.output), extra, keep=ns.keep)


def cmd_reference(ns: argparse.Namespace, extra: list[str]) -> int:
    try:
        from golive_testbed.reference import launcher
    except ImportError as exc:
        return _fail(f"the reference station needs vLLM ({exc.name} is missing): pip install -e './testbed[reference]'")
    state = Path(ns.state_dir)
    try:
        if ns.action == "up":
            station = launcher.up(state, variant=ns.variant, port=ns.port)
            print(f"golive: reference station '{ns.variant}' serving at {station['base_url']}")
        else:
            launcher.down(state)
            print("golive: reference station stopped")
    except launcher.ReferenceStationError as exc:
        return _fail(str(exc), code=1)
    return 0
