"""Reference solver: what a healthy GLM deployment would answer, decided from the prompt alone.

The reference station's oracle decodes the rendered prompt into messages + tools and asks `decide` for the
answer to force. Everything here is generic: tools are chosen by matching the request against tool names and
descriptions, arguments are read from the text and typed by each parameter's JSON schema. Nothing keys on the
battery's questions.
"""

from __future__ import annotations

import ast
import calendar
import itertools
import json
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolCall:
    name: str
    arguments: dict


@dataclass
class Answer:
    reasoning: str
    content: str  # "" when tool_calls is non-empty
    tool_calls: list[ToolCall] = field(default_factory=list)


def decide(
    messages: list[dict],
    tools: list[dict] | None,
    reasoning_effort: str | None = None,
    tool_choice: str | list[str] = "auto",
) -> Answer:
    """Answer the conversation: tool calls when an offered tool fits the last request, text otherwise.

    tool_choice as the server enforces it: "auto", "none" (answer in text even when a tool fits), or the list of
    tool names a call must use ("required": all offered tools; a named function: that one) — a call even when text
    would do.
    """
    request = _last_user_text(messages)
    results = _tool_results_since_user(messages)
    if tool_choice == "none":
        tools = None
    elif isinstance(tool_choice, list):
        return _forced(messages, tools, reasoning_effort, tool_choice, request)
    chained = _next_in_chain(request, tools, messages, results) if results else []
    if chained:
        shown = "; ".join(f"{c.name}({json.dumps(c.arguments)})" for c in chained)
        why = "The tool result gives what the next step of the request needs, so I call again."
        return Answer(_reasoning(why, f"Next: {shown}.", request, reasoning_effort), "", chained)
    if results:
        content = _summarise_results(results)
        combined = _combine(request, results)
        content = f"{combined} {content}" if combined else content
        why = "A tool result answers the request, so I report it in text."
    else:
        fns = [t.get("function", t) for t in tools or []]
        calls, missing, why = _plan_calls(request, fns)
        if not calls and not missing:
            calls = _follow_up(messages, fns)
            why = why if not calls else "This follow-up repeats the previous request for a new value, so I call again."
        if calls:
            shown = "; ".join(f"{c.name}({json.dumps(c.arguments)})" for c in calls)
            detail = f"Arguments come from the request, typed by each schema: {shown}."
            return Answer(_reasoning(why, detail, request, reasoning_effort), "", calls)
        content = missing or _direct_answer(messages, request)
    detail = f'My reply: "{content[:80]}".'
    return Answer(_reasoning(why, detail, request, reasoning_effort), content, [])


def _forced(
    messages: list[dict], tools: list[dict] | None, effort: str | None, allowed: list[str], request: str
) -> Answer:
    """A call is required: the fitting call among the allowed tools, else the allowed tool closest to the request."""
    fns = [t.get("function", t) for t in tools or [] if t.get("function", t).get("name") in allowed]
    if not fns:
        return decide(messages, tools, effort)
    calls, _, why = _plan_calls(request, fns)
    if not calls:
        fn = _best_tool(request, fns, [_tool_vocab(f) for f in fns]) or fns[0]
        args = (_arguments(fn, request) or [{}])[0]
        for p in (fn.get("parameters") or {}).get("required", []):
            spec = (fn.get("parameters") or {}).get("properties", {}).get(p, {})
            args.setdefault(p, spec.get("enum", [None])[0] or ("" if spec.get("type", "string") == "string" else 0))
        calls = [ToolCall(fn["name"], args)]
        why = f"tool_choice requires a call, so I call {fn['name']} with what the request gives."
    shown = "; ".join(f"{c.name}({json.dumps(c.arguments)})" for c in calls)
    return Answer(_reasoning(why, f"Calls: {shown}.", request, effort), "", calls)


# --- conversation -------------------------------------------------------------------------------------------


