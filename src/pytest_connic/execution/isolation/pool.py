"""pytest's side of the worker processes: a template and a pool per project, a lease per run.

The project's template (``worker.py``) loads the project once, started in the background while
pytest collects (``prestart``); every run leases a worker freshly forked from it for its whole
duration (builder ``build()``, the agent, ``cleanup()``: one sandbox per run, as on Connic), and
the worker is killed when the run ends, so no run sees what another left. The pool keeps as many
workers forked ahead as runs have needed at once (at most ``size``), so a run rarely waits for a
fork. A run's calls, nested ones included, are multiplexed over its worker's pipe with call ids.
What crosses is the message set of ``wire.py``; ``Template`` and ``Worker`` handle the messages of
the template and of a worker, one ``handle_<message>`` method each.
When a call is cancelled (the run's ``timeout_s`` passed, or the run was stopped) the worker is
killed with its process group and the lease takes a fresh one for what follows (cleanup). A
worker that dies ends the calls it was running with the cause in words.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import copy
import functools
import itertools
import os
import pickle
import signal
import sys
import threading
import types
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from pytest_connic.errors import ConnicError
from pytest_connic.execution.isolation import coverage_share
from pytest_connic.execution.isolation.wire import (
    Back,
    Call,
    CallResult,
    Copies,
    Exited,
    Fork,
    Forked,
    ForkFailed,
    ForkSettings,
    FromTemplate,
    FromWorker,
    Importing,
    LoadFailed,
    OutOfMemory,
    Preload,
    Raised,
    RaisedBase,
    Ready,
    Ref,
    Release,
    Released,
    Returned,
    ServiceRaised,
    ServiceRequest,
    ServiceReturned,
    Started,
    ToTemplate,
    ToWorker,
    Untransferable,
    WorkerExited,
    WorkerSettings,
    World,
    decode_exception,
    encode_exception,
    from_template,
    from_worker,
    unhandled,
    unpickled_copies,
)
from pytest_connic.execution.isolation.worker import main
from pytest_connic.project.located import safe_text
from pytest_connic.project.sdk import static_reference
from pytest_connic.runtime import placeholders
from pytest_connic.runtime.mocks import fresh_origin
from pytest_connic.runtime.signals import ExitCalled, UserCodeEnded
from pytest_connic.runtime.state import CURRENT

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.context import ForkServerContext, SpawnContext
    from multiprocessing.process import BaseProcess

#: how long the template may take to start and load the project
START_TIMEOUT_S = 120.0
#: how long the session waits, before its first case, for the templates started while collecting
PREWAIT_S = 5.0
#: how long a fork of the template may take before the run that waits for it fails
FORK_TIMEOUT_S = 30.0
#: the default address-space limit of a worker (``connic_worker_memory_mb``)
DEFAULT_MEMORY_MB = 4096


_T = TypeVar("_T")


class WorkerStartError(ConnicError):
    """A worker process could not start or load the project."""


class WorkerSpawnError(WorkerStartError):
    """No worker process could be started (out of processes or threads, a fork that failed): the
    machine's trouble, not the project's, so an infrastructure error (the session exits 2)."""


def _context() -> ForkServerContext | SpawnContext:
    import multiprocessing

    if sys.platform.startswith("linux"):
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([__name__.rsplit(".", 1)[0] + ".worker"])
        return ctx
    return multiprocessing.get_context("spawn")


_START_LOCK = threading.Lock()


@contextlib.contextmanager
def _without_main() -> Iterator[None]:
    """While a worker (or the forkserver) starts: no re-import of pytest's ``__main__`` there.

    ``multiprocessing`` re-runs the parent's main script in a spawned or forkserver child; under a
    script that calls ``pytest.main()`` without a ``__main__`` guard that would start pytest again
    inside the worker. The worker needs nothing of ``__main__``."""
    from multiprocessing import spawn

    original = spawn.get_preparation_data

    def preparation_data(name: str) -> dict[str, object]:
        data = original(name)
        for key in ("init_main_from_path", "init_main_from_name", "main_path"):
            data.pop(key, None)
        return data

    with _START_LOCK:
        spawn.get_preparation_data = preparation_data
        try:
            yield
        finally:
            spawn.get_preparation_data = original


#: what :func:`_next` returns once there is nothing more to read
_ENDED = object()


def _next(conn: Connection[_T, object], sentinel: int) -> object:
    """The next object a process sent on ``conn``; ``_ENDED`` once the process ended with nothing
    more to read, the pipe broke or closed (``close`` may close it under the reading thread, even
    in the middle of ``recv``, whose handle is then None), or what came cannot be unpickled."""
    from multiprocessing.connection import wait

    try:
        if conn not in wait([conn, sentinel]):
            return _ENDED
        return conn.recv()
    except (EOFError, OSError, pickle.UnpicklingError):
        return _ENDED
    except (TypeError, ValueError):
        if conn.closed:
            return _ENDED
        raise


def _hang_up(conn: Connection[_T, object]) -> None:
    """Close pytest's end of a pipe so that the process at the other end reads its end at once.

    ``close`` alone is not enough while the pipe's reader thread polls it (``_next``): the kernel
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


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass
class _Pending:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[object]
    context: contextvars.Context
    label: str
    copied: Copies = field(default_factory=dict)


