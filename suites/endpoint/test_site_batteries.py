"""Quality: a site's own battery (domain questions with expected answers) scores at least its floor [000]."""
from concurrent.futures import ThreadPoolExecutor

import pytest

from golive.endpoint.answers import battery_ref, load_answer_battery, score_answer
from golive.verdict import not_applicable, require

pytestmark = [pytest.mark.endpoint, pytest.mark.quality]


def test_site_batteries_meet_their_floors(endpoint, profile, golive_inventory, station, record_metric,
                                          record_finding):
    """Each site battery named in the profile scores ≥ its floor, with the profile's sampling [000]."""
    refs = profile.endpoint.site_batteries
    if not refs:
        not_applicable("the profile names no site battery (endpoint.site_batteries)")
    declared_in = golive_inventory.profile_of(station).files[-1]
    sampling = profile.endpoint.battery_sampling
    record_finding(f"site batteries sampled with {sampling.describe()}")
    below = []
    for ref in refs:
        battery = load_answer_battery(battery_ref(ref, declared_in))

        def ask(case, max_tokens=battery.max_tokens):
            return endpoint.chat(profile.vllm.served_model_name, case.conversation(), max_tokens=max_tokens,
                                 **sampling.params())

        with ThreadPoolExecutor(max_workers=profile.endpoint.max_concurrency) as pool:  # load bounded by the profile
            answers = list(pool.map(ask, battery.cases))
        failing = []
        for case, result in zip(battery.cases, answers):
            ok, reason = score_answer(case.expect, result.content)
            if not ok:
                failing.append(f"{case.id}: {reason}")
        passed = len(battery.cases) - len(failing)
        score = passed / len(battery.cases)
        record_metric(f"site_battery.{battery.name}", round(score, 4), "fraction", floor=battery.floor)
        if score < battery.floor:
            below.append(f"{battery.name} {passed}/{len(battery.cases)} ({score:.0%}) < floor {battery.floor:.0%}; "
                         f"failing: " + "; ".join(failing[:6]) + (" …" if len(failing) > 6 else ""))
    require(not below, found=" | ".join(below),
            recipe="every site battery at or above its floor (closed-book compliance 26/35 at go-live) [000]",
            fix="a checkpoint or image change lost answer quality: compare with the baseline's battery metrics and "
                "roll back, or re-measure and lower the floor only with the site's sign-off")
