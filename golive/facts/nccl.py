"""NCCL debug logs (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET,ENV) and nccl-tests `all_reduce_perf` output.

Formats from NCCL's source (github NVIDIA/nccl, v2.30.7-1): src/debug.cc (line prefix `host:pid:tid [dev] NCCL INFO`,
`… [dev] file:line (func) NCCL WARN …`), src/init.cc (`NCCL version 2.30.7+cuda13.0`, `Using network IB`),
src/transport/net.cc (`Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA(PCI)`), src/transport/p2p.cc
(`via P2P/CUMEM`, `P2P/IPC`, `P2P/direct pointer`), src/transport/shm.cc (`via SHM/direct`), src/misc/param.cc
(`NCCL_IB_GID_INDEX set by environment to 3.`), src/transport/net_ib/init.cc (`NET/IB : Using [0]mlx5_0:1/RoCE …`,
`NCCL_IB_HCA set to …`); nccl-tests v2.19.6 src/util.cu for the table.

Lines are found by NCCL's own tokens wherever they sit: after the `host:pid:tid [dev]` prefix or without it (pasted),
behind `docker logs --timestamps` or journald prefixes, with CRLF endings or ANSI colours (stripped first).

A log is evidence, not a story: a run died only where the log holds what NCCL (or its caller) prints when it dies
(`NCCL WARN …`, `NCCL error in: …`, `ncclSystemError`, an abort), never because a line is missing, and not where the
same process shows init going on after it, nor at a WARN whose own words say NCCL carries on (`Got non-fatal async
event`, `… is being ignored …`). A log without `Init COMPLETE` and without such a line is a partial capture (an
operator's excerpt, a log cut by rotation or taken mid-init): every fact it holds still counts, and a fact it lacks is
unknown (`NcclLog.partial`). A last line without its newline may be cut mid-line: it can say the run died, but no
value (a version, a channel's transport) is read from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from golive.core.verdict import counted
from golive.facts import FactError

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_LEVEL = re.compile(r"\bNCCL (INFO|WARN)\b ?")
# NCCL messages that identify themselves even where a shipper dropped `NCCL INFO` (src/init.cc, src/transport.cc)
_BARE = re.compile(
    r"NCCL version \S+|Channel \d+(?:/\d+)? : \d+\[\d+\] -> \d+\[\d+\]"
    r"|comm 0x[0-9a-f]+ rank \d+ nRanks \d+ nNodes \d+"
)
_CHANNEL = re.compile(
    r"Channel (\d+)(?:/\d+)? : (\d+)\[\d+\] -> (\d+)\[\d+\]"
    r"(?: \[(send|receive)\])? via (\S+(?: pointer\S*)?)"
)
_COMM = re.compile(r"comm 0x[0-9a-f]+ rank (\d+) nRanks (\d+) nNodes (\d+)")
# NCCL's own `host:pid:tid [dev]` (src/debug.cc): which process printed a line; a rank's threads share its pid
_PROCESS = re.compile(r"(\S+):(\d+):\d+ \[\d+\] ")
# Lines only an init that is still going prints (src/init.cc: `Init START`, the comm summary, the rings and trees,
# `Init COMPLETE`; src/transport.cc and net.cc: channels connecting): a death line its process prints one of these
# after is not where it died.
_PROGRESS = re.compile(
    r"Init (?:START|COMPLETE)\b|comm 0x[0-9a-f]+ rank \d+ nRanks \d+ nNodes \d+|Channel \d+(?:/\d+)? : \d+"
    r"|Trees \[|Connected all (?:rings|trees)"
)
# WARNs in whose own words NCCL carries on: src/transport/net_ib/common.cc `Got non-fatal async event`, `GID table
# changed` (2.21 and older: `Got async event : …`, only logged); src/transport/net_ib/init.cc `Unable to open device`,
# `Unable to query port_num` (the next device is tried); src/init.cc `NCCL_WORK_FIFO_BYTES=… is being ignored …`;
# src/transport/shm.cc `Ignoring SHM locality …`; src/graph/search.cc `… falling back to simple order`;
# src/graph/xml.cc `Skipping nvlink detection`; src/graph/tuning.cc `…, ignoring NCCL_ALGO=COLLNET`.
_CARRIES_ON = re.compile(
    r"non-fatal|Got async event|GID table changed|Unable to (?:open device|query port_num)"
    r"|\bignor(?:ed|ing)\b|falling back|\bskipping\b",
    re.IGNORECASE,
)
# What a run prints when it dies. NCCL's WARN level is "messages indicating a fatal error" (src/debug.cc, NCCL_DEBUG);
# the error strings are ncclGetErrorString's (src/init.cc: `unhandled system error (run with NCCL_DEBUG=INFO for
# details)`, `internal error - please report this issue …`, `remote process exited or there was a network error`), as
# callers raise them: torch `torch.distributed.DistBackendError: NCCL error in: …ProcessGroupNCCL.cpp:…` then
# `ncclSystemError: …`, vLLM's pynccl `NCCL error: …`, nccl-tests `Test NCCL failure common.cu:…`; and a process
# abort (libstdc++ `terminate called after throwing …`, `Fatal Python error: Aborted`, `Aborted (core dumped)`).
# NCCL's `file:line -> N` trail is not one: it also unwinds errors NCCL recovers from (`net_ib.cc:852 -> 3`, IB off).
_DEATH = re.compile(
    r"\bNCCL WARN\b|\bNCCL (?:error|Error|failure)\b|\bDistBackendError\b"
    r"|\bnccl(?:UnhandledCuda|System|Internal|InvalidArgument|InvalidUsage|Remote)Error\b"
    r"|unhandled (?:system|cuda) error|internal error - please report"
    r"|remote process exited or there was a network error|\bTest CUDA failure\b"
    r"|terminate called after throwing|Fatal Python error: Aborted|\bAborted \(core dumped\)"
)


@dataclass(frozen=True)
class Line:
    number: int  # 1-based line number in the log
    text: str


@dataclass(frozen=True)
class Channel:
    number: int
    channel: int
    src: int  # ranks
    dst: int
    direction: str | None  # send / receive on NET; None for P2P and SHM
    via: str  # NET/IB/0/GDRDMA(PCI), NET/Socket/0, P2P/CUMEM, P2P/IPC, SHM/direct …

    @property
    def transport(self) -> str:
        """NET/IB, NET/Socket (or another net plugin's name), P2P, SHM, COLLNET."""
        parts = self.via.split("/")
        return "/".join(parts[:2]) if parts[0] == "NET" else parts[0]

    @property
    def gdrdma(self) -> bool:
        return "/GDRDMA" in self.via  # coherent (C2C) GPUs print GDRDMA(PCI): match the substring


@dataclass(frozen=True)
class NcclLog:
    versions: tuple[str, ...]  # every distinct `NCCL version …` seen, e.g. ("2.30.7+cuda13.0",)
    channels: tuple[Channel, ...]
    networks: tuple[Line, ...]  # `NET/IB : Using …`, `NET/Socket : Using …`, `Using network IB`, …
    warnings: tuple[Line, ...]  # `NCCL WARN` lines
    env: dict[str, str]  # `NCCL_X set by environment to V.` / `NCCL_IB_HCA set to V`
    nodes: int | None  # `nNodes N` from the comm summary line
    ranks: int | None = None  # `nRanks N` from the same line
    topology: Line | None = None  # that line (`comm 0x… rank 0 nRanks 2 nNodes 2 …`)
    complete: Line | None = None  # the first `Init COMPLETE`: the communicator was ready
    lines: tuple[str, ...] = ()  # every line as read (colours and CR removed), for quoting by number
    last: Line | None = None  # the last NCCL line (or death line): where the log ends
    deaths: tuple[Line, ...] = ()  # what a dying run prints (a WARN, NCCL error strings, aborts): see _DEATH
    first: Line | None = None  # the first NCCL line (or death line): where the log starts
    progress: tuple[Line, ...] = ()  # lines that show init going on (see _PROGRESS), to judge a death line by
    fragment: Line | None = None  # the last line, when the text ends without its newline: maybe cut mid-line
    hole: int = 0  # NUL bytes the text starts with: logrotate's copytruncate cut it while NCCL kept its offset

    def text_of(self, number: int) -> str:
        return self.lines[number - 1].strip() if 0 < number <= len(self.lines) else ""

    def outlived(self, death: Line) -> Line | None:
        """The first line after `death` that shows init going on in the same process (by NCCL's `host:pid`; a line
        either of which lacks that prefix counts for the run): the process went on, so it did not die there."""
        dying = _process(death.text)
        return next(
            (
                p
                for p in self.progress
                if p.number > death.number and (dying is None or _process(p.text) in (None, dying))
            ),
            None,
        )

    @property
    def died_at_init(self) -> Line | None:
        """The line where the run says it died before NCCL finished init: its first death line (a WARN that does not
        say NCCL carries on, an NCCL error, an abort; see _DEATH) with no `Init COMPLETE` in the log and no line after
        it that shows the same process's init going on (see `outlived`). None otherwise: a missing `Init COMPLETE`
        alone is a log cut short (see `partial`), not a dead run."""
        if self.complete is not None:
            return None
        return next((d for d in self.deaths if self.outlived(d) is None), None)

    @property
    def partial(self) -> bool:
        """Neither `Init COMPLETE` nor a death: the log holds part of a run (an excerpt, a log cut by rotation or taken
        mid-init). Facts it shows count; facts it lacks are unknown, not failed."""
        return self.complete is None and self.died_at_init is None

    def extent(self) -> str:
        """Where the log's NCCL lines start and end, for a message: `lines 30–33, from `…` to `…``."""
        if self.hole:
            return f"{self.holed()}; after them, {self._extent()}"
        return self._extent()

    def holed(self) -> str:
        """`a hole of 4,096 NUL bytes at its start (…)`, for a message; "" without one."""
        if not self.hole:
            return ""
        return (
            f"a hole of {self.hole:,} NUL bytes at its start: logrotate's copytruncate emptied the file while NCCL "
            f"kept writing at its offset, so what it wrote before is gone"
        )

    def _extent(self) -> str:
        if self.first is None or self.last is None:
            return "no NCCL line"
        if self.first == self.last:
            return f"one NCCL line, line {self.first.number}: `{_short(self.first.text)}`"
        return (
            f"NCCL lines {self.first.number}–{self.last.number}, from `{_short(self.first.text)}` to "
            f"`{_short(self.last.text)}`"
        )

    @property
    def version(self) -> str | None:
        """The one NCCL version, without the +cuda suffix; None when ranks disagree or none was printed."""
        bare = {v.split("+")[0] for v in self.versions}
        return bare.pop() if len(bare) == 1 else None

    @property
    def transports(self) -> frozenset[str]:
        return frozenset(c.transport for c in self.channels)

    @property
    def net_transports(self) -> frozenset[str]:
        return frozenset(t for t in self.transports if t.startswith("NET/"))

    @property
    def one_host(self) -> bool:
        """All ranks on one host: NCCL says `nNodes 1`, or (without that line) channels exist and none crosses a
        network. A log with neither says nothing about hosts (a run that died at bootstrap): False."""
        if self.nodes is not None:
            return self.nodes == 1
        return bool(self.channels) and not self.net_transports

    @property
    def gdrdma(self) -> bool | None:
        """GPU Direct RDMA on every network channel; None (not applicable) when nothing crossed a network."""
        net = [c for c in self.channels if c.transport.startswith("NET/")]
        return all(c.gdrdma for c in net) if net else None


@dataclass
class _InfoLines:
    """What NCCL's INFO lines say, as they are read: its version, the channels, the network, its environment, the
    communicator's shape and when init completed."""

    versions: list[str] = field(default_factory=list)
    channels: list[Channel] = field(default_factory=list)
    networks: list[Line] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    nodes: int | None = None
    ranks: int | None = None
    topology: Line | None = None
    complete: Line | None = None

    def read(self, number: int, message: str, line: Line) -> None:
        """One line's message (after NCCL's `host:pid:tid [rank] NCCL INFO` prefix); `line`, the whole line."""
        if match := re.fullmatch(r"NCCL version (\d+\.\d+\.\d+\S*)(?: .*)?", message):  # src/init.cc: always x.y.z
            if match.group(1) not in self.versions:
                self.versions.append(match.group(1))
        elif match := _CHANNEL.match(message):
            self.channels.append(
                Channel(
                    number,
                    int(match.group(1)),
                    int(match.group(2)),
                    int(match.group(3)),
                    match.group(4),
                    match.group(5),
                )
            )
        elif re.match(r"NET/\S+ : (Using|No device)|Using network ", message):
            self.networks.append(Line(number, message))
        elif match := re.fullmatch(r"(NCCL_\w+) set (?:by environment )?to (.*?)\.?", message):
            self.env[match.group(1)] = match.group(2)
        elif match := _COMM.search(message):
            self.ranks, self.nodes = int(match.group(2)), int(match.group(3))
            self.topology = self.topology or line
        elif "Init COMPLETE" in message and self.complete is None:
            self.complete = line


def parse_nccl_log(text: str) -> NcclLog:
    """An NCCL INFO log (one or many ranks interleaved, as vLLM or torchrun print it), from any source."""
    info = _InfoLines()
    warnings: list[Line] = []
    first: Line | None = None
    last: Line | None = None
    deaths: list[Line] = []
    progress: list[Line] = []
    hole = len(text) - len(text.lstrip("\x00"))  # copytruncate: the writer's next line lands at its old offset
    text = text[hole:]
    lines = tuple(_ANSI.sub("", raw).rstrip("\r") for raw in text.split("\n"))
    fragment = len(lines) if lines[-1].strip() else None  # no newline after it: it may stop mid-line
    for number, line in enumerate(lines, 1):
        level = _LEVEL.search(line)
        if _DEATH.search(line):  # also torch's, vLLM's or the shell's words, which carry no NCCL token
            last = Line(number, line.strip())
            first = first or last
            if level and level.group(1) == "WARN":
                warnings.append(last)
                if _CARRIES_ON.search(line[level.end() :]):
                    continue  # a WARN, not a death (see _CARRIES_ON)
                if number == fragment and _may_carry_on(line[level.end() :]):
                    continue  # cut mid-line where the words that say NCCL carries on may be the ones cut off
            deaths.append(last)
            continue  # a death line is that and nothing else (torch's `…, NCCL version 2.21.5` is no version line)
        if level:
            message = line[level.end() :].strip()
        elif bare := _BARE.search(line):
            message = line[bare.start() :].strip()
        else:
            continue
        last = Line(number, line.strip())
        first = first or last
        if number == fragment and "Init COMPLETE" not in message:
            continue  # `…via NET/IB/1/GDR`, `NCCL version 2.3`: a value cut short is no value
        if _PROGRESS.search(message):
            progress.append(last)
        info.read(number, message, last)
    if last is None:
        raise FactError(_unreadable(text, lines, hole))
    return NcclLog(
        tuple(info.versions),
        tuple(info.channels),
        tuple(info.networks),
        tuple(warnings),
        info.env,
        info.nodes,
        info.ranks,
        info.topology,
        info.complete,
        lines,
        last,
        tuple(deaths),
        first,
        tuple(progress),
        Line(fragment, lines[-1].strip()) if fragment else None,
        hole,
    )


# how the WARNs NCCL carries on after begin (see _CARRIES_ON: src/transport/net_ib, init.cc, shm.cc, graph/xml.cc)
_CARRY_ON_STARTS = ("NET/IB : ", "Unable to ", "NCCL_WORK_FIFO_BYTES=", "Ignoring SHM", "Skipping nvlink")


def _may_carry_on(message: str) -> bool:
    """A WARN's message cut mid-line could still have been one NCCL carries on after: nothing of it is left, or what
    is left is the start of one of those (`NET/IB : mlx5_0:1 Got` may have gone on `non-fatal async event`)."""
    said = message.strip()
    return not said or any(start.startswith(said) or said.startswith(start) for start in _CARRY_ON_STARTS)


def _process(text: str) -> tuple[str, str] | None:
    """(host, pid) of NCCL's `host:pid:tid [dev]` prefix; None for a line without it (a caller's, or shipped bare)."""
    match = _PROCESS.search(text)
    return (match.group(1), match.group(2)) if match else None


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit] + " …"