class _Forked:
    """A worker process as pytest's process knows it: forked by the template, which reports its
    end (``WorkerExited``); ``sentinel`` becomes readable then, even while a process user code
    left behind still holds the worker's pipe open."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.exitcode: int | None = None
        self.ended = threading.Event()
        self._lock = threading.Lock()
        self.sentinel, self._wake = os.pipe()

    def end(self, status: int | None) -> None:
        """The template reaped it (``status``), or the template is gone (None)."""
        with self._lock:
            if self.ended.is_set():
                return
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

    process: _Forked
    conn: Connection[ToWorker, object]
    memory_mb: int | None
    pending: dict[int, _Pending] = field(default_factory=dict)
    send_lock: threading.Lock = field(default_factory=threading.Lock)
    #: why pytest's process stopped it (its pending calls end with this), None: it was not
    stopped: str | None = None
    dead: bool = False
    #: awaiting the worker's ``Released`` (on its loop)
    released: asyncio.Future[None] | None = None
    services: set[asyncio.Task[None]] = field(default_factory=set)

    def send(self, message: ToWorker) -> None:
        with self.send_lock:
            self.conn.send(message)

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
        even while a process user code left behind still holds the pipe open (anything that is
        not a worker's message is passed over)."""
        sentinel = self.process.sentinel
        while True:
            received = _next(self.conn, sentinel)
            if received is _ENDED:
                return
            message = from_worker(received)
            if message is not None:
                yield message

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
            self._reply(ServiceReturned(rid, value))

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
        except (OSError, ValueError):
            pass
        except Exception as exc:  # noqa: BLE001  (a service result that does not pickle)
            self.send(ServiceRaised(message.rid, encode_exception(exc, safe_text(exc))))

    def _died(self) -> None:
        self.dead = True
        self.process.join(2)
        if not self.process.ended.is_set():  # its pipe closed, the process lives on: it goes
            stopped, self.stopped = self.stopped, "-"
            self.kill("-")
            self.stopped = stopped
            self.process.join(5)
        code = self.process.exitcode
        if self.stopped is not None:
            cause = f"was stopped with its worker process ({self.stopped})"
        elif code is None:
            cause = "lost its worker process"
        elif code < 0:
            cause = f"was killed by signal {-code} ({_signal_name(-code)})"
        else:
            cause = f"ended its process with exit code {code}"
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


def _settle(pending: _Pending, message: CallResult, worker: Worker) -> None:
    """Settle a call's future with its outcome (its result or its exception); the arguments it
    copied back wait in ``pending.copied`` for ``Lease.call``."""
    future = pending.future
    if future.done():
        return
    label = pending.label
    pending.copied = unpickled_copies(message.copies)
    outcome = message.outcome
    match outcome:
        case Returned(data=data):
            try:
                future.set_result(pickle.loads(data))
            except Exception as exc:  # noqa: BLE001  (a class pytest's process cannot import)
                future.set_exception(UserCodeEnded(
                    f"{label} returned a value pytest's process cannot rebuild "
                    f"({type(exc).__name__}: {safe_text(exc)}); return JSON-like data"))
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


@dataclass
class _Asked:
    """A worker pytest's process asked the template for: who gets it (the worker, or why there is
    none), pytest's end of its pipe, its memory limit."""

    callback: Callable[[Worker | str], None]
    conn: Connection[ToWorker, object]
    memory_mb: int | None


