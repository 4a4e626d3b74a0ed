"""pytest's side of one worker process: what it sends the worker (``ToWorker``), the worker's
messages handled one ``handle_<message>`` each (``FromWorker``), its calls' futures, and its death
told in words (an exit code, a signal, why pytest's process stopped it, the template's end).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from pytest_connic.execution.isolation import wire
from pytest_connic.execution.isolation.exceptions import decode_exception, encode_exception
from pytest_connic.execution.isolation.values import to_data
from pytest_connic.execution.isolation.wire import (
    REPLY_BROKEN,
    BadFrame,
    CallResult,
    Copies,
    Exited,
    FromWorker,
    OutOfMemory,
    Raised,
    RaisedBase,
    Released,
    Returned,
    ServiceRaised,
    ServiceRequest,
    ServiceReturned,
    ToWorker,
    Untransferable,
    unhandled,
)
from pytest_connic.project.located import safe_text
from pytest_connic.runtime import placeholders
from pytest_connic.runtime.signals import ExitCalled, UserCodeEnded

if TYPE_CHECKING:
    from multiprocessing.connection import Connection


_T = TypeVar("_T")
_M = TypeVar("_M")


#: what :func:`next_message` returns once there is nothing more to read
ENDED = object()


class Waiter:
    """Waits for a process's pipe or its end (``sentinel``): one selector for the pipe's life (a
    new one per message, as ``multiprocessing.connection.wait`` makes, was a visible part of a
    fresh worker's cost in pytest's process)."""

    def __init__(self, conn: Connection[_T, object], sentinel: int) -> None:
        import selectors

        self.conn = conn
        self.selector = selectors.DefaultSelector()
        self.selector.register(conn.fileno(), selectors.EVENT_READ, "conn")
        self.selector.register(sentinel, selectors.EVENT_READ, "sentinel")

    def readable(self) -> bool:
        """Whether the pipe has something to read (False: the process ended with nothing more)."""
        return any(key.data == "conn" for key, _ in self.selector.select())

    def close(self) -> None:
        self.selector.close()


def next_message(conn: Connection[_T, object], waiter: Waiter, decoder: wire.Decoder[_M]) -> _M | object:
    """The next message a process sent on ``conn``; ``ENDED`` once the process ended with nothing
    more to read, the pipe broke or closed (``close`` may close it under the reading thread, even
    in the middle of ``recv_bytes``, whose handle is then None); ``BadFrame`` (raised) when what
    came is not a message of ``decoder``'s direction."""
    try:
        if not waiter.readable():
            return ENDED
        return wire.receive(conn, decoder)
    except (EOFError, OSError):
        return ENDED
    except (TypeError, ValueError):
        if conn.closed:
            return ENDED
        raise


def hang_up(conn: Connection[_T, object]) -> None:
    """Close pytest's end of a pipe so that the process at the other end reads its end at once.

    ``close`` alone is not enough while the pipe's reader thread polls it (``next_message``): the kernel
    keeps a polled socket open until the poll returns, and the poll waits for the other process,
    which waits for the end of the pipe; the template then only ended when killed, 2 s later, at
    the end of every session that had one. Shutting the socket down first ends it for both."""
    import socket

    with contextlib.suppress(OSError, ValueError):
        fd = os.dup(conn.fileno())
        try:
            sock = socket.socket(fileno=fd)
        except OSError:  # not a socket (a named pipe on Windows): closing it is all there is
            os.close(fd)
            raise
        with sock:
            sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        conn.close()


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass
class Pending:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[object]
    context: contextvars.Context
    label: str
    copied: Copies = field(default_factory=dict)


