"""The reference station: real vLLM (CPU) + the tiny GLM-dialect model + the oracle, started for real."""

from __future__ import annotations

import json
from types import SimpleNamespace

import httpx
import pytest

from golive_testbed.reference import ReferenceStation, build_model_dir
from golive_testbed.reference.model import EOS, ROLE_TOKENS, SERVED_NAME, TAG_TOKENS

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
        },
    },
}
EMAIL = {
    "type": "function",
    "function": {
        "name": "send_email",
        "description": "Send an e-mail",
        "parameters": {
            "type": "object",
            "properties": {"to": {"type": "string"}, "subject": {"type": "string"}, "urgent": {"type": "boolean"}},
            "required": ["to", "subject"],
        },
    },
}
ASK_WEATHER = [{"role": "user", "content": "What's the weather in Paris right now?"}]


# --- the model directory and the oracle's parsing, no server -----------------------------------------------------


def test_model_dir_is_reproducible_and_idempotent(tmp_path):
    a, b = build_model_dir(tmp_path / "a"), build_model_dir(tmp_path / "b")
    names = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"]
    assert sorted(p.name for p in a.iterdir()) == names
    assert all((a / n).read_bytes() == (b / n).read_bytes() for n in names)
    stamps = {n: (a / n).stat().st_mtime_ns for n in names}
    build_model_dir(a)
    assert stamps == {n: (a / n).stat().st_mtime_ns for n in names}, "an unchanged build must not rewrite files"
    config = json.loads((a / "config.json").read_text())
    assert config["head_dim"] >= 32 and config["max_position_embeddings"] >= 65536


def test_glm_tags_are_single_tokens_and_any_text_encodes(tmp_path):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(build_model_dir(tmp_path) / "tokenizer.json"))
    for tag in [EOS, *ROLE_TOKENS, *TAG_TOKENS]:
        assert len(tok.encode(tag).ids) == 1, tag
    text = "Grüße aus 東京 🚀\t<b>ok</b>\n"
    assert tok.decode(tok.encode(text).ids) == text
    assert tok.get_vocab_size() < 8192


def test_oracle_reads_back_the_rendered_conversation(tmp_path):
    from transformers import AutoTokenizer

    from golive_testbed.reference.oracle import parse_prompt

    hf = AutoTokenizer.from_pretrained(str(build_model_dir(tmp_path)))
    messages = [
        {"role": "system", "content": "Be brief."},
        *ASK_WEATHER,
        # vLLM hands the template parsed arguments (a dict), as here
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"temp_c": 18}'},
        {"role": "assistant", "content": "It is 18 °C."},
        {"role": "user", "content": "And in Tokyo?"},
    ]
    prompt = hf.apply_chat_template(
        messages, tools=[WEATHER, EMAIL], tokenize=False, add_generation_prompt=True, reasoning_effort="low"
    )
    ids = hf(prompt, add_special_tokens=False)["input_ids"]
    got, tools, effort = parse_prompt(hf.decode(ids, skip_special_tokens=False))
    assert (tools, effort) == ([WEATHER, EMAIL], "low")
    assert [m["role"] for m in got] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert got[2]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert got[3]["content"] == '{"temp_c": 18}' and got[5]["content"] == "And in Tokyo?"
    _, _, default_effort = parse_prompt(hf.apply_chat_template(ASK_WEATHER, tokenize=False, add_generation_prompt=True))
    assert default_effort == "max"  # GLM-5.3's default


def test_faults_break_the_answer_the_way_an_operator_would_see():
    from golive_testbed.reference.oracle import Reply, apply_fault

    def call(fault):
        return apply_fault(
            Reply("r", "", [("send_email", {"to": "a@b.c", "subject": "hi"})]), fault, [], [WEATHER, EMAIL]
        ).calls[0]

    assert call("malformed_tool_args") == ("send_email", {"subject": "hi"})  # a required argument missing
    assert call("wrong_tool")[0] == "get_weather"
    assert apply_fault(Reply("why", "42", []), "think_leak", [], None).content == "<think>why</think>42"
    haystack = "filler sentence. " * 40 + "The secret passphrase is violet-88. What is the secret passphrase?"
    miss = apply_fault(
        Reply("found violet-88", "violet-88", []), "needle_miss", [{"role": "user", "content": haystack}], None
    )
    assert "violet-88" not in miss.content + miss.reasoning


