"""Where a case's coroutine runs: one event loop per runtime and thread, kept from case to case.

``asyncio.run`` made a loop for every case (a selector, its self-pipe, a task for the loop's
end, and their closing): a visible part of what a case cost beside the call it made. A
``CaseLoop`` keeps one loop per thread and, after each case, ends on it what the case left, as
``asyncio.run`` ending the loop would have: tasks still pending are cancelled and run until they
end, async generators are closed, callbacks and timers still scheduled (``call_soon``,
``call_later``) are dropped, signal handlers a case added are removed, and the loop's exception
handler, task factory and debug mode are reset. So no case sees what another left on the loop.
A case whose coroutine raised (a plugin bug, or a second Ctrl-C raising ``KeyboardInterrupt`` out
of the loop), or whose clean-up was interrupted, discards its loop after that clean-up, as
``asyncio.run`` closed it; the next case gets a new one. The loop's default executor is not
joined after each case (``asyncio.run`` did): it is shut down, without waiting, with the runtime.

From a thread whose own loop is running (the ``connic`` fixture in an ``async def`` test, whose
loop is blocked while the case runs, as with ``asyncio.run`` on a thread of its own before), the
case runs on a helper thread of the runtime's, which keeps its own loop the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine

from pytest_connic.execution.executors import ReusingDaemonExecutor

__all__ = ["CaseLoop"]


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class CaseLoop:
    """Runs case coroutines to completion, one event loop per thread kept between them."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        #: every loop made (any thread's): closed with the runtime
        self._loops: list[asyncio.AbstractEventLoop] = []
        #: threads for cases started where a loop is already running
        self._helpers = ReusingDaemonExecutor("connic-case", idle_s=60.0)
        #: the debug mode a new loop starts in (``PYTHONASYNCIODEBUG``, ``-X dev``): restored after each case
        self._debug: bool | None = None

    def run(self, coro: Coroutine[object, object, None]) -> None:
        """Run ``coro`` to its end (what it raises is raised here)."""
        # decided outside any except block: every exception of the runs would otherwise get
        # "no running event loop" as its __context__ (and a provider's message with it)
        if not _loop_running():
            self._run_here(coro)
            return
        self._helpers.submit(self._run_here, coro).result()

    def _loop(self) -> asyncio.AbstractEventLoop:
        loop: asyncio.AbstractEventLoop | None = getattr(self._local, "loop", None)
        if loop is None or loop.is_closed():
            loop = self._local.loop = asyncio.new_event_loop()
            if self._debug is None:
                self._debug = loop.get_debug()
            with self._lock:
                self._loops.append(loop)
        return loop

    def _run_here(self, coro: Coroutine[object, object, None]) -> None:
        loop = self._loop()
        asyncio.set_event_loop(loop)  # as asyncio.run: asyncio.get_event_loop() inside finds it
        ended = False
        try:
            loop.run_until_complete(coro)
            ended = True
        finally:
            try:
                _tidy(loop, self._debug)
            except BaseException:
                ended = False  # interrupted while tidying: what the case left may still be there
                raise
            finally:
                asyncio.set_event_loop(None)
                if not ended:
                    self._discard(loop)

    def _discard(self, loop: asyncio.AbstractEventLoop) -> None:
        self._local.loop = None
        with self._lock, contextlib.suppress(ValueError):
            self._loops.remove(loop)
        with contextlib.suppress(RuntimeError):  # still running: a nested failure; the thread's next case starts another
            loop.close()

    def close(self) -> None:
        """Close every loop (the runtime's end; none is running then)."""
        with self._lock:
            loops, self._loops = self._loops, []
        for loop in loops:
            if not loop.is_running():
                loop.close()  # the default executor too, without waiting for a thread user code left
        self._helpers.shutdown()


def _tidy(loop: asyncio.AbstractEventLoop, debug: bool | None) -> None:
    """End on ``loop`` what a case left there, as ``asyncio.run`` ending the loop did."""
    tasks = asyncio.all_tasks(loop)
    if tasks:
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        for task in tasks:
            if not task.cancelled() and task.exception() is not None:
                loop.call_exception_handler({"message": "unhandled exception during the end of a case",
                                             "exception": task.exception(), "task": task})
    if getattr(loop, "_asyncgens", None):
        loop.run_until_complete(loop.shutdown_asyncgens())
        # a closed loop refuses new async generators; this one goes on serving cases
        loop._asyncgens_shutdown_called = False  # type: ignore[attr-defined]
    elif getattr(loop, "_ready", None):  # callbacks of the case's last step run, as the loop's end ran them
        loop.run_until_complete(_nothing())
    for handle in [*getattr(loop, "_ready", ()), *getattr(loop, "_scheduled", ())]:
        handle.cancel()
    for signum in list(getattr(loop, "_signal_handlers", None) or ()):
        with contextlib.suppress(Exception):
            loop.remove_signal_handler(signum)
    loop.set_exception_handler(None)
    loop.set_task_factory(None)
    if debug is not None:
        loop.set_debug(debug)


async def _nothing() -> None:
    """A coroutine for one turn of the loop."""
