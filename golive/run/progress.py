"""Long waits, watched: progress lines while one check waits long, and the whole run's time bound.

Progress goes to a copy of stderr taken before any test runs, so pytest's output capture does not swallow it; the
line names the check and its target (password hidden, secrets scrubbed: golive.core.secrets), never a key. The time
bound interrupts the main thread the way Ctrl-C does (a real signal, SIGUSR1: a blocking read wakes up), so the run
ends through pytest's own interrupt path: every report written, INCOMPLETE, with the checks it did not reach not
checked for that reason.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Generator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from golive.core.secrets import hide_password, scrub
from golive.endpoint.bounded import stop_requests
from golive.profile.rules import duration

BOUND_SIGNAL = signal.SIGUSR1
PRIOR_S = 20.0  # the estimate's own weight in the pace, in seconds of estimated work (Progress.pace)
UNNAMED_CHECK_S = 1.0  # a check the estimate did not name (golive.run.estimate.OTHER_CHECK_S)


STARTED_AT: float | None = None  # time.monotonic() when the process started, where `golive run` started it (cli)
PENDING: list[int] = []  # signals that came before the session could end cleanly (raised at its collection)


def defer_interrupt(signum: int, frame: FrameType | None) -> None:
    """A signal handler for before the session can end cleanly (golive starting, pytest configuring: an interrupt
    there would end it with no report): every request abandoned, the signal noted, raised once the checks are
    collected (`raise_pending`), where pytest's interrupt path writes every report."""
    stop_requests()
    PENDING.append(signum)


def takes_interrupts(handler: object) -> bool:
    """Whether SIGINT's handler makes it Ctrl-C (Python's own, or golive's): not where a shell without job control
    started golive with SIGINT ignored."""
    return handler in (signal.default_int_handler, defer_interrupt, raise_interrupt)


def raise_pending() -> None:
    """A signal deferred by `defer_interrupt`, raised now as Ctrl-C."""
    if PENDING:
        raise KeyboardInterrupt(f"signal {signal.Signals(PENDING[0]).name}")


def raise_interrupt(signum: int, frame: FrameType | None) -> None:
    """A signal handler that ends the run as Ctrl-C does (pytest's interrupt path writes every report), every request
    in flight abandoned first, in whichever thread it waits (golive.endpoint.bounded.stop_requests): the main thread
    joining a thread pool or an event loop's executor is not held up by a station that keeps answering."""
    stop_requests()
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