def _unreadable(text: str, lines: tuple[str, ...], hole: int = 0) -> str:
    """One line: what an NCCL log looks like, and what this file holds instead."""
    expected = (
        "expected NCCL_DEBUG=INFO lines (`… NCCL INFO NCCL version 2.30.7+cuda13.0`, `… NCCL INFO Channel "
        "00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA`)"
    )
    if hole and re.search(r"[\x00-\x08]", text[:4096]):
        return f"no NCCL line in the log: {expected}; found binary data (compressed? decompress it first)"
    if hole and not text.strip():
        return (
            f"no NCCL line in the log: {expected}; found {hole:,} NUL bytes and nothing after them: the file was "
            f"truncated (logrotate's copytruncate) while its writer kept its offset, and nothing was written since"
        )
    if not text.strip():
        return f"no NCCL line in the log: {expected}; found an empty file"
    if text.startswith("\x1f\ufffd") or "\x00" in text[:4096]:
        return f"no NCCL line in the log: {expected}; found binary data (compressed? decompress it first)"
    shown = [line.strip() for line in lines if line.strip()]
    return (
        f"no NCCL line in the log: {expected}; found {counted(len(shown), 'other line')}, the first: "
        f"`{shown[0][:120]}` (was NCCL_DEBUG=INFO set for this run?)"
    )