def _text(content: str | list[Any] | None) -> str:
    if isinstance(content, list):  # OpenAI content parts
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def _last_user_text(messages: list[dict]) -> str:
    return next((_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")


def _tool_results_since_user(messages: list[dict]) -> list[tuple[str, str]]:
    """(tool name, result text) for tool messages after the last user turn: those still need answering.

    A result is named by its tool_call_id when present, else by position (the oracle's decoded prompt has no ids).
    """
    by_id: dict[str | None, str | None] = {}
    pending: list[str | None] = []
    out: list[tuple[str, str]] = []
    for m in messages:
        if m.get("role") == "user":
            out = []
        if m.get("tool_calls"):
            pending = [(tc.get("function") or {}).get("name") for tc in m["tool_calls"]]
            by_id |= {tc.get("id"): name for tc, name in zip(m["tool_calls"], pending, strict=True)}
        if m.get("role") == "tool":
            name = m.get("name") or by_id.get(m.get("tool_call_id")) or (pending.pop(0) if pending else None)
            out.append((name or "the tool", _text(m.get("content"))))
    return out


def _next_in_chain(
    request: str, tools: list[dict] | None, messages: list[dict], results: list[tuple[str, str]]
) -> list[ToolCall]:
    """Calls the request still needs after the results so far: a step whose required argument a result supplies
    ("find the ticket … and tag it": find_ticket's ticket_id feeds tag_ticket)."""
    known: dict = {}
    for _, raw in results:
        try:
            data = json.loads(raw)
        except ValueError:
            continue
        if isinstance(data, dict):
            if "error" in data:
                return []  # a failed step ends the chain: report it
            known |= data
    called = set()
    for m in messages[next(i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user") :]:
        called |= {(tc.get("function") or {}).get("name") for tc in m.get("tool_calls") or []}
    calls, _, _ = _plan_calls(request, [t.get("function", t) for t in tools or []], known)
    return [c for c in calls if c.name not in called]


def _summarise_results(results: list[tuple[str, str]]) -> str:
    parts = []
    for name, raw in results:
        try:
            data = json.loads(raw)
        except ValueError:
            data = raw
        if isinstance(data, dict):
            data = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in data.items())
        elif isinstance(data, list):
            data = ", ".join(map(str, data))
        parts.append(f"{name} returned {str(data).strip()}")
    return "Here is what I found: " + "; ".join(parts) + "."


_COMBINERS = [  # what the request asks of several results' numbers
    (
        "difference",
        re.compile(r"\b(?:difference|warmer|colder|hotter|cooler|cheaper|dearer)\b", re.I),
        lambda xs: abs(xs[0] - xs[1]) if len(xs) == 2 else None,
    ),
    ("total", re.compile(r"\b(?:total|sum|combined|together|altogether|in all)\b", re.I), sum),
    ("average", re.compile(r"\b(?:average|mean)\b", re.I), lambda xs: sum(xs) / len(xs)),
]


def _combine(request: str, results: list[tuple[str, str]]) -> str:
    """A number the request asks to work out from several results ("how much warmer", "in total"): the field all
    results share, the one the request is most about."""
    rows = []
    for _, raw in results:
        try:
            data = json.loads(raw)
        except ValueError:
            return ""
        if not isinstance(data, dict) or "error" in data:
            return ""
        rows.append(data)
    if len(rows) < 2:
        return ""
    shared = [
        k
        for k, v in rows[0].items()
        if isinstance(v, (int, float))
        and not isinstance(v, bool)
        and all(isinstance(r.get(k), (int, float)) for r in rows[1:])
    ]
    if not shared:
        return ""
    asked = _with_kin(set(_words(request)))
    key = max(shared, key=lambda k: (len(set(_name_words(k)) & asked), -shared.index(k)))
    for label, cue, combine in _COMBINERS:
        if cue.search(request):
            value = combine([r[key] for r in rows])
            if value is None:
                return ""
            shown = str(int(value)) if float(value).is_integer() else f"{value:.6g}"
            return f"The {label} in {key.replace('_', ' ')} is {shown}."
    return ""


def _reasoning(why: str, detail: str, request: str, effort: str | None) -> str:
    """Deterministic thinking text; more sentences for higher effort (low 1, default/medium/high 3, max 5)."""
    gist = " ".join(request.split())
    sentences = [
        why,
        f'The user asks: "{gist[:100]}{"..." if len(gist) > 100 else ""}".',
        detail,
        "I checked the answer against what was asked and added nothing it did not ask for.",
        "Nothing else is needed, so I can reply.",
    ]
    count = {"none": 1, "minimal": 1, "low": 1, "max": 5, "xhigh": 5}.get((effort or "").lower(), 3)
    return " ".join(sentences[:count])


# --- words --------------------------------------------------------------------------------------------------

_STOP_WORDS = (
    "a an the to of in on for at by with from and or but is are was be been am i me my we our us you your it its "
    "this that these those what whats how who where when which why please can could would will do does did get "
    "give show tell let know need want like just now right current currently latest new some any all each one "
    "another there here make check find look see also then plus into about than as if so up out over given "
    "specified today"
)
# Verbs that say little about which tool is meant ("get", "run"); a specific verb ("translate") counts like a noun.
_WEAK_VERB_WORDS = (
    "get set search create run lookup look find list add update delete remove fetch check make open start stop query "
    "post put read write show"
)
# A small thesaurus of everyday world knowledge: a tool whose name holds one of these words also answers to
# the rest of its group ("euros" is about currency, "trading at" about a stock).
_GROUPS = [
    "weather forecast temperature rain snow sunny cloudy hot cold warm humid wind umbrella celsius fahrenheit warmer "
    "colder hotter",
    "thermostat heating heater cooling hvac degree warmer cooler temperature",
    "currency money exchange convert usd eur gbp jpy chf cad aud cny inr dollar euro pound yen franc rupee yuan",
    "stock share ticker trading market nasdaq nyse equity",
    "email mail inbox recipient",
    "ticket issue bug incident jira",
    "hotel room stay night accommodation reservation lodging",
    "sql database db table select row",
    "order package shipment delivery purchase shipping parcel",
    "doc documentation runbook manual wiki guide kb article",
    "tag label",
    "service daemon systemd",
    "guest people person adult traveler visitor",
]


def _stem(word: str) -> str:
    word = word.lower().removesuffix("'s")
    for suffix, repl in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""), ("e", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + repl
    return word


def _words(text: str) -> list[str]:
    return [_stem(w) for w in re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower())]


_STOP = set(_words(_STOP_WORDS))
_WEAK_VERBS = set(_words(_WEAK_VERB_WORDS))
_GROUP_STEMS = [set(_words(g)) for g in _GROUPS]


def _name_words(name: str) -> list[str]:
    return _words(re.sub(r"([a-z])([A-Z])", r"\1 \2", name).replace("_", " ").replace("-", " "))


def _with_kin(words: set[str]) -> set[str]:
    return words.union(*(g for g in _GROUP_STEMS if words & g))


# --- spans: quoted text, e-mail addresses, dates --------------------------------------------------------------

_QUOTE = re.compile(r"`([^`]+)`|\"([^\"]+)\"|“([^”]+)”|(?<!\w)'([^']+)'(?!\w)")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_name) if m} | {
    m.lower(): i for i, m in enumerate(calendar.month_abbr) if m
}
_MONTH = r"(?:" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DATES = [
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"), ("y", "m", "d")),
    (re.compile(rf"\b({_MONTH})\s+(\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(\d{{4}}))?\b", re.IGNORECASE), ("mon", "d", "y")),
    (
        re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})(?:,?\s+(\d{{4}}))?\b", re.IGNORECASE),
        ("d", "mon", "y"),
    ),
]
_TIME = re.compile(r"\b\d{1,2}(?::\d{2})+\b|\b\d{1,2}\s?(?:am|pm)\b", re.IGNORECASE)