class WorkerProcess:
    """A worker process as pytest's process knows it: forked by the template, which reports its
    end (``WorkerExited``); ``sentinel`` becomes readable then, even while a process user code
    left behind still holds the worker's pipe open."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.exitcode: int | None = None
        #: how the worker was lost when the template ended before reporting its end
        self.lost: str | None = None
        self.ended = threading.Event()
        self._lock = threading.Lock()
        self.sentinel, self._wake = os.pipe()

    def end(self, status: int | None, lost: str | None = None) -> None:
        """The template reaped it (``status``), or the template is gone (None; ``lost``: how, in
        words: ``the project's template process was killed by signal 9 (SIGKILL)``)."""
        with self._lock:
            if self.ended.is_set():
                return
            self.lost = lost
            if status is not None:
                self.exitcode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            self.ended.set()
            os.write(self._wake, b"x")

    def join(self, timeout: float | None = None) -> None:
        self.ended.wait(timeout)

    def close(self) -> None:
        with self._lock:
            for fd in (self.sentinel, self._wake):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.sentinel = self._wake = -1


@dataclass(eq=False)
class Worker:
    """One worker process (a run's), as pytest's process sees it: it sends the worker its
    ``ToWorker`` messages and handles the worker's ``FromWorker`` ones (``handle_<message>``)."""

    process: WorkerProcess
    conn: Connection[ToWorker, object]
    memory_mb: int | None
    pending: dict[int, Pending] = field(default_factory=dict)
    send_lock: threading.Lock = field(default_factory=threading.Lock)
    #: why pytest's process stopped it (its pending calls end with this), None: it was not
    stopped: str | None = None
    dead: bool = False
    #: awaiting the worker's ``Released`` (on its loop)
    released: asyncio.Future[None] | None = None
    services: set[asyncio.Task[None]] = field(default_factory=set)

    def send(self, message: ToWorker) -> None:
        frame = wire.encode(message)
        with self.send_lock:
            self.conn.send_bytes(frame)

    def kill(self, reason: str) -> None:
        """SIGKILL the worker's process group; the template then kills every process left of its
        tree (detached ones included) and reports its end (``worker.py``)."""
        if self.stopped is None:
            self.stopped = reason
        if self.process.ended.is_set():
            return
        pid = self.process.pid
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)

    def messages(self) -> Iterator[FromWorker]:
        """What the worker sends, until it ends: its pipe closes, or the template reports its end,
        even while a process user code left behind still holds the pipe open. A frame that is not
        a worker's message stops the worker (killed, its calls told why): nothing of it is read."""
        waiter = Waiter(self.conn, self.process.sentinel)
        try:
            while True:
                try:
                    received = next_message(self.conn, waiter, wire.FROM_WORKER)
                except BadFrame as exc:
                    self.kill(f"it sent pytest's process something that is not a message of the protocol: {exc}")
                    return
                if received is ENDED:
                    return
                yield received  # type: ignore[misc]
        finally:
            waiter.close()

    def read(self) -> None:
        """The reader thread: handles what the worker sends, then notices the worker's death."""
        for message in self.messages():
            self.handle(message)
        self._died()

    def handle(self, message: FromWorker) -> None:
        match message:
            case CallResult():
                self.handle_call_result(message)
            case ServiceRequest():
                self.handle_service_request(message)
            case Released():
                self.handle_released(message)
            case _:
                unhandled(message)

    def handle_call_result(self, message: CallResult) -> None:
        """A call ended: its future is settled on the loop of the run that made it."""
        pending = self.pending.pop(message.cid, None)
        if pending is not None:
            pending.loop.call_soon_threadsafe(_settle, pending, message, self)

    def handle_released(self, message: Released) -> None:
        """The worker saved its coverage data (``Lease.release`` waits for it)."""
        future = self.released
        if future is not None:
            future.get_loop().call_soon_threadsafe(_set, future, None)

    def handle_service_request(self, message: ServiceRequest) -> None:
        """User code called ``connic.tools``: the service runs on the loop of the run whose call
        made it, in that call's context, and its outcome goes back to the worker."""
        rid, name, params = message.rid, message.name, message.params
        pending = self.pending.get(message.cid) if message.cid is not None else None
        if pending is None:
            error = RuntimeError(f"connic.tools.{name} was called outside a call of user code "
                                 "(from a thread or task the user code left running)")
            self._reply(ServiceRaised(rid, encode_exception(error, str(error))))
            return

        async def serve() -> None:
            try:
                value = await placeholders.dispatch(name, params)
            except BaseException as exc:
                if isinstance(exc, asyncio.CancelledError) and self.dead:
                    raise
                self._reply(ServiceRaised(rid, encode_exception(exc, safe_text(exc))))
                if not isinstance(exc, Exception):
                    raise
                return
            self._reply(ServiceReturned(rid, to_data(value)))

        def start() -> None:
            task = pending.context.copy().run(asyncio.ensure_future, serve())
            self.services.add(task)
            task.add_done_callback(self.services.discard)

        pending.loop.call_soon_threadsafe(start)

    def _reply(self, message: ServiceReturned | ServiceRaised) -> None:
        if self.dead:
            return
        try:
            self.send(message)
        except BadFrame as exc:  # a service result past the frame's limit
            with contextlib.suppress(OSError, ValueError):
                self.send(ServiceRaised(message.rid, encode_exception(exc, safe_text(exc))))
        except (OSError, ValueError):
            pass

    def cause(self) -> str:
        """How this worker's calls ended, in words (once it is dead)."""
        code = self.process.exitcode
        if self.stopped is not None:
            return f"was stopped with its worker process ({self.stopped})"
        if code is None:
            lost = self.process.lost
            return f"lost its worker process: {lost}" if lost else "lost its worker process"
        if code < 0:
            return f"was killed by signal {-code} ({signal_name(-code)})"
        if code == REPLY_BROKEN:
            return ("could not send its outcome: user code broke its worker process's reply path "
                    f"(the worker ended with exit code {REPLY_BROKEN})")
        return f"ended its process with exit code {code}"

    def _died(self) -> None:
        self.dead = True
        self.process.join(2)
        if not self.process.ended.is_set():  # its pipe closed, the process lives on: it goes
            stopped, self.stopped = self.stopped, "-"
            self.kill("-")
            self.stopped = stopped
            self.process.join(5)
        cause = self.cause()
        for pending in list(self.pending.values()):
            error = UserCodeEnded(f"{pending.label} {cause}")
            pending.loop.call_soon_threadsafe(_fail, pending.future, error)
        self.pending.clear()
        for task in list(self.services):
            task.get_loop().call_soon_threadsafe(task.cancel)
        if self.released is not None:
            future = self.released
            future.get_loop().call_soon_threadsafe(_set, future, None)
        try:
            self.conn.close()
        except OSError:
            pass
        self.process.close()


