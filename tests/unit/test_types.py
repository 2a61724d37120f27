"""The type check catches a typo in a check: a misspelt fact, facts method or client call in a copy of a real check
fails mypy (as CI runs it: pyproject.toml's [tool.mypy]), naming the attribute; so does a misspelt gate name, in a
check's declaration or in the gate it reads (gate names are the closed type golive.profile.schema.GateName, issue 39
item 2); so does a misspelt profile field where a check cites its origin (`origin(profile, lambda p: …)`, `sourced`:
golive/profile/origins.py, issue 39 item 4); the unmodified copies pass.

One check per layer, each through the fixture type it is given: StationFacts (host), ClusterFacts (cluster) and
EndpointClient (endpoint). The copies sit in a tmp dir outside the repository, their `golive` imports resolved from
the working tree (MYPYPATH), so the test reads what the checks are now.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# (check file, the attribute access it holds, its misspelling, the type mypy names)
TYPOS = [
    ("suites/host/test_container.py", "container = facts.container\n", "container = facts.containr\n", "StationFacts"),
    (
        "suites/cluster/test_rails.py",
        "interfaces = cluster_facts.interfaces\n",
        "interfaces = cluster_facts.interfacs\n",
        "ClusterFacts",
    ),
    ("suites/endpoint/test_chat.py", "result = endpoint.chat(", "result = endpoint.caht(", "EndpointClient"),
]
# (check file, a gate name as written there, the same misspelt): each place it is written fails on its own line
GATE_TYPOS = [
    ("suites/endpoint/test_throughput.py", 'gates=("aggregate_tok_s",))', 'gates=("aggregate_tok_sx",))'),
    (
        "suites/endpoint/test_throughput.py",
        '"aggregate_tok_s", "aggregate throughput")',
        '"aggregate_tok_sy", "aggregate throughput")',
    ),
]
# (check file, a profile field a finding cites, the same misspelt, the misspelt attribute, the section mypy names)
FIELD_TYPOS = [
    (
        "suites/host/test_gpu.py",
        "origin(profile, lambda p: p.gpu.per_station)",
        "origin(profile, lambda p: p.gpu.per_statoin)",
        "per_statoin",
        "Gpu",
    ),
    (
        "suites/host/test_unit.py",
        "(lambda p: section(p.service).restart_sec_s,",
        "(lambda p: section(p.service).restart_secs,",
        "restart_secs",
        "Service",
    ),
]


def _copy(folder: Path, typo: bool) -> list[Path]:
    """The checks of TYPOS, GATE_TYPOS and FIELD_TYPOS copied into `folder`, with each access misspelt where `typo`."""
    folder.mkdir()
    texts: dict[str, str] = {}
    for check, right, wrong in (
        [(check, right, wrong) for check, right, wrong, _ in TYPOS]
        + GATE_TYPOS
        + [(check, right, wrong) for check, right, wrong, _, _ in FIELD_TYPOS]
    ):
        text = texts.get(check, (REPO / check).read_text())
        assert right in text, f"{check} no longer holds {right!r}: pick another access for this test"
        texts[check] = text.replace(right, wrong, 1) if typo else text
    copies = []
    for check, text in texts.items():
        copy = folder / Path(check).name
        copy.write_text(text)
        copies.append(copy)
    return copies


def _mypy(files: list[Path], cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MYPYPATH": str(REPO)}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(REPO / "pyproject.toml"),
            "--cache-dir",
            str(cache),
            "--no-color-output",
            *map(str, files),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=files[0].parent,
        timeout=300,
    )


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for both runs (one module, one xdist worker: tests/conftest.py): the first run checks golive
    and its libraries cold (~25 s on a busy 2-core box), the second reads them from it (~2 s)."""
    return tmp_path_factory.mktemp("mypy-cache")


def test_checks_as_they_are_pass_the_type_check(tmp_path: Path, cache: Path) -> None:
    result = _mypy(_copy(tmp_path / "checks", typo=False), cache)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_misspelt_attribute_in_a_check_fails_the_type_check(tmp_path: Path, cache: Path) -> None:
    copies = _copy(tmp_path / "checks", typo=True)
    result = _mypy(copies, cache)
    assert result.returncode != 0, result.stdout
    for copy, (_, _, wrong, owner) in zip(copies, TYPOS, strict=False):
        attribute = wrong.split(".", 1)[1].rstrip("(\n")
        line = next(n for n, text in enumerate(copy.read_text().splitlines(), 1) if wrong.rstrip("\n") in text)
        expected = f'{copy.name}:{line}: error: "{owner}" has no attribute "{attribute}"'
        assert expected in result.stdout, f"{expected!r} not in:\n{result.stdout}"


def test_a_misspelt_gate_name_in_a_check_fails_the_type_check(tmp_path: Path, cache: Path) -> None:
    copies = _copy(tmp_path / "checks", typo=True)
    result = _mypy(copies, cache)
    assert result.returncode != 0, result.stdout
    for check, _, wrong in GATE_TYPOS:
        copy = tmp_path / "checks" / Path(check).name
        line = next(n for n, text in enumerate(copy.read_text().splitlines(), 1) if wrong in text)
        misspelt = wrong.split('"')[1]
        said = [row for row in result.stdout.splitlines() if row.startswith(f"{copy.name}:{line}: error:")]
        assert said and misspelt in said[0], f"{copy.name}:{line} ({misspelt}) not named in:\n{result.stdout}"


def test_a_misspelt_profile_field_in_a_citation_fails_the_type_check(tmp_path: Path, cache: Path) -> None:
    copies = _copy(tmp_path / "checks", typo=True)
    result = _mypy(copies, cache)
    assert result.returncode != 0, result.stdout
    for check, _, wrong, attribute, owner in FIELD_TYPOS:
        copy = tmp_path / "checks" / Path(check).name
        line = next(n for n, text in enumerate(copy.read_text().splitlines(), 1) if wrong in text)
        expected = f'{copy.name}:{line}: error: "{owner}" has no attribute "{attribute}"'
        assert expected in result.stdout, f"{expected!r} not in:\n{result.stdout}"
