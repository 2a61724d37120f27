"""How pytest-xdist shares this test session between its workers: every test that uses a reference station goes to
one worker, first; the tests of one module (or of the network-namespace pairs) stay together.

xdist's own `--dist loadgroup` cannot do it under pytest 9: it renames each grouped test's `_nodeid`, which pytest 9
no longer reads (Node.nodeid comes from `_id`), so every test ends up a group of its own and each worker boots its
own stations. Instead each worker writes the test → group map it computed at collection to a file the controller
named (`workerinput`), and this scheduler reads it: groups as xdist's LoadScopeScheduling hands out scopes.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from xdist.scheduler import LoadScopeScheduling

STATIONS = "reference-stations"
GROUPS_KEY = "golive_test_groups"  # workerinput: the file the workers write the map to


def groups_file() -> Path:
    """A fresh file for this session's map (the controller names it; workers write it)."""
    return Path(tempfile.mkdtemp(prefix="golive-xdist-")) / "groups.json"


def write_groups(path: str, groups: dict[str, str]) -> None:
    """Write the map atomically: both workers write the same one."""
    partial = f"{path}.{os.getpid()}"
    Path(partial).write_text(json.dumps(groups))
    os.replace(partial, path)


class StationsFirst(LoadScopeScheduling):
    """LoadScopeScheduling over the workers' groups, the stations' group handed out first: it is the longest unit and
    must not start last."""

    def __init__(self, config: Any, log: Any, path: Path):
        super().__init__(config, log)
        self.path = path
        self.groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self.groups is None:  # first asked once every worker has collected: the map is written
            self.groups = json.loads(self.path.read_text())
        return self.groups.get(nodeid, nodeid)

    def _assign_work_unit(self, node: Any) -> None:
        if STATIONS in self.workqueue:
            self.workqueue.move_to_end(STATIONS, last=False)
        super()._assign_work_unit(node)
