"""Benchmark: golive against every hostile input, one run each, peak RSS and wall time read from its process.

    .venv/bin/python bench/hostile.py [--out bench/results/hostile.json] [--only NAME …]

Each hostile endpoint (golive_testbed.hostile.BEHAVIOURS: a gzip bomb on /v1/models, a 50 MB model list, 100,000
levels of JSON, a 100 MB stream line, a stream without end, an answer trickled a byte at a time, a server echoing
the Authorization header, 404/429/500 on chat, a redirect to another origin) is one station of its own, checked by
the endpoint checks that read it (`golive run … -m endpoint -k …  --max-run-time 120`); then `--max-run-time 12` and
SIGTERM/SIGINT while a stream of keep-alive comments hangs in a worker thread, the hostile files (exit 4), a report
folder on a 64 KiB tmpfs (root) and an sshd frozen mid-run (root, sshd). Peak RSS is the kernel's ru_maxrss of the
golive process (os.wait4); wall is from its start to its exit, Python's start included. The goal (issue 38): peak
RSS ≤ 300 MiB and wall ≤ the run's own announced limit + 10 s in every case; the announced limit is the smaller of
--max-run-time and golive's own ("golive's own limits stop a run by …"), for a signal the signal's time, for a
refused file golive's own start (a missing file, measured in the same run) + 1 s.

The machine is shared: walls move with its load, the bounds hold. The "before" of each case is issue 38's own
measurement (its text), not re-run here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from golive_testbed.hostile import (  # noqa: E402
    BEHAVIOURS,
    KEY_ENV,
    HostileStation,
    Measured,
    golive_command,
    hostile_files,
    measured,
)

SECRET = "sk-bench-hostile/3f9+a1"
CHECKS = (
    "test_health_endpoint_is_ok or test_models_lists_served_name or test_one_token_canary_answers or "
    "test_auth_matches_profile or test_chat_answers_and_stops or test_sweep_runs_every_level_without_failures or "
    "test_tool_choice_none_answers_in_text"
)
SITE = """\
extends: glm-5.3-flash-gb300
endpoint:
  light_timeout_s: 2
  connect_timeout_s: 2
  request_timeout_s: {timeout}
  stream_stall_timeout_s: {timeout}
load:
  output_tokens: 8
  concurrency: [1, 2]
  gate_concurrency: 2
  repeats: 1
  min_requests: 1
  warmup: 0
  ratio_rounds: 0
  max_requests: 20
  max_duration_s: 20