@dataclass(frozen=True)
class PerfRow:
    size: int  # bytes
    count: int  # elements
    type: str
    redop: str
    root: int
    time_us: float  # out-of-place
    algbw: float  # GB/s
    busbw: float
    wrong: int | None  # None when nccl-tests ran without checking (N/A)
    in_time_us: float  # in-place
    in_algbw: float
    in_busbw: float
    in_wrong: int | None


@dataclass(frozen=True)
class PerfResult:
    rows: tuple[PerfRow, ...]
    avg_busbw: float  # `# Avg bus bandwidth    : 123.45`, GB/s
    out_of_bounds: int | None  # `# Out of bounds values : 0 OK`


def parse_perf(text: str) -> PerfResult:
    """nccl-tests `all_reduce_perf -b 8 -e 8G -f 2 -g 1` stdout (any *_perf of the same table)."""
    rows = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 13 and fields[0].isdigit():
            try:
                wrong = [None if f == "N/A" else int(float(f)) for f in (fields[8], fields[12])]
                rows.append(
                    PerfRow(
                        int(fields[0]),
                        int(fields[1]),
                        fields[2],
                        fields[3],
                        int(fields[4]),
                        float(fields[5]),
                        float(fields[6]),
                        float(fields[7]),
                        wrong[0],
                        float(fields[9]),
                        float(fields[10]),
                        float(fields[11]),
                        wrong[1],
                    )
                )
            except ValueError:
                raise FactError(f"nccl-tests row does not parse: {line.strip()[:100]!r}") from None
    avg = re.search(r"^# Avg bus bandwidth\s*: ([\d.eE+-]+)", text, flags=re.MULTILINE)
    if not avg:
        raise FactError("nccl-tests output has no `# Avg bus bandwidth :` line (did the test finish?)")
    oob = re.search(r"^# Out of bounds values\s*: (\d+)", text, flags=re.MULTILINE)
    return PerfResult(tuple(rows), float(avg.group(1)), int(oob.group(1)) if oob else None)


