"""NCCL's documented log grammar as the oracle of golive's NCCL log reader (NCCL does not run here: its grammar does).

The grammar, from NCCL's source (github NVIDIA/nccl):
- src/debug.cc ncclDebugLogV: every INFO/WARN line is `HOST:PID:TID [DEV] NCCL INFO MSG` / `HOST:PID:TID [DEV]
  FILE:LINE (FUNC) NCCL WARN MSG` (a WARN after an empty line); HOST is getHostNameForLog's (cut at the first `.`, `%`
  and `/` as `-`). ncclDebugInit opens NCCL_DEBUG_FILE with `%h` the host, `%p` the pid, `%%` a `%`, any other `%X`
  echoed, fopen(…, "w") per process.
- src/init.cc: `NCCL version X.Y.Z+cudaA.B` first, the comm summary `comm 0x… rank R nRanks N nNodes M …`, `…
  Init COMPLETE` when the communicator is ready; src/transport/net.cc, p2p.cc, shm.cc: `Channel CC/P : S[D] -> T[D]
  [send|receive] via NET/IB/0/GDRDMA | NET/Socket/0 | P2P/CUMEM | SHM/direct`.
- A death: a WARN NCCL does not carry on after (misc/socket.cc `socketStartConnect … failed`), or the caller's error.

The generator builds a run from that grammar (its version, ranks and nodes, channels over each transport, a death or
not) and then shows it the ways a log reaches golive: cut at the head or the tail (a last line maybe cut mid-line),
emptied by logrotate's copytruncate while NCCL kept its offset (a hole of NUL bytes), two processes interleaved,
prefixed by `docker logs --timestamps` or journald, with CRLF or ANSI colours. What the lines it shows hold is known
from the run, and golive (golive.facts.nccl.parse_nccl_log, debug_file_name) must read exactly that.

    report = run(count=2000, seed=4)
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from golive.facts import FactError, nccl
from golive_testbed.oracles.reduce import Agreement, Disagreement


@dataclass(frozen=True)
class LogLine:
    text: str
    kind: str  # version, comm, channel, complete, warn-fatal, warn-carries-on, info
    pid: int
    value: object = None  # the version, (ranks, nodes), the channel's `via`


@dataclass
class LogCase:
    lines: list[LogLine]
    text: str
    visible: list[LogLine] = field(default_factory=list)  # whole lines the shown text holds, in order
    fragment: LogLine | None = None  # the last shown line, cut mid-line (no newline after it)
    fragment_text: str = ""  # what is left of it
    hole: int = 0
    pattern: str = ""
    hostname: str = ""
    pid: int = 0

    def describe(self) -> str:
        return (
            f"NCCL_DEBUG_FILE={self.pattern} on host {self.hostname!r}, pid {self.pid}\n"
            f"--- the log ({len(self.text)} characters, a hole of {self.hole})\n" + self.text.replace("\x00", "")[:3000]
        )


def _reference_debug_file(pattern: str, hostname: str, pid: int) -> str:
    """src/debug.cc ncclDebugInit's loop, character for character (written apart from golive's reader)."""
    host = hostname.split(".")[0]
    host = "".join("-" if ch in "%/" else ch for ch in host)
    out, c = "", 0
    while c < len(pattern):
        ch = pattern[c]
        c += 1
        if ch != "%":
            out += ch
            continue
        nxt = pattern[c] if c < len(pattern) else ""
        c += 1
        out += {"%": "%", "h": host, "p": str(pid)}.get(nxt, "%" + nxt)
    return out


def _run(rng: random.Random, host: str, pid: int, rank: int, shape: tuple[int, int]) -> list[LogLine]:
    """One process's NCCL lines, as src/init.cc and src/transport print them."""
    dev = rank
    pre = f"{host}:{pid}:{pid} [{dev}] NCCL INFO "
    version = rng.choice(("2.30.7+cuda13.0", "2.28.3+cuda12.9", "2.30.7+cuda13.0"))
    ranks, nodes = shape  # one communicator: every rank prints the same
    lines = [
        LogLine(f"{pre}Bootstrap: Using enp1s0f0np0:192.168.100.{rank + 1}<0>", "info", pid),
        LogLine(f"{pre}NCCL version {version}", "version", pid, version),
        LogLine(f"{pre}NCCL_IB_HCA set to mlx5_0,mlx5_1", "info", pid),
        LogLine(f"{pre}NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB enp1s0f0np0", "info", pid),
    ]
    if rng.random() < 0.12:  # died at bootstrap, before or after the version line
        warn = LogLine(
            f"{host}:{pid}:{pid} [{dev}] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
            f"192.168.100.2<39867> failed : Software caused connection abort",
            "warn-fatal",
            pid,
        )
        at = rng.choice((1, 2, len(lines)))
        return [*lines[:at], warn]
    if rng.random() < 0.1:
        lines.append(
            LogLine(
                f"{host}:{pid}:{pid} [{dev}] transport/net_ib.cc:1 NCCL WARN NET/IB : Got non-fatal "
                f"async event: port error",
                "warn-carries-on",
                pid,
            )
        )
    lines.append(
        LogLine(
            f"{pre}comm 0x5581a3c0 rank {rank} nRanks {ranks} nNodes {nodes} localRanks 1 localRank 0 MNNVL 0",
            "comm",
            pid,
            (ranks, nodes),
        )
    )
    via = rng.choice(("NET/IB/0/GDRDMA(PCI)", "NET/IB/0/GDRDMA", "NET/IB/0", "NET/Socket/0", "P2P/CUMEM", "SHM/direct"))
    lines.append(
        LogLine(
            f"{pre}ncclCommInitRankConfig comm 0x5581a3c0 rank {rank} nranks {ranks} cudaDev {dev} "
            f"nvmlDev {dev} busId 9010 commId 0x3b1f - Init COMPLETE",
            "complete",
            pid,
        )
    )
    for channel in range(rng.randrange(1, 4)):
        direction = " [send]" if via.startswith("NET") else ""
        lines.append(
            LogLine(
                f"{pre}Channel {channel:02d}/0 : {rank}[{dev}] -> {(rank + 1) % ranks}[0]{direction} via {via}",
                "channel",
                pid,
                via,
            )
        )
    return lines


