"""Every check of golive.suites declares itself (golive.checklist.check): an id of the form `layer.area.rule`, of its
own layer, unique; a cost the product reads (the estimate, its probe, the watcher's light set); the gates it owns,
each a bound of the profile's `load.floors`, each owned by one check. The checks are found as pytest collects them
(every test_* function of every test_* module of each layer's package): a new check is held to this the moment it is
written, and a check without an id fails here until it declares one."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from golive.checklist import ID, LIGHT, MARKER, Cost, Declaration, check, declaration_of, every_check, ids_table
from golive.profile.schema import LAYERS, LoadFloors


def suite_checks() -> list[tuple[str, str, Callable[..., Any]]]:
    """(layer, module, function) of every check in golive.suites, as pytest collects them."""
    found = []
    for layer in LAYERS:
        package = importlib.import_module(f"golive.suites.{layer}")
        for info in pkgutil.iter_modules(package.__path__):
            if not info.name.startswith("test_"):
                continue
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            found += [
                (layer, module.__name__, function)
                for name, function in inspect.getmembers(module, inspect.isfunction)
                if name.startswith("test_") and function.__module__ == module.__name__
            ]
    return found


def markers_of(function: Callable[..., Any]) -> set[str]:
    """The markers a check carries: its own and its module's `pytestmark`."""
    module = sys.modules[function.__module__]
    marks = getattr(module, "pytestmark", [])
    marks = marks if isinstance(marks, list) else [marks]
    return {m.name for m in [*getattr(function, "pytestmark", []), *marks]}


def problems(checks: list[tuple[str, str, Callable[..., Any]]]) -> list[str]:
    """What is wrong with the checks' declarations, one line each ([] when nothing is)."""
    found: list[str] = []
    owners: dict[str, str] = {}
    for layer, module, function in checks:
        where = f"{module}.{function.__name__}"
        declaration = declaration_of(function)
        if declaration is None:
            found.append(f"{where} declares no id: put @check('{layer}.area.rule', Cost.…) above it")
            continue
        if not ID.fullmatch(declaration.id):
            found.append(f"{where}: {declaration.id!r} is not layer.area.rule")
        if declaration.layer != layer:
            found.append(f"{where}: {declaration.id} names layer {declaration.layer}, the check is a {layer} check")
        if declaration.id in owners:
            found.append(f"{where}: {declaration.id} is declared by {owners[declaration.id]} too")
        owners.setdefault(declaration.id, where)
        if (layer == "endpoint") == (declaration.cost == Cost.READ):
            found.append(f"{where}: cost {declaration.cost} is not an {layer} cost")
        heavy = {"perf", "quality"} & markers_of(function)
        if declaration.cost.light and heavy:
            found.append(f"{where}: marked {', '.join(sorted(heavy))} but declares the light cost {declaration.cost}")
        if (LIGHT in markers_of(function)) != declaration.cost.light:
            found.append(f"{where}: the `{LIGHT}` marker disagrees with its cost {declaration.cost}")
    return found


CHECKS = suite_checks()


def test_every_check_declares_a_unique_id_of_its_layer_and_a_cost():
    assert len(CHECKS) >= 80, len(CHECKS)  # the whole checklist was found
    assert problems(CHECKS) == []


def _function(name: str, declared: Callable[[Callable[..., Any]], Callable[..., Any]] | None) -> Callable[..., Any]:
    def function() -> None: ...

    function.__name__ = function.__qualname__ = name
    function.__module__ = __name__
    return declared(function) if declared else function


def test_the_self_test_fails_a_check_without_an_id_a_duplicate_and_a_wrong_layer():
    """The rule above, proven the other way: each fault is named."""
    checks = [
        ("host", "m", _function("test_a", check("host.unit.a", Cost.READ))),
        ("host", "m", _function("test_no_id", None)),
        ("host", "m", _function("test_twin", check("host.unit.a", Cost.READ))),
        ("host", "m", _function("test_wrong_layer", check("endpoint.unit.b", Cost.LIGHT))),
    ]
    assert problems(checks) == [
        "m.test_no_id declares no id: put @check('host.area.rule', Cost.…) above it",
        "m.test_twin: host.unit.a is declared by m.test_a too",
        "m.test_wrong_layer: endpoint.unit.b names layer endpoint, the check is a host check",
        "m.test_wrong_layer: cost light is not an host cost",
    ]


@pytest.mark.parametrize(
    "id",
    ["host.unit", "Host.unit.caps", "host.unit.caps-starts", "gateway.unit.caps", "host..caps", "host.unit.caps@a"],
)
def test_a_malformed_id_is_refused_where_it_is_written(id):
    with pytest.raises(ValueError, match=r"is not `layer.area.rule`"):
        check(id, Cost.READ)


