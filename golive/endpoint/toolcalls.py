"""Tool-call battery: load the bundled cases and score a server's calls the way BFCL's AST checker does.

Type checks are written here rather than delegated to jsonschema: the battery's schemas use only flat
`type`/`enum`/`items`, and an operator needs a one-line reason naming the tool, the argument and the value,
which jsonschema's generic messages don't give.
"""

from __future__ import annotations

import json
import math
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from golive.core.verdict import counted

BATTERY = Path(__file__).parent / "batteries" / "toolcalls.yaml"
OMITTED = ""  # in an acceptable-values list: the argument may be left out

_JSON_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number", list: "array", dict: "object"}

# The recipe's smoke request [000]: a weather question and the one tool that fits it. The smoke check
# (suites/endpoint/test_tools.py) sends it alone; golive.endpoint.underload asks it again while the load runs.
WEATHER_QUESTION = "What's the weather in Paris right now?"
GET_WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. 'Paris'"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}


@dataclass
class ToolCase:
    id: str
    category: str
    messages: list[dict]
    tools: list[dict]  # OpenAI tool dicts
    expected: list[dict]  # [{name, arguments: {param: [acceptable values]}}]; [] = no call expected

    def parameters(self, name: str) -> dict | None:
        """JSON schema of the offered tool `name`, or None when it was not offered."""
        for tool in self.tools:
            if tool["function"]["name"] == name:
                return tool["function"].get("parameters") or {"type": "object", "properties": {}}
        return None


@dataclass
class Verdict:
    passed: bool
    reason: str


def load_battery(path: Path | None = None) -> list[ToolCase]:
    """Read a battery file; typos in it (unknown tool, undeclared argument, bare value) raise ValueError."""
    path = Path(path or BATTERY)
    data = yaml.safe_load(path.read_text())
    seen: set[str] = set()
    return [_read_case(path, raw, data["tools"], seen) for raw in data["cases"]]


def _read_case(path: Path, raw: dict, defs: dict, seen: set[str]) -> ToolCase:
    """One case of the battery, checked against the tool definitions; `seen` holds the ids read before it."""
    cid = raw["id"]

    def bad(msg: str) -> ValueError:
        return ValueError(f"{path}: case {cid}: {msg}")

    if cid in seen:
        raise bad("duplicate id")
    seen.add(cid)
    unknown = [t for t in raw["tools"] if t not in defs]
    if unknown:
        raise bad(f"unknown tools {unknown}")
    if not isinstance(raw.get("expected"), list):  # a forgotten key must not turn into "no call expected"
        raise bad("'expected' must be a list of calls ([] when no tool fits)")
    tools = [{"type": "function", "function": {"name": t, **defs[t]}} for t in raw["tools"]]
    case = ToolCase(cid, raw["category"], raw["messages"], tools, raw["expected"])
    for call in case.expected:
        params = case.parameters(call["name"])
        if params is None:
            raise bad(f"expects {call['name']!r}, which the case does not offer")
        for arg, ok in call.get("arguments", {}).items():
            if arg not in params.get("properties", {}):
                raise bad(f"{call['name']}: argument {arg!r} is not in the schema")
            # YAML turns unquoted dates into datetime.date; the server only ever returns JSON types.
            if not isinstance(ok, list) or any(_json_type(v) is None for v in ok):
                raise bad(f"{call['name']}: {arg!r} must map to a list of JSON values, got {ok!r}")
    return case


def score_calls(case: ToolCase, calls: list[tuple[str, str]]) -> Verdict:
    """Score (name, arguments-JSON) calls against a case: schema validity first, then count, then values."""
    names = [name for name, _ in calls]
    if not case.expected:
        if calls:
            return Verdict(False, f"called {', '.join(names)} where no tool fits")
        return Verdict(True, "no call, as expected")

    parsed = []
    for name, raw in calls:
        params = case.parameters(name)
        if params is None:
            offered = [t["function"]["name"] for t in case.tools]
            return Verdict(False, f"called {name!r}, which is not an offered tool {offered}")
        try:
            args = json.loads(raw)
        except (TypeError, ValueError) as exc:
            return Verdict(False, f"{name}: arguments are not valid JSON ({exc})")
        if not isinstance(args, dict):
            return Verdict(False, f"{name}: arguments must be a JSON object, got {_json_type(args)}")
        problem = schema_problem(name, args, params)
        if problem:
            return Verdict(False, problem)
        parsed.append((name, args))

    want = [c["name"] for c in case.expected]
    if len(parsed) != len(want):
        return Verdict(False, f"expected {counted(len(want), 'call')} {want}, got {len(parsed)} {names}")

    # Parallel calls may come in any order: pair expected and actual calls by bipartite matching.
    problems = [[_value_problem(exp, name, args) for name, args in parsed] for exp in case.expected]
    pair = _match([[p is None for p in row] for row in problems])
    for i, j in enumerate(pair):
        if j is not None:
            continue
        free = [k for k in range(len(parsed)) if k not in pair and parsed[k][0] == want[i]]
        if not free:
            return Verdict(False, f"expected a call to {want[i]!r}, got {names}")
        problem = problems[i][free[0]]
        assert problem is not None  # a maximum matching leaves no free call that would fit expected call i
        return Verdict(False, problem)
    return Verdict(True, f"{counted(len(parsed), 'call')} matched")


