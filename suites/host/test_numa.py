"""The NUMA page-cache trap of the GB300 [000]."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import not_applicable, require
from golive.profile.origins import section, sourced
from golive.profile.recipe import dram_node

if TYPE_CHECKING:
    from golive.profile.schema import Profile
    from golive.station.host import StationFacts

pytestmark = pytest.mark.host


@check("host.numa.hbm_node_page_cache_near_empty", Cost.READ)
def test_hbm_node_page_cache_is_near_empty(facts: StationFacts, profile: Profile) -> None:
    """The GPU's HBM NUMA node holds next to no page cache (FilePages at most {numa.hbm_file_pages_ceiling_mib} MiB)
    before a start [000][001]."""
    if profile.numa is None:
        not_applicable("the profile declares no coherent GPU memory (numa: null)")
    hbm = facts.hbm_nodes
    if not hbm:
        not_applicable(
            "no coherent GPU memory on this host: no numa_status node from the driver, no ATS addressing, "
            "no memory-only NUMA node; the page-cache trap cannot happen here"
        )
    ceiling = profile.numa.hbm_file_pages_ceiling_mib
    for node in hbm:
        kib = facts.nodes.get(node.node, {}).get("meminfo", {}).get("FilePages", 0)
        require(
            kib / 1024 <= ceiling,
            found=f"NUMA node {node.node} (the GPU's HBM, found by {node.how}) holds {kib / 1024 / 1024:.1f} GiB "
            f"of page cache (FilePages {kib} kB)",
            recipe="FilePages on the HBM node near 0 ("
            + sourced(profile, (lambda p: section(p.numa).hbm_file_pages_ceiling_mib, f"ceiling {ceiling:g} MiB"))
            + ") before vLLM allocates its KV cache; otherwise it dies with a self-contradicting OOM [000]",
            fix="run `sync; echo 1 > /proc/sys/vm/drop_caches` before starting, and run downloads/copies under "
            f"`numactl --membind={dram_node(profile)}` so their cache stays in LPDDR [000]",
        )
