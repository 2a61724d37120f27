"""bash as the oracle of golive's prestart reader (testbed/golive_testbed/oracles/bash_oracle.py): a seeded batch of
generated prestarts, each run by bash in a sandbox in both worlds; every step golive lists agrees with what bash did,
and any disagreement fails with the input reduced to its smallest form. The deep run (≥ 10,000) is bench/oracles.py.
"""

from __future__ import annotations

import shutil

import pytest

from golive_testbed.oracles import bash_oracle
from golive_testbed.oracles.bash_cases import ScriptCase

COUNT, SEED = 60, 40  # ~15 s on 2 shared cores


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is the oracle")
def test_golive_reads_generated_prestarts_as_bash_runs_them():
    report = bash_oracle.run(COUNT, SEED)
    assert report.inputs == COUNT
    assert not report.disagreements, report.describe(ScriptCase.text)


def test_a_disagreement_is_reduced_to_its_smallest_input():
    """The reducer keeps what still disagrees and drops every line it can: one line of twenty stays."""
    lines = [f"line {i}" for i in range(20)]
    case = ScriptCase((("{D}/usr/local/sbin/p.sh", "#!/bin/bash\n" + "\n".join(lines)),))

    def still(candidates: list[ScriptCase]) -> list[bool]:
        return ["line 13" in c.files[0][1] for c in candidates]

    smallest = case.rebuilt(bash_oracle.reduce_parts(case.parts(), case.rebuilt, still))
    assert smallest.files[0][1] == "#!/bin/bash\nline 13"
