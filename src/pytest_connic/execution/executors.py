"""Where sync user code (tools, hooks, mocks, builders) runs: daemon threads, reused.

A run that times out stops waiting for its tool at once, but a Python thread cannot be
killed: with ``ThreadPoolExecutor`` the interpreter would join that thread at exit and a
hanging tool would hang pytest. Daemon threads are abandoned at exit instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

T = TypeVar("T")

#: a call, and where its outcome goes: a ``concurrent.futures.Future``, or an asyncio future
#: with its loop (``submit_async``: settled on that loop, with no future of the other kind between)
_Job = tuple["Future[Any] | tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]]", Callable[[], Any]]


class ReusingDaemonExecutor(Executor):
    """Runs each submitted call at once on a daemon thread, reusing idle ones.

    Every call starts at once (on an idle thread when there is one, else on a new one), so a
    slow sync tool never holds up the other runs, and a tool that hangs is abandoned at exit
    instead of hanging pytest. Starting a thread for every call cost more than a typical tool
    call; a thread idle for ``idle_s`` seconds ends.
    """

    _ids = itertools.count(1)

    def __init__(self, name: str = "connic-run", idle_s: float = 5.0) -> None:
        self.name = name
        self.idle_s = idle_s
        self._lock = threading.Lock()
        #: threads waiting for a call, less the calls already queued for them (under ``_lock``)
        self._idle = 0
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: object, **kwargs: object) -> Future[Any]:
        future: Future[Any] = Future()
        self._start((future, functools.partial(fn, *args, **kwargs)))
        return future

    def submit_async(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """``fn()`` on a thread of this executor, its outcome an asyncio future of the running
        loop: ``loop.run_in_executor`` without the ``concurrent.futures.Future`` it chains to
        (a cancelled future is left alone; the call runs to its end, as a thread cannot be killed)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._start(((loop, future), fn))
        return future

    def _start(self, job: _Job) -> None:
        with self._lock:
            if self._idle:
                self._idle -= 1
                self._queue.put(job)
                return
        threading.Thread(target=self._work, args=(job,), name=f"{self.name}-{next(self._ids)}", daemon=True).start()

    def _work(self, job: _Job | None) -> None:
        while job is not None:
            target, call = job
            result: object = None
            error: BaseException | None = None
            started = isinstance(target, tuple) or target.set_running_or_notify_cancel()
            if started:
                try:
                    result = call()
                except BaseException as exc:  # noqa: BLE001  (handed to the awaiting run, never lost)
                    error = exc
            stay = self._available()  # before the caller learns the result, so it can reuse us
            if isinstance(target, tuple):
                loop, future = target
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
                    loop.call_soon_threadsafe(_settle, future, result, error)
            elif started:
                if error is None:
                    target.set_result(result)
                else:
                    target.set_exception(error)
            del target, call, job, result, error  # nothing of a finished call outlives it here
            job = self._next_job() if stay else None

    def _available(self) -> bool:
        with self._lock:
            if self._closed:
                return False
            self._idle += 1
            return True

    def _next_job(self) -> _Job | None:
        while True:
            try:
                return self._queue.get(timeout=self.idle_s)
            except queue.Empty:
                with self._lock:
                    if not self._queue.empty():
                        continue  # queued for an idle thread as this one timed out: take it
                    self._idle -= 1
                    return None

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Let idle threads end now; a busy one ends when its call returns, and a call submitted
        later still runs (on a thread of its own)."""
        with self._lock:
            self._closed = True
            for _ in range(self._idle):
                self._queue.put(None)
            self._idle = 0


def _settle(future: asyncio.Future[object], result: object, error: BaseException | None) -> None:
    """On the awaiting loop: the call's outcome, unless the run stopped waiting (cancelled)."""
    if future.done():
        return
    if error is None:
        future.set_result(result)
    elif isinstance(error, StopIteration):  # a future refuses it (it would end a coroutine): as a coroutine turns it
        wrapped = RuntimeError(f"StopIteration raised: {error}" if str(error) else "StopIteration raised")
        wrapped.__cause__ = error
        future.set_exception(wrapped)
    else:
        future.set_exception(error)
