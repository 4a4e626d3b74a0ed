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
#: how often a run in flight looks at the stop request
POLL_S = 0.1


class StopSignal:
    """A one-way flag with a reason (``interrupted by SIGINT``), safe to set from a signal
    handler or another thread; coroutines can race an awaitable against it.

    ``race`` polls the flag every ``POLL_S`` seconds rather than being woken: a signal that lands
    just before the event loop blocks runs its Python handler only when the loop wakes up, so the
    loop must wake up on its own (asyncio's wake-up fd is not set by a plain ``signal.signal``).
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason: str | None = None
        self._lock = threading.Lock()

    def is_set(self) -> bool:
        """Whether a stop was requested."""
        return self._event.is_set()

    def set(self, reason: str) -> None:
        """Request the stop (the first reason stays)."""
        with self._lock:
            if not self._event.is_set():
                self.reason = reason
                self._event.set()

    async def race(self, awaitable: Awaitable[T]) -> tuple[bool, T | None]:
        """``(True, result)`` when ``awaitable`` finished first; ``(False, None)`` when the stop
        came first: then it is cancelled and given ``CANCEL_GRACE_S`` to end."""
        task: asyncio.Future[T] = asyncio.ensure_future(awaitable)
        try:
            while not self.is_set():
                await asyncio.wait({task}, timeout=POLL_S)
                if task.done():
                    return True, task.result()
        except asyncio.CancelledError:
            task.cancel()
            raise
        return await _cancelled(task)


async def _cancelled(task: asyncio.Future[Any]) -> tuple[bool, None]:
    task.cancel()
    await asyncio.wait({task}, timeout=CANCEL_GRACE_S)
    if task.done() and not task.cancelled():
        task.exception()  # retrieved: an error while cancelling is no concern of the interrupted run
    return False, None