"""
PEAK_RSS_GOAL_MIB, WALL_SLACK_S = 300, 10
_OWN_LIMIT = re.compile(r"golive's own limits stop (?:a run|it) by (?:(\d+) min ?)?(?:(\d+) s)?")


def _own_limit(output: str) -> float | None:
    found = _OWN_LIMIT.search(output)
    if not found or not (found[1] or found[2]):
        return None
    return int(found[1] or 0) * 60 + int(found[2] or 0)


def _endpoint(
    work: Path,
    behaviour: str,
    *args: str,
    timeout: float = 5,
    signal_at: tuple[float, signal.Signals] | None = None,
    checks: str = CHECKS,
    basic: bool = False,
) -> Measured:
    work.mkdir(parents=True, exist_ok=True)
    (work / "site.yaml").write_text(SITE.format(timeout=timeout))
    with HostileStation(behaviour, key=None if basic else SECRET, basic=f"ops:{SECRET}" if basic else None) as station:
        url = station.url.replace("http://", f"http://ops:{SECRET.replace('/', '%2F')}@") if basic else station.url
        key = "" if basic else f", api_key_env: {KEY_ENV}"
        (work / "inventory.yaml").write_text(
            f"profile: site.yaml\nstations:\n  - {{name: s, endpoint: '{url}'{key}}}\n"
        )
        env = {KEY_ENV: SECRET}
        return measured(
            golive_command("run", work / "inventory.yaml", "-o", work / "out", "-m", "endpoint", "-k", checks, *args),
            env=env,
            cwd=work,
            timeout=300,
            signal_at=signal_at,
        )


def _row(case: str, run: Measured, limit: float | None, said: str, leaks: bool | None = None) -> dict:
    return {
        "case": case,
        "exit": run.code,
        "wall_s": round(run.wall_s, 1),
        "peak_rss_mib": round(run.peak_rss_mib),
        "limit_s": limit,
        "within": run.killed_for is None
        and run.peak_rss_mib <= PEAK_RSS_GOAL_MIB
        and (limit is None or run.wall_s <= limit + WALL_SLACK_S),
        "killed_for": run.killed_for,
        "key_in_output": leaks,
        "said": said[:200],
    }


def _said(run: Measured, out: Path) -> str:
    """The line that decided the run: its first failure or not-checked reason (results.json), else its last line."""
    try:
        results = json.loads((out / "results.json").read_text())
    except (OSError, ValueError):
        lines = [line for line in run.output.splitlines() if line.startswith("golive: ")]
        return lines[-1] if lines else run.output.strip().splitlines()[-1:][0] if run.output.strip() else ""
    for outcome in ("failed", "not_checked"):
        for check in results["checks"]:
            if check["outcome"] == outcome:
                return f"{check['outcome']}: {check['message'].splitlines()[0]}"
    return f"verdict {results['verdict']}"


def _leaks(run: Measured, out: Path) -> bool:
    from urllib.parse import quote

    forms = {SECRET, quote(SECRET, safe=""), json.dumps(SECRET)[1:-1], SECRET.replace("/", "\\/")}
    texts = [run.output] + [p.read_text(errors="replace") for p in out.glob("*") if p.is_file()]
    return any(form in text for form in forms for text in texts)


def endpoint_cases(work: Path, only: set[str]) -> list[dict]:
    rows = []
    for behaviour in [b for b in BEHAVIOURS if b != "healthy"] + ["userinfo"]:
        name = f"endpoint {behaviour}"
        if only and behaviour not in only:
            continue
        folder = work / behaviour
        run = _endpoint(
            folder,
            "echo-auth" if behaviour == "userinfo" else behaviour,
            "--max-run-time",
            "120",
            basic=behaviour == "userinfo",
        )
        own = _own_limit(run.output)
        rows.append(
            _row(name, run, min(120, own) if own else 120, _said(run, folder / "out"), _leaks(run, folder / "out"))
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def stop_cases(work: Path, only: set[str]) -> list[dict]:
    rows = []
    cases = {
        "--max-run-time 12, a stream that never ends": dict(args=("--max-run-time", "12"), signal_at=None),
        "SIGTERM at 6 s, the probe's stream in its thread pool": dict(args=(), signal_at=(6.0, signal.SIGTERM)),
        "SIGINT at 6 s, a check's thread pool": dict(
            args=(), signal_at=(6.0, signal.SIGINT), checks="test_tool_choice_none_answers_in_text"
        ),
    }
    for name, case in cases.items():
        if only and "stop" not in only:
            continue
        folder = work / re.sub(r"\W+", "-", name)
        run = _endpoint(
            folder,
            "sse-keepalive",
            *case["args"],  # type: ignore[misc]
            timeout=300,
            signal_at=case["signal_at"],  # type: ignore[arg-type]
            checks=case.get("checks", CHECKS),  # type: ignore[arg-type]
        )
        limit = 12.0 if case["signal_at"] is None else case["signal_at"][0]  # type: ignore[index]
        rows.append(_row(name, run, limit, _said(run, folder / "out"), _leaks(run, folder / "out")))
        print(json.dumps(rows[-1]), flush=True)
    return rows


def file_cases(work: Path, only: set[str]) -> list[dict]:
    if only and "files" not in only:
        return []
    files = hostile_files(work / "files")
    start = measured(golive_command("run", work / "absent.yaml", "-o", work / "out"), timeout=60)
    rows = [_row("golive's start (a missing inventory)", start, None, start.output.strip())]
    for name, path in files.items():
        run = measured(golive_command("run", path, "-o", work / "out"), cwd=path.parent, timeout=120)
        row = _row(f"file {name}", run, round(start.wall_s + 1, 1), run.output.strip())
        row["within"] = row["within"] and run.wall_s <= start.wall_s + 1
        rows.append(row)
    for row in rows:
        print(json.dumps(row), flush=True)
    return rows


def disk_case(work: Path, only: set[str]) -> list[dict]:
    if (only and "disk" not in only) or os.geteuid() != 0:
        return []
    full = work / "full"
    full.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)], check=True)
    try:
        (full / "ballast").write_bytes(bytes(40 * 1024))
        (work / "site.yaml").write_text(SITE.format(timeout=5))
        with HostileStation("healthy", key=SECRET) as station:
            (work / "inventory.yaml").write_text(
                f"profile: site.yaml\nstations:\n  - {{name: s, endpoint: '{station.url}', api_key_env: {KEY_ENV}}}\n"
            )
            run = measured(
                golive_command("run", work / "inventory.yaml", "-o", full, "-m", "endpoint", "-k", CHECKS),
                env={KEY_ENV: SECRET},
                cwd=work,
            )
        left = sorted(os.listdir(full))
    finally:
        subprocess.run(["umount", "-l", str(full)], check=False)
    said = next((line for line in run.output.splitlines() if "could not be written" in line), "")
    row = _row("report folder on a 64 KiB tmpfs (40 KiB taken)", run, _own_limit(run.output), said)
    row["left_in_folder"] = left
    print(json.dumps(row), flush=True)
    return [row]


def frozen_sshd_case(work: Path, only: set[str]) -> list[dict]:
    from golive_testbed.sshd import available, descendants, loopback_sshd
    from golive_testbed.targets import build_station_trees

    if (only and "ssh" not in only) or available() is not None:
        return []

    def port() -> int:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]

    tree = build_station_trees()["gb300-healthy"]
    work.mkdir(parents=True, exist_ok=True)
    (work / "site.yaml").write_text(
        f"extends: {REPO / 'fixtures' / 'profiles' / 'gb300-site.yaml'}\nhost:\n  connect_timeout_s: 10\n"
    )
    with (
        loopback_sshd(port(), tree=tree, alias="frozen") as frozen,
        loopback_sshd(port(), tree=tree, alias="alive") as alive,
    ):
        (work / "ssh_config").write_text(frozen.host_block + alive.host_block)
        (work / "inventory.yaml").write_text(
            f"profile: site.yaml\nssh_config: ssh_config\nstations:\n"
            f"  - {{name: frozen, role: a, host: '{frozen.spec}', phase: serving}}\n"
            f"  - {{name: alive, role: a, host: '{alive.spec}', phase: serving}}\n"
        )

        def freeze() -> None:  # after golive's 10th command to it, as the issue's
            give_up = time.monotonic() + 60
            while time.monotonic() < give_up and frozen.log.read_text().count("Starting session:") < 10:
                time.sleep(0.02)
            for pid in [frozen.pid, *descendants(frozen.pid)]:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGSTOP)

        threading.Thread(target=freeze, daemon=True).start()
        run = measured(golive_command("run", work / "inventory.yaml", "-o", work / "out", "-m", "host"), cwd=work)
        with contextlib.suppress(OSError):
            os.kill(frozen.pid, signal.SIGCONT)
    row = _row(
        "an sshd frozen (SIGSTOP) after golive's 10th command", run, _own_limit(run.output), _said(run, work / "out")
    )
    print(json.dumps(row), flush=True)
    return [row]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "hostile.json")
    parser.add_argument("--only", nargs="*", default=[], help="behaviours, or: stop, files, disk, ssh")
    args = parser.parse_args(argv)
    only = set(args.only)
    work = Path(tempfile.mkdtemp(prefix="golive-hostile-bench-"))
    try:
        rows = [
            *endpoint_cases(work / "endpoint", only),
            *stop_cases(work / "stop", only),
            *file_cases(work / "files", only),
            *disk_case(work / "disk", only),
            *frozen_sshd_case(work / "ssh", only),
        ]
        result = {
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()},
            "goal": {"peak_rss_mib": PEAK_RSS_GOAL_MIB, "wall": f"limit + {WALL_SLACK_S} s"},
            "rows": rows,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}: {sum(r['within'] for r in rows)} of {len(rows)} cases within the goal")


if __name__ == "__main__":
    main()
