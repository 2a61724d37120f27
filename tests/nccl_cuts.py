"""The repository's real NCCL logs cut as operators hand them over: an excerpt, a log cut by rotation, one taken while
the run was still in init. Shared by the parser tests (tests/unit/test_facts_nccl.py) and the check tests
(tests/cluster/test_cluster_nccl_partial_logs.py); the recorded files are never copied, only cut here.

A cut keeps the lines in place (a kept line's number changes only where a head is cut), so what a cut holds is read
from its own lines with plain string tests, independently of the parser under test.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# every recorded NCCL log (`grep -rl "NCCL INFO" fixtures docs`, less the station trees' copies of these), by the run
# each was (their PROVENANCE.md / README.md). gb300-rail: two stations over RoCE, NCCL 2.30.7's formats with
# reconstructed values; h200x2-device and docs/examples/h200x2: real runs on one host of two H200s, NCCL 2.28.9.
# (fixtures/recorded/h200-device/nccl.txt holds no NCCL line: a file listing, pip's and torch's versions.)
KINDS = {
    "fixtures/recorded/gb300-rail/nccl-gdrdma.log": "gdrdma",
    "fixtures/recorded/gb300-rail/nccl-gdrdma-b.log": "gdrdma",
    "fixtures/recorded/gb300-rail/nccl-2.28.3.log": "gdrdma",  # the wrong version, GDRDMA otherwise
    "fixtures/recorded/gb300-rail/nccl-no-gdrdma.log": "no-gdrdma",
    "fixtures/recorded/gb300-rail/nccl-socket-fallback.log": "socket",
    "fixtures/recorded/gb300-rail/nccl-warn.log": "warn",  # a WARN after Init COMPLETE; the run went on
    "fixtures/recorded/gb300-rail/nccl-bootstrap-died.log": "died",
    "fixtures/recorded/h200x2-device/nccl-p2p.txt": "one-host",
    "fixtures/recorded/h200x2-device/nccl-shm.txt": "one-host",
    "fixtures/recorded/h200x2-device/nccl-socket.txt": "one-host-socket",  # P2P and SHM off: NET/Socket on one host
    "docs/examples/h200x2/nccl.log": "one-host",
    "docs/examples/h200x2/nccl-socket.log": "one-host-socket",
}
TWO_STATION = sorted(name for name in KINDS if "/gb300-rail/" in name)
ONE_HOST = sorted(name for name in KINDS if "h200x2" in name)

CHANNEL = re.compile(r"Channel \d+(?:/\d+)? : \d+\[\d+\] -> \d+\[\d+\].* via (\S+)")
COMM = re.compile(r"\bnRanks \d+ nNodes \d+")
_NCCL = re.compile(r"\bNCCL (?:INFO|WARN)\b")


def lines_of(name: str) -> list[str]:
    return (REPO / name).read_text().splitlines()


def _channels(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if CHANNEL.search(line)]


def _first(lines: list[str], needle: str) -> int | None:
    return next((i for i, line in enumerate(lines) if needle in line), None)


def after_bootstrap(lines: list[str]) -> list[str] | None:
    """Cut after the last `Init START` before NCCL printed its topology: bootstrap done, no `nNodes`, no channel."""
    end = next((i for i, line in enumerate(lines) if COMM.search(line) or CHANNEL.search(line)), len(lines))
    starts = [i for i, line in enumerate(lines[:end]) if "Init START" in line]
    return lines[: starts[-1] + 1] if starts else None


def through_init_complete(lines: list[str]) -> list[str] | None:
    """Taken right after init, before the first collective: every line through the last `Init COMPLETE`, no channel
    yet (NCCL_RUNTIME_CONNECT=1, the default, connects them at the first collective)."""
    ends = [i for i, line in enumerate(lines) if "Init COMPLETE" in line]
    kept = lines[: ends[-1] + 1] if ends else []
    return kept if kept and not _channels(kept) else None


def mid_channels(lines: list[str]) -> list[str] | None:
    """Cut in the middle of the channel lines: half of them kept."""
    channels = _channels(lines)
    return lines[: channels[len(channels) // 2]] if len(channels) > 1 else None


def after_last_channel(lines: list[str]) -> list[str] | None:
    """Cut right after the last channel line, as NCCL printed them (NCCL_RUNTIME_CONNECT=1, the default: channels
    connect at the first collective, after `Init COMPLETE`, so the cut keeps it)."""
    channels = _channels(lines)
    return lines[: channels[-1] + 1] if channels else None


def eager_before_init_complete(lines: list[str]) -> list[str] | None:
    """Cut after the last channel of a run with NCCL_RUNTIME_CONNECT=0 (or an NCCL before 2.22), which connects its
    channels inside init, before `Init COMPLETE` (NVIDIA/nccl src/init.cc: ncclTransportRingConnect runs in
    initTransportsRank): every line up to the last channel, less the `Init COMPLETE` lines that follow it there."""
    cut = after_last_channel(lines)
    if cut is None:
        return None
    return [line for line in cut if "Init COMPLETE" not in line and "Init timings" not in line]


def head_rotated_at_channels(lines: list[str]) -> list[str] | None:
    """Rotation took every line before the first channel: no version, no `nNodes`, no `Init COMPLETE` (in these
    logs the channels come after it)."""
    channels = _channels(lines)
    return lines[channels[0] :] if channels else None


def head_rotated_after_topology(lines: list[str]) -> list[str] | None:
    """Rotation took every line up to the `comm … nRanks … nNodes …` line, that line too: what follows it stays."""
    at = next((i for i, line in enumerate(lines) if COMM.search(line)), None)
    return lines[at + 1 :] if at is not None else None


def head_rotated_after_init_complete(lines: list[str]) -> list[str] | None:
    """Rotation took every line up to the first `Init COMPLETE`, that line too."""
    at = _first(lines, "Init COMPLETE")
    return lines[at + 1 :] if at is not None else None


def head_rotated_first_half(lines: list[str]) -> list[str] | None:
    """The first half of the file gone, wherever that falls."""
    return lines[len(lines) // 2 :]


def head_rotated_to_last_lines(lines: list[str]) -> list[str] | None:
    """Only the last 8 lines kept (`tail -n 8`)."""
    return lines[-8:]


def channel_excerpt(lines: list[str]) -> list[str] | None:
    """An operator's excerpt: `grep ' via '`, the channel lines alone."""
    channels = _channels(lines)
    return [lines[i] for i in channels] if channels else None