def generate(count: int, seed: int) -> list[LogCase]:
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        host = rng.choice(("gb300-a", "gb300-a.lab.example.com", "node%1", "h/x", "gb300-b"))
        pid = rng.randrange(100, 99999)
        shape = rng.choice(((2, 2), (2, 1), (4, 2)))
        lines = _run(rng, host.split(".")[0].replace("%", "-").replace("/", "-"), pid, 0, shape)
        if rng.random() < 0.25:  # a second process, interleaved
            other = _run(rng, "gb300-a", pid + 1, 1, shape)
            merged: list[LogLine] = []
            while lines or other:
                source = lines if (lines and (not other or rng.random() < 0.5)) else other
                merged.append(source.pop(0))
            lines = merged
        shown = list(lines)
        if rng.random() < 0.3:  # cut at the head (an excerpt, a rotation)
            shown = shown[rng.randrange(len(shown)) :]
        if rng.random() < 0.3 and len(shown) > 1:  # cut at the tail
            shown = shown[: rng.randrange(1, len(shown) + 1)]
        prefix = rng.choice(
            ("", "", "2026-11-29T13:01:44.123456789Z ", "2026-11-29T13:01:44+0000 gb300-a vllm[4107]: ")
        )
        color = rng.random() < 0.1
        eol = "\r\n" if rng.random() < 0.1 else "\n"
        rendered = [prefix + (f"\x1b[32m{line.text}\x1b[0m" if color else line.text) for line in shown]
        rendered = [
            ("" + eol + r) if s.kind.startswith("warn") and rng.random() < 0.5 else r
            for r, s in zip(rendered, shown, strict=True)
        ]
        text = eol.join(rendered) + eol
        fragment, fragment_text = None, ""
        if rng.random() < 0.15 and shown:  # the last line cut mid-line: no newline after it
            last = rendered[-1]
            cut = rng.randrange(len(prefix) + 1, len(last) + 1)
            text = eol.join(rendered[:-1]) + (eol if len(rendered) > 1 else "") + last[:cut]
            fragment = shown[-1]
            fragment_text = last[:cut]
            shown = shown[:-1]
        hole = 0
        if rng.random() < 0.15:  # copytruncate: NCCL's next line lands at its old offset
            hole = rng.randrange(1, 5000)
            text = "\x00" * hole + text
        pattern = rng.choice(("/var/log/glm53/nccl.%h.%p.log", "/var/log/nccl.log", "/tmp/%h-%%-%p-%q", "/x/%p%"))
        cases.append(LogCase(lines, text, shown, fragment, fragment_text, hole, pattern, host, pid))
    return cases


