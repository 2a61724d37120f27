"""vLLM's own argument parser as the oracle of golive's reading of the served flags
(testbed/golive_testbed/oracles/vllm_oracle.py): a seeded batch of generated command lines, with and without a
`--config FILE`; golive agrees with vLLM on whether it starts and on every flag golive compares. golive's table of
vLLM's options (golive.facts.vllm_options) is vLLM's own. The deep run (≥ 10,000) is bench/oracles.py."""

from __future__ import annotations

import pytest

from golive.facts import vllm_options

COUNT, SEED = 800, 41

pytest.importorskip("vllm", reason="vLLM's parser is the oracle (the testbed's reference extra installs it)")

from golive_testbed.oracles import vllm_oracle  # noqa: E402
from golive_testbed.oracles.vllm_oracle import ArgsCase  # noqa: E402


def test_golive_reads_generated_command_lines_as_vllms_parser_does():
    report = vllm_oracle.run(COUNT, SEED)
    assert report.inputs == COUNT
    assert not report.disagreements, report.describe(ArgsCase.text)


def test_golive_option_table_is_vllms_own():
    """Every option, its kind, its short alias and its choices, as make_arg_parser(FlexibleArgumentParser()) holds
    them in the installed vLLM: a vLLM upgrade that adds or changes one fails here until the table is regenerated."""
    parser = vllm_oracle._parser()
    kinds: dict[str, str] = {}
    shorts: dict[str, str] = {}
    choices: dict[str, tuple[str, ...]] = {}
    for action in parser._actions:
        if not action.option_strings or type(action).__name__ == "_HelpAction":
            continue
        name = action.option_strings[0][2:]
        kind = {"BooleanOptionalAction": "switch", "_StoreTrueAction": "flag", "_AppendAction": "append"}.get(
            type(action).__name__, {"+": "many", "?": "optional"}.get(str(action.nargs), "value")
        )
        for option in action.option_strings:
            if option.startswith("--") and not (kind == "switch" and option.startswith("--no-")):
                kinds[option[2:]] = kind
            elif not option.startswith("--"):
                shorts[option[1:]] = name
        if isinstance(action.choices, (list, tuple)):
            choices[name] = tuple(sorted(str(c) for c in action.choices))
    assert kinds == vllm_options.OPTIONS
    assert shorts == vllm_options.SHORT
    assert choices == vllm_options.CHOICES