def _quotes(text: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), next(g for g in m.groups() if g is not None)) for m in _QUOTE.finditer(text)]


def _blank(text: str, spans: Iterable[tuple[int, int] | tuple[int, int, str]]) -> str:
    """Hide spans behind underscores, keeping every offset valid."""
    for start, end, *_ in spans:
        text = text[:start] + "_" * (end - start) + text[end:]
    return text


def _dates(text: str) -> list[tuple[int, int, str]]:
    found: list[tuple[int, int, str]] = []
    for pattern, fields in _DATES:
        for m in pattern.finditer(text):
            if any(s <= m.start() < e for s, e, _ in found):
                continue
            parts = dict(zip(fields, m.groups(), strict=True))  # one field name per group
            month = int(parts["m"]) if "m" in parts else _MONTHS[parts["mon"].lower().rstrip(".")]
            if parts.get("y"):  # ISO only when the year is known; otherwise keep the user's words
                value = f"{int(parts['y']):04d}-{month:02d}-{int(parts['d']):02d}"
            else:
                value = m.group(0)
            found.append((m.start(), m.end(), value))
    return sorted(found)


# --- choosing tools -----------------------------------------------------------------------------------------


def _tool_vocab(fn: dict) -> dict[str, int]:
    """Word -> weight: name words 3 (weak verbs 1), thesaurus kin of the name 2, description words and enum
    values 1."""
    vocab: dict[str, int] = {}

    def put(word: str, weight: int) -> None:
        if word not in _STOP:
            vocab[word] = max(vocab.get(word, 0), weight)

    props = (fn.get("parameters") or {}).get("properties", {})
    enums = [str(v) for spec in props.values() for v in spec.get("enum", [])]
    for w in _words(" ".join([fn.get("description", ""), *enums])):
        put(w, 1)
    name = _name_words(fn["name"])
    for w in name:
        for group in _GROUP_STEMS:
            if w in group:
                for kin in group:
                    put(kin, 2)
    for w in name:
        put(w, 1 if w in _WEAK_VERBS else 3)
    return vocab


def _best_tool(text: str, fns: list[dict], vocabs: list[dict[str, int]]) -> dict | None:
    """The offered tool the text is most about (first offered wins a tie), if it scores at least 2."""
    words = set(_words(re.sub(r"\blook(?:ing)?\s+up\b", "lookup", text, flags=re.IGNORECASE)))
    scores = [sum(vocab.get(w, 0) for w in words) for vocab in vocabs]
    best = max(range(len(fns)), key=lambda i: (scores[i], -i))
    return fns[best] if scores[best] >= 2 else None


_BOUNDARY = re.compile(r"[.?!]+(?:\s+|$)|[;,]\s+|\b(?:and|then|also|plus)\b", re.IGNORECASE)


def _clauses(masked: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for m in _BOUNDARY.finditer(masked):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(masked)))
    return [(s, e) for s, e in spans if masked[s:e].strip()]


