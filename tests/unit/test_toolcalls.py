"""The tool-call battery loads cleanly, and score_calls gives each BFCL-style failure its own readable reason."""

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from golive.endpoint.toolcalls import BATTERY, ToolCase, load_battery, score_calls

CASES = {c.id: c for c in load_battery()}


def call(name: str, **args) -> tuple[str, str]:
    return name, json.dumps(args)


def score(case_id: str, *calls):
    return score_calls(CASES[case_id], list(calls))


# --- the bundled battery ----------------------------------------------------------------------------------


def test_battery_covers_bfcl_categories():
    counts = Counter(c.category for c in CASES.values())
    assert len(CASES) >= 25
    assert set(counts) == {"simple", "multiple", "parallel", "parallel_multiple", "typed", "irrelevance"}
    assert all(n >= 4 for n in counts.values()), counts


def test_battery_cases_are_well_formed():
    for case in CASES.values():
        assert case.messages and case.messages[-1]["role"] == "user"
        assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object" for t in case.tools)
        if case.category == "irrelevance":
            assert case.expected == []
        else:
            assert case.expected
        if case.category in ("parallel", "parallel_multiple"):
            assert len(case.expected) >= 2
        if case.category == "parallel_multiple":
            assert len({c["name"] for c in case.expected}) >= 2


def test_battery_has_the_recipe_smoke_tool():
    weather = CASES["simple_weather_smoke"].parameters("get_weather")
    assert weather is not None
    assert weather["required"] == ["city"]
    assert weather["properties"]["city"]["type"] == "string"
    assert weather["properties"]["unit"]["enum"] == ["celsius", "fahrenheit"]


def test_default_path_is_the_bundled_file(tmp_path):
    """load_battery() reads the battery shipped inside the package, and the wheel's package data carries it."""
    import fnmatch
    import tomllib

    import golive.endpoint

    package = Path(golive.endpoint.__file__).parent
    assert BATTERY.is_file() and BATTERY.parent.parent == package
    shipped = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    globs = shipped["tool"]["setuptools"]["package-data"]["golive.endpoint"]
    assert any(fnmatch.fnmatch(str(BATTERY.relative_to(package)), g) for g in globs), globs
    # the default is that file: its case ids, read as plain YAML, are the default battery's, in order
    assert [c["id"] for c in yaml.safe_load(BATTERY.read_text())["cases"]] == [c.id for c in load_battery()]
    # and a path, when given, is read instead: a copy with its last case removed loads one case fewer
    data = yaml.safe_load(BATTERY.read_text())
    dropped = data["cases"].pop()
    (tmp_path / "battery.yaml").write_text(yaml.safe_dump(data))
    assert [c.id for c in load_battery(tmp_path / "battery.yaml")] == [i for i in CASES if i != dropped["id"]]


@pytest.mark.parametrize(
    "case_yaml, message",
    [
        ("tools: [nope]\n    expected: []", "unknown tools ['nope']"),
        ("tools: [ping]\n    expected: [{name: pong, arguments: {}}]", "expects 'pong', which the case does not offer"),
        ("tools: [ping]\n    expected: [{name: ping, arguments: {when: [x]}}]", "'when' is not in the schema"),
        ("tools: [ping]\n    expected: [{name: ping, arguments: {host: [2025-07-14]}}]", "must map to a list of JSON"),
        ("tools: [ping]\n    expected: [{name: ping, arguments: {host: a}}]", "must map to a list of JSON"),
        ("tools: [ping]", "'expected' must be a list of calls"),
    ],
)
def test_load_battery_rejects_typos(tmp_path, case_yaml, message):
    path = tmp_path / "battery.yaml"
    path.write_text(
        "tools:\n  ping:\n    description: Ping a host.\n"
        "    parameters: {type: object, properties: {host: {type: string}}, required: [host]}\n"
        "cases:\n  - id: c1\n    category: simple\n    messages: [{role: user, content: hi}]\n    " + case_yaml + "\n"
    )
    with pytest.raises(ValueError, match=r"case c1: .*" + message.replace("[", r"\[").replace("(", r"\(")):
        load_battery(path)