def test_the_declaration_rides_on_the_check_as_its_markers():
    function = _function("test_x", check("endpoint.chat.x", Cost.LIGHT, gates=("aggregate_tok_s",)))
    assert declaration_of(function) == Declaration("endpoint.chat.x", Cost.LIGHT, ("aggregate_tok_s",))
    assert {m.name for m in function.pytestmark} == {MARKER, LIGHT}
    heavy = _function("test_y", check("endpoint.throughput.y", Cost.SWEEP))
    assert {m.name for m in heavy.pytestmark} == {MARKER}  # the watcher never runs it


def test_every_gate_is_a_floor_of_the_profile_owned_by_one_check():
    """The gates the checks declare are `load.floors` fields (a misspelt gate fails here), each owned once, and every
    floor the profile can set has its check."""
    owned: dict[str, list[str]] = {}
    for _, _, function in CHECKS:
        declaration = declaration_of(function)
        assert declaration is not None
        for gate in declaration.gates:
            owned.setdefault(gate, []).append(declaration.id)
    assert set(owned) == set(LoadFloors.model_fields), set(owned) ^ set(LoadFloors.model_fields)
    assert {gate: ids for gate, ids in owned.items() if len(ids) > 1} == {}


def test_the_light_set_is_what_the_watcher_may_run():
    """The checks `golive watch` runs every round are those declaring a light cost; none of the heavy ones (the
    sweep, the batteries, the needle, the over-long prompt, the tool_choice set, the long prompt beside streams)."""
    light = {d.id for _, _, f in CHECKS if (d := declaration_of(f)) is not None and d.cost.light}
    heavy = {d.id for _, _, f in CHECKS if (d := declaration_of(f)) is not None and not d.cost.light}
    assert {
        "endpoint.liveness.health_ok",
        "endpoint.liveness.one_token_canary_answers",
        "endpoint.tools.smoke_call_is_structured",
        "host.vllm.served_flags_match_profile",
    } <= light
    assert {
        "endpoint.throughput.sweep_runs_every_level_without_failures",
        "endpoint.tools.call_battery_meets_floor",
        "endpoint.tools.streamed_and_plain_calls_agree",
        "endpoint.agent.battery_meets_floor",
        "endpoint.context.needle_retrieved_near_full_context",
        "endpoint.limits.over_long_prompt_refused_cleanly",
        "endpoint.tool_choice.auto_calls_when_a_tool_fits",
        "endpoint.prefill.streams_keep_decoding_during_long_prefill",
        "endpoint.quality.site_batteries_meet_their_floors",
    } <= heavy


def test_two_checks_declaring_one_id_stop_the_run_before_it_starts(tmp_path):
    """The plugin refuses a collection where two checks declare one id (results.json, waivers and the baseline would
    mix them up): one line, exit 4, no report."""
    (tmp_path / "test_twins.py").write_text(
        "from golive.checklist import Cost, check\n\n"
        "@check('host.unit.same', Cost.READ)\ndef test_one():\n    pass\n\n"
        "@check('host.unit.same', Cost.READ)\ndef test_two():\n    pass\n"
    )
    (tmp_path / "inventory.yaml").write_text("profile: reference-cpu\nstations:\n  - {name: a}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "test_twins.py", "--golive-inventory", "inventory.yaml", "-p", "no:randomly"]
        + ["-p", "no:cacheprovider", "-o", "addopts=", "--golive-output", str(tmp_path / "out")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr
    said = "two checks declare one id: host.unit.same is declared by test_twins.py::test_one and test_twins.py::"
    assert f"{said}test_two (golive.checklist.check)" in proc.stderr, proc.stderr
    assert "should take" not in proc.stdout, proc.stdout  # no estimate, no probe
    assert not list((tmp_path / "out").glob("*")), "a usage error writes no report"


def test_docs_ci_lists_every_check_id():
    """docs/ci.md's list of ids is the checklist's (an operator writes waivers from it)."""
    docs = (Path(__file__).resolve().parents[2] / "docs/ci.md").read_text()
    listed = re.search(r"`python -m golive.checklist` prints it.*?```\n(.*?)```", docs, re.S)
    assert listed, "docs/ci.md lost its list of check ids (after `python -m golive.checklist` prints it)"
    assert listed.group(1) == ids_table(), (
        "docs/ci.md's check ids are not the checklist's: paste `python -m golive.checklist`"
    )
    assert {d.id for d, _ in every_check()} == {declaration_of(f).id for _, _, f in CHECKS if declaration_of(f)}