def _plan_calls(request: str, fns: list[dict], known: dict | None = None) -> tuple[list[ToolCall], str, str]:
    """(calls, question for missing info, why). Split the request into clauses, give each clause the tool it asks
    for, fan out repeated entities. `known`: values earlier tool results supplied; a step that lacks a required
    argument waits for them when another step can run first."""
    if not fns or not request.strip():
        return [], "", "No tools are offered, so I answer directly."
    masked = _blank(request, _quotes(request) + [(m.start(), m.end()) for m in _EMAIL.finditer(request)])
    vocabs = [_tool_vocab(fn) for fn in fns]
    groups: list[list] = []  # [fn, start, end]: one action, possibly over several entities
    for start, end in _clauses(masked):
        fn = _best_tool(masked[start:end], fns, vocabs)
        if groups and (fn is None or (fn is groups[-1][0] and not _opens_call(fn, request[start:end]))):
            groups[-1][2] = end  # a clause without a tool of its own continues the previous action
        elif fn is not None:
            groups.append([fn, 0 if not groups else start, end])
    if not groups:
        return [], "", "None of the offered tools fits this request, so I answer directly without a call."

    calls: list[ToolCall] = []
    waiting = ""  # the question to ask when no step can run
    for fn, start, end in groups:
        params = fn.get("parameters") or {}
        for args in _arguments(fn, request[start:end]):
            for p in params.get("required", []):
                if p not in args and known and p in known:
                    args[p] = known[p]
            lacking = [p for p in params.get("required", []) if p not in args]
            if lacking:
                desc = params.get("properties", {}).get(lacking[0], {}).get("description", lacking[0])
                ask = f"I can do that with {fn['name']}, but I need the {lacking[0].replace('_', ' ')} ({desc}). "
                waiting = waiting or ask + "Could you tell me?"
                why_not = f"{fn['name']} fits, but the request lacks {lacking[0]}."
                continue
            call = ToolCall(fn["name"], args)
            if call not in calls:
                calls.append(call)
    if waiting and (not calls or len(groups) < 2):
        return [], waiting, why_not
    names = ", ".join(dict.fromkeys(c.name for c in calls))
    return calls, "", f"The request asks for {len(calls)} tool call(s) to {names}, so I call rather than answer."


def _follow_up(messages: list[dict], fns: list[dict]) -> list[ToolCall]:
    """An elliptical follow-up ("And in Tokyo?") reuses the previous request's tool when it supplies every
    required argument."""
    users = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
    if len(users) < 2 or not re.match(r"\s*(?:and|what about|how about|same for|also|now)\b", users[-1], re.IGNORECASE):
        return []
    previous, _, _ = _plan_calls(users[-2], fns)
    for fn in [f for f in fns if f["name"] in {c.name for c in previous}]:
        required = (fn.get("parameters") or {}).get("required", [])
        calls = [ToolCall(fn["name"], args) for args in _arguments(fn, users[-1])]
        if all(p in c.arguments for c in calls for p in required):
            return calls
    return []


def _opens_call(fn: dict, clause: str) -> bool:
    """A clause naming the same tool starts a new call only if it supplies the tool's first required argument."""
    required = (fn.get("parameters") or {}).get("required") or []
    return not required or any(required[0] in args for args in _arguments(fn, clause))


# --- arguments ----------------------------------------------------------------------------------------------

_CURRENCY_CODES = {
    "USD",
    "EUR",
    "GBP",
    "JPY",
    "CHF",
    "CAD",
    "AUD",
    "CNY",
    "INR",
    "SEK",
    "NOK",
    "DKK",
    "KRW",
    "BRL",
    "MXN",
    "SGD",
    "HKD",
    "NZD",
    "ZAR",
    "PLN",
    "TRY",
    "CZK",
    "HUF",
    "ILS",
}
_CURRENCY_NAMES = {
    "canadian dollar": "CAD", "australian dollar": "AUD", "hong kong dollar": "HKD", "singapore dollar": "SGD",
    "swiss franc": "CHF", "dollar": "USD", "buck": "USD", "euro": "EUR", "pound": "GBP", "sterling": "GBP",
    "yen": "JPY", "franc": "CHF", "yuan": "CNY", "renminbi": "CNY", "rupee": "INR",
    "$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY",
}  # fmt: skip
_CURRENCY = re.compile(
    r"\b("
    + "|".join(sorted(_CURRENCY_CODES))
    + r")\b|(?i:\b("
    + "|".join(sorted((n for n in _CURRENCY_NAMES if n.isalpha() or " " in n), key=len, reverse=True))
    + r")s?\b)|([$€£¥])"
)
_ACRONYMS = {
    "OK",
    "GPU",
    "CPU",
    "TPU",
    "API",
    "SQL",
    "URL",
    "UTC",
    "GMT",
    "ETA",
    "FAQ",
    "AI",
    "ML",
    "LLM",
    "RAM",
    "VRAM",
    "HBM",
    "TB",
    "GB",
    "MB",
    "IT",
    "HR",
    "US",
    "UK",
    "EU",
    "USA",
}
_PLACE_CUES = {"in", "for", "at", "near", "to", "from"}
_NOT_PLACES = {m.capitalize() for m in _MONTHS} | set(calendar.day_name) | {"I", "Celsius", "Fahrenheit"}
_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]
    )
}
_NUMBER = re.compile(
    r"(?<![\w.,\-])(-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?)(?![\w\-]|[.,]\d)|\b("
    + "|".join(_NUMBER_WORDS)
    + r")\b",
    re.IGNORECASE,
)
_NEGATORS = {"no", "not", "don't", "dont", "without", "off", "disable", "disabled", "false", "never", "skip",
             "exclude", "n't", "doesn't", "isn't", "shouldn't"}  # fmt: skip
