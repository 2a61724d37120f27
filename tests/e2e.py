"""What the root-only end-to-end tests need (root, chroot, busybox, network namespaces), and CI's preflight.

Host and cluster end-to-end tests skip where they cannot run (a laptop, a container without privileges). CI must not
pass that way: `.ci/run` runs `python tests/e2e.py` first (one line and exit 1 if anything is missing) and sets
GOLIVE_REQUIRE_E2E=1, under which each of these skips becomes a failure.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from golive_testbed.targets import BUSYBOX

REQUIRE_E2E = os.environ.get("GOLIVE_REQUIRE_E2E") == "1"


def chroot_missing() -> str | None:
    """Why the station trees (testinfra's chroot backend) cannot be entered here, or None."""
    if os.geteuid() != 0:
        return "station trees are reached through chroot, which needs root"
    if shutil.which("chroot") is None:
        return "`chroot` is not installed (coreutils)"
    if not BUSYBOX.is_file():
        return f"{BUSYBOX} is missing: the station trees' shell tools (apt-get install busybox-static)"
    return None


def netns_missing() -> str | None:
    """Why the cluster test hosts (network namespaces with sshd) cannot run here, or None."""
    from cluster import netns  # tests/cluster: on sys.path both under pytest and as `python tests/e2e.py`

    return netns.available()


def skip_e2e(reason: str) -> None:
    """pytest.skip for an end-to-end test that cannot run here; a failure when CI requires the layer."""
    if REQUIRE_E2E:
        pytest.fail(f"GOLIVE_REQUIRE_E2E=1 and {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def e2e_chroot() -> None:
    """Skips (fails under GOLIVE_REQUIRE_E2E=1) a test that enters station trees where chroot cannot run."""
    reason = chroot_missing()
    if reason:
        skip_e2e(reason)


# Mark a test, or a module's pytestmark, that enters station trees (tests/conftest.py provides the fixture).
needs_chroot = pytest.mark.usefixtures("e2e_chroot")


def main() -> int:
    reasons = [r for r in (chroot_missing(), netns_missing()) if r]
    if reasons:
        print(
            f"ci: cannot run the root-only end-to-end tests (host and cluster layers): {'; '.join(reasons)}. "
            "Run CI as root on a machine with chroot and network namespaces.",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
