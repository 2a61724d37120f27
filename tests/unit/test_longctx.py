"""The needle prompt is sized with at most 3 /tokenize calls to ±0.5 % of its target, by a real tokenizer's count."""

import pytest
from tokenizers import Tokenizer

from golive.endpoint import longctx
from golive_testbed.reference.model import build_model_dir


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    """The reference model's own tokenizer.json: the tokenizer the reference station's /tokenize runs."""
    model_dir = build_model_dir(tmp_path_factory.mktemp("reference-model"))
    return Tokenizer.from_file(str(model_dir / "tokenizer.json"))


class Counter:
    """A `tokenize` callable that counts like the server (no special tokens added) and counts its calls."""

    def __init__(self, tokenizer, overhead: int = 0):
        self.tokenizer, self.overhead, self.calls = tokenizer, overhead, 0
        self.sizes: list[int] = []

    def __call__(self, text: str) -> int:
        self.calls += 1
        self.sizes.append(len(text))
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids) + self.overhead


@pytest.mark.parametrize("target", [5_000, 14_745, 50_000])  # 14,745: the reference station's needle
@pytest.mark.parametrize("seed", range(5))
def test_within_half_a_percent_in_at_most_three_calls(tokenizer, target, seed):
    tokenize = Counter(tokenizer)
    haystack = longctx.build(tokenize, target, depth=0.5, seed=seed)
    assert tokenize.calls == haystack.calls <= 3
    assert abs(haystack.tokens - target) <= target * 0.005, haystack.tokens
    assert haystack.tokens == Counter(tokenizer)(haystack.prompt)  # the count it reports is of the prompt it returns
    assert haystack.error == (haystack.tokens - target) / target
    assert max(tokenize.sizes[:1]) <= target  # the calibration call never exceeds the window, whatever the tokenizer


@pytest.mark.parametrize("overhead", [300, 2_000])
def test_a_count_with_a_fixed_overhead_still_converges(tokenizer, overhead):
    """A server that adds tokens to every prompt (a template, a system prompt) throws the density off: the third call
    corrects for it."""
    tokenize = Counter(tokenizer, overhead)
    haystack = longctx.build(tokenize, 20_000, depth=0.5, seed=3)
    assert haystack.calls == 3  # the second count was off by more than 0.5 %: the overhead was found, not ignored
    assert abs(haystack.tokens - 20_000) <= 100, haystack.tokens
    assert haystack.tokens == Counter(tokenizer, overhead)(haystack.prompt)


@pytest.mark.parametrize("depth", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_needle_sits_at_its_depth_and_the_question_ends_the_prompt(tokenizer, depth):
    haystack = longctx.build(Counter(tokenizer), 10_000, depth=depth, seed=1)
    needle = f"The secret passphrase is {haystack.answer}."
    assert haystack.prompt.count(haystack.answer) == 1
    body = haystack.prompt[: haystack.prompt.index("\n\nWhat is the secret passphrase")]
    assert body.index(needle) / len(body) == pytest.approx(depth, abs=0.01)
    assert haystack.prompt.endswith("Answer with the passphrase only.")


def test_filler_is_prefix_stable():
    assert longctx.filler(300, 4)[:100] == longctx.filler(100, 4)
    assert longctx.filler(100, 4) != longctx.filler(100, 5)


@pytest.fixture(scope="module")
def haystack(tokenizer):
    return longctx.build(Counter(tokenizer), 14_745, depth=0.5, seed=50)


@pytest.mark.parametrize("extra", [0, 12, longctx.TEMPLATE_ALLOWANCE])
def test_usage_of_the_prompt_plus_a_template_matches(haystack, extra):
    assert longctx.usage_mismatch(haystack.tokens + extra, haystack) is None


@pytest.mark.parametrize(
    "prompt_tokens, found, fix",
    [
        (None, "no usage.prompt_tokens", "proxy"),
        (8_192, "counted 8,192 prompt tokens", "cut the prompt"),  # a truncating proxy or setting
        (20_000, "a chat template adds 0 to 256", "injects a long system prompt"),
    ],
    ids=["no-usage", "truncated", "template-injects"],
)
def test_usage_that_does_not_match_is_a_finding(haystack, prompt_tokens, found, fix):
    mismatch = longctx.usage_mismatch(prompt_tokens, haystack)
    assert mismatch is not None and found in mismatch.found and fix in mismatch.fix, mismatch


def test_a_probe_built_off_target_is_a_finding(tokenizer):
    unsteady = iter([1_000, 40_000, 40_000])  # a /tokenize that counts like no tokenizer: three calls cannot fix it
    haystack = longctx.build(lambda text: next(unsteady), 14_745, depth=0.5)
    assert haystack.calls == 3
    mismatch = longctx.usage_mismatch(haystack.tokens + 12, haystack)
    assert mismatch is not None and "off its target of 14,745 after 3 calls" in mismatch.found, mismatch