_TEXT_CUES = ("about", "regarding", "on", "for", "titled", "called", "named", "saying", "that says")
_KIND_CUES = [  # a string parameter's kind, from words in its name or description
    (kind, set(_words(cues)))
    for kind, cues in (
        ("email", "email recipient"),
        ("currency", "currency"),
        ("ticker", "ticker symbol"),
        ("date", "date yyyy"),
        ("id", "id number"),
        ("place", "city location place town country destination"),
    )
]


def _kind(name: str, spec: dict) -> str:
    """What sort of value a parameter wants, judged from its schema, name and description."""
    if "enum" in spec:
        return "enum"
    kind: str | None = spec.get("type")
    if kind in ("boolean", "array"):
        return kind
    if kind in ("integer", "number"):
        return "number"
    words = set(_name_words(name)) | set(_words(spec.get("description", "")))
    return next((k for k, cues in _KIND_CUES if words & cues), "text")


def _arguments(fn: dict, text: str) -> list[dict]:
    """Argument dicts for one action; several when the text lists several entities for one parameter."""
    params = (fn.get("parameters") or {}).get("properties", {})
    required = (fn.get("parameters") or {}).get("required", [])
    kinds = {p: _kind(p, spec) for p, spec in params.items()}
    quotes = _quotes(text)
    emails = [(m.start(), m.end(), m.group(0)) for m in _EMAIL.finditer(text)]
    dates = _dates(_blank(text, quotes + emails))
    masked = _blank(text, quotes + emails + dates + [(m.start(), m.end()) for m in _TIME.finditer(text)])
    found: dict[str, list] = {}

    def take(param: str, values: list) -> None:
        if values:
            found[param] = values

    def by_kind(kind: str) -> list[str]:
        return [p for p in params if kinds[p] == kind]

    for p in by_kind("email"):
        take(p, [v for _, _, v in emails])
    for p in by_kind("array"):  # a list of addresses ("attendee emails")
        if emails and _kind(p, {"description": params[p].get("description", "")}) == "email":
            take(p, [[v for _, _, v in emails]])
    for i, p in enumerate(by_kind("date")):
        take(p, [v for _, _, v in dates][i : i + 1])
    for p in by_kind("enum"):
        take(p, _enum_values(masked, params[p]["enum"], p))
    for p in by_kind("id"):
        ids = re.findall(r"(?<![\w@.\-])#?((?:[A-Za-z]{1,6}-)?\d[\w\-]*)", masked)
        take(p, [i for i in ids if len(i) >= 3])
        for value in found.get(p, []):  # an id's digits are not also a count
            masked = re.sub(rf"(?<![\w\-]){re.escape(value)}(?![\w\-])", "_" * len(value), masked)
    _currencies(masked, by_kind("currency"), take)
    for p in by_kind("ticker"):
        tickers = re.findall(r"\b([A-Z]{2,5})(?:'s)?\b", masked)
        take(p, [t for t in dict.fromkeys(tickers) if t not in _CURRENCY_CODES | _ACRONYMS])
    for p in by_kind("place"):
        take(p, _places(masked, {str(v).capitalize() for s in params.values() for v in s.get("enum", [])}))
    for p, values in _quoted_text(text, quotes, [p for p in params if p not in found], kinds, required).items():
        take(p, values)
    for p in by_kind("text"):
        if p not in found:
            take(p, _like_example(masked, params[p]))
        if p not in found and _stem("name") in _words(params[p].get("description", "")):
            take(p, _name_before_noun(masked, p, params[p]))
    _numbers(masked, params, kinds, required, found)
    for p in by_kind("boolean"):
        take(p, _boolean(masked, p))
    for p in by_kind("text") + by_kind("array"):
        if p not in found and p in required:
            take(p, _cue_phrase(text, masked, kinds[p] == "array"))

    for p, values in found.items():  # shape values to the schema
        spec = params[p]
        if spec.get("type") == "integer":
            found[p] = [int(v) for v in values]
        elif spec.get("type") == "array" and values and not isinstance(values[0], list):
            found[p] = [values]
    # Several values for a parameter mean several calls; the others' single value is shared by all of them.
    width = max((len(v) for v in found.values()), default=1)
    ordered = [p for p in params if p in found]  # schema order, as a model writes them
    return [{p: found[p][i] if len(found[p]) == width else found[p][0] for p in ordered} for i in range(width)]


