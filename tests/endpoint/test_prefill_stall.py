"""Prefill that stalls decoding, against the real vLLM reference station both ways: the healthy station (chunked
prefill on) keeps its streams decoding while a long prompt is prefilled; served with `--no-enable-chunked-prefill` its
streams freeze for the whole prefill and the check fails naming the flag (suites/endpoint/test_prefill.py)."""

import pytest
from golive_run import golive_endpoint

CHECK = "test_streams_keep_decoding_during_long_prefill"


def test_healthy_station_keeps_decoding_during_long_prefill(healthy_endpoint_run):
    """The shipped reference profile's probe passes on the healthy station, its freeze well below the ceiling (read
    from the session's whole-layer run on the healthy station, tests/conftest.py)."""
    run = healthy_endpoint_run
    assert run.check(CHECK)["outcome"] == "passed", run.check(CHECK)
    metrics = {m["name"]: m for m in run.results["metrics"]}
    share = metrics["prefill_freeze_share"]
    assert share["passed"] and 0 < share["value"] < share["ceiling"], share
    assert 0 < metrics["prefill_freeze_s"]["value"], metrics["prefill_freeze_s"]


@pytest.mark.slow
@pytest.mark.parametrize("reference", ["no-chunked-prefill"], indirect=True)
def test_station_without_chunked_prefill_fails(reference, tmp_path):
    """Served with `--no-enable-chunked-prefill`, the running streams get no token for the whole prefill: the check
    fails (both rounds froze), says what was found, the recipe's rule and the flag to serve."""
    run = golive_endpoint(reference, tmp_path, "-k", CHECK)
    assert run.failed() == {CHECK}, run.output
    message = run.check(CHECK)["message"]
    for fragment in (
        "running streams got no token for",
        "every one of 2 rounds froze",
        "chunked prefill on: running streams keep decoding while a long prompt is prefilled",
        "serve `--enable-chunked-prefill`",
        "--no-enable-chunked-prefill",
        "test_served_flags_match_profile reads the same served flags",
    ):
        assert fragment in message, message
    share = next(m for m in run.results["metrics"] if m["name"] == "prefill_freeze_share")
    assert not share["passed"] and share["value"] >= share["ceiling"], share
