"""The NCCL checks on logs cut short: the repository's real logs cut where operators' logs are cut (tests/nccl_cuts.py)
and judged on what they show. A partial log of a healthy run passes GPU Direct RDMA, one without GDRDMA fails "RDMA
without GPU Direct", one over sockets fails the socket check; a check that needs a line the cut lacks is not checked,
naming that line; a run died only where NCCL printed its death. Every failure quotes a line that supports it.

Two halves: every cut against every NCCL check, called as pytest calls them with ClusterFacts over the cut (no
chroot); then a few cuts on the station trees under `golive run -m cluster` (root), the layer as operators run it.
"""

from __future__ import annotations

import inspect
import re
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import nccl_cuts
import pytest
from _pytest.outcomes import Skipped
from e2e import needs_chroot
from golive_run import golive_run

from golive.core.verdict import Finding, NotApplicable
from golive.site.loader import load_profile
from golive.station.cluster import ClusterFacts
from golive.suites.cluster import test_rdma_nccl as checks
from golive_testbed.targets import build_station_trees

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / "fixtures" / "profiles" / "gb300-rail-site.yaml"
PROFILE = load_profile(SITE).profile
TOPOLOGY, VERSION, GDRDMA, SOCKETS, WARNINGS = (
    "test_nccl_log_matches_declared_topology",
    "test_nccl_version_matches_profile",
    "test_nccl_uses_gpu_direct_rdma",
    "test_nccl_never_falls_back_to_sockets",
    "test_nccl_log_has_no_warnings",
)
NCCL_CHECKS = (TOPOLOGY, VERSION, GDRDMA, SOCKETS, WARNINGS)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def facts_of(text: str, station: str = "gb300-a", profile=PROFILE) -> ClusterFacts:
    """ClusterFacts of one station whose cluster.nccl_log holds `text` (the one file the NCCL checks read)."""
    role = "a" if station.endswith("-a") else "b"

    def run(command: str, *args: str, ok_rcs: tuple[int, ...] = (0,)) -> str:
        if "docker ps" in command:
            return ""  # no serving container found: the profile's cluster.nccl_log is the log, and no start time
        assert command.startswith("find "), command
        return f"{profile.cluster.nccl_log}|{int(time.time())}\n"

    no_file = SimpleNamespace(exists=False, is_file=False)
    station_facts = SimpleNamespace(
        station=SimpleNamespace(name=station, role=role),
        host=SimpleNamespace(file=lambda path: no_file),
        profile=profile,
        read=lambda path: text,
        run=run,
    )
    return ClusterFacts(station_facts, profile.cluster)


def outcome(name: str, facts: ClusterFacts) -> tuple[str, str]:
    """(outcome, message) of one NCCL check, called with the arguments pytest gives it."""
    check = getattr(checks, name)
    given = {
        "cluster_facts": facts,
        "cluster": facts.cluster,
        "station": facts.station,
        "profile": facts.station_facts.profile,
        "record_provenance": lambda **learned: None,
    }
    try:
        check(**{k: v for k, v in given.items() if k in inspect.signature(check).parameters})
    except Finding as finding:
        return "failed", str(finding.msg)
    except NotApplicable as skip:
        return "not_applicable", str(skip.msg)
    except Skipped as skip:
        return "not_checked", str(skip.msg)
    return "passed", ""


def socket_shown(cut: nccl_cuts.Cut) -> bool:
    """A socket channel, or (no channel shown, two stations declared) NCCL's choice of the Socket network."""
    if cut.vias:
        return any(via.startswith("NET/Socket") for via in cut.vias)
    return cut.holds("NET/Socket : Using") or cut.holds("Using network Socket")


NEEDS_CHANNELS = "needs NCCL's `Channel 00/0 : 0[0] -> 1[0] [send] via NET/…` lines"