def _set(future: asyncio.Future[_T], value: _T) -> None:
    if not future.done():
        future.set_result(value)


def _fail(future: asyncio.Future[object], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


def _settle(pending: Pending, message: CallResult, worker: Worker) -> None:
    """Settle a call's future with its outcome (its result or its exception); the arguments it
    copied back wait in ``pending.copied`` for ``Lease.call``."""
    future = pending.future
    if future.done():
        return
    label = pending.label
    pending.copied = dict(message.copies)
    outcome = message.outcome
    match outcome:
        case Returned(value=value):
            future.set_result(value)
        case Untransferable(why=why):
            future.set_exception(UserCodeEnded(
                f"{label} returned a value that cannot leave its worker process ({why}); return JSON-like data"))
        case Raised(error=error):
            future.set_exception(decode_exception(error))
        case Exited(code=code):
            future.set_exception(ExitCalled(code))
        case OutOfMemory():
            limit = f"{worker.memory_mb} MiB" if worker.memory_mb else "the machine's memory"
            future.set_exception(UserCodeEnded(
                f"{label} went past the memory limit of its worker process ({limit}, ini connic_worker_memory_mb)"))
            worker.kill("its memory limit was reached")
        case RaisedBase(type_name=type_name, text=text, where=where):
            detail = f": {text}" if text else ""
            at = f" at {where}" if where else ""
            future.set_exception(UserCodeEnded(f"{label} raised {type_name}{detail}{at}"))
        case _:
            unhandled(outcome)