def _enum_values(masked: str, enum: list, param: str) -> list:
    """The enum value the text names; with several, the one nearest the parameter's own name."""
    hits = []
    for value in enum:
        word = re.escape(str(value)).replace("_", "[ _-]")
        pattern = rf"\b{word}\b"
        if isinstance(value, str) and value[:1].isalpha():  # °C / °F for celsius / fahrenheit
            pattern += rf"|°\s?{re.escape(value[0])}\b"
        hits += [(m.start(), value) for m in re.finditer(pattern, masked, re.IGNORECASE)]
    hits.sort()
    near = [m.start() for m in re.finditer("|".join(map(re.escape, _name_words(param))), masked.lower())]
    if len(hits) > 1 and near:
        hits.sort(key=lambda h: min(abs(h[0] - n) for n in near))
    return [hits[0][1]] if hits else []


def _currencies(masked: str, params: list[str], take: Callable[[str, list[Any]], None]) -> None:
    """Currencies in order: the one attached to an amount ("10 pounds", "$50") is a source, one after
    "to"/"into"/"in" a target; otherwise the first named is the source."""
    if not params:
        return
    mentions = []  # (code, attached to an amount, after "to"/"into"/"in")
    for m in _CURRENCY.finditer(masked):
        code = m.group(1) or _CURRENCY_NAMES.get(_qualified(masked, m), "")
        priced = re.search(r"\d\s*$", masked[: m.start()]) or re.match(r"\s*\d", masked[m.end() :])
        cued = {"to", "into", "in"} & set(masked[max(0, m.start() - 25) : m.start()].lower().split()[-3:])
        mentions.append((code, bool(priced), bool(cued)))
    by_amount = any(priced for _, priced, _ in mentions)  # an amount marks the source; else "to" marks the target
    sides = [(code, priced if by_amount else not cued) for code, priced, cued in mentions]
    source = [code for code, is_source in sides if is_source]
    target = [code for code, is_source in sides if not is_source]
    if not target and len(source) >= 2:  # "USD EUR rate": first is from, second to
        source, target = source[::2], source[1::2]
    for p in params:
        take(p, target if set(_name_words(p)) & {"to", "target", "into"} else source)


def _qualified(masked: str, m: re.Match) -> str:
    name = (m.group(2) or m.group(3)).lower()
    prev = masked[: m.start()].split()[-1:]
    longer = f"{prev[0].lower()} {name}" if prev else ""
    return longer if longer in _CURRENCY_NAMES else name


def _places(masked: str, enum_words: set[str]) -> list[str]:
    """Capitalised names after a place cue ("in Paris"), and names listed after one ("in Paris and Tokyo")."""
    places: list[str] = []
    for m in re.finditer(r"\b[A-Z][a-z]+(?:[ -][A-Z][a-z]+)*\b", masked):
        name = m.group(0)
        head = masked[: m.start()].rstrip()
        prev = head.lower().split()[-1:] or [""]
        listed = places and (prev[0] in {"and", "or", "&"} or head.endswith(","))
        if (prev[0] in _PLACE_CUES or listed) and name not in _NOT_PLACES | enum_words:
            places.append(name)
    return list(dict.fromkeys(places))


def _quoted_text(text: str, quotes: list, params: list[str], kinds: dict, required: list) -> dict[str, list]:
    """Quoted strings go to the parameter named just before them ("subject 'X'"), else to required text params."""
    slots = [p for p in params if kinds[p] in ("text", "array")]
    named: dict[str, list] = {}
    loose: list[str] = []
    hidden = _blank(text, quotes)
    for start, _, value in quotes:
        before = _words(hidden[:start])[-3:]
        owner = next((p for p in slots if set(_name_words(p)) & set(before)), None)
        (named.setdefault(owner, []) if owner else loose).append(value)
    open_slots = [p for p in slots if p not in named and p in required]
    if loose and len(open_slots) == 1:
        named[open_slots[0]] = loose
    else:
        for p, value in zip(open_slots, loose, strict=False):  # extra values or slots stay unpaired
            named[p] = [value]
    return {p: [values] if kinds[p] == "array" else values for p, values in named.items()}


def _like_example(masked: str, spec: dict) -> list[str]:
    """Identifiers shaped like the description's example: 'gpu-node-01' -> "gpu-node-07", 'vllm.service' ->
    "nccl.service"."""
    m = re.search(r"e\.g\.\s*['\"`]?([\w.:/-]+?)['\"`]?(?:[\s,;)]|$)", spec.get("description", ""))
    example = m.group(1) if m else ""
    if re.search(r"\d", example) and re.search(r"[-_.:/]", example):  # letters and digits around separators
        shape = re.sub(r"\d+", r"\\d+", re.sub(r"[A-Za-z]+", "[A-Za-z]+", re.escape(example)))
    elif re.fullmatch(r"[\w-]+\.[A-Za-z]\w*", example):  # a name with a fixed suffix
        shape = r"[\w-]+" + re.escape(example[example.index(".") :])
    else:
        return []
    return re.findall(rf"(?<![\w.]){shape}(?![\w-])", masked)