def expected(cut: nccl_cuts.Cut) -> dict[str, tuple[str, list[str]]]:
    """What each NCCL check must say of a cut, from the cut's own lines (the issue's rules, not the code's)."""
    died = cut.death
    partial = not cut.complete and not died
    cut_short = "it was cut (see test_nccl_log_matches_declared_topology)" if partial else ""
    reading = ["the run died before NCCL finished init", "NCCL WARN"]
    if died:
        topology = ("failed", reading)
    elif partial:
        outlived = "so the run went on" if cut.holds("NCCL WARN") else "no line NCCL prints when it dies"
        topology = (
            "not_checked",
            ["is a partial capture: no `Init COMPLETE`", outlived, "`… nranks 2 … - Init COMPLETE` line"]
            + ([] if cut.topology else ["`comm 0x… rank 0 nRanks 2 nNodes 2 …` line"]),
        )
    elif not cut.topology:
        topology = ("not_checked", ["needs NCCL's `comm 0x… rank 0 nRanks 2 nNodes 2 …` line", "the log starts after"])
    else:
        topology = ("passed", [])
    if not cut.holds("NCCL version"):
        version = ("not_checked", ["needs NCCL's `NCCL version 2.30.7+cuda13.0` line", cut_short])
    elif cut.holds("NCCL version 2.28.3"):
        version = ("failed", ["`NCCL version 2.28.3+cuda12.9`"])
    else:
        version = ("passed", [])
    if died:
        gdrdma = sockets = warnings = ("not_checked", ["the run died before NCCL finished init (line"])
    else:
        if socket_shown(cut):
            gdrdma = ("not_checked", ["NCCL runs over sockets"])
            sockets = ("failed", ["launch fails on socket fallback"])
        elif not cut.net_vias:
            gdrdma = sockets = ("not_checked", [NEEDS_CHANNELS, cut_short])
        elif not all("/GDRDMA" in via for via in cut.net_vias):
            gdrdma = ("failed", ["RDMA without GPU Direct: line ", "channel(s) without GDRDMA"])
            sockets = ("passed", [])
        else:
            gdrdma = sockets = ("passed", [])
        warnings = ("failed", ["NCCL WARN Call to ibv_modify_qp"]) if cut.holds("NCCL WARN") else ("passed", [])
    return {TOPOLOGY: topology, VERSION: version, GDRDMA: gdrdma, SOCKETS: sockets, WARNINGS: warnings}


def quoted(message: str) -> list[str]:
    """The log lines a message quotes: backticked text that names a line number before it."""
    return re.findall(r"line \d+: `([^`]+)`", message)


TWO_STATION_CUTS = nccl_cuts.cuts(nccl_cuts.TWO_STATION)


@pytest.mark.parametrize("cut", TWO_STATION_CUTS, ids=lambda c: c.id)
def test_every_nccl_check_judges_a_cut_log_on_what_it_shows(cut):
    facts = facts_of(cut.text)
    got = {name: outcome(name, facts) for name in NCCL_CHECKS}
    want = expected(cut)
    assert {k: v[0] for k, v in got.items()} == {k: v[0] for k, v in want.items()}, got
    plain = ANSI.sub("", cut.text).replace("\r", "")
    for name, (result, message) in got.items():
        for fragment in want[name][1]:
            assert fragment in message, (name, message)
        if result == "failed":
            assert message.startswith("Found: ") and "\nRecipe: " in message and "\nDo: " in message
            lines = quoted(message)
            assert lines or name == VERSION, message
            for line in lines:  # each finding quotes the log's own line, and one that supports it
                assert line in plain, (line, message)
                assert {GDRDMA: "via NET/IB/", SOCKETS: "Socket", TOPOLOGY: "NCCL WARN", WARNINGS: "NCCL WARN"}[
                    name
                ] in line, message
                if name == GDRDMA:
                    assert "GDRDMA" not in line, message
        if result == "not_checked" and "needs NCCL's" in message:
            assert "which" in message and "does not hold" in message, message
            if cut.cut == "through-init-complete" and NEEDS_CHANNELS in message:  # not cut: taken before they came
                assert "take it after the serving run answered a request" in message, message