class Template:
    """The project's template process: loads the project once, forks a worker per request.
    pytest's process sends it ``ToTemplate`` messages and handles its ``FromTemplate`` ones
    (``handle_<message>``, on the template's reader thread)."""

    def __init__(self, root: Path, memory_mb: int | None) -> None:
        self.root = root
        self.memory_mb = memory_mb
        self.process: BaseProcess | None = None
        self.conn: Connection[ToTemplate, object] | None = None
        self.pid: int | None = None
        #: the start's outcome once known
        self.outcome: Ready | LoadFailed | None = None
        self.ready = threading.Event()
        #: the module of the project the template said it is importing while it loads
        self.loading: str | None = None
        self.dead = False
        self._lock = threading.Lock()
        #: one joiner at a time: two threads polling the fork server's status pipe at once, one reads
        #: the exit code and the other the end of the pipe, which multiprocessing reports as 255
        self._join_lock = threading.Lock()
        self._tokens = itertools.count(1)
        self._forks: dict[int, _Asked] = {}
        self._workers: dict[int, _Forked] = {}

    def start(self) -> None:
        """Start the process (the few milliseconds ``multiprocessing`` takes); it loads the project
        in the background. Raises ``RuntimeError``/``OSError`` when no process or thread is left."""
        ctx = _context()
        parent, child = ctx.Pipe(duplex=True)
        settings = WorkerSettings(root=str(self.root), cwd=os.getcwd(), env=dict(os.environ),
                                  sys_path=list(sys.path), memory_mb=self.memory_mb,
                                  coverage=coverage_share.settings_of_current())
        process = ctx.Process(target=main, args=(child, settings), name="connic-template", daemon=True)
        with _without_main():
            process.start()
        child.close()
        self.process, self.conn = process, parent
        try:
            threading.Thread(target=self._read, args=(process, parent), name=f"connic-template-reader-{process.pid}",
                             daemon=True).start()
        except RuntimeError:
            self.kill()
            raise

    def _read(self, process: BaseProcess, conn: Connection[ToTemplate, object]) -> None:
        sentinel = process.sentinel
        while True:
            received = _next(conn, sentinel)
            if received is _ENDED:
                break
            message = from_template(received)
            if message is not None:
                self.handle(message)
        self._died(process, conn)

    def handle(self, message: FromTemplate) -> None:
        match message:
            case Started():
                self.handle_started(message)
            case Importing():
                self.handle_importing(message)
            case Ready():
                self.handle_ready(message)
            case LoadFailed():
                self.handle_load_failed(message)
            case Forked():
                self.handle_forked(message)
            case ForkFailed():
                self.handle_fork_failed(message)
            case WorkerExited():
                self.handle_worker_exited(message)
            case _:
                unhandled(message)

    def handle_started(self, message: Started) -> None:
        self.pid = message.pid

    def handle_importing(self, message: Importing) -> None:
        self.loading = message.module

    def handle_ready(self, message: Ready) -> None:
        self.outcome = message
        self.ready.set()

    def handle_load_failed(self, message: LoadFailed) -> None:
        self.outcome = message
        self.ready.set()

    def handle_forked(self, message: Forked) -> None:
        """The worker asked for runs: its reader thread starts, and it goes to whoever asked."""
        pid = message.pid
        with self._lock:
            asked = self._forks.pop(message.token, None)
            if asked is None:
                return
            forked = self._workers[pid] = _Forked(pid)
            worker = Worker(forked, asked.conn, asked.memory_mb)
        try:
            threading.Thread(target=worker.read, name=f"connic-worker-reader-{pid}", daemon=True).start()
        except RuntimeError as exc:  # no thread left (a pids limit)
            worker.kill("it could not start")
            asked.callback(f"RuntimeError: {safe_text(exc)}")
            return
        asked.callback(worker)

    def handle_fork_failed(self, message: ForkFailed) -> None:
        with self._lock:
            asked = self._forks.pop(message.token, None)
            if asked is None:
                return
            asked.conn.close()
        asked.callback(message.why)

    def handle_worker_exited(self, message: WorkerExited) -> None:
        with self._lock:
            forked = self._workers.pop(message.pid, None)
        if forked is not None:
            forked.end(message.status)

    def _died(self, process: BaseProcess, conn: Connection[ToTemplate, object]) -> None:
        self.dead = True
        code = None
        with contextlib.suppress(Exception):
            code = self._join(process, 2)
        if not self.ready.is_set():
            cause = f"ended with exit code {code}" if code is not None and code >= 0 else \
                f"was killed by signal {-code} ({_signal_name(-code)})" if code is not None else "was lost"
            self.outcome = LoadFailed(f"the worker process {cause.removeprefix('was ')}")
            self.ready.set()
        with self._lock:
            forks, self._forks = list(self._forks.values()), {}
            workers, self._workers = list(self._workers.values()), {}
        for asked in forks:
            asked.callback("the project's template process ended")
        for forked in workers:  # they die with the template (``die_with_parent``)
            forked.end(None)
        with contextlib.suppress(OSError):
            conn.close()

    def preload(self, names: list[str], timeout_s: float) -> None:
        """Ask the template to import ``names`` (each bounded by ``timeout_s``) for the workers it
        forks next; nothing is awaited (a failure leaves each run to import them itself)."""
        with self._lock:
            if self.dead or not names or self.conn is None:
                return
            with contextlib.suppress(OSError, ValueError):
                self.conn.send(Preload(tuple(names), timeout_s))

    def fork(self, memory_mb: int | None, callback: Callable[[Worker | str], None]) -> None:
        """Ask for a worker; ``callback`` gets it (or why there is none) on the reader thread."""
        ctx = _context()
        parent, child = ctx.Pipe(duplex=True)
        settings = ForkSettings(cwd=os.getcwd(), env=dict(os.environ), sys_path=list(sys.path))
        from multiprocessing.reduction import send_handle

        with self._lock:
            conn = self.conn
            if self.dead or conn is None:
                parent.close()
                child.close()
                callback("the project's template process ended")
                return
            token = next(self._tokens)
            self._forks[token] = _Asked(callback, parent, memory_mb)
            try:
                conn.send(Fork(token, settings))
                send_handle(conn, child.fileno(), self.pid or 0)
                # the worker writes where pytest's process writes now (pytest's capture, -s: the
                # terminal), not where the template's descriptors pointed when it started
                for fd in _stdio():
                    send_handle(conn, fd, self.pid or 0)
            except (OSError, ValueError) as exc:
                self._forks.pop(token, None)
                parent.close()
                callback(f"{type(exc).__name__}: {safe_text(exc)}")
            finally:
                child.close()

    def kill(self) -> None:
        """End the template at once (its workers die with it)."""
        if self.process is None:
            return
        pid = self.pid or self.process.pid
        if pid is not None:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(OSError, ValueError, AttributeError):
            self.process.kill()

    def _join(self, process: BaseProcess, timeout_s: float) -> int | None:
        """Wait for the template's end (bounded), and its exit code (None while it runs): the
        reader thread and ``close`` both wait, one at a time."""
        with self._join_lock:
            process.join(timeout_s)
            return process.exitcode

    def close(self) -> None:
        """The session ended: the template kills its workers and what they started, then exits
        (pytest's end of its pipe closes); killed if it does not within 2 s."""
        if self.process is None:
            return
        if not self.ready.is_set():  # still loading: nothing of a run to end gracefully
            self.kill()
        if self.conn is not None:
            _hang_up(self.conn)
        with contextlib.suppress(Exception):
            if self._join(self.process, 2) is None:
                self.kill()
                self._join(self.process, 2)


