"""A prestart that sources its steps by a relative path, on the real station (issue 40, item 3): the station's
prestart has its `sync` and `echo 1 > /proc/sys/vm/drop_caches` moved to /usr/local/lib/glm53-flash/page-cache.sh
and reaches it as operators write it (realstation_variants.prestart_sources_steps). Where bash would find the file
golive follows it and the page-cache rule passes: `cd` to the folder then `. ./lib.sh` (which sources
`./page-cache.sh`), or `. ./page-cache.sh` with the unit's WorkingDirectory= there (a `systemctl edit` drop-in, read
as systemd 252 loaded it). Without either, systemd runs the prestart in `/`: the finding names `/` and /page-cache.sh,
which does not exist. Through a variable no file sets, golive cannot tell the file: not checked, naming the variable,
never failed. The station is not restarted (golive reads the files): one `golive run -m host -k prestart` a case.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from golive_run import Run, golive_run

from golive_testbed import realstation
from golive_testbed.realstation_files import PRESTART, UNIT
from golive_testbed.realstation_variants import prestart_sources_steps, revert_variant

pytestmark = pytest.mark.slow
CHECK = "test_prestart_syncs_then_drops_page_cache"
PRESTART_CHECKS = {
    CHECK,
    "test_prestart_is_what_the_unit_runs_before_start",
    "test_prestart_saves_logs_before_removing_container",
}


@pytest.fixture
def healthy_after(station: realstation.Record) -> Iterator[realstation.Record]:
    try:
        yield station
    finally:
        revert_variant(station, serving=False)  # files only: the container was never restarted


def prestart_run(station: realstation.Record, tmp_path: Path) -> Run:
    run = golive_run(station.inventory, tmp_path / "out", "-m", "host", "-k", "prestart", timeout=300)
    assert set(run.by_name()) >= PRESTART_CHECKS, run.output[-3000:]
    return run


@pytest.mark.parametrize("how", ["cd-then-relative", "working-directory"])
def test_a_relative_source_golive_can_follow_passes(healthy_after, tmp_path, how):
    prestart_sources_steps(healthy_after, how)
    run = prestart_run(healthy_after, tmp_path)
    assert run.code == 0 and not run.failed(), run.output[-4000:]
    assert run.check(CHECK)["outcome"] == "passed", run.check(CHECK)


def test_a_relative_source_without_a_directory_resolves_against_root(healthy_after, tmp_path):
    line = prestart_sources_steps(healthy_after, "relative-from-root")
    run = prestart_run(healthy_after, tmp_path)
    assert run.failed() == {CHECK}, run.output[-4000:]
    said = run.check(CHECK)["message"]
    assert (
        f"{PRESTART}:{line} sources `./page-cache.sh` relative to the current directory / (where systemd runs the "
        f"unit's commands: {UNIT} sets no WorkingDirectory=), that is /page-cache.sh, which does not exist on the "
        "station" in said
    ), said


def test_a_source_through_an_unknown_variable_is_not_checked(healthy_after, tmp_path):
    line = prestart_sources_steps(healthy_after, "unknown-variable")
    run = prestart_run(healthy_after, tmp_path)
    assert not run.failed(), run.output[-4000:]
    check = run.check(CHECK)
    assert check["outcome"] == "not_checked", check
    assert (
        f"not checked: {PRESTART}:{line} sources `$GLM53_LIB/page-cache.sh`, a path that depends on a variable "
        "golive cannot work out" in check["message"]
    ), check
    assert run.code == 2 and run.results["verdict"] == "incomplete", run.output[-3000:]