def test_load_battery_rejects_duplicate_ids(tmp_path):
    path = tmp_path / "battery.yaml"
    case = "  - {id: c1, category: irrelevance, messages: [{role: user, content: hi}], tools: [], expected: []}\n"
    path.write_text("tools: {}\ncases:\n" + case * 2)
    with pytest.raises(ValueError, match="case c1: duplicate id"):
        load_battery(path)


# --- passing -------------------------------------------------------------------------------------------------


def test_simple_call_passes():
    verdict = score("simple_weather_smoke", call("get_weather", city="Paris"))
    assert verdict.passed and verdict.reason == "1 call matched"


def test_optional_argument_may_be_given_with_an_accepted_value():
    assert score("simple_weather_smoke", call("get_weather", city="Paris", unit="celsius")).passed


def test_strings_ignore_case_whitespace_and_surrounding_punctuation():
    assert score("simple_weather_smoke", call("get_weather", city="  paris. ")).passed
    assert score("simple_weather_smoke", call("get_weather", city="Paris,  France")).passed


def test_numbers_compare_by_value_and_an_int_is_a_number():
    assert score(
        "multiple_thermostat", call("set_thermostat", temperature=18.50, unit="celsius", room="Server Room")
    ).passed
    assert score("typed_boolean_false", call("set_thermostat", temperature=19.0, unit="celsius", eco_mode=False)).passed
    assert score(
        "multiple_currency_names", call("convert_currency", amount=250, from_currency="eur", to_currency="JPY")
    ).passed


def test_parallel_calls_match_in_any_order():
    calls = [call("get_stock_price", ticker=t) for t in ("INTC", "NVDA", "AMD")]
    assert score("parallel_stocks", *calls).passed


def test_parallel_multiple_in_any_order():
    verdict = score(
        "parallel_multiple_weather_ticket",
        call("create_ticket", title="Cooling fan noise in rack 4", priority="high"),
        call("get_weather", city="Oslo"),
    )
    assert verdict.passed and verdict.reason == "2 calls matched"


def test_arrays_and_integers():
    assert score("typed_array", call("tag_ticket", ticket_id=4512, tags=["NCCL", "networking", "p1"])).passed


def test_no_call_case_passes_without_calls():
    verdict = score("irrelevance_haiku")
    assert verdict.passed and verdict.reason == "no call, as expected"


# --- each failure kind, with its reason ------------------------------------------------------------------------


def test_any_call_fails_a_no_call_case():
    verdict = score(
        "irrelevance_arithmetic", call("convert_currency", amount=17, from_currency="USD", to_currency="EUR")
    )
    assert not verdict.passed
    assert verdict.reason == "called convert_currency where no tool fits"


def test_undeclared_function():
    verdict = score("simple_weather_smoke", call("get_forecast", city="Paris"))
    assert verdict.reason == "called 'get_forecast', which is not an offered tool ['get_weather']"


def test_arguments_not_json():
    verdict = score("simple_weather_smoke", ("get_weather", '{"city": "Paris"'))
    assert not verdict.passed
    assert verdict.reason.startswith("get_weather: arguments are not valid JSON (")


def test_arguments_not_an_object():
    verdict = score("simple_weather_smoke", ("get_weather", '["Paris"]'))
    assert verdict.reason == "get_weather: arguments must be a JSON object, got array"


def test_required_argument_missing():
    verdict = score("simple_weather_smoke", call("get_weather", unit="celsius"))
    assert verdict.reason == "get_weather: required argument 'city' missing"


def test_argument_not_in_schema():
    verdict = score("simple_weather_smoke", call("get_weather", city="Paris", country="FR"))
    assert verdict.reason == "get_weather: argument 'country' is not in the tool's schema"


@pytest.mark.parametrize(
    "value, reason",
    [
        ("3", "book_hotel: argument 'nights' = '3' is string, schema says integer"),
        (3.0, "book_hotel: argument 'nights' = 3.0 is number, schema says integer"),
        (True, "book_hotel: argument 'nights' = True is boolean, schema says integer"),
    ],
)
def test_integer_type_is_strict(value, reason):
    args = {"city": "Lisbon", "check_in": "2025-07-14", "nights": value, "guests": 2}
    verdict = score("typed_integers_hotel", ("book_hotel", json.dumps(args)))
    assert not verdict.passed and verdict.reason == reason