#: templates started while pytest collects (``prestart``), taken by the project's pool
_PRESTARTED: dict[Path, Template] = {}
_PRESTART_LOCK = threading.Lock()


def prestart(root: Path, memory_mb: int | None = DEFAULT_MEMORY_MB) -> None:
    """Start the project's template in the background (pytest is collecting): the project loads
    meanwhile, outside any case's time. Nothing happens when it cannot start now (the first run
    that needs it starts one, and says why it cannot)."""
    with _PRESTART_LOCK:
        if root in _PRESTARTED:
            return
        template = _PRESTARTED[root] = Template(root, memory_mb)

    def start() -> None:
        try:
            template.start()
        except (RuntimeError, OSError):  # the pool that took it starts another
            template.dead = True
            template.ready.set()
            with _PRESTART_LOCK:
                _PRESTARTED.pop(root, None)

    try:
        threading.Thread(target=start, name="connic-template-start", daemon=True).start()
    except RuntimeError:
        with _PRESTART_LOCK:
            _PRESTARTED.pop(root, None)


def wait_prestarted(stopped: Callable[[], bool], timeout_s: float = PREWAIT_S) -> None:
    """Before the first case: the templates started during collection have loaded their project
    (or failed, or ``timeout_s`` passed: a hanging import is then bounded by the timeout of the
    case that needs it). Polled, so a stop request (``stopped``) ends the wait at once."""
    import time

    deadline = time.monotonic() + timeout_s
    with _PRESTART_LOCK:
        templates = list(_PRESTARTED.values())
    for template in templates:
        while not template.ready.is_set() and not template.dead and not stopped() \
                and time.monotonic() < deadline:
            template.ready.wait(0.05)


