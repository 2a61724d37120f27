"""Long-context prompts of an exact size: a haystack with a needle, sized with the server's own /tokenize."""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

_SUBJECTS = [
    "The harbour office",
    "A night-shift engineer",
    "The quarterly audit",
    "Our build farm",
    "The west wing",
    "A delivery drone",
    "The archive team",
    "The cooling loop",
    "A visiting professor",
    "The ferry schedule",
]
_VERBS = ["reviewed", "rescheduled", "measured", "repainted", "catalogued", "rerouted", "inspected", "summarised"]
_OBJECTS = [
    "the spare parts inventory",
    "three old maintenance logs",
    "the lobby lighting",
    "a shipment of cables",
    "the visitor badges",
    "the backup generator",
    "a box of printed manuals",
    "the parking rota",
]
_WHEN = [
    "on Monday",
    "before lunch",
    "after the storm",
    "during the holidays",
    "late in the evening",
    "in early spring",
]
_ADJ = ["amber", "cobalt", "silent", "northern", "velvet", "granite", "lunar", "copper"]
_NOUN = ["falcon", "harbor", "lantern", "meadow", "compass", "glacier", "orchid", "beacon"]

TOLERANCE = 0.005  # of the target: the recipe's needle is 968,377 tokens, so ±4,842
# The density measured on 200k characters of filler is within ~0.15 % of the whole's (1 σ over 12 seeds, reference
# tokenizer): missing ±0.5 % needs a > 3 σ draw, and the third call repairs that. More would only cost time.
CALIBRATION_CHARS = 200_000


def _sentences(seed: int) -> Iterator[str]:
    rng = random.Random(seed)
    while True:
        yield f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_WHEN)}."


def filler(n_sentences: int, seed: int) -> list[str]:
    """Varied, meaningless sentences: no repeated chunk for a cache to shortcut, nothing that looks like a needle.

    Prefix-stable: filler(n, seed) is the start of filler(n + k, seed)."""
    return list(itertools.islice(_sentences(seed), n_sentences))


@dataclass
class Haystack:
    prompt: str
    answer: str
    tokens: int  # as the server counted this very prompt (its last /tokenize call)
    depth: float
    calls: int = 0  # /tokenize calls it took
    target: int = 0

    @property
    def error(self) -> float:
        """Relative distance of the verified count from the target (0.004 = 0.4 % over)."""
        return (self.tokens - self.target) / self.target if self.target else 0.0


def tolerance(target_tokens: int) -> int:
    """±0.5 % of the target, and never less than one filler sentence (~15 tokens): the prompt grows by sentences."""
    return max(16, int(target_tokens * TOLERANCE))


class _Filler:
    """One seed's sentences, generated once and extended on demand, with their cumulative length in characters."""

    def __init__(self, seed: int):
        self._source = _sentences(seed)
        self.sentences: list[str] = []
        self.ends: list[int] = []  # ends[i]: characters of sentences[:i + 1] joined with spaces

    def count_for(self, chars: float, at_most: bool = False) -> int:
        """The number of sentences whose joined text is closest to `chars` characters, or longest within them
        (at least 1)."""
        while not self.ends or self.ends[-1] < chars:
            self._extend(max(1024, len(self.sentences)))
        if at_most:
            return max(1, bisect.bisect_right(self.ends, chars))
        i = bisect.bisect_left(self.ends, chars)
        if i > 0 and chars - self.ends[i - 1] < self.ends[i] - chars:
            i -= 1
        return i + 1

    def _extend(self, n: int) -> None:
        total = self.ends[-1] + 1 if self.ends else 0
        for sentence in itertools.islice(self._source, n):
            total += len(sentence)
            self.sentences.append(sentence)
            self.ends.append(total)
            total += 1  # the joining space