CUTS: dict[str, Callable[[list[str]], list[str] | None]] = {
    "whole": lambda lines: lines,
    "after-bootstrap": after_bootstrap,
    "through-init-complete": through_init_complete,
    "mid-channels": mid_channels,
    "after-last-channel": after_last_channel,
    "eager-before-init-complete": eager_before_init_complete,
    "head-rotated-at-channels": head_rotated_at_channels,
    "head-rotated-after-topology": head_rotated_after_topology,
    "head-rotated-after-init-complete": head_rotated_after_init_complete,
    "head-rotated-first-half": head_rotated_first_half,
    "tail-8": head_rotated_to_last_lines,
    "channel-excerpt": channel_excerpt,
}

# Prefixes that shippers and launchers put before NCCL's own `host:pid:tid [dev]`, one for every line.
PREFIXES: dict[str, Callable[[int, str], str]] = {
    "as-recorded": lambda n, line: line,
    "docker-timestamps": lambda n, line: f"2026-09-30T10:00:{n % 60:02d}.{n:09d}Z {line}",
    "journald": lambda n, line: f"2026-09-30T10:00:00+0000 gb300-a docker[4107]: {line}",
    "vllm-worker": lambda n, line: f"(VllmWorker rank=0 pid=4107) {line}",
    "kubectl-prefix": lambda n, line: f"[pod/glm53-0/worker] {line}",
    "torchrun-rank": lambda n, line: f"[rank0]: {line}",
    "ansi-crlf": lambda n, line: line.replace("NCCL INFO", "\x1b[32mNCCL INFO\x1b[0m") + "\r",
    "no-nccl-prefix": lambda n, line: re.sub(r"^\S+:\d+:\d+ \[\d+\] ", "", line),
}


@dataclass(frozen=True)
class Cut:
    """One real log, cut and prefixed: its text and what it holds, read with plain string tests."""

    name: str
    kind: str
    cut: str
    prefix: str
    lines: tuple[str, ...]  # the kept lines, before the prefix

    @property
    def text(self) -> str:
        return "".join(PREFIXES[self.prefix](n, line) + "\n" for n, line in enumerate(self.lines))

    @property
    def id(self) -> str:
        return f"{'/'.join(self.name.split('/')[-2:])}:{self.cut}:{self.prefix}"

    def holds(self, needle: str) -> bool:
        return any(needle in line for line in self.lines)

    @property
    def vias(self) -> list[str]:
        return [m.group(1) for line in self.lines if (m := CHANNEL.search(line))]

    @property
    def net_vias(self) -> list[str]:
        return [via for via in self.vias if via.startswith("NET/")]

    @property
    def complete(self) -> bool:
        return self.holds("Init COMPLETE")

    @property
    def topology(self) -> bool:
        return any(COMM.search(line) for line in self.lines)

    @property
    def death(self) -> bool:
        """Holds NCCL's own death line, with no channel after it (the recorded deaths are WARN lines)."""
        warns = [i for i, line in enumerate(self.lines) if "NCCL WARN" in line]
        channels = [i for i, line in enumerate(self.lines) if CHANNEL.search(line)]
        return not self.complete and any(w > max(channels, default=-1) for w in warns)


def cuts(names: list[str], prefixes: list[str] | None = None) -> list[Cut]:
    """Every applicable cut of each named log, with each prefix (all of them unless named); cuts that give the same
    lines as another of the same log are left out (a small log's head cuts can coincide)."""
    found = []
    for name in names:
        lines = lines_of(name)
        seen: set[tuple[str, ...]] = set()
        for cut_name, cut in CUTS.items():
            kept = cut(lines)
            if not kept or tuple(kept) in seen or not any(_NCCL.search(line) for line in kept):
                continue
            seen.add(tuple(kept))
            found += [Cut(name, KINDS[name], cut_name, prefix, tuple(kept)) for prefix in (prefixes or PREFIXES)]
    return found