def test_the_table_proves_both_ways():
    """Not vacuous: among the cuts, partial ones pass GPU Direct, fail it and fail sockets; bootstrap-only ones are
    not checked; a death survives a cut; and whole logs still pass or fail as before."""
    seen: dict[tuple[str, str], set[str]] = {}
    for cut in TWO_STATION_CUTS:
        for name, (result, _) in expected(cut).items():
            partial = not cut.complete and not cut.death
            seen.setdefault((name, result), set()).add(f"{cut.kind}:{'partial' if partial else cut.cut}")
    assert {"gdrdma:partial", "warn:partial"} <= seen[(GDRDMA, "passed")]
    assert "no-gdrdma:partial" in seen[(GDRDMA, "failed")]
    assert "socket:partial" in seen[(SOCKETS, "failed")]
    assert "gdrdma:partial" in seen[(SOCKETS, "not_checked")] and "gdrdma:partial" in seen[(TOPOLOGY, "not_checked")]
    assert {"died:whole", "died:tail-8", "died:head-rotated-first-half"} <= seen[(TOPOLOGY, "failed")]
    assert "gdrdma:whole" in seen[(TOPOLOGY, "passed")] and "no-gdrdma:whole" in seen[(GDRDMA, "failed")]
    assert "gdrdma:through-init-complete" in seen[(GDRDMA, "not_checked")] & seen[(TOPOLOGY, "passed")]


def _rail(name: str) -> list[str]:
    return nccl_cuts.lines_of("fixtures/recorded/gb300-rail/" + name)


def _at(lines: list[str], needle: str) -> int:
    return next(i for i, line in enumerate(lines) if needle in line)


def _interleave(a: list[str], b: list[str]) -> list[str]:
    """Two ranks' logs in one file, a line of each in turn (a shipper merging both stations)."""
    return [line for pair in zip(a, b, strict=False) for line in pair] + a[len(b) :] + b[len(a) :]


