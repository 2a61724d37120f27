"""GlmOracle: a vLLM V1 logits processor that makes the random-weight reference model answer like a healthy GLM.

It reads each request's prompt, parses the rendered GLM conversation back into (messages, tools, reasoning effort),
asks golive_testbed.reference.solver what a good answer is, and forces that answer token by token, then EOS.
Fault modes (env GOLIVE_ORACLE_FAULT, read once at start) turn it into a broken station an operator could meet.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from golive_testbed.reference.model import EOS, token_id

if TYPE_CHECKING:
    from vllm.config import VllmConfig

log = logging.getLogger(__name__)

FAULTS = (
    "none",
    "malformed_tool_args",
    "think_leak",
    "wrong_tool",
    "needle_miss",
    "tool_under_none",
    "text_under_required",
    "ignore_tool_result",
    "short_recall_wrong",
)
FAULT_ENV = "GOLIVE_ORACLE_FAULT"
NEG_INF = float("-inf")
NEEDLE_MIN_CHARS = 400  # an answer copied out of a user turn this long is a retrieval (needle_miss applies)

_TURN = re.compile(r"(<\|system\|>|<\|user\|>|<\|assistant\|>|<\|observation\|>)")
_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_ARG = re.compile(r"<arg_key>(.*?)</arg_key><arg_value>(.*?)</arg_value>", re.DOTALL)
_RESPONSE = re.compile(r"\n<tool_response>\n(.*?)\n</tool_response>", re.DOTALL)


@dataclass
class _Script:
    """One request's forced tokens; `output_ids` is vLLM's live list of what was generated so far."""

    ids: list[int]
    output_ids: list[int]
    params: Any
    skipped: int = 0  # scripted tokens the grammar refused


@dataclass
class Reply:
    """What the oracle will say; calls are (name, arguments) pairs."""

    reasoning: str
    content: str
    calls: list[tuple[str, dict]] = field(default_factory=list)


# --- prompt -> conversation ------------------------------------------------------------------------------------------


def _value(text: str) -> Any:
    """Argument values are raw strings, or JSON for anything else (as the template renders them)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _calls(body: str) -> list[dict]:
    out = []
    for raw in _CALL.findall(body):
        name = raw.split("<arg_key>", 1)[0].strip()
        args = {k.strip(): _value(v) for k, v in _ARG.findall(raw)}
        out.append({"type": "function", "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}})
    return out


def parse_prompt(text: str) -> tuple[list[dict], list[dict] | None, str | None]:
    """Rendered GLM prompt -> (messages, tools, reasoning_effort); inverse of model.CHAT_TEMPLATE."""
    parts = _TURN.split(text)
    if len(parts) == 1:  # not a chat prompt (plain completion): treat it as one user turn
        return [{"role": "user", "content": text}], None, None
    messages: list[dict] = []
    tools: list[dict] | None = None
    effort: str | None = None
    turns = list(zip(parts[1::2], parts[2::2], strict=True))  # split on one group: tag, body, tag, body
    for i, (tag, body) in enumerate(turns):
        if tag == "<|system|>" and i == 0 and body.startswith("\nReasoning Effort: "):
            header, _, rest = body[1:].partition("\n")
            effort = header.removeprefix("Reasoning Effort: ").strip() or None
            if "<tools>\n" in rest:
                block = rest.split("<tools>\n", 1)[1].split("</tools>", 1)[0]
                tools = [json.loads(line) for line in block.splitlines() if line.strip()]
        elif tag in ("<|system|>", "<|user|>"):
            messages.append({"role": tag[2:-2], "content": body.removeprefix("\n")})
        elif tag == "<|assistant|>":
            if i == len(turns) - 1 and body == "<think>":
                continue  # the generation prompt
            body = re.sub(r"^<think>.*?</think>", "", body, count=1, flags=re.DOTALL)
            msg: dict = {"role": "assistant", "content": body.split("<tool_call>", 1)[0]}
            if calls := _calls(body):
                msg["tool_calls"] = calls
            messages.append(msg)
        else:  # <|observation|>: one tool message per <tool_response>
            messages += [{"role": "tool", "content": c} for c in _RESPONSE.findall(body)]
    return messages, tools, effort


def tool_choice(params: Any) -> str | list[str] | None:
    """What the server's tool grammar says about tool_choice (the chat template does not render it).

    vLLM 0.32 + glm47 puts an xgrammar structural tag on every request with tools: "triggered_tags" lets the model
    call or not (auto); "tags_with_separator" demands a call among its tags (required: every tool; named: one).
    tool_choice none builds no tag. Returns "auto", the list of names a call must use, or None (no tag).
    """
    tag = getattr(getattr(params, "structured_outputs", None), "structural_tag", None)
    if not tag:
        return None
    fmt = json.loads(tag).get("format", {})
    if fmt.get("type") == "triggered_tags":
        return "auto"
    names = [t.get("begin", "").removeprefix("<tool_call>") for t in fmt.get("tags", [])]
    return [n for n in names if n] or "auto"


# --- faults ----------------------------------------------------------------------------------------------------------


def _schema(tools: list[dict] | None, name: str) -> dict:
    for t in tools or []:
        fn = t.get("function", t)
        if fn.get("name") == name:
            return fn.get("parameters") or {}
    return {}


def _placeholder(prop: dict, donor: dict) -> Any:
    """A value of the right JSON type, so the server's tool grammar accepts it."""
    if prop.get("enum"):
        return prop["enum"][0]
    kind = prop.get("type", "string")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "string":
        return next((v for v in donor.values() if isinstance(v, str)), "unknown")
    return {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}.get(kind, "unknown")


def apply_fault(reply: Reply, fault: str, messages: list[dict], tools: list[dict] | None) -> Reply:
    """Turn a healthy reply into the broken one a faulty station would give.

    vLLM's glm47 tool grammar pins argument keys and value types, so a type violation can never leave the server:
    malformed_tool_args drops a required argument instead.
    """
    if fault == "ignore_tool_result" and not reply.calls and any(m["role"] == "tool" for m in messages[-1:]):
        reply.content = "Done. Let me know if you need anything else."  # answers without reading the result
    elif fault == "think_leak":
        reply.content = f"<think>{reply.reasoning}</think>{reply.content}"
    elif fault == "malformed_tool_args" and reply.calls:
        name, args = reply.calls[0]
        required = [k for k in _schema(tools, name).get("required", []) if k in args]
        if required:
            reply.calls[0] = (name, {k: v for k, v in args.items() if k != required[0]})
    elif fault == "wrong_tool" and reply.calls:
        name, args = reply.calls[0]
        others = [t.get("function", t)["name"] for t in tools or [] if t.get("function", t).get("name") != name]
        if others:  # with a single declared tool there is no wrong one to call (undeclared names are refused)
            schema = _schema(tools, others[0])
            props = schema.get("properties", {})
            reply.calls[0] = (
                others[0],
                {k: args.get(k, _placeholder(props.get(k, {}), args)) for k in schema.get("required", [])},
            )
    elif fault == "needle_miss" and reply.content.strip():
        users = [m["content"] for m in messages if m["role"] == "user"]
        needle = reply.content.strip()
        if users and len(users[-1]) >= NEEDLE_MIN_CHARS and needle in users[-1]:
            reply.content = "I could not find that in the document."
            reply.reasoning = reply.reasoning.replace(needle, "nothing")
    elif fault == "short_recall_wrong" and reply.content.strip():
        # a fact stated in a short prompt ("The secret passphrase is X.") recalled wrong: a site battery's domain
        # answer, where the long-context needle check (NEEDLE_MIN_CHARS and up) stays right
        users = [m["content"] for m in messages if m["role"] == "user"]
        fact = reply.content.strip()
        if users and len(users[-1]) < NEEDLE_MIN_CHARS and re.search(rf"\bis\s+{re.escape(fact)}\.", users[-1]):
            reply.content = fact[::-1]
            reply.reasoning = reply.reasoning.replace(fact, fact[::-1])
    return reply


# --- the logits processor --------------------------------------------------------------------------------------------


class GlmOracle(LogitsProcessor):
    """Forces, per request, the token sequence of the solver's answer in GLM syntax, then EOS."""

    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool) -> None:
        from tokenizers import Tokenizer

        from golive_testbed.reference.solver import decide

        self.fault = os.environ.get(FAULT_ENV, "none") or "none"
        if self.fault not in FAULTS:
            raise ValueError(f"{FAULT_ENV}={self.fault!r}; expected one of {', '.join(FAULTS)}")
        self.decide = decide
        self.tok = Tokenizer.from_file(str(Path(vllm_config.model_config.tokenizer) / "tokenizer.json"))
        self.eos = token_id(self.tok, EOS)
        self.scripts: dict[int, _Script] = {}  # by batch index
        log.info("GlmOracle ready (fault=%s)", self.fault)

    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if not batch_update:
            return
        for index in batch_update.removed:
            self.scripts.pop(index, None)
        for index, params, prompt_ids, output_ids in batch_update.added:
            if prompt_ids is None:  # prompt embeddings: nothing to read, let the model speak
                self.scripts.pop(index, None)
            else:
                self.scripts[index] = _Script(self.plan(prompt_ids, tool_choice(params)), output_ids, params)
        for a, b, direction in batch_update.moved:
            script_a, script_b = self.scripts.pop(a, None), self.scripts.pop(b, None)
            if script_a is not None:
                self.scripts[b] = script_a
            if script_b is not None and direction == MoveDirectionality.SWAP:
                self.scripts[a] = script_b

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        for index, script in self.scripts.items():
            row, ids, done = logits[index], script.ids, len(script.output_ids)
            # The structured-output grammar has already masked `row` with -inf. Like a real sampler, the oracle
            # yields: a scripted token the grammar forbids is skipped (e.g. </think> when no reasoning parser gives
            # the grammar a thinking phase) rather than leaving nothing to sample, which fails the request.
            pos = done + script.skipped
            while pos < len(ids) and row[ids[pos]] == NEG_INF:
                script.skipped, pos = script.skipped + 1, pos + 1
            if pos < len(ids):
                token = ids[pos]
            elif script.params.ignore_eos or done < (script.params.min_tokens or 0) or row[self.eos] == NEG_INF:
                continue  # past the script: benchmark-style requests (or the grammar) let the model fill the length
            else:
                token = self.eos
            row.fill_(NEG_INF)
            row[token] = 0.0
        return logits

    # --- answer -> token ids ---

    def plan(self, prompt_ids: list[int], choice: str | list[str] | None = "auto") -> list[int]:
        try:
            messages, tools, effort = parse_prompt(self.tok.decode(prompt_ids, skip_special_tokens=False))
            if choice is None:  # no tool grammar although the prompt shows tools: the request said tool_choice none
                choice = "none" if tools else "auto"
            if self.fault == "tool_under_none" and choice == "none":
                choice = "auto"  # the broken model calls anyway
            if self.fault == "text_under_required" and isinstance(choice, list):
                choice = "none"  # the broken model answers in text and ignores the grammar's demand
            answer = self.decide(messages, tools, effort, choice)
            reply = Reply(answer.reasoning, answer.content, [(c.name, dict(c.arguments)) for c in answer.tool_calls])
            return self.encode(apply_fault(reply, self.fault, messages, tools))
        except Exception as exc:  # a bad request must not kill the engine; say what went wrong instead
            log.exception("GlmOracle could not answer")
            return self.encode(Reply("", f"[golive oracle error: {type(exc).__name__}: {exc}]"))

    def _text(self, text: str) -> list[int]:
        # "<" on its own, so tag-like text stays ordinary tokens: only real tags get the tag ids.
        pieces = re.split(r"(<)", text)
        return [i for piece in pieces if piece for i in self.tok.encode(piece, add_special_tokens=False).ids]

    def _tag(self, tag: str) -> list[int]:
        return [token_id(self.tok, tag)]

    def encode(self, reply: Reply) -> list[int]:
        ids = self._text(reply.reasoning) + self._tag("</think>") + self._text(reply.content)
        for name, args in reply.calls:
            ids += self._tag("<tool_call>") + self._text(name)
            for key, value in args.items():
                text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                ids += (
                    self._tag("<arg_key>")
                    + self._text(key)
                    + self._tag("</arg_key>")
                    + self._tag("<arg_value>")
                    + self._text(text)
                    + self._tag("</arg_value>")
                )
            ids += self._tag("</tool_call>")
        return ids