def _name_before_noun(masked: str, param: str, spec: dict) -> list[str]:
    """Names used as a modifier: "the billing database" -> billing, "the server room" -> server room."""
    noun = param.split("_")[-1]
    desc = spec.get("description", "").lower()
    keep_noun = "e.g." in desc and noun in desc.split("e.g.")[-1]
    values = []
    for m in re.finditer(rf"\b([A-Za-z][\w-]*)\s+{noun}s?\b", masked, re.IGNORECASE):
        if _stem(m.group(1)) not in _STOP:
            values.append(f"{m.group(1)} {noun}" if keep_noun else m.group(1))
    return values[:1]


def _numbers(masked: str, params: dict, kinds: dict, required: list, found: dict) -> None:
    """Numbers go to the numeric parameter named next to them ("3 nights", "top 3 results"); a lone required
    numeric parameter takes whatever numbers are left."""
    slots = [p for p in params if kinds[p] == "number" and p not in found]
    if not slots:
        return
    tokens = [(m.start(), m.group(0)) for m in re.finditer(r"[^\s_]+", masked)]
    numbers = []
    for m in _NUMBER.finditer(masked):
        value = _NUMBER_WORDS[m.group(2).lower()] if m.group(2) else float(m.group(1).replace(",", ""))
        index = next(i for i, (pos, _) in enumerate(tokens) if pos <= m.start() < pos + len(tokens[i][1]))
        numbers.append((index, int(value) if float(value).is_integer() else value))
    keys = {p: _with_kin(set(_name_words(p)) | set(_words(params[p].get("description", "")))) - _STOP - {"number"}
            for p in slots}  # fmt: skip

    def near(part: list[tuple[int, str]]) -> set[str]:
        return set(_words(" ".join(t for _, t in part)))

    scored = []
    for n, (index, _) in enumerate(numbers):
        after, before = near(tokens[index + 1 : index + 3]), near(tokens[max(0, index - 2) : index])
        for p in slots:
            score = 3 if keys[p] & after else 2 if keys[p] & before else 0
            if score:
                scored.append((-score, n, p))
    used: set[int] = set()
    best: dict[str, int] = {}
    for score, n, p in sorted(scored):  # strongest first; a weaker match never adds a second value
        if n not in used and best.setdefault(p, score) == score:
            used.add(n)
            found.setdefault(p, []).append(numbers[n][1])
    lone = [p for p in slots if p not in found and p in required]
    left = [v for n, (_, v) in enumerate(numbers) if n not in used]
    if len(lone) == 1 and left:
        found[lone[0]] = left


def _boolean(masked: str, param: str) -> list[bool]:
    """True when the text names the flag ("include its history", "read-only"), False when it negates it."""
    generic = set(_words("include enable use is has with show allow mode"))
    keys = [w for w in _name_words(param) if w not in generic] or _name_words(param)
    tokens = re.findall(r"[a-z0-9']+", masked.lower())
    stems = [_stem(t) for t in tokens]
    for i, s in enumerate(stems):
        if s == keys[0] and stems[i : i + len(keys)] == keys:
            window = tokens[max(0, i - 4) : i + len(keys) + 3]
            return [not any(t in _NEGATORS or t.endswith("n't") for t in window)]
    return []


def _cue_phrase(text: str, masked: str, as_list: bool) -> list:
    """Free text after a cue word: "docs about draining a node" -> "draining a node"; lists also after "with"."""
    cues = _TEXT_CUES + (("with", "as") if as_list else ())
    for m in re.finditer(rf"\b(?:{'|'.join(cues)})\b:?\s+", masked, re.IGNORECASE):
        end = next((b.start() for b in _BOUNDARY.finditer(masked, m.end()) if not as_list), len(text))
        phrase = text[m.end() : end].strip(" .,;:!?")
        if phrase:
            if as_list:
                return [[w.strip(" .'\"") for w in re.split(r",\s*|\s+and\s+", phrase) if w.strip()]]
            return [phrase]
    return []


# --- answering without tools --------------------------------------------------------------------------------