def test_oracle_forces_its_script_and_yields_to_the_grammar(tmp_path):
    import torch

    from golive_testbed.reference.oracle import GlmOracle, _Script

    model = build_model_dir(tmp_path)
    oracle = GlmOracle(SimpleNamespace(model_config=SimpleNamespace(tokenizer=str(model))), torch.device("cpu"), False)
    output: list[int] = []
    oracle.scripts[0] = _Script([5, 6, 7], output, SimpleNamespace(ignore_eos=False, min_tokens=0))
    picked = []
    for step in range(4):
        logits = torch.zeros(1, 64 + oracle.eos)
        if step == 1:
            logits[0, 6] = float("-inf")  # the grammar forbids the next scripted token: skip it
        token = int(oracle.apply(logits)[0].argmax())
        picked.append(token)
        output.append(token)
        if token == oracle.eos:
            break
    assert picked == [5, 7, oracle.eos]


# --- the real server ---------------------------------------------------------------------------------------------

# The session's stations (tests/conftest.py): healthy, and the think-leak one the endpoint tests use as well.
THINK_LEAK = pytest.mark.parametrize("reference", ["fault-think-leak"], indirect=True)


@pytest.fixture
def healthy(reference) -> ReferenceStation:
    return reference


def _chat(station: ReferenceStation, messages, **extra) -> dict:
    body = {"model": SERVED_NAME, "messages": messages, "max_tokens": 512, **extra}
    r = httpx.post(f"{station.base_url}/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]


def _chat_stream(station: ReferenceStation, messages, **extra) -> dict:
    """Concatenate the deltas: content, reasoning, and tool calls assembled by index."""
    body = {"model": SERVED_NAME, "messages": messages, "max_tokens": 512, "stream": True, **extra}
    out = {"content": "", "reasoning": "", "tool_calls": {}}
    with httpx.stream("POST", f"{station.base_url}/chat/completions", json=body, timeout=60) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for choice in json.loads(line[6:])["choices"]:
                delta = choice["delta"]
                out["content"] += delta.get("content") or ""
                out["reasoning"] += delta.get("reasoning") or delta.get("reasoning_content") or ""
                for tc in delta.get("tool_calls") or []:
                    slot = out["tool_calls"].setdefault(tc["index"], {"name": "", "arguments": ""})
                    slot["name"] += tc.get("function", {}).get("name") or ""
                    slot["arguments"] += tc.get("function", {}).get("arguments") or ""
    return out


def test_health_and_models(healthy):
    root = healthy.base_url.removesuffix("/v1")
    assert httpx.get(f"{root}/health", timeout=5).status_code == 200
    models = httpx.get(f"{healthy.base_url}/models", timeout=5).json()["data"]
    assert [(m["id"], m["max_model_len"]) for m in models] == [(SERVED_NAME, 16384)]


def test_tool_call_is_structured_streaming_or_not(healthy):
    choice = _chat(healthy, ASK_WEATHER, tools=[WEATHER, EMAIL], reasoning_effort="low")  # low: fewer tokens
    assert choice["finish_reason"] == "tool_calls"
    calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in choice["message"]["tool_calls"]]
    assert calls == [("get_weather", {"city": "Paris"})]
    assert not choice["message"]["content"]

    streamed = _chat_stream(healthy, ASK_WEATHER, tools=[WEATHER, EMAIL], reasoning_effort="low")
    assert [(c["name"], json.loads(c["arguments"])) for c in streamed["tool_calls"].values()] == calls


def test_reasoning_is_separated_from_content(healthy):
    choice = _chat(healthy, [{"role": "user", "content": "What is 17 * 23?"}], reasoning_effort="low")
    message = choice["message"]
    reasoning = message.get("reasoning") or message.get("reasoning_content")
    assert reasoning and message["content"] == "391"
    assert "<think>" not in message["content"] and "</think>" not in message["content"]
    streamed = _chat_stream(healthy, [{"role": "user", "content": "What is 17 * 23?"}], reasoning_effort="low")
    assert (streamed["reasoning"], streamed["content"]) == (reasoning, "391")


@THINK_LEAK
def test_think_leak_fault_really_leaks(reference):
    leaky = reference
    question = [{"role": "user", "content": "What is 17 * 23?"}]
    streamed = _chat_stream(leaky, question, reasoning_effort="low")
    assert streamed["reasoning"], "the real reasoning still arrives"
    assert streamed["content"].startswith("<think>") and "</think>391" in streamed["content"]
    # Without streaming, vLLM's text-mode glm45 parser pulls a <think> block out of content again (the reasoning
    # then holds it twice): a leak check must look at the streamed answer.
    message = _chat(leaky, question, reasoning_effort="low")["message"]
    assert message["content"] == "391" and message["reasoning"] == streamed["reasoning"] * 2
