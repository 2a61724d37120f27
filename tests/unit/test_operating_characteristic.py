"""The gates' error rates, held in CI (issue 42 item 6): a few hundred seeded go-lives at the reference station's pace
through golive's own rules (bench/operating_characteristic.py: load.run_plan, load_batch.summarize, the gates, on a
station model), failing when a change to the rules lets power or false NO-GO drift past the goal: P(NO-GO) ≥ 95 % for
a station that cannot batch, P(NO-GO) ≤ 1 % and P(INCOMPLETE) ≤ 5 % for a healthy one on a loaded runner. Seeded: the
same rules give the same counts; the whole file takes ~10-20 s on 2 cores."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from golive.endpoint.uncertainty import Decision

REPO = Path(__file__).resolve().parents[2]
GOLIVES = 100  # per point: the goal's figure is read as counts (≤ 1 false NO-GO in 100, ≥ 95 NO-GO in 100)


def _bench(name: str) -> ModuleType:
    sys.path.insert(0, str(REPO / "bench"))  # the bench's own imports (station_model) are by module name
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def oc() -> ModuleType:
    return _bench("operating_characteristic")


@pytest.fixture(scope="module")
def reference(oc: ModuleType):
    return oc.settings(["reference-cpu"])[0]


def verdicts(oc: ModuleType, setting, degradation, runner: str) -> dict[Decision, int]:
    counts = dict.fromkeys(Decision, 0)
    for i in range(GOLIVES):
        counts[oc.go_live(setting, degradation, runner, [4242, i]).verdict] += 1
    return counts


def test_a_healthy_station_on_a_loaded_runner_is_go(oc, reference):
    """False NO-GO ≤ 1 %, INCOMPLETE ≤ 5 %, with CPU hogs on the runner's cores (the station's and the client's)."""
    counts = verdicts(oc, reference, oc.HEALTHY, "loaded")
    assert counts[Decision.FAILS] <= GOLIVES // 100, counts
    assert counts[Decision.UNDECIDED] <= 5 * GOLIVES // 100, counts


@pytest.mark.parametrize("cap", [1, 2], ids=["max-num-seqs-1", "max-num-seqs-2"])
@pytest.mark.parametrize("runner", ["quiet", "loaded"])
def test_a_station_that_cannot_batch_is_no_go(oc, reference, runner, cap):
    """P(NO-GO) ≥ 95 % for a station capped at 1 or 2 sequences, quiet or loaded."""
    capped = next(d for d in oc.DEGRADATIONS if d.max_num_seqs == cap)
    counts = verdicts(oc, reference, capped, runner)
    assert counts[Decision.FAILS] >= 95 * GOLIVES // 100, counts


def test_a_station_slower_than_its_floors_is_no_go_where_floors_are_its_own(oc):
    """With floors at the station's own healthy medians (a site's profile, 10 % tolerance), a station 1.5× slower is
    NO-GO in ≥ 95 % of quiet runs, and a healthy one is not NO-GO."""
    site = oc.settings([oc.SITE])[0]
    slower = next(d for d in oc.DEGRADATIONS if d.slower == 1.5)
    assert verdicts(oc, site, slower, "quiet")[Decision.FAILS] >= 95 * GOLIVES // 100
    assert verdicts(oc, site, oc.HEALTHY, "quiet")[Decision.FAILS] <= GOLIVES // 100


def test_the_simulated_rules_are_the_products(oc, reference):
    """The bench drives golive's own sweep rules and gates, not a copy of them."""
    import golive.endpoint.gates as gates
    import golive.endpoint.load as load

    assert oc.run_plan is load.run_plan and oc.gates is gates
    run = oc.go_live(reference, oc.HEALTHY, "quiet", [1])
    assert set(run.decisions) >= {"single_user_decode_tok_s", "scaling_ratio", gates.BATCH_CHECK}
