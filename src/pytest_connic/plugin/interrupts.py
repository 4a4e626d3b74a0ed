"""A real SIGINT or SIGTERM while Connic cases run: the session stops the way the user meant it.

While the session's run loop holds Connic cases, SIGINT and SIGTERM get a handler of their own
(the previous ones come back after the loop). During a case the first signal only sets the
session's ``StopSignal``: the case starts no more runs, its runs in flight are cancelled, their
``cleanup()`` finishes, the case ends as *interrupted* (a pytest skip with that reason) and the
session stops after it through pytest's own ``session.shouldstop``: pytest then exits with its
interrupted exit code (2) after ``pytest_sessionfinish`` has written every report. Between
cases, or at a second signal, the handler raises ``KeyboardInterrupt`` as pytest's default
handler does (SIGTERM included: it becomes pytest's own interruption, so JUnit and the other
reports are still written). Every case that never ran is then reported as interrupted.

A ``KeyboardInterrupt`` that no signal caused was raised by user code: that case's error.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from pytest_connic.execution.interruption import StopSignal

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupts:
    """The session's signal handlers and what they saw."""

    def __init__(self, stop: StopSignal) -> None:
        self.stop = stop
        #: a case of this process is running (a signal then stops it gracefully)
        self.in_case = False
        #: the handler raised ``KeyboardInterrupt`` itself (a signal between cases, or a second one)
        self.raised = False
        self._previous: dict[int, Any] = {}

    @property
    def reason(self) -> str:
        """``interrupted by SIGINT`` (or SIGTERM), or ``interrupted`` when pytest's own handler saw it."""
        return self.stop.reason or "interrupted"

    def install(self) -> None:
        """Install the handlers (main thread only; signal handlers can be set nowhere else)."""
        if self._previous or threading.current_thread() is not threading.main_thread():
            return
        for signum in SIGNALS:
            try:
                self._previous[signum] = signal.signal(signum, self._handle)
            except (ValueError, OSError):  # pragma: no cover - not the main interpreter
                pass

    def restore(self) -> None:
        """Put the previous handlers back."""
        previous, self._previous = self._previous, {}
        for signum, handler in previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(signum, handler if handler is not None else signal.SIG_DFL)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        self.install()
        try:
            yield
        finally:
            self.restore()

    @contextlib.contextmanager
    def case(self) -> Iterator[None]:
        """While one case runs: the first signal asks it to stop instead of raising."""
        self.in_case = True
        try:
            yield
        finally:
            self.in_case = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        reason = f"interrupted by {signal.Signals(signum).name}"
        if self.in_case and not self.stop.is_set():
            self.stop.set(reason)
            return
        self.stop.set(reason)
        self.raised = True
        raise KeyboardInterrupt(reason)

    def real(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the user's own interruption (not a ``KeyboardInterrupt`` user code raised)."""
        return isinstance(exc, KeyboardInterrupt) and self.raised
