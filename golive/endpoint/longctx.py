"""Long-context prompts of an exact size: a haystack with a needle, calibrated with the server's own /tokenize."""
from __future__ import annotations

import random
from dataclasses import dataclass

_SUBJECTS = ["The harbour office", "A night-shift engineer", "The quarterly audit", "Our build farm", "The west wing",
             "A delivery drone", "The archive team", "The cooling loop", "A visiting professor", "The ferry schedule"]
_VERBS = ["reviewed", "rescheduled", "measured", "repainted", "catalogued", "rerouted", "inspected", "summarised"]
_OBJECTS = ["the spare parts inventory", "three old maintenance logs", "the lobby lighting", "a shipment of cables",
            "the visitor badges", "the backup generator", "a box of printed manuals", "the parking rota"]
_WHEN = ["on Monday", "before lunch", "after the storm", "during the holidays", "late in the evening", "in early spring"]
_ADJ = ["amber", "cobalt", "silent", "northern", "velvet", "granite", "lunar", "copper"]
_NOUN = ["falcon", "harbor", "lantern", "meadow", "compass", "glacier", "orchid", "beacon"]


def filler(n_sentences: int, seed: int) -> list[str]:
    """Varied, meaningless sentences: no repeated chunk for a cache to shortcut, nothing that looks like a needle."""
    rng = random.Random(seed)
    return [f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_WHEN)}."
            for _ in range(n_sentences)]


@dataclass
class Haystack:
    prompt: str
    answer: str
    tokens: int  # as the server counts them
    depth: float


def build(tokenize, target_tokens: int, depth: float, seed: int = 0) -> Haystack:
    """A user prompt of ~target_tokens (±1 %): filler, the needle at `depth` (0 = start, 1 = end), then the question.

    `tokenize(text) -> int` is the server's count, so the size is right for the served tokenizer.
    """
    rng = random.Random(seed + 1)
    answer = f"{rng.choice(_ADJ)}-{rng.choice(_NOUN)}-{rng.randint(10, 99)}"
    needle = f"The secret passphrase is {answer}."
    question = "\n\nWhat is the secret passphrase mentioned in the document above? Answer with the passphrase only."
    sample = filler(200, seed)
    per_sentence = tokenize(" ".join(sample)) / len(sample)
    overhead = tokenize(needle + question)
    count = max(1, int((target_tokens - overhead) / per_sentence))
    for _ in range(3):  # converge on the target with the server's own count
        sentences = filler(count, seed)
        at = int(len(sentences) * depth)
        prompt = " ".join(sentences[:at] + [needle] + sentences[at:]) + question
        tokens = tokenize(prompt)
        if abs(tokens - target_tokens) <= max(8, target_tokens // 100):
            break
        count = max(1, count + int((target_tokens - tokens) / per_sentence))
    return Haystack(prompt=prompt, answer=answer, tokens=tokens, depth=depth)


def repeat_to(tokenize, min_tokens: int) -> str:
    """Text just over min_tokens by the server's count (for over-limit probes: far over would test another limit)."""
    chunk = " ".join(filler(20, 7))  # ~1 % of a 64k limit: lands just over it
    count = -(-min_tokens // tokenize(chunk))  # ceil
    text = " ".join([chunk] * count)
    while tokenize(text) < min_tokens:
        count += 1
        text = " ".join([chunk] * count)
    return text
