"""The reference model directory: a tiny Llama that speaks GLM's dialect (tokens and chat template), no weights."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:  # tokenizers is imported where used
    from tokenizers import Tokenizer

# GLM's tags. Role/framing tokens are special (hidden when decoding with skip_special_tokens); the reasoning and
# tool-call tags are not, as in GLM's own tokenizer, so a station without a parser shows them in `content`.
ROLE_TOKENS = ["[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"]
TAG_TOKENS = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
]
EOS = "<|endoftext|>"
SERVED_NAME = "golive-reference"
MAX_POSITION_EMBEDDINGS = 65536
VOCAB_TARGET = 4096

# GLM-5.3 style: an always-open <think> and a "Reasoning Effort:" header (vLLM's glm47 parser keys on that header to
# treat reasoning as always on). Effort defaults to max, as in the GLM-5.3 deployment. Tools render in the system turn.
CHAT_TEMPLATE = r"""
{%- macro text(c) -%}
{%- if c is string -%}{{ c }}
{%- elif c -%}{%- for p in c -%}{%- if p.type == 'text' -%}{{ p.text }}{%- endif -%}{%- endfor -%}
{%- endif -%}
{%- endmacro -%}
{%- if reasoning_effort is defined and reasoning_effort -%}{%- set effort = reasoning_effort -%}
{%- else -%}{%- set effort = 'max' -%}{%- endif -%}
{{- '[gMASK]<sop><|system|>\nReasoning Effort: ' + effort -}}
{%- if tools -%}
{{- '\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' -}}
{{- 'You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n' -}}
{%- for tool in tools -%}{{- tool | tojson(ensure_ascii=False) + '\n' -}}{%- endfor -%}
{{- '</tools>\n\nFor each function call, output the function name and arguments within the following XML format:\n' -}}
{{- '<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value>...</tool_call>' -}}
{%- endif -%}
{%- for m in messages -%}
{%- if m.role == 'system' -%}
{{- '<|system|>\n' + text(m.content) -}}
{%- elif m.role == 'user' -%}
{{- '<|user|>\n' + text(m.content) -}}
{%- elif m.role == 'assistant' -%}
{{- '<|assistant|><think></think>' + text(m.content) -}}
{%- for tc in m.tool_calls or [] -%}
{%- set f = tc.function if tc.function is defined else tc -%}
{{- '<tool_call>' + f.name -}}
{%- if f.arguments is mapping -%}
{%- for k, v in f.arguments.items() -%}
{{- '<arg_key>' + k + '</arg_key><arg_value>' -}}
{{- (v if v is string else v | tojson(ensure_ascii=False)) + '</arg_value>' -}}
{%- endfor -%}
{%- elif f.arguments -%}{{- f.arguments -}}{%- endif -%}
{{- '</tool_call>' -}}
{%- endfor -%}
{%- elif m.role == 'tool' -%}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}{{- '<|observation|>' -}}{%- endif -%}
{{- '\n<tool_response>\n' + text(m.content) + '\n</tool_response>' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|><think>' -}}{%- endif -%}
""".strip()

# Training text for the BPE merges: fixed here so every build yields the same bytes. Its only job is to make common
# English, JSON and tool-call text compact; byte fallback still encodes anything.
_WORD_TEXT = """
the of and to in is was that for it with as on be at by this had not are but from or have an they which one you were
her all she there would their we him been has when who will more no if out so said what up its about into than them
can only other new some could time these two may then do first any my now such like our over man me even most made
after also did many before must through back years where much your way well down should because each just those
people how too little state good very make world still own see men work long get here between both life being under
never day same another know while last might us great old year off come since against go came right used take three
question answer answers think thinking reasoning effort low high max tool tools call calls function functions argument
arguments value values key keys result results weather temperature city country unit units celsius fahrenheit forecast
today tomorrow rain sunny cloudy wind humidity degrees location name type string integer number boolean array object
properties required description parameters enum search query document documents needle haystack secret code word
magic passage context retrieve find found hidden sales quarter quarterly revenue increase decrease percent trend
summary total sum add subtract multiply divide plus minus times equals calculate compute math hello hi thanks please
user assistant system observation response message content model server station health check test ok error
Paris London Tokyo Berlin Beijing Madrid Rome New York San Francisco Sydney January February March April May June
July August September October November December Monday Tuesday Wednesday Thursday Friday Saturday Sunday
"""

_SAMPLES = [
    (
        '{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city", '
        '"parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", '
        '"enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}'
    ),
    "The answer is 42. The total is 1,234.56 and the increase is 50%. 0123456789 10 100 1000 2024 2025 2026",
    "Reasoning Effort: max\n\n# Tools\n\nYou may call one or more functions to assist with the user query.",
    "def main():\n    return {'key': [1, 2, 3], \"value\": None}\n",
]


def _corpus() -> list[str]:
    words = _WORD_TEXT.split()
    lines = [" ".join(words), " ".join(w.capitalize() for w in words), ". ".join(words), *_SAMPLES]
    return lines * 3  # repetition lets merges clear min_frequency


def build_tokenizer() -> Tokenizer:
    """Byte-level BPE with GLM's tags as single tokens; deterministic (same corpus, same merges)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_TARGET,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in [EOS, *ROLE_TOKENS]])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAG_TOKENS])
    return tok


def token_id(tok: Tokenizer, token: str) -> int:
    """The id of one of GLM's tokens (EOS, ROLE_TOKENS, TAG_TOKENS): build_tokenizer adds each to the vocabulary."""
    return cast(int, tok.token_to_id(token))


def _files() -> dict[str, str]:
    tok = build_tokenizer()
    ids = {t: token_id(tok, t) for t in [EOS, *ROLE_TOKENS, *TAG_TOKENS]}
    vocab = tok.get_vocab_size(with_added_tokens=True)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab,
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "head_dim": 64,  # CPU needs >= 32
        "max_position_embeddings": MAX_POSITION_EMBEDDINGS,
        "rope_theta": 10000.0,
        "rms_norm_eps": 1e-5,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "bos_token_id": ids["[gMASK]"],
        "eos_token_id": ids[EOS],
        "pad_token_id": ids[EOS],
    }
    # GLM stops on <|user|> and <|observation|> as well as EOS.
    generation = {"eos_token_id": [ids[EOS], ids["<|user|>"], ids["<|observation|>"]], "pad_token_id": ids[EOS]}
    tok_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": MAX_POSITION_EMBEDDINGS,
        "eos_token": EOS,
        "pad_token": EOS,
        "clean_up_tokenization_spaces": False,
        "added_tokens_decoder": {
            str(i): {
                "content": t,
                "special": t not in TAG_TOKENS,
                "normalized": False,
                "lstrip": False,
                "rstrip": False,
                "single_word": False,
            }
            for t, i in sorted(ids.items(), key=lambda kv: kv[1])
        },
        "chat_template": CHAT_TEMPLATE,
    }

    def dump(data: dict) -> str:
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"

    return {
        "config.json": dump(config),
        "generation_config.json": dump(generation),
        "tokenizer.json": tok.to_str(pretty=True) + "\n",
        "tokenizer_config.json": dump(tok_config),
    }


def build_model_dir(dest: Path) -> Path:
    """Write the model files into dest; files already holding the same bytes are left alone."""
    dest = Path(dest).expanduser()
    dest.mkdir(parents=True, exist_ok=True)
    for name, text in _files().items():
        path = dest / name
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        tmp = path.with_name(f".{name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)  # atomic: a server starting meanwhile, or a concurrent build, never sees half a file
    return dest