def schema_problem(name: str, args: dict, params: dict) -> str | None:
    """Validity against the tool's own schema, independent of what the case expects."""
    props = params.get("properties", {})
    for req in params.get("required", []):
        if req not in args:
            return f"{name}: required argument {req!r} missing"
    for arg, value in args.items():
        spec = props.get(arg)
        if spec is None:
            return f"{name}: argument {arg!r} is not in the tool's schema"
        problem = _type_problem(value, spec)
        if problem:
            return f"{name}: argument {arg!r} = {value!r} {problem}"
    return None


def _type_problem(value: object, spec: dict[str, Any]) -> str | None:
    kinds = spec.get("type")
    if kinds:
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if not any(_is_type(value, k) for k in kinds):
            return f"is {_json_type(value)}, schema says {'/'.join(kinds)}"
    if "enum" in spec and value not in spec["enum"]:
        return f"not in enum {spec['enum']}"
    if isinstance(value, list) and isinstance(spec.get("items"), dict):
        for item in value:
            problem = _type_problem(item, spec["items"])
            if problem:
                return f"has item {item!r} that {problem}"
    return None


def _is_type(value: object, kind: str) -> bool:
    if isinstance(value, bool):  # bool subclasses int in Python, never in JSON
        return kind == "boolean"
    if kind == "number":
        return isinstance(value, (int, float))
    return _json_type(value) == kind or (kind == "null" and value is None)


def _json_type(value: object) -> str | None:
    return "null" if value is None else _JSON_TYPES.get(type(value))


def _value_problem(expected: dict, name: str, args: dict) -> str | None:
    """Why this actual call is not the expected one, or None when it is."""
    if name != expected["name"]:
        return f"called {name!r} where {expected['name']!r} was expected"
    wanted = expected.get("arguments", {})
    for arg, value in args.items():
        if arg not in wanted:
            return f"{name}: argument {arg!r} = {value!r} was not expected"
    for arg, ok in wanted.items():
        shown = [v for v in ok if v != OMITTED]
        if arg not in args:
            if OMITTED not in ok:
                return f"{name}: argument {arg!r} missing, expected one of {shown}"
        elif not any(_same(args[arg], v) for v in ok):
            return f"{name}: argument {arg!r} = {args[arg]!r}, expected one of {shown}"
    return None


def _same(actual: object, wanted: object) -> bool:
    if isinstance(actual, bool) or isinstance(wanted, bool):
        return actual is wanted
    if isinstance(actual, (int, float)) and isinstance(wanted, (int, float)):
        return math.isclose(actual, wanted, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(actual, str) and isinstance(wanted, str):
        return normalized(actual) == normalized(wanted)
    if isinstance(actual, list) and isinstance(wanted, list):
        return len(actual) == len(wanted) and all(map(_same, actual, wanted))
    if isinstance(actual, dict) and isinstance(wanted, dict):
        return actual.keys() == wanted.keys() and all(_same(actual[k], wanted[k]) for k in actual)
    return False


def normalized(text: str) -> str:
    """Case, surrounding punctuation and runs of whitespace don't change what a string argument means."""
    return " ".join(text.split()).strip(string.punctuation + " ").casefold()


def _match(ok: list[list[bool]]) -> list[int | None]:
    """Maximum bipartite matching rows -> columns (Kuhn's augmenting paths); None for an unmatched row."""
    owner: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j, fits in enumerate(ok[i]):
            if fits and j not in seen:
                seen.add(j)
                if j not in owner or augment(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    for i in range(len(ok)):
        augment(i, set())
    pair: list[int | None] = [None] * len(ok)
    for j, i in owner.items():
        pair[i] = j
    return pair