_A, _A_NO_GDR, _B = _rail("nccl-gdrdma.log"), _rail("nccl-no-gdrdma.log"), _rail("nccl-gdrdma-b.log")
_STARTED = _at(_A, "Init START") + 1
_NONFATAL = "gb300-a:4107:4190 [0] transport/net_ib/common.cc:179 NCCL WARN NET/IB : mlx5_1:1 Got non-fatal async event"
_QP = "gb300-a:4107:4107 [0] misc/ibvwrap.cc:106 (wrap_ibv_create_qp) NCCL WARN Call to ibv_create_qp failed with 12"
_LAST_VIA = _at(_A, "Channel 01/0 : 0[0] -> 1[0]")
_P2P = "gb300-a:4107:4107 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read"
_CARRIED = ["is a partial capture", "its NCCL WARN says NCCL carries on", "so the run went on"]
DIED = ["the run died before NCCL finished init (line"]
# (text, {check: (outcome, fragments of its message)}): logs the cuts above do not make, from the real ones
SECOND_ROUND = {
    "non-fatal WARN, cut after the bootstrap": (
        "\n".join([*_A[:_STARTED], "", _NONFATAL]) + "\n",
        {
            TOPOLOGY: ("not_checked", _CARRIED),
            VERSION: ("passed", []),
            GDRDMA: ("not_checked", [NEEDS_CHANNELS]),
            SOCKETS: ("not_checked", [NEEDS_CHANNELS]),
            WARNINGS: ("failed", ["Got non-fatal async event", "launch fails on NCCL warnings"]),
        },
    ),
    "non-fatal WARN, then the channels (head rotated, no Init COMPLETE)": (
        "\n".join(["", _NONFATAL, *_A[_LAST_VIA - 3 :]]) + "\n",
        {
            TOPOLOGY: ("not_checked", _CARRIED),
            VERSION: ("not_checked", ["needs NCCL's `NCCL version"]),
            GDRDMA: ("passed", []),
            SOCKETS: ("passed", []),
            WARNINGS: ("failed", ["Got non-fatal async event"]),
        },
    ),
    "a verbs call failed, no channel": (
        "\n".join([*_A[:_STARTED], "", _QP, "gb300-a:4107:4107 [0] NCCL INFO transport/net_ib/connect.cc:412 -> 2"])
        + "\n",
        {
            TOPOLOGY: ("failed", ["the run died before NCCL finished init", "Call to ibv_create_qp failed"]),
            VERSION: ("passed", []),
            GDRDMA: ("not_checked", DIED),
            SOCKETS: ("not_checked", DIED),
            WARNINGS: ("not_checked", DIED),
        },
    ),
    "the last channel cut mid-line, no newline": (
        "\n".join(_A[:_LAST_VIA]) + "\n" + _A[_LAST_VIA][: _A[_LAST_VIA].index("GDRDMA") + 3],
        {TOPOLOGY: ("passed", []), VERSION: ("passed", []), GDRDMA: ("passed", []), SOCKETS: ("passed", [])}
        | {WARNINGS: ("passed", [])},
    ),
    "the version line cut mid-line, no newline": (
        "\n".join(_A[: _at(_A, "NCCL version")]) + "\n" + _A[_at(_A, "NCCL version")][:-8],
        {
            TOPOLOGY: ("not_checked", ["is a partial capture", "no line NCCL prints when it dies"]),
            VERSION: ("not_checked", ["needs NCCL's `NCCL version"]),
            GDRDMA: ("not_checked", [NEEDS_CHANNELS]),
            SOCKETS: ("not_checked", [NEEDS_CHANNELS]),
            WARNINGS: ("passed", []),
        },
    ),
    "RoCE without GDRDMA, P2P lines among the NET/IB ones": (
        "\n".join([*_A_NO_GDR[: _at(_A_NO_GDR, " via ")], _P2P, *_A_NO_GDR[_at(_A_NO_GDR, " via ") :]]) + "\n",
        {
            TOPOLOGY: ("passed", []),
            VERSION: ("passed", []),
            GDRDMA: ("failed", ["RDMA without GPU Direct: line 31:", "4 channel(s) without GDRDMA, of 4"]),
            SOCKETS: ("passed", []),
            WARNINGS: ("passed", []),
        },
    ),
    "GDRDMA, P2P lines among the NET/IB ones": (
        "\n".join([*_A[:_LAST_VIA], _P2P, *_A[_LAST_VIA:]]) + "\n",
        {TOPOLOGY: ("passed", []), VERSION: ("passed", []), GDRDMA: ("passed", []), SOCKETS: ("passed", [])}
        | {WARNINGS: ("passed", [])},
    ),
    "both stations interleaved, GDRDMA": (
        "\n".join(_interleave(_A, _B)) + "\n",
        {name: ("passed", []) for name in NCCL_CHECKS},
    ),
    "both stations interleaved, A without GDRDMA": (
        "\n".join(_interleave(_A_NO_GDR, _B)) + "\n",
        {name: ("passed", []) for name in NCCL_CHECKS}
        | {GDRDMA: ("failed", ["RDMA without GPU Direct: line ", "4 channel(s) without GDRDMA, of 8"])},
    ),
}


