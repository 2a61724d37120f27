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
from types import FrameType
from typing import Any

import pytest

from golive.core.secrets import hide_password, scrub

BOUND_SIGNAL = signal.SIGUSR1


def raise_interrupt(signum: int, frame: FrameType | None) -> None:
    """A signal handler that ends the run as Ctrl-C does (pytest's interrupt path writes every report)."""
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
        self.started = time.monotonic()
        self.bound_reached = False
        self.running: pytest.Item | None = None  # the check that runs now (after an interrupt: the one stopped)
        self._timer: threading.Timer | None = None
        self._signal_before: Callable[..., Any] | int | None = None
        self._finishing = False  # the checks are over: the reports are being written, never interrupt that
        self._position: dict[str, int] = {}  # nodeid → n of the run's N checks, in the order pytest runs them
        self._finished, self._finished_s = 0, 0.0  # checks finished so far and their summed wall time
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
            self._say(f"golive: {self.reason}: stopping the running check, writing the reports (INCOMPLETE)")
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
        if n and self._finished:
            line += "; " + self.run_estimate(total - n)
        if self.bound_s is not None:
            left = self.bound_s - (time.monotonic() - self.started)
            line += f"; {max(left, 0):.0f} s left of the run's {self.bound_s:g} s time bound"
        return self.scrubbed(line)

    def run_estimate(self, after: int) -> str:
        """The run's time left after this check, estimated simply: the checks after it × the mean wall time of the
        checks finished so far (checks differ a lot, so this is a guide, and it says how it was made)."""
        if after == 0:
            return "the run's last check"
        mean = self._finished_s / self._finished
        left = mean * after
        return (
            f"{_duration(left)} left in the run after this check ({after} more × {mean:.1f} s, the mean of "
            f"the {self._finished} finished)"
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


def _duration(seconds: float) -> str:
    if seconds < 1:
        return "under 1 s"
    return f"about {seconds:.0f} s" if seconds < 120 else f"about {seconds / 60:.0f} min"