def close_prestarted() -> None:
    """The session ended: templates that no pool took are closed."""
    with _PRESTART_LOCK:
        templates = list(_PRESTARTED.values())
        _PRESTARTED.clear()
    for template in templates:
        template.close()


def has_user_code(root: Path) -> bool:
    """Whether the project has Python modules of its own (tools, middleware, hooks, guardrails)."""
    return any(any((root / folder).rglob("*.py")) for folder in ("tools", "middleware", "hooks", "guardrails")
               if (root / folder).is_dir())


def _taken(root: Path, memory_mb: int | None) -> Template | None:
    with _PRESTART_LOCK:
        template = _PRESTARTED.get(root)
        if template is None or template.memory_mb != memory_mb or template.dead:
            return None
        return _PRESTARTED.pop(root)


class WorkerPool:
    """The worker processes of one project: each run gets a worker forked from the project's
    template and discards it when it ends; as many are forked ahead as runs have needed at once
    (at most ``size``)."""

    def __init__(self, root: Path, *, size: int, memory_mb: int | None = DEFAULT_MEMORY_MB) -> None:
        self.root = root
        self.size = max(1, size)
        self.memory_mb = memory_mb
        self._lock = threading.Lock()
        self._idle: list[Worker] = []
        self._leased: set[Worker] = set()
        self._starting = 0
        #: how many workers runs have needed at once (leased and waiting): kept forked ahead
        self._wanted = 1
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[Worker | str]]] = []
        self._closed = False
        self._template: Template | None = _taken(root, memory_mb)
        self._references: weakref.WeakKeyDictionary[Callable[..., object], Ref | None] = weakref.WeakKeyDictionary()
        #: whether workers save coverage data when their run ends (asked before they are killed)
        self.measuring = coverage_share.settings_of_current() is not None
        atexit.register(self.close)

    # -- references ----------------------------------------------------------------------
    def reference(self, func: Callable[..., object]) -> Ref | None:
        """A reference the worker resolves to ``func`` (None: run it in pytest's process)."""
        try:
            return self._references[func]
        except (KeyError, TypeError):
            pass
        ref = _reference(func, self.root)
        try:
            self._references[func] = ref
        except TypeError:
            pass
        return ref

    # -- the template --------------------------------------------------------------------
    async def _loaded(self, timeout_s: float | None) -> Template:
        """The project's template once it loaded the project: within ``timeout_s`` (the timeout of
        the case that needs it), else it is killed and the error names the module it was
        importing (the next run starts another)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            template = self._template
            if template is None or (template.dead and not isinstance(template.outcome, LoadFailed)):
                template = self._template = Template(self.root, self.memory_mb)
                fresh = True
            else:
                fresh = False
        if fresh:
            try:
                await loop.run_in_executor(None, template.start)
            except (RuntimeError, OSError) as exc:  # out of processes or threads
                with self._lock:
                    self._template = None
                raise WorkerSpawnError(f"a worker process could not start: {type(exc).__name__}: {safe_text(exc)}") \
                    from None
        if template.ready.is_set():
            ready = True
        else:
            limit = START_TIMEOUT_S if timeout_s is None else min(timeout_s, START_TIMEOUT_S)
            try:
                ready = await loop.run_in_executor(None, template.ready.wait, limit)
            except BaseException as exc:  # cancelled (the session stops) or no thread left to wait on
                self._forget(template)
                if isinstance(exc, RuntimeError):
                    raise WorkerSpawnError(f"a worker process could not start: RuntimeError: {safe_text(exc)}") \
                        from None
                raise
            if not ready:
                self._forget(template)
                what = f"importing {template.loading}" if template.loading else "loading the project"
                label = "timeout_s" if timeout_s is not None and timeout_s <= START_TIMEOUT_S else "the start-up limit"
                raise WorkerStartError(f"a worker process did not finish {what} within {limit:g}s ({label})")
        outcome = template.outcome
        assert outcome is not None
        if isinstance(outcome, LoadFailed):
            raise WorkerStartError(f"a worker process could not load the project: {outcome.why}")
        return template

    def _forget(self, template: Template) -> None:
        template.kill()
        with self._lock:
            if self._template is template:
                self._template = None

    # -- workers -------------------------------------------------------------------------
    async def acquire(self, timeout_s: float | None = None) -> Worker:
        """A fresh worker of this run: one forked ahead, or the next one forked (the case's runs
        are bounded by ``--connic-concurrency``, so are the leases)."""
        template = await self._loaded(timeout_s)
        loop = asyncio.get_running_loop()
        with self._lock:
            self._wanted = min(self.size, max(self._wanted, len(self._leased) + len(self._waiters) + 1))
            while self._idle:
                worker = self._idle.pop(0)
                if not worker.dead:
                    self._leased.add(worker)
                    self._top_up(template)
                    return worker
            future: asyncio.Future[Worker | str] = loop.create_future()
            self._waiters.append((loop, future))
            self._top_up(template)
        try:
            got = await asyncio.wait_for(asyncio.shield(future), FORK_TIMEOUT_S)
        except asyncio.TimeoutError:
            got = f"no worker was forked within {FORK_TIMEOUT_S:g}s"
            with self._lock:
                if (loop, future) in self._waiters:
                    self._waiters.remove((loop, future))
            future.add_done_callback(self._unwanted)
        except BaseException:  # cancelled: a worker it gets later goes back
            with self._lock:
                if (loop, future) in self._waiters:
                    self._waiters.remove((loop, future))
            future.add_done_callback(self._unwanted)
            raise
        if isinstance(got, str):
            raise WorkerSpawnError(f"a worker process could not start: {got}")
        return got

    def _unwanted(self, future: asyncio.Future[Worker | str]) -> None:
        got = None if future.cancelled() else future.result()
        if isinstance(got, Worker):
            self.discard(got, "its run was cancelled")

    def _top_up(self, template: Template) -> None:
        """Under ``_lock``: fork one worker per run waiting, and as many ahead as runs have needed
        at once (at most ``size``), so the next runs find theirs forked."""
        if self._closed or template.dead:
            return
        need = len(self._waiters) + min(self.size, self._wanted)
        while len(self._idle) + self._starting < need:
            self._starting += 1
            template.fork(self.memory_mb, self._forked)

    def _forked(self, worker: Worker | str) -> None:
        """A fork's outcome (the template's reader thread): to the first run waiting, else idle."""
        with self._lock:
            self._starting -= 1
            if isinstance(worker, Worker) and self._closed:
                worker.kill("the session ended")
                return
            while self._waiters:
                loop, future = self._waiters.pop(0)
                if not future.done() and not loop.is_closed():
                    if isinstance(worker, Worker):
                        self._leased.add(worker)
                    loop.call_soon_threadsafe(_hand, future, worker, self)
                    return
            if isinstance(worker, Worker):
                self._idle.append(worker)

    def preload(self, names: list[str], timeout_s: float) -> None:
        """The template imports ``names`` for the workers it forks from now on (the ones forked
        ahead already import them in their run)."""
        template = self._template
        if template is not None and isinstance(template.outcome, Ready):
            template.preload(names, timeout_s)

    def discard(self, worker: Worker, reason: str) -> None:
        """Kill ``worker`` (its run ended, timed out, was cancelled, or it crashed) and fork the
        next one runs need."""
        worker.kill(reason)
        with self._lock:
            self._leased.discard(worker)
            with contextlib.suppress(ValueError):
                self._idle.remove(worker)
            template = self._template
            if template is not None:
                self._top_up(template)

    def lease(self, timeout_s: float | None = None) -> Lease:
        """A run's lease; the template it starts must load the project within ``timeout_s``."""
        return Lease(self, timeout_s)

    def close(self) -> None:
        """Kill every worker and end the template (the session ends; cleanup has run)."""
        self._closed = True
        with self._lock:
            workers = [*self._leased, *self._idle]
            self._leased.clear()
            self._idle.clear()
            template, self._template = self._template, None
        for worker in workers:
            worker.kill("the session ended")
        if template is not None:
            template.close()