_FACT = re.compile(
    r"\b[Tt]he\s+((?:secret|magic|special|hidden)\s+[\w -]{1,30}?|passphrase|password|passcode)\s+(?:is|was)"
    r"\s*:?\s+[\"'“]?(.+?)[\"'”]?\.(?=\s|$)"
)
_AMOUNT = r"([$€£]?\s?\d+(?:,\d{3})*(?:\.\d+)?(?:\s?(?:[kKmMbB]\b|million|thousand|billion))?)"
_QUARTERS = [  # "Q1: $100k" and "100 in Q1"
    (re.compile(r"\bQ([1-4])\b[^\d\n$€£]{0,20}?" + _AMOUNT), 1, 2),
    (re.compile(_AMOUNT + r"\s*(?:in|for|during)\s+(?:the\s+)?Q([1-4])\b"), 2, 1),
]
_OPS: dict[type[ast.operator | ast.unaryop], Callable[..., float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.Pow: operator.pow, ast.Mod: operator.mod, ast.USub: operator.neg, ast.UAdd: operator.pos,
}  # fmt: skip


def _direct_answer(messages: list[dict], request: str) -> str:
    for skill in (_needle, _sales, _arithmetic, _echo):
        answer = skill(messages, request)
        if answer:
            return answer
    if re.search(r"\b(?:thanks|thank you|thx)\b", request, re.IGNORECASE):
        return "You're welcome! Anything else I can help with?"
    return "Hello! How can I help?"


def _needle(messages: list[dict], request: str) -> str | None:
    """A planted fact ("The secret passphrase is X.") asked about later: answer exactly X."""
    question = set(_words(_FACT.sub("", request)))
    for m in messages:
        for fact in _FACT.finditer(_text(m.get("content"))):
            if set(_words(fact.group(1))) - _STOP - set(_words("secret magic special hidden")) & question:
                return fact.group(2).strip()
    return None


def _sales(_messages: list[dict], request: str) -> str | None:
    """Quarterly figures: describe the trend and the change from the first quarter to the last."""
    readings = []
    for pattern, q, amount in _QUARTERS:
        found: dict[int, str] = {}
        for m in pattern.finditer(request):
            found.setdefault(int(m.group(q)), m.group(amount).strip())
        readings.append(found)
    quarters = max(readings, key=len)  # the layout that accounts for more quarters
    if len(quarters) < 2:
        return None
    order = sorted(quarters)
    values = [float(re.sub(r"[^\d.]", "", quarters[q].replace(",", ""))) for q in order]
    steps = [b - a for a, b in itertools.pairwise(values)]
    if all(s > 0 for s in steps):
        trend = "Sales rose every quarter"
    elif all(s < 0 for s in steps):
        trend = "Sales fell every quarter"
    else:
        trend = f"Sales moved unevenly but ended {'higher' if values[-1] > values[0] else 'lower'}"
    first, last = order[0], order[-1]
    change = (values[-1] - values[0]) / values[0] * 100 if values[0] else 0.0
    pct = f"{abs(change):.1f}".rstrip("0").rstrip(".")
    word = "increase" if change >= 0 else "decrease"
    return (
        f"{trend}, from {quarters[first]} in Q{first} to {quarters[last]} in Q{last}: "
        f"a {pct}% {word} from Q{first} to Q{last}."
    )


def _arithmetic(_messages: list[dict], request: str) -> str | None:
    """A plain calculation ("What is 17 * 23?"): the result, and nothing else."""
    text = request.lower()
    if not re.search(r"\b(?:what(?:'s| is)|calculate|compute|evaluate|how much is|solve)\b|=\s*\??\s*$", text):
        return None
    for words, sym in (("multiplied by", "*"), ("times", "*"), ("divided by", "/"), ("plus", "+"),
                       ("minus", "-"), ("to the power of", "**"), ("×", "*"), ("÷", "/"), ("^", "**")):  # fmt: skip
        text = text.replace(words, f" {sym} ")
    text = re.sub(r"(?<=\d)\s*x\s*(?=\d)", " * ", text)
    candidates = re.findall(r"[\d.()][\d.()\s+\-*/%]*[\d)]", text)
    for expr in sorted(candidates, key=len, reverse=True):
        if not re.search(r"\d\s*\)?\s*[-+*/%]", expr):
            continue
        try:
            value = _eval(ast.parse(expr.strip(), mode="eval").body)
        except (SyntaxError, ValueError, ZeroDivisionError, TypeError, OverflowError):
            continue
        return str(int(value)) if float(value).is_integer() else f"{value:.6g}"
    return None


def _eval(node: ast.expr) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 100:
            raise ValueError("exponent too large")
        return _OPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.operand))
    raise ValueError("not arithmetic")


def _echo(_messages: list[dict], request: str) -> str | None:
    """Canary prompts that dictate the reply: "Reply with exactly: pong", "Say 'ready'"."""
    ask = re.search(r"\b(?:reply|respond|answer)\s+(?:only\s+)?with\b|\bsay\b", request, re.IGNORECASE)
    if not ask:
        return None
    quoted = [q for q in _quotes(request) if 0 <= q[0] - ask.end() <= 40]
    if quoted:
        return quoted[0][2].strip()
    m = re.search(
        r"\b(?:exactly|only|just|the\s+(?:single\s+)?word)\s*:?\s*([\w-]+(?:\s+[\w-]+){0,3})\s*[.!]?\s*$",
        request[ask.end() :],
        re.IGNORECASE,
    )
    return m.group(1) if m else None
