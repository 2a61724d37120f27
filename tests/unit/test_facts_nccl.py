"""NCCL log and nccl-tests parsers: real two-GPU logs from the device machine (fixtures/recorded/h200x2-device) and
the two-station RoCE formats (fixtures/recorded/gb300-rail, reconstructed from NCCL's source: see PROVENANCE.md)."""

import re
from pathlib import Path

import nccl_cuts
import pytest

from golive.facts import FactError, nccl
from golive.facts.nccl import parse_nccl_log, parse_perf

RECORDED = Path(__file__).resolve().parents[2] / "fixtures/recorded"


def log(name: str):
    return parse_nccl_log((RECORDED / name).read_text())


def test_real_one_host_p2p_run_gdrdma_not_applicable():
    nccl = log("h200x2-device/nccl-p2p.txt")
    assert nccl.versions == ("2.28.9+cuda13.0",) and nccl.version == "2.28.9"
    assert nccl.transports == {"P2P"} and {c.via for c in nccl.channels} == {"P2P/CUMEM"}
    assert len(nccl.channels) == 48  # 24 channels, both directions
    assert nccl.one_host and nccl.nodes == 1 and nccl.gdrdma is None
    assert nccl.warnings == () and nccl.env == {"NCCL_NVLS_ENABLE": "0"}
    # the net plugin is still chosen (Socket: no RDMA device there), but nothing crossed it
    assert any(line.text == "Using network Socket" for line in nccl.networks)
    assert any(line.text == "NET/IB : No device found." for line in nccl.networks)


def test_real_one_host_shm_run():
    nccl = log("h200x2-device/nccl-shm.txt")
    assert nccl.transports == {"SHM"} and nccl.one_host and nccl.gdrdma is None
    assert nccl.channels[0].via == "SHM/direct/direct" and nccl.channels[0].direction is None
    assert nccl.env["NCCL_P2P_DISABLE"] == "1"


