"""`golive run | demo | profile | reference`: the operator's entry points."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml

from golive import config as golive_config

REPO = Path(__file__).resolve().parents[1]
SUITES = REPO / "suites"
EXIT_USAGE = 4  # pytest's code for usage errors; config errors are usage errors


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"golive: {message}", file=sys.stderr)
    return code


def report_args(out: Path) -> list[str]:
    return [f"--html={out / 'go-live.html'}", "--self-contained-html", f"--junitxml={out / 'junit.xml'}",
            f"--golive-json={out / 'results.json'}", "-o", "junit_family=xunit2"]


def run_suites(inventory: Path, out: Path, pytest_args: list[str]) -> int:
    import pytest

    if not SUITES.is_dir():
        return _fail(f"the checklist folder {SUITES} is missing: run golive from its source checkout")
    out.mkdir(parents=True, exist_ok=True)
    args = [str(SUITES), f"--golive-inventory={inventory}", *report_args(out), "-p", "no:cacheprovider",
            "-c", str(Path(__file__).with_name("suites.ini")), f"--rootdir={REPO}", *pytest_args]
    code = int(pytest.main(args))
    for name in ("go-live.html", "results.json", "junit.xml"):
        if (out / name).exists():
            print(f"golive: wrote {out / name}")
    return code


def cmd_run(ns: argparse.Namespace, extra: list[str]) -> int:
    try:
        loaded = golive_config.load_inventory(Path(ns.inventory), ns.profile)
    except golive_config.ConfigError as exc:
        return _fail(str(exc))
    out = Path(ns.output) if ns.output else (
        (loaded.path.parent / loaded.inventory.output) if loaded.inventory.output else Path("reports"))
    if ns.profile:
        extra = [f"--golive-profile={ns.profile}", *extra]
    return run_suites(Path(ns.inventory), out, extra)


def cmd_profile(ns: argparse.Namespace, extra: list[str]) -> int:
    if ns.action == "list":
        for name in golive_config.shipped_profiles():
            print(name)
        return 0
    if not ns.name:
        return _fail("profile show needs a profile name or file")
    try:
        ref = Path(ns.name) if ns.name.endswith((".yaml", ".yml")) else ns.name
        loaded = golive_config.load_profile(ref)
    except golive_config.ConfigError as exc:
        return _fail(str(exc))
    print(f"# resolved from: {' <- '.join(str(p) for p in loaded.files)}")
    print(f"# sha256: {loaded.sha256}")
    print(yaml.safe_dump(loaded.profile.model_dump(mode="json"), sort_keys=False), end="")
    return 0


def cmd_demo(ns: argparse.Namespace, extra: list[str]) -> int:
    from golive.demo import run_demo

    return run_demo(Path(ns.output), extra, keep=ns.keep)


def cmd_reference(ns: argparse.Namespace, extra: list[str]) -> int:
    from golive.reference import launcher

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="golive", description="Go-live acceptance for self-hosted LLM serving "
                                     "stations: host, cluster and endpoint checks against a recipe profile.")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the checklist against an inventory's stations (extra args go to pytest)")
    run.add_argument("inventory")
    run.add_argument("--output", "-o", help="report folder (default: the inventory's `output`, else ./reports)")
    run.add_argument("--profile", help="use this profile instead of the inventory's")
    run.set_defaults(func=cmd_run)

    demo = sub.add_parser("demo", help="bring up the bundled reference station and station trees, run, report")
    demo.add_argument("--output", "-o", default="reports")
    demo.add_argument("--keep", action="store_true", help="leave the reference station running afterwards")
    demo.set_defaults(func=cmd_demo)

    prof = sub.add_parser("profile", help="list shipped profiles or show one resolved (extends applied)")
    prof.add_argument("action", choices=["show", "list"])
    prof.add_argument("name", nargs="?")
    prof.set_defaults(func=cmd_profile)

    ref = sub.add_parser("reference", help="start or stop the reference station (real vLLM on CPU)")
    ref.add_argument("action", choices=["up", "down"])
    ref.add_argument("--variant", default="healthy")
    ref.add_argument("--port", type=int, default=8765)
    ref.add_argument("--state-dir", default=os.environ.get("GOLIVE_STATE_DIR", str(Path.home() / ".cache/golive")))
    ref.set_defaults(func=cmd_reference)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ns, extra = build_parser().parse_known_args(argv)
    if extra and ns.command not in ("run", "demo"):
        return _fail(f"unexpected arguments: {' '.join(extra)}")
    return ns.func(ns, extra)


if __name__ == "__main__":
    sys.exit(main())
