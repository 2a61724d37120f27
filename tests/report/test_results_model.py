"""results.json is one model (golive.report.model.Results): written from it, read back through it, its JSON schema the
one docs/ci.md shows, and each check's id the same for the same check on the same station in every run."""

import json
import re
from pathlib import Path

import pytest

from golive.checklist import check_id
from golive.endpoint.levels import LevelResult
from golive.report.markdown import render_markdown
from golive.report.model import SCHEMA, Results, SweepRow, legacy_check_id, main, read_results, schema_text
from golive.report.results import CheckRecord, Metric, Recorder
from tests.report.test_numbers import numbers_recorder
from tests.report.test_plots import sweep_recorder

REPO = Path(__file__).resolve().parents[2]
DOC_BLOCK = re.compile(r"`python -m golive\.report\.model --schema` prints it.*?```json\n(.*?)```", re.S)


def test_docs_ci_shows_the_models_json_schema():
    match = DOC_BLOCK.search((REPO / "docs/ci.md").read_text())
    assert match, "docs/ci.md lost its results.json schema block (after `python -m golive.report.model --schema`)"
    assert match.group(1) == schema_text(), (
        "docs/ci.md's results.json schema is not the model's: paste the output of "
        "`python -m golive.report.model --schema` into its ```json block"
    )
    assert json.loads(match.group(1)) == Results.model_json_schema(by_alias=True)


def test_the_schema_command_prints_it_and_refuses_anything_else(capsys):
    assert main(["--schema"]) == 0
    assert capsys.readouterr().out == schema_text()
    assert main(["--shema"]) == 4
    assert capsys.readouterr().err == "usage: python -m golive.report.model --schema\n"


def test_a_sweep_row_is_the_load_generators_row_and_its_station():
    """One model from the load generator to the report: the row is LevelResult (declared once) plus its station."""
    assert issubclass(SweepRow, LevelResult)
    assert set(SweepRow.model_fields) == {*LevelResult.model_fields, "station"}
    level = LevelResult.model_validate(
        {name: None for name, field in LevelResult.model_fields.items() if not field.is_required()}
        | {"concurrency": 8, "requests": 24, "failures": 0, "duration_s": 1.0, "output_tokens": 768}
        | {"aggregate_tok_s": 768.0, "client_usage_mismatches": 0, "warmup_failures": 0, "batches": 1, "errors": []}
        | {n: None for n in ("per_user_tok_s_p50", "ttft_p50_s", "ttft_p99_s", "ttft_mean_s", "ttfo_p50_s")}
        | {n: None for n in ("itl_p50_s", "itl_mean_s", "tpot_p50_s", "e2e_p50_s", "e2e_mean_s", "prompt_tokens_p50")}
    )
    assert SweepRow.of("a", level).level == level


@pytest.mark.parametrize("recorder", [numbers_recorder, sweep_recorder, Recorder], ids=["numbers", "sweep", "empty"])
def test_what_is_written_reads_back_the_same(tmp_path, recorder):
    written = recorder().write(tmp_path / "results.json")
    text = (tmp_path / "results.json").read_text()
    assert json.loads(text)["schema"] == SCHEMA == 5
    read = read_results(tmp_path / "results.json")
    assert read == written and read.as_json() == text
    assert render_markdown(read) == render_markdown(written)


def test_a_metric_at_infinity_is_written_as_json_dumps_wrote_it(tmp_path):
    recorder = Recorder()
    recorder.metrics.append(Metric(station="a", check="c", name="ratio", value=float("inf"), unit="x"))
    recorder.write(tmp_path / "results.json")
    assert '"value": Infinity' in (tmp_path / "results.json").read_text()
    assert read_results(tmp_path / "results.json").metrics[0].value == float("inf")


