"""The tools themselves as golive's oracles: generators of inputs (unit files, prestart scripts, vLLM command lines,
NCCL logs), each run through the tool that acts on it (systemd 252 in the real station, bash, vLLM's own argument
parser, NCCL's documented log grammar) and through golive's reader, every disagreement reduced to its smallest input.

    from golive_testbed.oracles import vllm_oracle
    report = vllm_oracle.run(count=200, seed=7)        # an Agreement: inputs, agreements, the reduced disagreements
    assert report.agreed == report.inputs, report.describe()

tests/differential/ runs a seeded few hundred of each in CI; bench/oracles.py runs ≥ 10,000 of each
(docs/performance.md).
"""