@pytest.mark.parametrize("case", SECOND_ROUND)
def test_every_nccl_check_judges_what_a_log_shows_second_round(case):
    """Non-fatal WARNs (before a cut, before rotated channels), a death with no channel, a line cut mid-line, RoCE
    without GPU Direct among P2P lines, two stations' lines interleaved: each check's outcome and words, and every
    failure quotes a line of the log that supports it."""
    text, want = SECOND_ROUND[case]
    got = {name: outcome(name, facts_of(text)) for name in NCCL_CHECKS}
    assert {k: v[0] for k, v in got.items()} == {k: v[0] for k, v in want.items()}, got
    for name, (result, message) in got.items():
        for fragment in want[name][1]:
            assert fragment in message, (name, message)
        if result == "failed":
            for line in quoted(message) or [""]:
                assert line and line in text, (line, message)
                assert {GDRDMA: "via NET/IB/", TOPOLOGY: "NCCL WARN", WARNINGS: "NCCL WARN"}[name] in line, message
                assert name != GDRDMA or "GDRDMA" not in line, message


@pytest.mark.parametrize(
    "name",
    [
        "fixtures/recorded/h200x2-device/nccl-p2p.txt",
        "fixtures/recorded/h200x2-device/nccl-shm.txt",
        "docs/examples/h200x2/nccl.log",
    ],
)
def test_a_cut_one_host_log_still_fails_the_topology_of_two_stations(name):
    """Without its `nNodes` line, a one-host run's log still shows channels that cross no network: the two-station
    profile's topology check fails, quoting one."""
    for cut in nccl_cuts.cuts([name], ["as-recorded"]):
        result, message = outcome(TOPOLOGY, facts_of(cut.text))
        if cut.topology:
            assert result == "failed" and "one-host run: nNodes 1" in message, (cut.id, message)
        elif cut.vias:
            assert result == "failed" and "no channel crosses a network" in message, (cut.id, message)
            [line] = quoted(message)
            assert " via P2P/" in line or " via SHM/" in line
        else:
            assert result == "not_checked" and "needs NCCL's" in message, (cut.id, message)


ONE_HOST = load_profile(REPO / "docs" / "examples" / "h200x2" / "h200x2-site.yaml").profile  # rails: [], TP 2


def expected_one_host(cut: nccl_cuts.Cut) -> dict[str, str]:
    """The outcomes on one host of two GPUs (no rails): the real H200 logs, cut."""
    partial = not cut.complete
    shown_one_host = cut.holds("nNodes 1") or (bool(cut.vias) and not cut.net_vias)
    sockets = "failed" if cut.net_vias else "passed" if cut.vias else "not_checked"
    gdrdma = "not_applicable" if shown_one_host else "not_checked"  # sockets, or no channel shown
    return {
        TOPOLOGY: "not_checked" if partial or not cut.topology else "passed",
        VERSION: "failed" if cut.holds("NCCL version") else "not_checked",
        GDRDMA: gdrdma,
        SOCKETS: sockets,
        WARNINGS: "passed",
    }


@pytest.mark.parametrize(
    "cut", nccl_cuts.cuts(nccl_cuts.ONE_HOST, ["as-recorded", "journald", "no-nccl-prefix"]), ids=lambda c: c.id
)
def test_the_nccl_checks_judge_a_cut_one_host_log_on_what_it_shows(cut):
    """Without rails, `Using network Socket` (printed where every channel is P2P) is no socket finding: a cut with no
    channel is not checked, one with P2P/SHM channels passes, one with NET/Socket channels fails, quoting one."""
    facts = facts_of(cut.text, profile=ONE_HOST)
    got = {name: outcome(name, facts) for name in NCCL_CHECKS}
    assert {k: v[0] for k, v in got.items()} == expected_one_host(cut), got
    if got[SOCKETS][0] == "failed":
        [line] = quoted(got[SOCKETS][1])
        assert "via NET/Socket/0" in line
    if got[SOCKETS][0] == "not_checked":
        assert NEEDS_CHANNELS in got[SOCKETS][1]


# --- on the station trees, through `golive run -m cluster` ------------------------------------------------------------