@pytest.mark.parametrize(
    "nodeid, station, expected",
    [
        ("suites/host/test_unit.py::test_unit_caps[gb300-a]", "gb300-a", "host/test_unit.py::test_unit_caps@gb300-a"),
        # plain pytest --pyargs golive.suites names the same check from its rootdir
        (
            "../venv/lib/python3.11/site-packages/golive/suites/host/test_unit.py::test_unit_caps[gb300-a]",
            "gb300-a",
            "host/test_unit.py::test_unit_caps@gb300-a",
        ),
        (
            "suites/endpoint/test_long_context.py::test_needle[depth50-gb300-a]",
            "gb300-a",
            "endpoint/test_long_context.py::test_needle[depth50]@gb300-a",
        ),
        ("suites/endpoint/test_x.py::test_y[a-gb300-a-q]", "gb300-a", "endpoint/test_x.py::test_y[a-q]@gb300-a"),
        (
            "suites/host/test_unit.py::test_unit_caps[gb300-a-2]",
            "gb300-a-2",
            "host/test_unit.py::test_unit_caps@gb300-a-2",
        ),
        ("golive::post-upgrade-gate", "", "golive::post-upgrade-gate"),
    ],
)
def test_legacy_ids_drop_what_depends_on_the_run(nodeid, station, expected):
    """The id schema 4 derived from where a check was written: older files still read, and pair, by it."""
    assert legacy_check_id(nodeid, station) == expected


@pytest.mark.parametrize(
    "nodeid, station, expected",
    [
        ("suites/host/test_unit.py::test_unit_caps[gb300-a]", "gb300-a", "host.unit.caps@gb300-a"),
        ("../site-packages/golive/suites/host/moved.py::test_renamed[gb300-a]", "gb300-a", "host.unit.caps@gb300-a"),
        ("suites/endpoint/t.py::test_needle[gb300-a-depth50]", "gb300-a", "host.unit.caps[depth50]@gb300-a"),
        ("suites/endpoint/t.py::test_y[a-gb300-a-q]", "gb300-a", "host.unit.caps[a-q]@gb300-a"),
        ("suites/host/test_unit.py::test_unit_caps[gb300-a-2]", "gb300-a-2", "host.unit.caps@gb300-a-2"),
    ],
)
def test_check_ids_are_the_declared_id_its_parameters_and_station(nodeid, station, expected):
    """Where the check is written (file, function) is not part of its id: moved or renamed, it keeps it."""
    assert check_id("host.unit.caps", nodeid, station) == expected


def test_the_same_check_on_two_stations_or_two_cases_have_two_ids():
    ids = {
        check_id("host.unit.caps", "suites/host/test_unit.py::test_unit_caps[gb300-a]", "gb300-a"),
        check_id("host.unit.caps", "suites/host/test_unit.py::test_unit_caps[gb300-a-2]", "gb300-a-2"),
        check_id("host.unit.enabled", "suites/host/test_unit.py::test_unit_enabled[gb300-a]", "gb300-a"),
        check_id("endpoint.context.needle", "suites/endpoint/t.py::test_needle[depth10-gb300-a]", "gb300-a"),
        check_id("endpoint.context.needle", "suites/endpoint/t.py::test_needle[depth50-gb300-a]", "gb300-a"),
    }
    assert len(ids) == 5


def test_every_record_has_its_id_and_a_written_id_is_kept():
    """A record without an id (a schema 2 or 3 file) gets the one schema 4 derived; a written id is kept as it is."""
    record = CheckRecord(nodeid="suites/host/test_unit.py::test_x[a]", layer="host", rule="r", station="a")
    assert record.id == "host/test_unit.py::test_x@a"
    kept = CheckRecord.model_validate(record.model_dump() | {"nodeid": "elsewhere::test_x[a]"})
    assert kept.id == "host/test_unit.py::test_x@a"
    declared = CheckRecord(
        id="host.unit.x@a", nodeid="suites/host/test_unit.py::test_x[a]", layer="host", rule="r", station="a"
    )
    assert declared.id == "host.unit.x@a"


def test_a_stopped_check_says_why_as_data(tmp_path):
    """mark_unfinished records `stopped_by`; golive watch reads that, never the message."""

    class Item:
        def __init__(self, nodeid: str) -> None:
            self.nodeid, self.user_properties = nodeid, []

    recorder = Recorder()
    running, later = Item("suites/host/t.py::test_a[s]"), Item("suites/host/t.py::test_b[s]")
    recorder.mark_unfinished([running, later], running, "the run's time bound (60 s) was reached", "time_bound")
    data = json.loads(recorder.write(tmp_path / "results.json").as_json())
    assert [(c["outcome"], c["stopped_by"]) for c in data["checks"]] == [("not_checked", "time_bound")] * 2
