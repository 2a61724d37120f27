"""Quality: a site's own battery (domain questions with expected answers) scores at least its floor [000]."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import not_applicable, require
from golive.endpoint.answers import battery_ref, load_answer_battery, score_answer
from golive.endpoint.battery_runs import Spread, failing_ids

if TYPE_CHECKING:
    from golive.endpoint.answers import AnswerCase
    from golive.endpoint.client import ChatResult, EndpointClient
    from golive.profile.inventory import Station
    from golive.profile.schema import Profile
    from golive.run.fixtures import RecordFinding, RecordMetric, RecordProvenance
    from golive.site.loader import LoadedInventory

pytestmark = [pytest.mark.endpoint, pytest.mark.quality]


@check("endpoint.quality.site_batteries_meet_their_floors", Cost.SITE_BATTERIES)
def test_site_batteries_meet_their_floors(
    endpoint: EndpointClient,
    profile: Profile,
    golive_inventory: LoadedInventory,
    station: Station,
    record_metric: RecordMetric,
    record_finding: RecordFinding,
    record_provenance: RecordProvenance,
) -> None:
    """Each site battery named in the profile or the inventory scores ≥ its floor, with the profile's sampling
    [000]."""
    declared_in = golive_inventory.profile_of(station).files[-1]
    paths = [battery_ref(ref, declared_in) for ref in profile.endpoint.site_batteries]
    paths += [battery_ref(ref, golive_inventory.path) for ref in golive_inventory.inventory.site_batteries]
    if not paths:
        not_applicable(
            "neither the profile (endpoint.site_batteries) nor the inventory (site_batteries) names a site battery"
        )
    sampling = profile.endpoint.battery_sampling
    below, shown = [], []
    for path in dict.fromkeys(paths):
        battery = load_answer_battery(path)

        def ask(case: AnswerCase, max_tokens: int = battery.max_tokens) -> ChatResult:
            return endpoint.chat(
                profile.vllm.served_model_name, case.conversation(), max_tokens=max_tokens, **sampling.params()
            )

        runs = []  # per run: case id -> why it failed
        for _ in range(sampling.repeats):
            with ThreadPoolExecutor(max_workers=profile.endpoint.max_concurrency) as pool:  # load bounded by profile
                answers = list(pool.map(ask, battery.cases))
            runs.append(
                {
                    case.id: f"{case.id}: {reason}"
                    for case, result in zip(battery.cases, answers, strict=True)
                    for ok, reason in [score_answer(case.expect, result.content)]
                    if not ok
                }
            )
        total = len(battery.cases)
        spread = Spread([(total - len(failing)) / total for failing in runs])
        spread.record(record_metric, f"site_battery.{battery.name}", battery.floor)
        record_provenance(**{f"battery_failing.{battery.name}": failing_ids(runs)})
        shown.append(f"{battery.name} {spread.text()}")
        if spread.mean < battery.floor:
            worst = max(runs, key=len)
            below.append(
                f"{battery.name} {total - len(worst)}/{total} ({spread.text()}) < floor "
                f"{battery.floor:.0%}; failing: "
                + "; ".join(list(worst.values())[:6])
                + (" …" if len(worst) > 6 else "")
            )
    record_finding(f"site batteries {', '.join(shown)}; sampled with {sampling.describe()}")
    require(
        not below,
        found=" | ".join(below),
        recipe="every site battery at or above its floor [000]",
        fix="a checkpoint or image change lost answer quality: compare with the baseline's battery metrics and "
        "roll back, or re-measure and lower the floor only with the site's sign-off",
    )
