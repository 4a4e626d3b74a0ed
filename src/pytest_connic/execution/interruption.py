"""The session's stop request: set by a real SIGINT or SIGTERM (``plugin/interrupts.py``), read by
the run loop of a case, which then starts no more runs, cancels the agent runs in flight and lets
their ``cleanup()`` finish."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")

#: how long a cancelled agent run may take to end before it is abandoned (user code that
#: swallows ``CancelledError``); its cleanup then still runs
CANCEL_GRACE_S = 5.0


class StopSignal:
    """A one-way flag with a reason (``interrupted by SIGINT``), safe to set from a signal
    handler or another thread; coroutines can race an awaitable against it."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason: str | None = None
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def is_set(self) -> bool:
        """Whether a stop was requested."""
        return self._event.is_set()

    def set(self, reason: str) -> None:
        """Request the stop (the first reason stays); wakes every coroutine waiting in ``race``."""
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            try:
                loop.call_soon_threadsafe(_resolve, future)
            except RuntimeError:  # that loop is closed: nobody waits any more
                pass

    async def race(self, awaitable: Awaitable[T]) -> tuple[bool, T | None]:
        """``(True, result)`` when ``awaitable`` finished first; ``(False, None)`` when the stop
        came first: then it is cancelled and given ``CANCEL_GRACE_S`` to end."""
        task: asyncio.Future[T] = asyncio.ensure_future(awaitable)
        if self.is_set():
            return await _cancelled(task)
        loop = asyncio.get_running_loop()
        stopped: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._event.is_set():
                stopped.set_result(None)
            else:
                self._waiters.append((loop, stopped))
        try:
            waiting: set[asyncio.Future[Any]] = {task, stopped}
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            with self._lock:
                self._waiters = [w for w in self._waiters if w[1] is not stopped]
        if task.done():
            return True, task.result()
        return await _cancelled(task)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _cancelled(task: asyncio.Future[Any]) -> tuple[bool, None]:
    task.cancel()
    await asyncio.wait({task}, timeout=CANCEL_GRACE_S)
    if task.done() and not task.cancelled():
        task.exception()  # retrieved: an error while cancelling is no concern of the interrupted run
    return False, None
