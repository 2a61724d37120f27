"""`golive demo` and `golive reference` as a new user meets them: help that lists the options, the variants and the
default port; a wrong variant is one line that lists the variants; `down` with nothing up says so. Run from outside
the checkout, as an operator would."""

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from golive_testbed.commands import REFERENCE_PORT
from golive_testbed.demo import DEMO_PORT

REPO = Path(__file__).resolve().parents[1]
GOLIVE = [sys.executable, "-m", "golive.cli"]


def golive(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST") and k != "GOLIVE_STATE_DIR"}
    return subprocess.run([*GOLIVE, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)


def test_reference_help_lists_options_variants_and_the_default_port(tmp_path):
    from golive_testbed.reference.launcher import DEFAULT_PORT, VARIANTS

    assert REFERENCE_PORT == DEFAULT_PORT
    result = golive(tmp_path, "reference", "--help")
    assert result.returncode == 0 and not result.stderr, result.stderr
    text = " ".join(result.stdout.split())  # argparse wraps lines
    for option in ("--variant VARIANT", "--port PORT", "--state-dir DIR", "{up,down}"):
        assert option in text, text
    assert f"port on 127.0.0.1 (default: {DEFAULT_PORT})" in text and "(default: healthy;" in text, text
    listed = result.stdout.split("variants (--variant):\n")[1].splitlines()
    assert [line.split()[0] for line in listed] == list(VARIANTS)
    assert all(VARIANTS[line.split()[0]].description in line for line in listed)


def test_demo_help_lists_options_and_the_port(tmp_path):
    result = golive(tmp_path, "demo", "--help")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "--output DIR, -o DIR report folder (default: reports)" in text, text
    assert "--keep leave the station running afterwards" in text, text
    assert "--targets {auto,real-station,bundled}" in text and "a real station where this machine can run one" in text
    assert f"127.0.0.1:{DEMO_PORT} (GOLIVE_DEMO_PORT sets the port)" in text, text
    assert "Any other argument is passed to pytest" in text, text


def test_unknown_variant_is_one_line_listing_the_variants(tmp_path):
    from golive_testbed.reference.launcher import VARIANTS

    result = golive(tmp_path, "reference", "up", "--variant", "nosuch", "--state-dir", str(tmp_path / "state"))
    assert result.returncode == 4, result.stderr
    assert result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("golive: unknown variant 'nosuch'; the variants are: healthy, ")
    assert all(name in result.stderr for name in VARIANTS) and "Traceback" not in result.stderr


def test_reference_down_with_nothing_up_says_so(tmp_path):
    result = golive(tmp_path, "reference", "down", "--state-dir", str(tmp_path / "state"))
    assert result.returncode == 0, result.stderr
    assert (
        result.stdout == f"golive: no reference station was up (none recorded in {tmp_path / 'state'}); "
        f"nothing to stop\n"
    )
    assert "stopped" not in result.stdout


def test_ci_doc_installs_the_wheel_not_a_package_no_index_has():
    """golive is on no public index: docs/ci.md installs the wheel of this version (or from a site's own index)."""
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    doc = (REPO / "docs/ci.md").read_text()
    installs = [args.strip() for args in re.findall(r"pip install ([^`\n#]+)", doc)]
    assert len(installs) >= 3, installs
    for args in installs:
        if args == "golive":  # only where the doc says that this finds nothing
            assert doc.count("`pip install golive` finds nothing") == doc.count("pip install golive`"), doc
            continue
        assert f"golive-{version}-py3-none-any.whl" in args or f"golive=={version}" in args, args
    assert "--index-url" in doc and "scripts/wheel-check.sh" in doc


def test_demo_without_a_real_station_says_why_in_one_line_and_takes_the_bundled_targets(monkeypatch, capsys):
    """auto: where a real station cannot run (here: not root), one line saying why, then the bundled targets."""
    from golive_testbed import demo, realstation

    monkeypatch.setattr(realstation.os, "geteuid", lambda: 1000)
    assert demo.choose_targets("auto") == "bundled"
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and said.startswith("golive demo: no real station on this machine (a real station "), (
        said
    )
    assert said.rstrip().endswith("; checking the bundled targets instead"), said
    assert demo.choose_targets("bundled") == "bundled"


def test_demo_asked_for_a_real_station_where_none_can_run_is_one_line(tmp_path, monkeypatch, capsys):
    """--targets real-station where one cannot run (here: not root) exits 1 with one line, nothing started."""
    from golive.cli import main
    from golive_testbed import realstation

    monkeypatch.setattr(realstation.os, "geteuid", lambda: 1000)
    code = main(["demo", "--targets", "real-station", "-o", str(tmp_path / "out")])
    said = capsys.readouterr().err
    assert code == 1 and said.count("\n") == 1, said
    assert said.startswith("golive: demo: a real station needs root"), said
    assert not (tmp_path / "out" / "results.json").exists()


def test_auto_takes_the_real_station_where_it_can_run(monkeypatch):
    from golive_testbed import demo, realstation

    monkeypatch.setattr(realstation, "preflight", lambda: None)
    assert demo.choose_targets("auto") == "real-station" == demo.choose_targets("real-station")