SRC = REPO / "fixtures" / "cluster-stations"
# generated variants: (base tree, log, cut, prefix); each replaces the base tree's /var/log/glm53/nccl.log
RAIL = "fixtures/recorded/gb300-rail/"
GENERATED = {
    "a-gdrdma-rotated": ("gb300-rail-a", RAIL + "nccl-gdrdma.log", "head-rotated-at-channels", "journald"),
    "b-gdrdma-eager-cut": ("gb300-rail-b", RAIL + "nccl-gdrdma-b.log", "eager-before-init-complete", "vllm-worker"),
    "a-no-gdrdma-rotated": ("gb300-rail-a", RAIL + "nccl-no-gdrdma.log", "head-rotated-at-channels", "as-recorded"),
    "b-socket-excerpt": ("gb300-rail-b", RAIL + "nccl-socket-fallback.log", "channel-excerpt", "as-recorded"),
    "a-gdrdma-bootstrap": ("gb300-rail-a", RAIL + "nccl-gdrdma.log", "after-bootstrap", "docker-timestamps"),
    "b-died-tail": ("gb300-rail-b", RAIL + "nccl-bootstrap-died.log", "tail-8", "as-recorded"),
}


def cut_text(log: str, cut: str, prefix: str) -> str:
    kept = nccl_cuts.CUTS[cut](nccl_cuts.lines_of(log))
    assert kept
    return nccl_cuts.Cut(log, nccl_cuts.KINDS[log], cut, prefix, tuple(kept)).text


@pytest.fixture(scope="module")
def cut_trees(tmp_path_factory) -> dict[str, Path]:
    """The healthy pair and the generated variants, built like the committed ones (golive_testbed.targets)."""
    src = tmp_path_factory.mktemp("cluster-stations")
    for base in ("gb300-rail-a", "gb300-rail-b"):
        shutil.copytree(SRC / base, src / base, symlinks=True)
    for name, (base, log, cut, prefix) in GENERATED.items():
        folder = src / "variants" / name
        (folder / "var/log/glm53").mkdir(parents=True)
        (folder / "var/log/glm53/nccl.log").write_text(cut_text(log, cut, prefix))
        (folder / "variant.yaml").write_text(
            f"base: {base}\nphase: serving\nbreaks: null\n"
            f"why: {nccl_cuts.KINDS[log]} log {log}, cut {cut}, prefix {prefix}\n"
        )
    return build_station_trees(src, src / ".built")


def run_pair(tmp_path: Path, a: Path, b: Path):
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        f"profile: {SITE}\nstations:\n"
        f"  - {{name: gb300-a, role: a, host: 'chroot://{a}'}}\n"
        f"  - {{name: gb300-b, role: b, host: 'chroot://{b}'}}\n"
    )
    run = golive_run(inventory, tmp_path / "out", "-m", "cluster", "-k", "nccl", "-q")
    return run, {(c["nodeid"].split("::")[-1].split("[")[0], c["station"]): c for c in run.checks}


@needs_chroot
def test_healthy_partial_logs_pass_what_they_show(cut_trees, tmp_path):
    """A's log rotated to its channels (journald prefixes), B's cut after its last channel before `Init COMPLETE`
    (vLLM worker prefixes): GPU Direct RDMA, sockets and warnings pass on both; the topology is not checked, said
    once, naming the lines it needs; nothing fails; the verdict is INCOMPLETE, not NO-GO."""
    run, checks_ = run_pair(tmp_path, cut_trees["a-gdrdma-rotated"], cut_trees["b-gdrdma-eager-cut"])
    outcomes = {k: c["outcome"] for k, c in checks_.items()}
    for station in ("gb300-a", "gb300-b"):
        assert (outcomes[(GDRDMA, station)], outcomes[(SOCKETS, station)], outcomes[(WARNINGS, station)]) == (
            "passed",
            "passed",
            "passed",
        ), run.output
        assert outcomes[(TOPOLOGY, station)] == "not_checked", run.output
        topology = checks_[(TOPOLOGY, station)]["message"]
        assert "is a partial capture" in topology and "`… nranks 2 … - Init COMPLETE` line" in topology, topology
    assert "`comm 0x… rank 0 nRanks 2 nNodes 2 …` line" in checks_[(TOPOLOGY, "gb300-a")]["message"]
    assert outcomes[(VERSION, "gb300-a")] == "not_checked" and outcomes[(VERSION, "gb300-b")] == "passed"
    assert "needs NCCL's `NCCL version" in checks_[(VERSION, "gb300-a")]["message"]
    assert "failed" not in outcomes.values() and run.results["verdict"] == "incomplete" and run.code == 2, run.output


