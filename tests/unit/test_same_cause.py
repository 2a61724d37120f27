"""golive.report.causes: a served flag one check found wrong and the checks it explains are tied as one root cause,
per station, in both findings; nothing else is tied."""

from __future__ import annotations

from golive.core.verdict import Finding as Raised
from golive.report.causes import tie
from golive.report.model import CheckRecord, Finding


def _check(name: str, layer: str, station: str, outcome: str = "failed", **said: list[str]) -> CheckRecord:
    raised = Raised("found", "recipe", "fix", said.get("flags", ()), said.get("suspects", ()))
    return CheckRecord(
        nodeid=f"suites/{layer}/test_x.py::{name}[{station}]",
        layer=layer,
        rule="rule",
        station=station,
        outcome=outcome,
        finding=Finding.model_validate(raised.as_dict()),
    )


def test_a_flag_and_the_check_it_explains_are_tied_both_ways():
    flag = _check("test_served_flags_match_profile", "host", "a", flags=["max-num-seqs"])
    batch = _check("test_gate_level_is_never_held_back", "endpoint", "a", suspects=["max-num-seqs", "max-model-len"])
    ties = tie([flag, batch])
    assert [(t.station, t.flags) for t in ties] == [("a", ("max-num-seqs",))]
    assert ties[0].line() == (
        "same cause on a: the served --max-num-seqs, found by test_served_flags_match_profile@a (host); it explains "
        "test_gate_level_is_never_held_back@a (endpoint)"
    )
    assert flag.finding and batch.finding
    assert flag.finding.same_cause_checks == [batch.id] and batch.finding.same_cause_checks == [flag.id]
    assert "which found the served --max-num-seqs wrong" in batch.finding.same_cause
    assert "the served --max-num-seqs explains what it found" in flag.finding.same_cause


def test_other_stations_other_flags_and_passed_checks_are_not_tied():
    checks = [
        _check("test_served_flags_match_profile", "host", "a", flags=["tool-call-parser"]),
        _check("test_gate_level_is_never_held_back", "endpoint", "a", suspects=["max-num-seqs"]),
        _check("test_served_flags_match_profile", "host", "b", flags=["max-num-seqs"]),
        _check("test_x", "endpoint", "b", outcome="waived", suspects=["max-num-seqs"]),
    ]
    assert tie(checks) == []
    assert all(c.finding and not c.finding.same_cause and not c.finding.same_cause_checks for c in checks)


def test_every_endpoint_check_names_suspects_the_host_check_can_find_wrong():
    """Each `suspects=` in suites/endpoint names vLLM flags as the served-flag check spells them (dashes), at least one
    of them a flag the profile pins (golive.profile.recipe.VLLM_FLAGS), so a tie with the host finding can happen."""
    import ast
    from pathlib import Path

    from golive.profile.recipe import VLLM_FLAGS

    suites = Path(__file__).resolve().parents[2] / "suites" / "endpoint"
    declared: dict[str, list[str]] = {}
    for path in sorted(suites.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "suspects" and isinstance(node.value, ast.Tuple):
                names = [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                declared[f"{path.name}:{node.value.lineno}"] = names
    assert {where.split(":")[0] for where in declared} >= {"test_throughput.py", "test_prefill.py"}, declared
    for where, names in declared.items():
        assert names and all(n == n.lower() and "_" not in n and not n.startswith("-") for n in names), where
        assert set(names) & set(VLLM_FLAGS.values()), f"{where}: no suspect the host check can find wrong: {names}"