def build(tokenize: Callable[[str], int], target_tokens: int, depth: float, seed: int = 0) -> Haystack:
    """A user prompt of target_tokens ±0.5 % by the server's count, in at most 3 /tokenize calls: filler, the needle
    at `depth` (0 = start, 1 = end), then the question.

    `tokenize(text) -> int` is the server's count, so the size is right for the served tokenizer. Tokens are modelled
    as a line in characters (tokens = overhead + density × chars):
      1. a prompt of the same shape, at most `target_tokens` characters (so at most that many tokens for any tokenizer
         of ≥ 1 character a token: within the window), gives the density;
      2. the full prompt at that density; done when within tolerance (the usual case: the density of one filler
         sequence barely moves past ~100k characters);
      3. otherwise the two counts fix the line (overhead included: e.g. a server that adds tokens to every prompt),
         and the corrected prompt is counted once more. Its count is returned as is, in or out of tolerance.
    """
    rng = random.Random(seed + 1)
    answer = f"{rng.choice(_ADJ)}-{rng.choice(_NOUN)}-{rng.randint(10, 99)}"
    needle = f"The secret passphrase is {answer}."
    question = "\n\nWhat is the secret passphrase mentioned in the document above? Answer with the passphrase only."
    source = _Filler(seed)
    fixed = len(needle) + 1 + len(question)  # characters outside the filler

    def prompt_of(n: int) -> tuple[str, int]:
        at = int(n * depth)
        parts = itertools.chain(source.sentences[:at], (needle,), source.sentences[at:n])
        return " ".join(parts) + question, source.ends[n - 1] + fixed

    calls = 0

    def count(n: int) -> tuple[str, int, int]:
        nonlocal calls
        calls += 1
        text, chars = prompt_of(n)
        return text, chars, tokenize(text)

    allowed = tolerance(target_tokens)
    n = source.count_for(min(target_tokens, CALIBRATION_CHARS) - fixed, at_most=True)
    _, chars0, tokens0 = count(n)
    density = tokens0 / chars0
    n = source.count_for(target_tokens / density - fixed)
    prompt, chars1, tokens = count(n)
    if abs(tokens - target_tokens) > allowed:
        slope = (tokens - tokens0) / (chars1 - chars0) if chars1 != chars0 else density
        slope = slope if slope > 0 else density
        n = source.count_for(chars1 + (target_tokens - tokens) / slope - fixed)
        prompt, _, tokens = count(n)
    return Haystack(prompt=prompt, answer=answer, tokens=tokens, depth=depth, calls=calls, target=target_tokens)


TEMPLATE_ALLOWANCE = 256  # tokens a chat template may add around one user turn (GLM's framing: under 20)


def no_room(served: int, prompt_tokens: int, room: int) -> str:
    """Why a probe of `prompt_tokens` (and `room` for the template and its answer) is not sent to a server whose
    context is `served` tokens: the not-checked line of the checks that size prompts to the context.

    >>> no_room(12_000, 12_000, 256)
    "not checked: the server's 12,000-token context has no room for this probe's 12,000-token prompt and 256 tokens \
for the chat template and the answer: see the max_model_len check"
    """
    return (
        f"not checked: the server's {served:,}-token context has no room for this probe's {prompt_tokens:,}-token "
        f"prompt and {room:,} tokens for the chat template and the answer: see the max_model_len check"
    )


class Mismatch(NamedTuple):
    found: str
    fix: str


def usage_mismatch(prompt_tokens: int | None, haystack: Haystack) -> Mismatch | None:
    """What is wrong with a chat answer's usage.prompt_tokens for this haystack, or None: it must be the verified
    count plus the chat template's few tokens, and that count within ±0.5 % of the target."""
    if not isinstance(prompt_tokens, int):
        return Mismatch(
            found=f"the answer carried no usage.prompt_tokens (got {prompt_tokens!r})",
            fix="a proxy in front of vLLM may rewrite answers: query vLLM directly and compare",
        )
    if abs(haystack.tokens - haystack.target) > tolerance(haystack.target):
        return Mismatch(
            found=f"/tokenize counted the probe at {haystack.tokens:,} tokens, {haystack.error:+.2%} off "
            f"its target of {haystack.target:,} after {haystack.calls} calls",
            fix="/tokenize counts unsteadily (the same text counted differently between calls): check "
            "that every replica behind the URL serves the same tokenizer",
        )
    extra = prompt_tokens - haystack.tokens
    counted = (
        f"the chat answer counted {prompt_tokens:,} prompt tokens for a user turn /tokenize counted at "
        f"{haystack.tokens:,} ({extra:+,}; a chat template adds 0 to {TEMPLATE_ALLOWANCE})"
    )
    if extra < -4:  # -4: merges across the template's last tag, in theory
        return Mismatch(
            found=counted,
            fix="something between golive and the model cut the prompt (a proxy's body-size limit, a "
            "truncation setting), or chat and /tokenize use different tokenizers: compare the served "
            "tokenizer files with the checkpoint's",
        )
    if extra > TEMPLATE_ALLOWANCE:
        return Mismatch(
            found=counted,
            fix="the chat template (--chat-template or the checkpoint's) injects a long system prompt, or "
            "chat and /tokenize use different tokenizers: compare the rendered template and the "
            "tokenizer files",
        )
    return None


def repeat_to(tokenize: Callable[[str], int], min_tokens: int) -> str:
    """Text just over min_tokens by the server's count (for over-limit probes: far over would test another limit)."""
    chunk = " ".join(filler(20, 7))  # ~1 % of a 64k limit: lands just over it
    count = -(-min_tokens // tokenize(chunk))  # ceil
    text = " ".join([chunk] * count)
    while tokenize(text) < min_tokens:
        count += 1
        text = " ".join([chunk] * count)
    return text
