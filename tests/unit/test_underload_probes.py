"""The under-load probes' judgement: right answers pass, anything else is named with what came back."""

from golive.endpoint.client import ChatResult
from golive.endpoint.underload import PROBES

TOOL, SUM = PROBES[0], PROBES[1]  # get_weather(Paris), 17 * 23


def test_tool_probe_wants_one_get_weather_call_for_paris():
    assert TOOL.judge(ChatResult("", "", [("get_weather", '{"city": "Paris"}')], "tool_calls")) is None
    assert (
        TOOL.judge(ChatResult("", "", [("get_weather", '{"city": "paris", "unit": "celsius"}')], "tool_calls")) is None
    )
    wrong = TOOL.judge(ChatResult("", "", [("get_time", '{"city": "Paris"}')], "tool_calls"))
    assert wrong == "tool calls [('get_time', '{\"city\": \"Paris\"}')], content '', finish_reason tool_calls"
    assert TOOL.judge(ChatResult("", "", [("get_weather", '{"city": "Lyon"}')], "tool_calls"))
    assert TOOL.judge(ChatResult("", "", [("get_weather", "not json")], "tool_calls"))
    assert TOOL.judge(ChatResult("It is sunny.", "", [], "stop"))
    assert TOOL.judge(ChatResult("", "", [("get_weather", '{"city": "Paris"}')] * 2, "tool_calls"))


def test_arithmetic_probe_wants_the_number_itself():
    assert SUM.judge(ChatResult("391", "", [], "stop")) is None
    assert SUM.judge(ChatResult("17 * 23 = 391.", "", [], "stop")) is None
    for content in ("392", "3910", "1391", "39.1", ""):
        assert SUM.judge(ChatResult(content, "", [], "stop")) == f"content {content!r}, finish_reason stop", content
