"""The testbed's subcommands of `golive` (entry points in group golive.commands): `demo` and `reference`."""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from golive.cli import arguments_refused, fail, report_folder_problem
from golive.core.verdict import EXIT_USAGE
from golive_testbed.realstation_host import StationError

# golive_testbed.reference.launcher.DEFAULT_PORT, not imported: that pulls httpx into every `golive` start
REFERENCE_PORT = 8765
STATE_DIR = os.environ.get("GOLIVE_STATE_DIR", str(Path.home() / ".cache/golive"))
if TYPE_CHECKING:  # not generic at run time
    # what golive.cli hands each entry point of group golive.commands: its subcommands, to add one to
    Subcommands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]


def _port(text: str) -> int:
    """--port: a TCP port golive's reference station can listen on (1-65535)."""
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"takes a TCP port 1-65535, not {text!r}")
    return int(text)


def _variants() -> str:
    """The reference station's variants, one a line (imported only when asked: help or a wrong name)."""
    from golive_testbed.reference.launcher import VARIANTS

    width = max(map(len, VARIANTS))
    return "\n".join(f"  {name:<{width}}  {variant.description}" for name, variant in VARIANTS.items())


class _HelpWithVariants(argparse.Action):
    """-h/--help for `golive reference`: argparse's help, then the variants."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str = argparse.SUPPRESS,
        default: object = argparse.SUPPRESS,
        help: str | None = None,
    ) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        try:
            variants = _variants()
        except ImportError as exc:
            variants = f"  (not listed: the reference station needs vLLM, and {exc.name} is missing)"
        print(f"{parser.format_help()}\nvariants (--variant):\n{variants}")
        parser.exit()


def add_demo(sub: Subcommands) -> None:
    from golive_testbed.demo import DEMO_PORT, DEMO_STATION, TARGETS

    demo = sub.add_parser(
        "demo",
        help="bring up a real station (or the bundled targets), run every layer, report",
        description="Check golive's bundled targets end to end, into one report. Where this machine can run one (root "
        "and the testbed's packages), a real station: systemd 252 as PID 1 in systemd-nspawn, a real Docker engine "
        "and registry, sshd, the recipe's unit and prestart, vLLM's CPU build serving in the container (host and "
        f"endpoint layers; named {DEMO_STATION}: GOLIVE_DEMO_STATION sets the name), beside the healthy GB300 station "
        "tree (host layer, through chroot). Elsewhere the GB300 tree and the reference station (real vLLM on CPU, "
        f"endpoint layer) on 127.0.0.1:{DEMO_PORT} (GOLIVE_DEMO_PORT sets the port). Targets are stopped afterwards. "
        "Any other argument is passed to pytest (-k, -x, -m …).",
    )
    demo.add_argument(
        "--targets",
        choices=TARGETS,
        default="auto",
        help="auto: a real station where this machine can run one, else the bundled targets (default: %(default)s)",
    )
    demo.add_argument("--output", "-o", default="reports", metavar="DIR", help="report folder (default: %(default)s)")
    demo.add_argument(
        "--keep",
        action="store_true",
        help="leave the station running afterwards (stop it with `golive station down --name NAME`, or kill the "
        "reference station's pid the demo prints)",
    )
    demo.set_defaults(func=cmd_demo)


def add_reference(sub: Subcommands) -> None:
    ref = sub.add_parser(
        "reference",
        help="start or stop the reference station (real vLLM on CPU)",
        add_help=False,
        description="Start (up) or stop (down) the reference station: real vLLM on CPU serving a "
        "tiny GLM-shaped model, in the background, on 127.0.0.1.",
    )
    ref.add_argument("-h", "--help", action=_HelpWithVariants, help="show this help and the variants, then exit")
    ref.add_argument("action", choices=["up", "down"], help="up: start and wait until it serves; down: stop it")
    ref.add_argument(
        "--variant",
        default="healthy",
        help="how the station is (mis)configured (default: %(default)s; the list is below)",
    )
    ref.add_argument("--port", type=_port, default=REFERENCE_PORT, help="port on 127.0.0.1 (default: %(default)s)")
    ref.add_argument(
        "--state-dir",
        default=STATE_DIR,
        metavar="DIR",
        help="where the running station is recorded (default: GOLIVE_STATE_DIR, else ~/.cache/golive)",
    )
    ref.set_defaults(func=cmd_reference)


def cmd_demo(ns: argparse.Namespace, extra: list[str]) -> int:
    """Usage errors first, in a moment: a report folder golive cannot write, or pytest arguments pytest refuses
    (checked by collecting the demo's checks, nothing run), before the reference station's minute or two of start."""
    from golive_testbed.demo import DEMO_PORT, run_demo, write_inventory

    problem = report_folder_problem(Path(ns.output))
    if problem:
        return fail(problem)
    if extra:
        with tempfile.TemporaryDirectory(prefix="golive-demo-") as scratch:
            inventory = write_inventory(Path(scratch), None, f"http://127.0.0.1:{DEMO_PORT}/v1")
            if arguments_refused(inventory, extra, "golive demo"):
                return EXIT_USAGE
    try:
        return run_demo(Path(ns.output), extra, keep=ns.keep, targets=ns.targets)
    except StationError as exc:  # --targets real-station where none can run: one line
        return fail(f"demo: {exc}", code=1)


def cmd_reference(ns: argparse.Namespace, extra: list[str]) -> int:
    try:
        from golive_testbed.reference import launcher
    except ImportError as exc:
        return fail(f"the reference station needs vLLM ({exc.name} is missing): pip install -e './testbed[reference]'")
    state = Path(ns.state_dir)
    try:
        if ns.action == "up":
            if ns.variant not in launcher.VARIANTS:
                return fail(
                    f"unknown variant '{ns.variant}'; the variants are: {', '.join(launcher.VARIANTS)} "
                    f"(`golive reference --help` says what each is)"
                )
            station = launcher.up(state, variant=ns.variant, port=ns.port)
            print(f"golive: reference station '{ns.variant}' serving at {station['base_url']}")
        elif launcher.down(state):
            print("golive: reference station stopped")
        else:
            print(f"golive: no reference station was up (none recorded in {state}); nothing to stop")
    except launcher.ReferenceStationError as exc:
        return fail(str(exc), code=1)
    return 0