class Progress:
    """Registered per run by golive.run.plugin; `every_s` 0 shows no progress, `bound_s` None sets no time bound."""

    def __init__(
        self,
        every_s: float,
        bound_s: float | None,
        secrets: Callable[[], list[str]],
        budget: Callable[[pytest.Item], str] = lambda item: "",
    ):
        self.every_s, self.bound_s, self._secrets, self._budget = every_s, bound_s, secrets, budget
        self.started = time.monotonic() if STARTED_AT is None else STARTED_AT  # `golive run`: its own start counts
        self.bound_reached = False
        self.running: pytest.Item | None = None  # the check that runs now (after an interrupt: the one stopped)
        self._timer: threading.Timer | None = None
        self._signal_before: Callable[..., Any] | int | None = None
        self._finishing = False  # the checks are over: the reports are being written, never interrupt that
        self._position: dict[str, int] = {}  # nodeid → n of the run's N checks, in the order pytest runs them
        self._expected: dict[str, float] = {}  # nodeid → the estimate's seconds for it (golive.run.estimate)
        self._after: list[float] = []  # [n - 1]: the estimate's seconds for the checks after the n-th
        self._finished, self._finished_s = 0, 0.0  # checks finished so far and their summed wall time
        self._finished_expected = 0.0  # … and what the estimate gave them
        self._lock = threading.Lock()
        self._out = (
            os.fdopen(os.dup(2), "w", buffering=1, errors="backslashreplace")
            if every_s > 0 or bound_s is not None
            else None
        )

    # --- the whole run's time bound -----------------------------------------------------------------------------------

    @property
    def reason(self) -> str:
        return f"the run's time bound ({self.bound_s:g} s, --max-run-time) was reached"

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.bound_s is not None and threading.current_thread() is threading.main_thread():
            # the bound's own signal, not SIGINT: a shell without job control starts background jobs (`golive run … &`,
            # a CI step run in the background) with SIGINT ignored, and Python then never turns it into Ctrl-C
            self._signal_before = signal.signal(BOUND_SIGNAL, raise_interrupt)
            self._timer = threading.Timer(
                max(0.0, self.bound_s - (time.monotonic() - self.started)),
                self._stop_run,
                args=(threading.main_thread().ident,),
            )
            self._timer.daemon = True
            self._timer.start()

    def _stop_run(self, main: int) -> None:
        with self._lock:
            if self._finishing:
                return
            self.bound_reached = True
            self._say(f"golive: {self.reason}: stopping the running check, writing the reports")
            stop_requests()  # now, from this thread: the main thread may be waiting on another one's request
            signal.pthread_kill(main, BOUND_SIGNAL)  # a blocking read wakes, then pytest's Ctrl-C path: the reports

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        try:
            return (yield)
        finally:
            with self._lock:
                self._finishing = True
                if self._timer is not None:
                    self._timer.cancel()

    def pytest_unconfigure(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._signal_before is not None and threading.current_thread() is threading.main_thread():
            signal.signal(BOUND_SIGNAL, self._signal_before)
            self._signal_before = None
        if self._out is not None:
            self._out.close()
            self._out = None

    # --- progress during one check ---------------------------------------------------------------------------------

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._position = {item.nodeid: n for n, item in enumerate(session.items, 1)}
        self.expect(self._expected)

    def expect(self, per_check: dict[str, float]) -> None:
        """The estimate's seconds for each check (golive.run.estimate.Estimate.per_check); a check it does not
        name counts `UNNAMED_CHECK_S`."""
        self._expected = dict(per_check)
        order = sorted(self._position, key=self._position.__getitem__)
        after, suffix = [], 0.0
        for nodeid in reversed(order):
            after.append(suffix)
            suffix += self._expected_of(nodeid)
        self._after = after[::-1]

    def _expected_of(self, nodeid: str) -> float:
        return self._expected.get(nodeid, UNNAMED_CHECK_S)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        self.running = item
        done = threading.Event()
        if self.every_s > 0:
            threading.Thread(target=self._watch, args=(item, time.monotonic(), done), daemon=True).start()
        began = time.monotonic()
        try:
            result = yield
        finally:
            done.set()
        self._finished += 1
        self._finished_s += time.monotonic() - began
        self._finished_expected += self._expected_of(item.nodeid)
        self.running = None  # finished (an interrupt leaves it set: that check was stopped)
        return result

    def _watch(self, item: pytest.Item, began: float, done: threading.Event) -> None:
        while not done.wait(self.every_s):
            self._say(self.waiting_line(item, time.monotonic() - began))

    def waiting_line(self, item: pytest.Item, waited_s: float) -> str:
        callspec = getattr(item, "callspec", None)  # a parametrized check's (pytest.Function) parameters
        station = callspec and callspec.params.get("station")
        target = getattr(station, "endpoint" if item.get_closest_marker("endpoint") else "host", None)
        n, total = self._position.get(getattr(item, "nodeid", "")), len(self._position)
        line = f"golive: still waiting: {item.name}" + (f" (check {n} of {total})" if n else "")
        line += f" on {hide_password(target)}" if target else ""
        line += f", {waited_s:.0f} s so far" + self._budget(item)
        expected = self._expected.get(getattr(item, "nodeid", ""), 0.0)
        if expected >= 5:
            line += f"; this check estimated {duration(expected * self.pace)}"
        if n and self._finished:
            line += "; " + self.run_estimate(total - n)
        if self.bound_s is not None:
            left = self.bound_s - (time.monotonic() - self.started)
            line += f"; {max(left, 0):.0f} s left of the run's {self.bound_s:g} s time bound"
        return self.scrubbed(line)

    @property
    def pace(self) -> float:
        """Actual ÷ estimated time of the checks finished so far, with the estimate itself counted as `PRIOR_S` of
        work done at its own pace (1.0): a few quick checks do not swing it, a long one that ran slow does."""
        return (self._finished_s + PRIOR_S) / (self._finished_expected + PRIOR_S)

    def run_estimate(self, after: int) -> str:
        """The run's time left after this check: the estimate's seconds for the checks after it (each weighted by its
        own share: the sweep counts for minutes, a file read for a second) × the pace of the checks finished so far."""
        if after == 0:
            return "the run's last check"
        total = len(self._position)
        rest = self._after[total - after - 1] if len(self._after) == total else after * UNNAMED_CHECK_S
        pace = self.pace
        return (
            f"{_duration(rest * pace)} left in the run after this check ({after} more, estimated {duration(rest)}, "
            f"× {pace:.2f}: the {self._finished} finished took {duration(self._finished_s)} for "
            f"{duration(self._finished_expected)} estimated)"
        )

    def scrubbed(self, line: str) -> str:
        """The line as the terminal may show it (golive.core.secrets.scrub: shapes, then the run's secrets)."""
        return scrub(line, self._secrets())

    def _say(self, line: str) -> None:
        out = self._out
        if out is None:
            return
        line = self.scrubbed(line)
        try:
            out.write(f"\n{line}\n")
        except (OSError, ValueError):  # the terminal went away, or the run is closing: progress is best effort
            pass


def process_age() -> float:
    """Seconds since this process started (Linux: /proc/self/stat's start time against /proc/uptime); 0 elsewhere.
    `golive run` counts its run's time bound from there: the operator's clock, not pytest's configure."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))


def _duration(seconds: float) -> str:
    if seconds < 1:
        return "under 1 s"
    return f"about {seconds:.0f} s" if seconds < 120 else f"about {seconds / 60:.0f} min"