def test_boolean_type():
    verdict = score("typed_boolean_true", call("lookup_order", order_id="88213", include_history="yes"))
    assert verdict.reason == "lookup_order: argument 'include_history' = 'yes' is string, schema says boolean"


def test_string_type():
    verdict = score("simple_order", call("lookup_order", order_id=10234))
    assert verdict.reason == "lookup_order: argument 'order_id' = 10234 is integer, schema says string"


def test_array_item_type():
    verdict = score("typed_array", call("tag_ticket", ticket_id=4512, tags=["nccl", 7, "p1"]))
    assert verdict.reason == (
        "tag_ticket: argument 'tags' = ['nccl', 7, 'p1'] has item 7 that is integer, schema says string"
    )


def test_enum_respected():
    verdict = score("simple_weather_smoke", call("get_weather", city="Paris", unit="kelvin"))
    assert verdict.reason == "get_weather: argument 'unit' = 'kelvin' not in enum ['celsius', 'fahrenheit']"


def test_wrong_number_of_calls():
    verdict = score("parallel_weather", call("get_weather", city="Paris"))
    assert verdict.reason == "expected 2 calls ['get_weather', 'get_weather'], got 1 ['get_weather']"


def test_wrong_function_chosen():
    verdict = score("multiple_email", call("create_ticket", title="Maintenance window"))
    assert verdict.reason == "expected a call to 'send_email', got ['create_ticket']"


def test_wrong_value():
    verdict = score("simple_weather_fahrenheit", call("get_weather", city="Phoenix", unit="celsius"))
    assert verdict.reason == "get_weather: argument 'unit' = 'celsius', expected one of ['fahrenheit']"


def test_value_may_not_be_omitted_when_the_user_asked_for_it():
    verdict = score("simple_weather_fahrenheit", call("get_weather", city="Phoenix"))
    assert verdict.reason == "get_weather: argument 'unit' missing, expected one of ['fahrenheit']"


def test_unasked_argument_is_rejected():
    """An argument the schema allows (guests) but the user never asked for fails; the same call without it passes."""
    case = ToolCase(
        "x",
        "simple",
        [],
        CASES["typed_integers_hotel"].tools,
        [{"name": "book_hotel", "arguments": {"city": ["Lisbon"], "check_in": ["2025-07-14"], "nights": [3]}}],
    )
    asked = {"city": "Lisbon", "check_in": "2025-07-14", "nights": 3}
    schema = case.parameters("book_hotel")
    assert schema and "guests" in schema["properties"]  # allowed by the schema: only the user's ask rules it out
    assert score_calls(case, [("book_hotel", json.dumps(asked))]).passed
    verdict = score_calls(case, [("book_hotel", json.dumps({**asked, "guests": 4}))])
    assert not verdict.passed and verdict.reason == "book_hotel: argument 'guests' = 4 was not expected"


def test_array_value_mismatch():
    verdict = score("typed_array", call("tag_ticket", ticket_id=4512, tags=["nccl", "p1"]))
    assert verdict.reason == (
        "tag_ticket: argument 'tags' = ['nccl', 'p1'], expected one of [['nccl', 'networking', 'p1']]"
    )


def test_parallel_duplicate_reports_the_missing_entity():
    verdict = score("parallel_weather", call("get_weather", city="Paris"), call("get_weather", city="Paris"))
    assert verdict.reason == "get_weather: argument 'city' = 'Paris', expected one of ['Tokyo', 'Tokyo, Japan']"


def test_parallel_multiple_missing_one_tool():
    verdict = score(
        "parallel_multiple_stock_docs",
        call("get_stock_price", ticker="AMD"),
        call("get_stock_price", ticker="MTP"),
    )
    assert verdict.reason == "expected a call to 'search_docs', got ['get_stock_price', 'get_stock_price']"