# --- NCCL_DEBUG_FILE: where NCCL writes its log (github NVIDIA/nccl, src/debug.cc ncclDebugInit) --------------------


def log_hostname(hostname: str) -> str:
    """The host name NCCL puts in its log file names and line prefixes (src/debug.cc getHostNameForLog: cut at the
    first `.`, every `%` and `/` a `-`)."""
    return hostname.strip().split(".", 1)[0].replace("%", "-").replace("/", "-")


def debug_file_name(pattern: str, hostname: str, pid: int | None = None) -> str:
    """NCCL_DEBUG_FILE expanded as NCCL expands it (src/debug.cc ncclDebugInit): `%h` is the host name (log_hostname),
    `%p` the process id, `%%` a `%`, any other `%X` stays as written (a `%` at the very end too). With `pid` None, a
    `%p` stays `%p` (see debug_file_regex)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        i += 1
        if c != "%":
            out.append(c)
            continue
        nxt = pattern[i : i + 1]
        i += 1
        if nxt == "%":
            out.append("%")
        elif nxt == "h":
            out.append(log_hostname(hostname))
        elif nxt == "p":
            out.append("%p" if pid is None else str(pid))
        else:
            out.append("%" + nxt)
    return "".join(out)


def debug_file_regex(pattern: str, hostname: str) -> re.Pattern[str]:
    """The file names NCCL_DEBUG_FILE gives this host's processes, whatever their pid: `%p` any number."""
    name = debug_file_name(pattern, hostname)
    return re.compile("\\d+".join(re.escape(part) for part in name.split("%p")))