def _hand(future: asyncio.Future[Worker | str], worker: Worker | str, pool: WorkerPool) -> None:
    """On the waiting run's loop: the worker is its (or goes, when the run stopped waiting)."""
    if future.done():
        if isinstance(worker, Worker):
            pool.discard(worker, "its run stopped waiting")
        return
    future.set_result(worker)


class Lease:
    """A run's worker: taken on its first call (or ``acquire``), replaced after a kill or a crash."""

    _ids = itertools.count(1)

    def __init__(self, pool: WorkerPool, timeout_s: float | None = None) -> None:
        self.pool = pool
        self.timeout_s = timeout_s
        self.worker: Worker | None = None
        #: why this run's worker could not start (the run's later calls fail at once with it)
        self.failed: WorkerStartError | None = None
        #: a call of a child or a stage was cancelled (its own timeout) and left running: the
        #: worker is retired when the run ends
        self.abandoned = False

    def reference(self, func: Callable[..., object]) -> Ref | None:
        return self.pool.reference(func)

    async def acquire(self) -> Worker:
        worker = self.worker
        if worker is None or worker.dead or worker.stopped is not None:
            if worker is not None:
                self.pool.discard(worker, worker.stopped or "it died")
            self.worker = None
            if self.failed is not None:
                raise type(self.failed)(str(self.failed))
            try:
                worker = self.worker = await self.pool.acquire(self.timeout_s)
            except WorkerStartError as exc:
                self.failed = exc
                raise
        return worker

    async def call(self, ref: Ref, label: str, args: tuple[object, ...], kwargs: dict[str, object],
                   world: World | None = None) -> object:
        """``world``: the run's recorded wall clock for this call and its seed (worker.py)."""
        worker = await self.acquire()
        loop = asyncio.get_running_loop()
        cid = next(self._ids)
        future: asyncio.Future[object] = loop.create_future()
        back: Back = tuple(i for i, a in enumerate(args) if type(a) in (dict, list))
        if type(kwargs.get("context")) is dict:
            back = (*back, "context")
        pending = worker.pending[cid] = _Pending(loop, future, contextvars.copy_context(), label)
        sent = _snapshot(back, args, kwargs)
        try:
            worker.send(Call(cid, ref, args, kwargs, back, world))
        except (OSError, ValueError, BrokenPipeError):
            worker.pending.pop(cid, None)
            if not future.done():
                future.set_exception(UserCodeEnded(f"{label} lost its worker process"))
        except Exception as exc:  # noqa: BLE001  (arguments that do not pickle)
            worker.pending.pop(cid, None)
            raise UserCodeEnded(f"the arguments of {label} cannot be sent to its worker process "
                                f"({type(exc).__name__}: {safe_text(exc)})") from None
        try:
            return await future
        except asyncio.CancelledError:
            if worker.pending.pop(cid, None) is not None or not future.done():
                invocation = CURRENT.get()
                if invocation is not None and not invocation.root:
                    # a child's or a stage's own timeout: the parent's calls in this worker go on
                    # (the run's own bound still kills it), the worker is retired after the run
                    self.abandoned = True
                else:  # the run timed out or was stopped: the call cannot be; its process goes
                    self.pool.discard(worker, "the run timed out or was stopped")
            raise
        finally:
            _copy_back(pending.copied, sent, args, kwargs)

    async def release(self) -> None:
        """The run ended: its worker is killed (a fresh one serves the next run); when coverage
        is measured it saves its data first."""
        worker, self.worker = self.worker, None
        if worker is None:
            return
        if self.pool.measuring and not worker.dead and worker.stopped is None:
            loop = asyncio.get_running_loop()
            future: asyncio.Future[None] = loop.create_future()
            worker.released = future
            try:
                worker.send(Release())
                await asyncio.wait_for(future, 10)
            except (OSError, ValueError, asyncio.TimeoutError):
                pass
            finally:
                worker.released = None
        reason = "a call was left running" if self.abandoned else "its run ended"
        self.pool.discard(worker, worker.stopped or reason)


