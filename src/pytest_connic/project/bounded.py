"""Loading the project in pytest's process, bounded and interruptible.

Under ``--connic-isolation=none`` (and ``--pdb``) pytest's process imports the project's modules
once (``LoadedProject``); under process isolation it only reads them (nothing executes). A module whose import hangs would hang the session, and a SIGINT or
SIGTERM would only be seen once the import returned. So the load runs on a thread of its own while
the main thread waits in short steps: a stop request (the session's signal handler) ends the wait
at once, and a load that takes longer than ``IMPORT_TIMEOUT_S`` is an error naming the file and
line the import is stuck at.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pytest_connic.errors import ConnicError
from pytest_connic.project.located import relative

T = TypeVar("T")

#: how long the project's modules may take to import in pytest's process
IMPORT_TIMEOUT_S = 120.0
#: how often the wait looks at the stop request
_STEP_S = 0.1


class ImportStopped(ConnicError):
    """The session was asked to stop while the project was importing (``reason`` says why)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ImportHung(ConnicError):
    """The project's modules did not finish importing within the bound."""


def where_stuck(thread: threading.Thread, root: Path) -> str | None:
    """The innermost ``file:line`` of the project that ``thread`` is executing."""
    frame = sys._current_frames().get(thread.ident or -1)
    resolved = root.resolve()
    while frame is not None:
        path = Path(frame.f_code.co_filename)
        try:
            if path.is_absolute() and path.resolve().is_relative_to(resolved):
                return f"{relative(resolved, path.resolve())}:{frame.f_lineno}"
        except (OSError, ValueError):
            pass
        frame = frame.f_back
    return None


def load_bounded(load: Callable[[], T], root: Path, stopped: Callable[[], str | None],
                 timeout_s: float = IMPORT_TIMEOUT_S) -> T:
    """``load()`` on a thread; its result or exception here. ``ImportStopped`` when ``stopped()``
    gives a reason first, ``ImportHung`` after ``timeout_s`` (the thread is abandoned: a daemon)."""
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(load())
        except BaseException as exc:  # noqa: BLE001  (re-raised on the caller's thread)
            failure.append(exc)

    thread = threading.Thread(target=run, name="connic-project-import", daemon=True)
    thread.start()
    waited = 0.0
    while thread.is_alive():
        thread.join(_STEP_S)
        waited += _STEP_S
        reason = stopped()
        if reason is not None and thread.is_alive():
            raise ImportStopped(reason)
        if waited >= timeout_s and thread.is_alive():
            at = where_stuck(thread, root)
            raise ImportHung(f"the project's modules did not finish importing within {timeout_s:g}s"
                             + (f" (stuck at {at})" if at else ""))
    if failure:
        raise failure[0]
    return outcome[0]
