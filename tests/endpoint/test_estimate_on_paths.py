"""The time estimate survives the path: said before the first check, it holds within 2× of the run's actual time
directly and through a path that adds 40 ms or 300 ms to every request (tests/faults/proxy.py's FaultProxy in front of
the session's real vLLM reference station), and its probe reads the station's decode speed, not the path's: from the
gaps between tokens, within 4× of what the sweep itself measured one user decode through the same path (a 40 ms path
once read a 445 tok/s station as 75, and the estimate ran 2.6-3.9× the run; the 4× is the shared machine's own
moment-to-moment spread, see _held).

The direct path is the session's whole-layer run on the healthy station (tests/conftest.py); the two slow paths run
the endpoint layer less the batteries (answers at the probe's speed, as the light checks are) with two ratio rounds:
each request pays the path, so a whole layer through 300 ms is minutes of CI."""

from __future__ import annotations

from pathlib import Path

import pytest
from faults.proxy import FaultProxy
from golive_run import Run, golive_run

from golive.report.model import EstimateRecord

SITE = "extends: reference-cpu\nload:\n  ratio_rounds: 2\n"
WITHOUT_BATTERIES = "not battery and not streamed_and_plain_calls_agree"


def _held(run: Run) -> tuple[EstimateRecord, float]:
    """The run's estimate, its actual ÷ expected, and the probe's decode against the sweep's own single-user speed."""
    assert run.results, run.output[-3000:]
    estimate = EstimateRecord.model_validate(run.results["estimate"])
    assert estimate.actual_s and estimate.expected_s and not estimate.not_estimated, estimate
    ratio = estimate.actual_s / estimate.expected_s
    assert 0.5 <= ratio <= 2.0, f"actual ÷ expected {ratio:.2f}: {estimate.summary()}"
    (probe,) = estimate.probes
    (one_user,) = [row for row in run.results["sweep"] if row["concurrency"] == 1]
    swept = one_user["per_user_tok_s_p50"]
    assert probe.decode_tok_s is not None and swept, (probe, one_user)
    # the path is not in the decode: read from the gaps between tokens, never from the answers' whole time
    assert probe.decode_from == "gaps", probe
    # A 2-second probe against the sweep's minutes-long median: on the shared 2-core CI machine the station itself
    # is 0.3-1.7x as fast from one moment to the next (CI, 2026-12-05: 209 vs 610 and 145 vs 502 tok/s while the other
    # worker's tests ran; 838 vs 600 quiet), so the bound is the path's own mistake, not the machine's noise: a 40 ms
    # path counted as decoding read a 445 tok/s station as 75 (6x), as a 300 ms one would read it as 85 tok/s.
    assert 0.25 <= probe.decode_tok_s / swept <= 4.0, f"probe {probe.decode_tok_s:.0f} tok/s, sweep {swept:.0f} tok/s"
    return estimate, ratio


def test_the_estimate_holds_on_the_direct_path(healthy_endpoint_run):
    _held(healthy_endpoint_run)


@pytest.mark.slow  # each request waits 40 ms or 300 ms more: ~2 min a path on the loaded 2-core machine
@pytest.mark.parametrize("delay_s", [0.04, 0.3], ids=["40ms", "300ms"])
def test_the_estimate_holds_through_a_slow_path(reference, tmp_path: Path, delay_s: float):
    site = tmp_path / "site.yaml"
    site.write_text(SITE)
    inventory = tmp_path / "inventory.yaml"
    with FaultProxy(reference.port, delay_s=delay_s) as proxy:
        inventory.write_text(f"profile: {site}\nstations:\n  - {{name: reference, endpoint: '{proxy.base_url}'}}\n")
        run = golive_run(inventory, tmp_path / "out", "-m", "endpoint", "-k", WITHOUT_BATTERIES, "-q", timeout=900)
    estimate, _ = _held(run)
    probe = estimate.probes[0]
    assert probe.round_trip_s is not None and probe.round_trip_s >= delay_s, probe  # the path, paid once
    assert probe.ttft_s is not None and probe.ttft_s >= delay_s, probe
