"""The clock of one run: real time, plus the retry delays a replayed run skips.

Connic waits between operation retries (``retry_options.initial_delay``/``max_delay``), and
those waits count against the run's ``timeout``. A replayed run must not be slow, so its clock
is *virtual*: a delay moves the clock forward at once instead of sleeping. Timeouts read the
same clock, so a run whose backoff would pass its ``timeout_s`` (or its agent's ``timeout``)
still times out, at the delay that crosses the deadline. A live run (``--connic-record-mode
live``) really waits.

Every deadline of the runtime (``InvocationState.deadline``, ``RunScope.deadline``) is a value
of :meth:`RunClock.now`.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass
class _Frame:
    """A deadline being waited for, and the task that runs until it."""

    deadline: float
    task: asyncio.Task[object] | None = None
    timed_out: bool = False


#: the deadlines enclosing the running code, outermost first
_FRAMES: contextvars.ContextVar[tuple[_Frame, ...]] = contextvars.ContextVar("connic_deadlines", default=())


class RunClock:
    """``now()`` is ``time.perf_counter()`` plus the delays skipped so far (virtual clock)."""

    def __init__(self, *, virtual: bool = True) -> None:
        self.virtual = virtual
        self.skipped_s = 0.0
        self._moved: asyncio.Future[None] | None = None

    def now(self) -> float:
        return time.perf_counter() + self.skipped_s

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds``: really, or (virtual) by moving the clock; a wait that crosses an
        enclosing deadline ends there, as the real wait would have (the waiter is cancelled)."""
        if seconds <= 0:
            return
        if not self.virtual:
            await asyncio.sleep(seconds)
            return
        self.skipped_s += seconds
        if self._moved is not None and not self._moved.done():
            self._moved.set_result(None)
        self._moved = None
        now = self.now()
        crossed = [f for f in _FRAMES.get() if f.deadline <= now]
        if not crossed:
            await asyncio.sleep(0)
            return
        for frame in crossed:
            frame.timed_out = True
        outermost = crossed[0].task
        current = asyncio.current_task()
        if outermost is not None:
            outermost.cancel()
        if current is not None and current is not outermost:
            current.cancel()  # a background task inside the timed-out run: it ends with it
        await asyncio.sleep(0)  # the cancellation arrives here

    async def wait_for(self, awaitable: Awaitable[T], timeout_s: float) -> T:
        """``asyncio.wait_for`` on this clock: ``asyncio.TimeoutError`` once ``now()`` passes
        ``timeout_s`` from now, whether real time or a skipped delay got it there."""
        if not self.virtual:
            return await asyncio.wait_for(awaitable, timeout_s)
        frame = _Frame(self.now() + timeout_s)

        async def framed() -> T:
            _FRAMES.set((*_FRAMES.get(), frame))  # this task's context only
            return await awaitable

        task: asyncio.Task[T] = asyncio.ensure_future(framed())
        frame.task = task
        try:
            while not task.done():
                remaining = frame.deadline - self.now()
                if remaining <= 0:
                    frame.timed_out = True
                    task.cancel()
                    break
                waits: set[asyncio.Future[T] | asyncio.Future[None]] = {task, self._moved_future()}
                await asyncio.wait(waits, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # cancelled from outside: the body goes with it
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise
        await asyncio.gather(task, return_exceptions=True)
        if frame.timed_out:
            raise asyncio.TimeoutError
        return task.result()

    def _moved_future(self) -> asyncio.Future[None]:
        if self._moved is None or self._moved.done():
            self._moved = asyncio.get_running_loop().create_future()
        return self._moved