def test_real_forced_socket_run():
    nccl = log("h200x2-device/nccl-socket.txt")
    assert nccl.transports == {"NET/Socket"} and nccl.net_transports == {"NET/Socket"}
    assert not nccl.one_host and nccl.nodes == 2  # P2P and SHM off: NCCL treats each rank as its own node
    assert nccl.gdrdma is False
    assert {c.direction for c in nccl.channels} == {"send", "receive"}
    assert {k: nccl.env[k] for k in ("NCCL_IB_DISABLE", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE")} == {
        "NCCL_IB_DISABLE": "1",
        "NCCL_P2P_DISABLE": "1",
        "NCCL_SHM_DISABLE": "1",
    }


@pytest.mark.parametrize("name", ["gb300-rail/nccl-gdrdma.log", "gb300-rail/nccl-gdrdma-b.log"])
def test_two_station_roce_gdrdma(name):
    nccl = log(name)
    assert nccl.version == "2.30.7" and nccl.transports == {"NET/IB"} and nccl.gdrdma is True
    assert {c.via for c in nccl.channels} == {"NET/IB/0/GDRDMA(PCI)", "NET/IB/1/GDRDMA(PCI)"}
    assert nccl.env["NCCL_IB_HCA"] == "mlx5_0,mlx5_1" and nccl.env["NCCL_IB_GID_INDEX"] == "3"
    assert nccl.env["NCCL_SOCKET_IFNAME"] == "enp1s0f0np0"
    assert not nccl.one_host and nccl.nodes == 2 and nccl.warnings == ()
    assert any("NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE" in line.text for line in nccl.networks)


def test_socket_fallback():
    nccl = log("gb300-rail/nccl-socket-fallback.log")
    assert nccl.transports == {"NET/Socket"} and nccl.gdrdma is False and not nccl.one_host
    assert "NET/IB : No device found." in [line.text for line in nccl.networks]


def test_ib_without_gdrdma():
    nccl = log("gb300-rail/nccl-no-gdrdma.log")
    assert nccl.transports == {"NET/IB"} and nccl.gdrdma is False


def test_warn_line_with_line_number():
    nccl = log("gb300-rail/nccl-warn.log")
    [warn] = nccl.warnings
    text = (RECORDED / "gb300-rail/nccl-warn.log").read_text().splitlines()
    assert text[warn.number - 1].strip() == warn.text and "NCCL WARN Call to ibv_modify_qp failed" in warn.text
    assert text[warn.number - 2] == ""  # debug.cc starts a WARN with a newline


def test_wrong_version():
    assert log("gb300-rail/nccl-2.28.3.log").version == "2.28.3"
    mixed = parse_nccl_log(
        "a:1:1 [0] NCCL INFO NCCL version 2.30.7+cuda13.0\nb:2:2 [0] NCCL INFO NCCL version 2.28.3+cuda12.9\n"
    )
    assert mixed.version is None and mixed.versions == ("2.30.7+cuda13.0", "2.28.3+cuda12.9")


def test_proxy_rank_and_timestamp_forms():
    nccl = parse_nccl_log(
        "[2026-09-30 10:00:00] a:1:1 [0] NCCL INFO Channel 02/1 : 0[0] -> 1[0] [send] "
        "via NET/IB/1(2)/GDRDMA(PCI)/Shared\n"
    )
    assert nccl.channels[0].transport == "NET/IB" and nccl.gdrdma is True and nccl.channels[0].channel == 2


def test_not_an_nccl_log():
    with pytest.raises(FactError, match="NCCL_DEBUG=INFO"):
        parse_nccl_log("INFO 09-30 vLLM API server version 0.30.0\n")


def test_all_reduce_perf():
    perf = parse_perf((RECORDED / "gb300-rail/all_reduce_perf.txt").read_text())
    assert len(perf.rows) == 16 and perf.out_of_bounds == 0
    top = perf.rows[-1]
    assert (top.size, top.count, top.type, top.redop, top.root) == (8589934592, 2147483648, "float", "sum", -1)
    assert (top.busbw, top.wrong, top.in_busbw, top.in_wrong) == (44.00, 0, 43.56, 0)
    assert perf.avg_busbw == 19.6547


def test_all_reduce_perf_unchecked_and_truncated():
    row = "     1048576        262144     float     sum      -1    40.12   26.14   26.14    N/A    40.50   25.89   25.89    N/A\n"
    perf = parse_perf(row + "# Avg bus bandwidth    : 26.015 \n")
    assert perf.rows[0].wrong is None and perf.out_of_bounds is None
    with pytest.raises(FactError, match="Avg bus bandwidth"):
        parse_perf((RECORDED / "gb300-rail/all_reduce_perf-truncated.txt").read_text())


# --- logs from any source: the real logs re-emitted as operators hand them over --------------------------------------
# Each re-emission is generated here from the recorded logs, one function per source; it keeps the lines in place, so
# the parse must give the same facts at the same line numbers.

REAL_LOGS = sorted(
    str(p.relative_to(RECORDED))
    for pattern in ("gb300-rail/nccl-*.log", "h200x2-device/nccl-[ps]*.txt")
    for p in RECORDED.glob(pattern)
)


def docker_timestamps(text: str) -> str:
    """`docker logs --timestamps`: RFC 3339 nanosecond timestamp and a space before every line."""
    return "".join(f"2026-09-30T10:00:{n % 60:02d}.{n:09d}Z {line}\n" for n, line in enumerate(text.splitlines()))


def journald(text: str) -> str:
    """`journalctl -u glm53-flash -o short-iso`: timestamp, host, unit[pid]: before every line."""
    return "".join(f"2026-09-30T10:00:00+0000 gb300-a docker[4107]: {line}\n" for line in text.splitlines())


def without_prefix(text: str) -> str:
    """Pasted or shipped without NCCL's `host:pid:tid [dev] ` prefix."""
    return "".join(re.sub(r"^\S+:\d+:\d+ \[\d+\] ", "", line) + "\n" for line in text.splitlines())


def shipped_plain(text: str) -> str:
    """A shipper that kept only the message: no prefix and no `NCCL INFO` either (`NCCL WARN` lines kept)."""
    return "".join(re.sub(r"^\S+:\d+:\d+ \[\d+\] NCCL INFO ", "", line) + "\n" for line in text.splitlines())


def crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


def ansi(text: str) -> str:
    """A coloured console: NCCL INFO in green, WARN in red, a reset at the end of each line."""
    return "".join(
        line.replace("NCCL INFO", "\x1b[32mNCCL INFO\x1b[0m").replace("NCCL WARN", "\x1b[1;31mNCCL WARN") + "\x1b[0m\n"
        for line in text.splitlines()
    )


SOURCES = [
    docker_timestamps,
    journald,
    without_prefix,
    shipped_plain,
    crlf,
    ansi,
    lambda text: journald(ansi(crlf(text))),
]


def facts(nccl) -> tuple:
    return (
        nccl.versions,
        [(c.number, c.channel, c.src, c.dst, c.direction, c.via) for c in nccl.channels],
        [(n.number, n.text) for n in nccl.networks],
        [w.number for w in nccl.warnings],
        nccl.env,
        nccl.nodes,
        nccl.ranks,
        nccl.complete.number if nccl.complete else None,
        nccl.one_host,
        nccl.gdrdma,
    )


@pytest.mark.parametrize("name", REAL_LOGS)
@pytest.mark.parametrize(
    "source",
    SOURCES,
    ids=["docker-timestamps", "journald", "no-prefix", "shipped-plain", "crlf", "ansi", "journald+ansi+crlf"],
)
def test_a_log_reads_the_same_from_any_source(name, source):
    original = log(name)
    assert original.channels or original.versions  # the original itself is a real NCCL log, not an empty one
    again = parse_nccl_log(source((RECORDED / name).read_text()))
    mine, theirs = facts(original), facts(again)
    if source is shipped_plain:  # only messages that name themselves survive without `NCCL INFO`
        assert (theirs[0], theirs[1], theirs[5], theirs[6], theirs[8]) == (mine[0], mine[1], mine[5], mine[6], mine[8])
        return
    assert theirs == mine
    for warning in again.warnings:
        assert "NCCL WARN" in again.text_of(warning.number) and "\x1b" not in again.text_of(warning.number)


def test_the_first_lines_of_real_logs_cover_every_kind():
    """The table above is not vacuous: P2P, SHM, Socket, IB with GDRDMA, a WARN and a bootstrap death are in it."""
    kinds = {t for name in REAL_LOGS for t in log(name).transports}
    assert {"P2P", "SHM", "NET/Socket", "NET/IB"} <= kinds
    assert any(log(name).warnings for name in REAL_LOGS) and any(log(name).died_at_init for name in REAL_LOGS)


@pytest.mark.parametrize(
    "text, found",
    [
        ("", "found an empty file"),
        ("\n\n", "found an empty file"),
        (
            "INFO 09-30 10:00:00 api_server.py:1 vLLM API server version 0.32.0\nINFO ready\n",
            "found 2 other lines, the first: `INFO 09-30 10:00:00 api_server.py:1 vLLM API server version 0.32.0`",
        ),
        ("\x00\x01binary", "found binary data"),
    ],
)
def test_a_log_golive_cannot_read_is_one_line_saying_what_it_expected(text, found):
    with pytest.raises(FactError) as caught:
        parse_nccl_log(text)
    message = str(caught.value)
    assert "\n" not in message and "expected NCCL_DEBUG=INFO lines" in message and found in message, message


# --- the topology a log shows -----------------------------------------------------------------------------------------


def test_topology_of_real_runs():
    p2p, socket, gdr = (
        log("h200x2-device/nccl-p2p.txt"),
        log("h200x2-device/nccl-socket.txt"),
        log("gb300-rail/nccl-gdrdma.log"),
    )
    assert (p2p.nodes, p2p.ranks, p2p.one_host) == (1, 2, True)
    assert "nNodes 1" in p2p.text_of(p2p.topology.number)
    assert (socket.nodes, socket.ranks, socket.one_host) == (2, 2, False)
    assert (gdr.nodes, gdr.ranks, gdr.one_host, gdr.died_at_init) == (2, 2, False, None)
    assert "Init COMPLETE" in gdr.text_of(gdr.complete.number)


def test_a_run_that_died_at_bootstrap_is_not_a_one_host_run():
    died = log("gb300-rail/nccl-bootstrap-died.log")
    assert died.nodes is None and died.channels == () and not died.one_host
    assert died.died_at_init is not None and "socketStartConnect: Connect to 192.168.100.2" in died.died_at_init.text
    assert died.version == "2.30.7"  # printed before the bootstrap: still the run's version


# --- logs cut short: evidence, not a story ----------------------------------------------------------------------------
# Every real log, cut where operators' logs are cut (tests/nccl_cuts.py: after the bootstrap, mid-channels, after the
# last channel, the head rotated away, an excerpt) and behind each prefix shippers add: the parser reads what the cut
# holds, no more. A run died only where NCCL printed its death; a missing `Init COMPLETE` is a partial capture.

CUTS = nccl_cuts.cuts(list(nccl_cuts.KINDS))


@pytest.mark.parametrize("cut", CUTS, ids=lambda c: c.id)
def test_a_cut_log_is_read_as_what_it_holds(cut):
    nccl = parse_nccl_log(cut.text)
    assert [c.via for c in nccl.channels] == cut.vias
    for channel in nccl.channels:  # every channel quotes its own line
        assert f"via {channel.via}" in nccl.text_of(channel.number)
    net = cut.net_vias
    assert nccl.gdrdma == (all("/GDRDMA" in via for via in net) if net else None)
    assert (nccl.complete is not None, nccl.topology is not None) == (cut.complete, cut.topology)
    died = nccl.died_at_init
    assert (died is not None) == cut.death, died
    if died is not None:  # the death quotes NCCL's own death line, never a line that shows the run going on
        assert "NCCL WARN" in died.text and died.text == nccl.text_of(died.number).strip()
    assert nccl.partial == (not cut.complete and not cut.death)
    if nccl.partial:
        assert nccl.extent().startswith(("NCCL lines ", "one NCCL line"))


def test_the_cuts_cover_every_case_of_the_issue():
    """Not vacuous: partial logs with GDRDMA, RDMA without it and sockets, bootstrap-only ones, deaths that survive a
    head cut and WARNs a cut separates from `Init COMPLETE` but that the run outlived."""
    partial = [c for c in CUTS if not c.complete and not c.death]
    assert {c.kind for c in partial if c.net_vias and all("/GDRDMA" in v for v in c.net_vias)} >= {"gdrdma", "warn"}
    assert any(c.kind == "no-gdrdma" and c.net_vias for c in partial)
    assert any(c.kind == "socket" and c.net_vias for c in partial)
    assert {c.cut for c in partial if not c.vias} >= {"after-bootstrap"}
    assert {c.cut for c in CUTS if c.death} >= {"whole", "head-rotated-first-half", "tail-8"}
    assert any(c.kind == "warn" and c.holds("NCCL WARN") for c in partial)
    assert any(c.cut == "eager-before-init-complete" and c.topology for c in partial)


def test_a_healthy_real_log_holds_no_death_line():
    for name, kind in nccl_cuts.KINDS.items():
        if kind not in ("died", "warn"):
            assert parse_nccl_log((nccl_cuts.REPO / name).read_text()).deaths == (), name
    assert [d.number for d in log("gb300-rail/nccl-warn.log").deaths] == [31]  # its one WARN, which it outlived


def test_a_file_without_nccl_lines_is_not_read_as_a_log():
    """h200-device/nccl.txt names libnccl (a file listing, pip, torch's version) but holds no NCCL line."""
    with pytest.raises(FactError, match="no NCCL line in the log"):
        log("h200-device/nccl.txt")


BOOTSTRAP = "".join(
    line + "\n"
    for line in nccl_cuts.after_bootstrap(nccl_cuts.lines_of("fixtures/recorded/gb300-rail/nccl-gdrdma.log")) or []
)


@pytest.mark.parametrize(
    "death",
    [
        # NCCL's own WARN (src/debug.cc), then its callers' words for ncclGetErrorString (src/init.cc)
        "gb300-a:4107:4107 [0] include/alloc.h:125 NCCL WARN Cuda failure 'out of memory'",
        "[rank0]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"
        ":1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.30.7",
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
        "ncclInternalError: Internal check failed.",
        "(VllmWorker rank=0 pid=4107) ERROR RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO "
        "for details)",
        "RuntimeError: NCCL error: remote process exited or there was a network error",
        "gb300-a: Test NCCL failure common.cu:1279 'unhandled system error (run with NCCL_DEBUG=INFO for details) / '",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        "Fatal Python error: Aborted",
    ],
)
def test_a_run_died_where_it_says_so(death):
    nccl = parse_nccl_log(BOOTSTRAP + death + "\n")
    assert nccl.died_at_init is not None and nccl.died_at_init.text == death.strip() and not nccl.partial
    assert nccl.versions == ("2.30.7+cuda13.0",)  # torch's `…, NCCL version 2.30.7` is a death line, not a version


@pytest.mark.parametrize(
    "line",
    [
        "gb300-a:4107:4107 [0] NCCL INFO transport/net_ib.cc:852 -> 3",  # NCCL unwinding an error it recovers from
        "gb300-a:4107:4107 [0] NCCL INFO NET/IB : No device found.",
        "gb300-a:4107:4107 [0] NCCL INFO Failed to initialize NET plugin IB",
        "INFO 09-30 10:00:00 [pynccl.py:70] vLLM is using nccl==2.30.7",
        "",
    ],
)
def test_a_run_did_not_die_where_a_line_is_missing(line):
    nccl = parse_nccl_log(BOOTSTRAP + line + "\n")
    assert nccl.died_at_init is None and nccl.partial and nccl.deaths == ()


def test_a_death_the_run_outlived_is_not_where_it_died():
    """A WARN with channels connecting after it (nccl-warn.log without its head): the run went on."""
    lines = nccl_cuts.lines_of("fixtures/recorded/gb300-rail/nccl-warn.log")
    nccl = parse_nccl_log("\n".join(lines[29:]))
    assert nccl.complete is None and len(nccl.warnings) == 1 and nccl.died_at_init is None and nccl.partial


# --- second round: a line cut mid-line, WARNs NCCL carries on after, ranks interleaved ---------------------------------


@pytest.mark.parametrize("name", REAL_LOGS)
def test_a_last_line_cut_mid_line_gives_no_value(name):
    """Every line of every real log cut at every point, the file ending there without its newline (a copy taken while
    NCCL wrote, `head -c`): the cut line yields no channel, version or nNodes; the whole lines before it read as they
    do whole. A cut `via NET/IB/1/GDR` is no channel without GPU Direct, `NCCL version 2.3` no version."""
    lines = (RECORDED / name).read_text().split("\n")
    valued = [i for i, line in enumerate(lines) if nccl_cuts.CHANNEL.search(line) or "NCCL version" in line]
    valued += [i for i, line in enumerate(lines) if nccl_cuts.COMM.search(line)]
    assert valued, name  # not vacuous: the log holds lines with values
    for i in valued:
        head = "\n".join(lines[:i]) + "\n"
        try:
            whole = parse_nccl_log(head)
        except FactError:
            continue  # nothing before it: there is no log to compare with
        for at in range(len(lines[i]) - 1, 0, -7):
            cut = parse_nccl_log(head + lines[i][:at])
            assert (cut.versions, cut.channels, cut.nodes, cut.gdrdma) == (
                whole.versions,
                whole.channels,
                whole.nodes,
                whole.gdrdma,
            ), (i, lines[i][:at])
            assert cut.fragment is not None and cut.fragment.number == i + 1


def test_a_whole_last_line_without_its_newline_still_says_what_it_can():
    """The newline is the only sign of a whole line: a death and `Init COMPLETE` (tokens that end the line's meaning)
    still count on a last line without it; the line is kept for quoting."""
    died = nccl_cuts.lines_of("fixtures/recorded/gb300-rail/nccl-bootstrap-died.log")
    warn = next(i for i, line in enumerate(died) if "NCCL WARN" in line)
    nccl = parse_nccl_log("\n".join(died[: warn + 1]))
    assert nccl.died_at_init is not None and "socketStartConnect" in nccl.died_at_init.text
    ok = nccl_cuts.lines_of("fixtures/recorded/gb300-rail/nccl-gdrdma.log")
    done = next(i for i, line in enumerate(ok) if "Init COMPLETE" in line)
    assert parse_nccl_log("\n".join(ok[: done + 1])).complete is not None


HEALTHY = nccl_cuts.lines_of("fixtures/recorded/gb300-rail/nccl-gdrdma.log")
AT = {  # where a line goes in the healthy log: after the bootstrap, after the topology line, after the last channel
    "after-bootstrap": next(i for i, line in enumerate(HEALTHY) if "Init START" in line) + 1,
    "after-topology": next(i for i, line in enumerate(HEALTHY) if nccl_cuts.COMM.search(line)) + 1,
}
PREFIX = "gb300-a:4107:4190 [0] "
# WARNs in whose own words NCCL carries on (NVIDIA/nccl, file:line of the WARN call at 5067397 or the tag named)
CARRIES_ON = [
    "transport/net_ib/common.cc:179 NCCL WARN NET/IB : mlx5_1:1 Got non-fatal async event: port active(9)",
    "transport/net_ib/common.cc:153 NCCL WARN NET/IB : mlx5_0:1 GID table changed",
    "transport/net_ib.cc:101 NCCL WARN NET/IB : mlx5_0:1 Got async event : GID table change",  # v2.21.5
    "transport/net_ib/init.cc:334 NCCL WARN NET/IB : Unable to open device mlx5_bond_0",
    "transport/net_ib/init.cc:360 NCCL WARN NET/IB : Unable to query port_num 2",
    "init.cc:621 NCCL WARN NCCL_WORK_FIFO_BYTES=1000 is being ignored because it is not a power of 2.",
    "transport/shm.cc:298 NCCL WARN Ignoring SHM locality, must be 1 (sender side) or 2 (receiver side, default)",
    "graph/search.cc:960 NCCL WARN Could not find a path for pattern 4, falling back to simple order",  # v2.18.3
    "graph/xml.cc:628 NCCL WARN No NVML device handle. Skipping nvlink detection.",  # v2.18.3
]
# and WARNs that end the run (the same files): each is a death where nothing of its process follows
FATAL = [
    "transport/net_ib/common.cc:123 NCCL WARN NET/IB : mlx5_0:1 async fatal event: local catastrophic error",
    "misc/ibvwrap.cc:376 (wrap_ibv_modify_qp) NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out",
    "include/alloc.h:125 NCCL WARN Cuda failure 'out of memory'",
    "graph/paths.cc:396 NCCL WARN P2P is disabled between NVLINK connected GPUs 0 and 1. This should not be the case "
    "given their connectivity, and is probably due to a hardware issue. If you still want to proceed, you can set "
    "NCCL_IGNORE_DISABLED_P2P=1.",
    "init.cc:1339 NCCL WARN Detected mixed local Net device counts across ranks (min 1, max 2). Set "
    "NCCL_IGNORE_NET_MISMATCH=1 to continue.",
]


@pytest.mark.parametrize("at", AT)
@pytest.mark.parametrize("warn", CARRIES_ON + FATAL, ids=lambda warn: warn.split()[0])
def test_a_warn_is_a_death_only_where_nccl_does_not_carry_on(warn, at):
    """Each WARN in the healthy log, the log cut right after it, and cut at the next line of init going on (the
    topology line, or a ring): a WARN that says NCCL carries on is never a death; one that does not is a death until
    its process prints init going on."""
    line = PREFIX + warn
    cut = "\n".join([*HEALTHY[: AT[at]], "", line]) + "\n"
    later = next(x for x in HEALTHY[AT[at] :] if nccl_cuts.COMM.search(x) or "Channel " in x)
    went_on = "\n".join([*HEALTHY[: AT[at]], "", line, later]) + "\n"
    nccl, on = parse_nccl_log(cut), parse_nccl_log(went_on)
    assert [w.text for w in nccl.warnings] == [line] == [w.text for w in on.warnings]
    if warn in CARRIES_ON:
        assert nccl.deaths == () and nccl.died_at_init is None and nccl.partial
    else:
        assert nccl.died_at_init is not None and nccl.died_at_init.text == line and not nccl.partial
        progress = on.outlived(on.deaths[0])
        assert progress is not None and progress.text == later.strip(), later
    assert on.died_at_init is None and on.partial


P2P = nccl_cuts.lines_of("fixtures/recorded/h200x2-device/nccl-p2p.txt")  # two ranks (pids 612, 613) interleaved


def test_a_rank_that_died_is_not_outlived_by_the_other_rank():
    """The real two-rank log, rank 1 (pid 613) dying after its topology line while rank 0 (pid 612) goes on printing
    its rings, cut before `Init COMPLETE`: rank 1 died there, whatever rank 0 printed after. The same WARN followed
    by rank 1's own line is outlived."""
    topology = next(i for i, line in enumerate(P2P) if line.startswith("vm:613:613") and nccl_cuts.COMM.search(line))
    death = "vm:613:613 [1] transport/p2p.cc:275 NCCL WARN Cuda failure 'peer access is not supported'"
    complete = next(i for i, line in enumerate(P2P) if "Init COMPLETE" in line)
    rest = [line for line in P2P[topology + 1 : complete] if line.startswith("vm:612:")]
    assert any("Channel 00/24 : 0 1" in line for line in rest)  # rank 0 goes on: its rings, after rank 1's WARN
    nccl = parse_nccl_log("\n".join([*P2P[: topology + 1], "", death, *rest]) + "\n")
    assert nccl.died_at_init is not None and nccl.died_at_init.text == death
    own = next(line for line in P2P[topology + 1 :] if line.startswith("vm:613:613") and "Trees [" in line)
    outlived = parse_nccl_log("\n".join([*P2P[: topology + 1], "", death, *rest, own]) + "\n")
    assert outlived.died_at_init is None and outlived.partial
    bare = parse_nccl_log("\n".join([*P2P[: topology + 1], "", death.replace("vm:613:613 [1] ", ""), *rest]) + "\n")
    assert bare.died_at_init is None  # without NCCL's prefix the WARN names no process: the run's lines go on


def test_a_run_that_died_without_a_channel_says_where():
    """Deaths with no channel line in the log: NCCL's Cuda failure, a verbs call failing, the caller's
    ncclInternalError, nccl-tests' CUDA failure; each is the line quoted."""
    head = "\n".join(HEALTHY[: AT["after-topology"]]) + "\n"
    for death in (
        PREFIX + "include/alloc.h:125 NCCL WARN Cuda failure 'out of memory'",
        PREFIX + "misc/ibvwrap.cc:106 (wrap_ibv_create_qp) NCCL WARN Call to ibv_create_qp failed with 12 Cannot "
        "allocate memory",
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
        "internal error - please report this issue to the NCCL developers, NCCL version 2.30.7",
        "ncclInternalError: Internal check failed.",
        "gb300-a: Test CUDA failure common.cu:891 'out of memory'",
    ):
        nccl = parse_nccl_log(head + "\n" + death + "\n")
        assert nccl.channels == () and nccl.died_at_init is not None and nccl.died_at_init.text == death, death


def test_a_version_line_is_read_only_whole():
    """NCCL prints its version as major.minor.patch (src/init.cc, showVersion): `NCCL version 2.30` is a line cut short,
    not a version."""
    assert parse_nccl_log("a:1:1 [0] NCCL INFO NCCL version 2.30\n").versions == ()
    assert parse_nccl_log("a:1:1 [0] NCCL INFO NCCL version 2.30.7+cuda13.0\n").versions == ("2.30.7+cuda13.0",)


# NCCL_DEBUG_FILE as NCCL expands it: github NVIDIA/nccl src/debug.cc ncclDebugInit (`%h` the host name cut at its
# first `.` with `%` and `/` as `-`, getHostNameForLog; `%p` the pid; `%%` a `%`; anything else echoed)
DEBUG_FILES = [
    ("/var/log/glm53/nccl.%h.%p.log", "gb300-a", 4107, "/var/log/glm53/nccl.gb300-a.4107.log"),
    ("/var/log/nccl.%h.log", "gb300-a.lab.example.com", 1, "/var/log/nccl.gb300-a.log"),
    ("/tmp/%h-%p-%%-%q.log", "a%b/c", 7, "/tmp/a-b-c-7-%-%q.log"),
    ("/tmp/nccl.log%", "h", 1, "/tmp/nccl.log%"),
    ("/tmp/plain.log", "h", 1, "/tmp/plain.log"),
]


@pytest.mark.parametrize("pattern, host, pid, name", DEBUG_FILES, ids=[d[0] for d in DEBUG_FILES])
def test_nccl_debug_file_is_expanded_as_nccl_expands_it(pattern, host, pid, name):
    assert nccl.debug_file_name(pattern, host, pid) == name
    assert nccl.debug_file_regex(pattern.rsplit("/", 1)[-1], host).fullmatch(name.rsplit("/", 1)[-1])


def test_a_copytruncate_hole_is_named_not_quoted():
    """logrotate's copytruncate empties the file while NCCL keeps its offset: its next line lands past a hole of NUL
    bytes. golive says so, and quotes the lines after it without the NULs."""
    log = nccl.parse_nccl_log("\x00" * 160 + "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0\n")
    assert log.hole == 160 and "\x00" not in log.first.text
    assert log.extent().startswith("a hole of 160 NUL bytes at its start: logrotate's copytruncate emptied the file")
    with pytest.raises(FactError, match="found 4,096 NUL bytes and nothing after them"):
        nccl.parse_nccl_log("\x00" * 4096)