def truth(case: LogCase) -> dict[str, object]:
    """What the shown lines hold, from the run that made them."""
    shown = case.visible
    # a line cut mid-line gives no value, but its words still say the run completed or died (when they are whole)
    cut = case.fragment
    completes = [line for line in shown if line.kind == "complete"]
    completes += [cut] if cut is not None and "Init COMPLETE" in case.fragment_text else []
    deaths = [line for line in shown if line.kind == "warn-fatal"]
    # a WARN cut mid-line is a death when what is left of its message cannot be the start of one NCCL carries on
    # after (src/transport/net_ib/*.cc `NET/IB : …`, init.cc `NCCL_WORK_FIFO_BYTES=…`, shm.cc, graph/xml.cc)
    if cut is not None and cut.kind == "warn-fatal" and "NCCL WARN" in case.fragment_text:
        left = case.fragment_text.split("NCCL WARN", 1)[1].strip()
        starts = ("NET/IB : ", "Unable to ", "NCCL_WORK_FIFO_BYTES=", "Ignoring SHM", "Skipping nvlink")
        if left and not any(s.startswith(left) or left.startswith(s) for s in starts):
            deaths.append(cut)
    vias = {str(line.value) for line in shown if line.kind == "channel"}
    comm = [line.value for line in shown if line.kind == "comm"]
    return {
        "versions": sorted({str(line.value) for line in shown if line.kind == "version"}),
        "transports": sorted({"/".join(v.split("/")[:2]) if v.startswith("NET") else v.split("/")[0] for v in vias}),
        "complete": bool(completes),
        "died": bool(deaths) and not completes,
        "comm": comm[0] if comm else None,
        "warnings": sum(1 for line in shown if line.kind.startswith("warn"))
        + (1 if cut is not None and cut.kind.startswith("warn") and "NCCL WARN" in case.fragment_text else 0),
        "hole": case.hole,
        "file": _reference_debug_file(case.pattern, case.hostname, case.pid),
    }


def reading(case: LogCase) -> dict[str, object]:
    """What golive reads of the log."""
    try:
        log = nccl.parse_nccl_log(case.text)
    except FactError:
        return {
            "versions": [],
            "transports": [],
            "complete": False,
            "died": False,
            "comm": None,
            "warnings": 0,
            "hole": case.hole,
            "file": nccl.debug_file_name(case.pattern, case.hostname, case.pid),
        }
    return {
        "versions": sorted(log.versions),
        "transports": sorted(log.transports),
        "complete": log.complete is not None,
        "died": log.died_at_init is not None,
        "comm": (log.ranks, log.nodes) if log.ranks is not None else None,
        "warnings": len(log.warnings),
        "hole": log.hole,
        "file": nccl.debug_file_name(case.pattern, case.hostname, case.pid),
    }


def run(count: int, seed: int) -> Agreement[LogCase]:
    started = time.monotonic()
    report: Agreement[LogCase] = Agreement("golive's NCCL log reader", "NCCL's log grammar (src/debug.cc, init.cc)")
    for case in generate(count, seed):
        want, got = truth(case), reading(case)
        diff = [k for k in want if want[k] != got[k]]
        report.record(Disagreement(diff[0], repr(got[diff[0]]), repr(want[diff[0]]), case) if diff else None)
    report.seconds = time.monotonic() - started
    return report