@needs_chroot
def test_broken_partial_logs_fail_on_the_lines_they_show(cut_trees, tmp_path):
    """A's no-GDRDMA log rotated to its channels fails "RDMA without GPU Direct"; B's socket log, its channel lines
    alone, fails the socket check; each quotes its own channel line."""
    run, checks_ = run_pair(tmp_path, cut_trees["a-no-gdrdma-rotated"], cut_trees["b-socket-excerpt"])
    failed = {k for k, c in checks_.items() if c["outcome"] == "failed"}
    assert failed == {(GDRDMA, "gb300-a"), (SOCKETS, "gb300-b")}, run.output
    gdrdma = checks_[(GDRDMA, "gb300-a")]["message"]
    assert (
        "RDMA without GPU Direct: line 1: `gb300-a:4107:4107 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] "
        "via NET/IB/0`"
    ) in gdrdma and "nvidia-peermem" in gdrdma, gdrdma
    sockets = checks_[(SOCKETS, "gb300-b")]["message"]
    assert (
        "line 1: `gb300-a:4107:4107 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0`" in sockets
        and "launch fails on socket fallback" in sockets
    ), sockets
    assert checks_[(TOPOLOGY, "gb300-a")]["outcome"] == "not_checked" and run.code == 1


@needs_chroot
def test_a_bootstrap_cut_is_not_a_death_and_a_death_is(cut_trees, tmp_path):
    """A's log cut after its bootstrap: the checks that need channels are not checked, naming the lines; B's log of a
    run that died at bootstrap, its last 8 lines alone: the died reading, quoting NCCL's WARN."""
    run, checks_ = run_pair(tmp_path, cut_trees["a-gdrdma-bootstrap"], cut_trees["b-died-tail"])
    failed = {k for k, c in checks_.items() if c["outcome"] == "failed"}
    assert failed == {(TOPOLOGY, "gb300-b")}, run.output
    for name in (GDRDMA, SOCKETS):
        assert checks_[(name, "gb300-a")]["outcome"] == "not_checked"
        assert NEEDS_CHANNELS in checks_[(name, "gb300-a")]["message"]
    assert (
        checks_[(VERSION, "gb300-a")]["outcome"] == "passed" and checks_[(WARNINGS, "gb300-a")]["outcome"] == "passed"
    )
    died = checks_[(TOPOLOGY, "gb300-b")]["message"]
    assert (
        "the run died before NCCL finished init: NCCL said so at line 2: `gb300-a:4107:4107 [0] misc/socket.cc:484 "
        "NCCL WARN socketStartConnect: Connect to 192.168.100.2<39867> failed"
    ) in died, died


def test_a_run_that_died_before_its_version_line_is_not_said_to_start_after_it():
    """A run that died in bootstrap before NCCL printed its version: the version check says it died first."""
    text = (
        "gb300-a:4107:4107 [0] NCCL INFO Bootstrap: Using enp1s0f0np0:192.168.100.1<0>\n"
        "gb300-a:4107:4107 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 192.168.100.2<39867> "
        "failed : Software caused connection abort\n"
    )
    got, said = outcome(VERSION, facts_of(text))
    assert got == "not_checked" and "the run died at line 2 (`gb300-a:4107:4107 [0] misc/socket.cc:484" in said
    assert "before NCCL printed it" in said and "starts after" not in said
