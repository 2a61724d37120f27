"""NCCL's documented log grammar (src/debug.cc, init.cc, the transports; testbed/golive_testbed/oracles/
nccl_oracle.py) as the oracle of golive's NCCL log reader: a seeded batch of generated logs (cut, copytruncated,
interleaved, prefixed) and NCCL_DEBUG_FILE names. The deep run (≥ 10,000) is bench/oracles.py."""

from __future__ import annotations

from golive_testbed.oracles import nccl_oracle

COUNT, SEED = 3000, 42


def test_golive_reads_generated_nccl_logs_as_nccl_grammar_says():
    report = nccl_oracle.run(COUNT, SEED)
    assert report.inputs == COUNT
    assert not report.disagreements, report.describe(nccl_oracle.LogCase.describe)