def _snapshot(back: Back, args: tuple[object, ...], kwargs: dict[str, object]) -> Copies:
    """What the mutable arguments held when the call was sent (the base of ``_copy_back``)."""
    try:
        return {key: copy.deepcopy(args[key] if isinstance(key, int) else kwargs[key]) for key in back}
    except Exception:  # noqa: BLE001  (an argument that does not copy: its mutations replace it)
        return {}


def _copy_back(copied: Copies, sent: Copies, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    """Mutations of dict and list arguments in the worker, applied to the caller's objects.

    Calls of one run may be in flight at once (the tool calls of one model turn) and share the
    run's ``context``, as they share one dict in a single process: so what a call changed is merged
    into the caller's object against what it was sent (``sent``), and the changes other calls
    copied back meanwhile stay."""
    for key, value in copied.items():
        target = args[key] if isinstance(key, int) else kwargs.get(key)
        if key in sent:
            _merge(target, sent[key], value)
        elif isinstance(target, dict) and isinstance(value, dict):
            target.clear()
            target.update(value)
        elif isinstance(target, list) and isinstance(value, list):
            target[:] = value


_ABSENT = object()


def _merge(ours: object, base: object, theirs: object) -> None:
    """Apply the change from ``base`` to ``theirs`` onto ``ours`` in place (dicts and lists)."""
    if isinstance(ours, dict) and isinstance(base, dict) and isinstance(theirs, dict):
        for key in [*theirs, *(k for k in base if k not in theirs)]:  # the worker's order, as in place
            was, now = base.get(key, _ABSENT), theirs.get(key, _ABSENT)
            if _same(was, now):
                continue
            if now is _ABSENT:
                if key in ours and _same(ours[key], was):
                    del ours[key]
            elif key in ours and was is not _ABSENT and isinstance(ours[key], (dict, list)) \
                    and type(ours[key]) is type(was) is type(now):
                _merge(ours[key], was, now)
            elif key in ours and was is _ABSENT and isinstance(ours[key], list) and isinstance(now, list):
                ours[key].extend(now)  # both created the list (``setdefault(k, []).append``)
            else:
                ours[key] = now
    elif isinstance(ours, list) and isinstance(base, list) and isinstance(theirs, list):
        if theirs[:len(base)] == base and ours[:len(base)] == base:
            ours.extend(theirs[len(base):])  # both appended: keep both, the caller's first
        elif not _same(base, theirs):
            ours[:] = theirs


def _same(a: object, b: object) -> bool:
    try:
        return bool(a is b or a == b)
    except Exception:  # noqa: BLE001  (a user value whose __eq__ raises)
        return False


def _reference(func: object, root: Path) -> Ref | None:
    """("module", name, qualname) for a function of a project module in ``sys.modules``;
    ("fresh", name, file, qualname) for one of a builder or mocks module loaded for this run;
    None for anything else (lambdas, closures, bound methods: they run in pytest's process).
    A stub of the project read statically (``project/sdk.py``) carries its reference."""
    static = static_reference(func)
    if static is not None:
        return static
    if not isinstance(func, types.FunctionType):
        return None
    qualname = getattr(func, "__qualname__", "")
    if not qualname or "<" in qualname:
        return None
    module_name = getattr(func, "__module__", None)
    if not isinstance(module_name, str):
        return None
    module = sys.modules.get(module_name)
    if module is not None:
        file = getattr(module, "__file__", None)
        if not file or not _inside(Path(file), root) or _lookup(module, qualname) is not func:
            return None
        return ("module", module_name, qualname)
    if fresh_origin(module_name) is not None:
        file = func.__globals__.get("__file__")
        if not file or not _inside(Path(file), root) or _lookup(func.__globals__, qualname) is not func:
            return None
        return ("fresh", module_name, str(file), qualname)
    return None


def _lookup(namespace: object, qualname: str) -> object:
    first, *rest = qualname.split(".")
    value = namespace.get(first) if isinstance(namespace, dict) else getattr(namespace, first, None)
    for part in rest:
        value = getattr(value, part, None)
    return value


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, ValueError):
        return False


def _stdio() -> tuple[int, int]:
    """pytest's process's descriptors 1 and 2 for a worker (``/dev/null`` for one that is closed)."""
    fds = []
    for fd in (1, 2):
        try:
            os.fstat(fd)
        except OSError:
            fd = _devnull()
        fds.append(fd)
    return fds[0], fds[1]


@functools.lru_cache(maxsize=1)
def _devnull() -> int:
    return os.open(os.devnull, os.O_WRONLY)
