"""Worker processes: a template loads the project once; each run gets a worker forked from it.

Started by ``pool.py`` (``multiprocessing``, ``forkserver`` on Linux with this module preloaded):
the process ``multiprocessing`` starts is the project's *template*. It loads the project (the
SDK, ``LoadedProject``, the ``connic.tools`` forwarders) once, runs no user call, and then forks a
fresh worker for every run that pytest's process asks for (``wire.Fork``, the worker's end of its
pipe passed along as a descriptor). So every run starts in the state the
template has: its modules' globals, signal handlers, umask, limits, descriptors, never what an
earlier run left. A worker serves one run and is killed when the run ends.

In a worker the main thread reads the pipe; a sync function runs on a thread, a coroutine
function on the worker's event loop (its own thread). ``connic.tools`` calls travel back to
pytest's process, which runs the service for the invocation that made the call.

The template and its workers ignore SIGINT and each worker leads its own process group (pytest's
process decides when a run stops, and kills the whole group, children of user code included).
The template is a child subreaper (``procs.py``): a worker's detached descendants stay in the
worker's tree while it lives and become the template's children when it ends, and the template
kills every child that is not a live worker; it reports each worker's end (``wire.WorkerExited``)
at once. Everything exits when pytest's process closes the pipes.

``TemplateProcess`` handles the messages pytest's process sends the template (``wire.ToTemplate``),
``Endpoint`` those it sends a worker (``wire.ToWorker``), one ``handle_<message>`` method each.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import os
import random
import sys
import threading
import types
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from pytest_connic.errors import ConnicError
from pytest_connic.execution.executors import ReusingDaemonExecutor
from pytest_connic.execution.isolation import coverage_share, wire
from pytest_connic.execution.isolation.exceptions import decode_exception, encode_exception
from pytest_connic.execution.isolation.values import text, to_data
from pytest_connic.execution.isolation.wire import (
    REPLY_BROKEN,
    BadFrame,
    Call,
    CallResult,
    Exited,
    FromWorker,
    OutOfMemory,
    Raised,
    RaisedBase,
    Ref,
    Release,
    Released,
    Returned,
    ServiceRaised,
    ServiceRequest,
    ServiceReturned,
    ToWorker,
    Untransferable,
    WorkerSettings,
    unhandled,
)
from pytest_connic.project.loaded import LoadedProject
from pytest_connic.project.located import safe_text, user_location
from pytest_connic.runtime.mocks import ModuleLoadError, import_fresh
from pytest_connic.runtime.placeholders import PlaceholderSwap
from pytest_connic.runtime.signals import UserCodeEnded
from pytest_connic.usertb import attach, import_in

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from pytest_connic.execution.isolation.coverage_share import Measurement



#: the id of the call a piece of user code runs for (``connic.tools`` requests carry it)
CALL_ID: contextvars.ContextVar[int | None] = contextvars.ContextVar("connic_worker_call", default=None)


class Endpoint:
    """The project as a worker uses it: built in the template, bound to a run's pipe in each
    forked worker (``bind``). It handles what pytest's process sends a worker (``ToWorker``, one
    ``handle_<message>`` each) and sends it ``FromWorker`` messages."""

    def __init__(self, settings: WorkerSettings) -> None:
        self.root = Path(settings.root)
        self.requests: dict[int, Future[object]] = {}
        self.request_ids = iter(range(1, sys.maxsize))
        self.fresh: dict[str, types.ModuleType] = {}
        self.functions: dict[Ref, Callable[..., object]] = {}
        self.project: LoadedProject | None = None
        #: whether the run's seed was applied to ``random`` (before its first call)
        self.seeded = False
        #: coverage.py measuring this worker (``coverage_share.py``; None: not measured)
        self.coverage: Measurement | None = None

    def bind(self, conn: Connection[FromWorker, object]) -> None:
        """In a forked worker: the run's pipe, and the threads and loop of its own."""
        self.conn = conn
        self.send_lock = threading.Lock()
        self.executor = ReusingDaemonExecutor("connic-call", idle_s=60.0)
        #: the worker's event loop, made by its first coroutine (a run of sync code makes none)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.loop_thread: threading.Thread | None = None
        self.loop_lock = threading.Lock()
        #: the calls whose outcome was sent (``_answer`` checks that its reply sent one)
        self.answered: set[int] = set()
        # the reply path, bound now, before any user code runs here: a run that patches this
        # class (or this module) cannot change how this worker answers
        for name in ("handle", "handle_call", "call", "send", "_answer", "_reply", "_run_sync", "_start_task",
                     "_reply_task"):
            setattr(self, name, getattr(self, name))

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The worker's event loop (``start_loop`` made it)."""
        assert self._loop is not None, "start_loop first"
        return self._loop

    def send(self, message: FromWorker) -> None:
        frame = wire.encode(message)
        with self.send_lock:
            self.conn.send_bytes(frame)

    # -- connic.tools, forwarded to pytest's process --------------------------------------
    def install_placeholders(self) -> None:
        self._placeholders = PlaceholderSwap(self._forward)
        self._placeholders.install()

    def rebind(self, modules: list[types.ModuleType]) -> None:
        self._placeholders.rebind(modules, undo=False)  # the run's fresh modules are dropped after it

    async def _forward(self, name: str, params: dict[str, object]) -> object:
        future: Future[object] = Future()
        rid = next(self.request_ids)
        self.requests[rid] = future
        self.send(ServiceRequest(CALL_ID.get(), rid, name, {str(k): to_data(v) for k, v in params.items()}))
        return await asyncio.wrap_future(future)

    def handle_service_returned(self, message: ServiceReturned) -> None:
        future = self.requests.pop(message.rid, None)
        if future is not None:
            future.set_result(message.value)

    def handle_service_raised(self, message: ServiceRaised) -> None:
        future = self.requests.pop(message.rid, None)
        if future is not None:
            future.set_exception(decode_exception(message.error))

    # -- functions ----------------------------------------------------------------------
    def resolve(self, ref: Ref) -> Callable[..., object]:
        func = self.functions.get(ref)
        if func is not None:
            return func
        if ref[0] == "fresh":
            _, name, file, qualname = ref
            module = self.fresh.get(name)
            if module is None:
                module = self.fresh[name] = self._load_fresh(name, Path(file))
        else:
            _, name, qualname = ref
            module = sys.modules.get(name) or self._load_project_module(name)
        value: object = module
        for part in qualname.split("."):
            value = getattr(value, part)
        if not callable(value):
            raise TypeError(f"'{type(value).__name__}' object is not callable")
        if ref[0] == "module":
            self.functions[ref] = value
        return value

    def _load_fresh(self, name: str, path: Path) -> types.ModuleType:
        """A builder or mocks module, executed here only; a failing import ends the run, located,
        and carries the import's traceback to pytest's process (``usertb.import_traceback``)."""
        label = f"builder '{path.stem}'" if path.parent.name == "builders" else f"mocks '{path.stem}'"
        try:
            return import_fresh(name, path, label)
        except ModuleLoadError as exc:
            raise attach(UserCodeEnded(str(exc)), import_in(str(exc))) from None

    def _load_project_module(self, name: str) -> types.ModuleType:
        """Tools, middleware, hooks and guardrails are imported by the SDK on first use (the
        project reaches ``adopt`` with each module it imported)."""
        assert self.project is not None
        return self.project.import_module(name)

    def adopt(self, name: str, module: types.ModuleType) -> None:
        """A project module imported here: its ``connic.tools`` names forward to pytest's process
        and it stays for the runs that follow."""
        self.rebind([module])

    # -- calls --------------------------------------------------------------------------
    def handle_call(self, message: Call) -> None:
        try:
            self.call(message)
        except BaseException as exc:  # noqa: BLE001  (no thread left: memory is short)
            self._answer(msgspec.structs.replace(message, back=()), exc, None)

    def call(self, call: Call) -> None:
        if call.seed is not None and not self.seeded:  # the run's seed, before its first call
            random.seed(call.seed)
            self.seeded = True
        try:
            func = self.resolve(call.ref)
        except BaseException as exc:  # noqa: BLE001  (a module of the user's failing to load here)
            self._answer(call, exc, None)
            return
        if inspect.iscoroutinefunction(func):
            self.start_loop()
            self.loop.call_soon_threadsafe(self._start_task, call, func)
        else:
            self.executor.submit(self._run_sync, call, func)

    def _start_task(self, call: Call, func: Callable[..., Awaitable[object]]) -> None:
        async def run() -> object:
            CALL_ID.set(call.cid)
            return await _boxed(func(*call.args, **call.kwargs))

        task = contextvars.Context().run(self.loop.create_task, run())
        task.add_done_callback(lambda t: self._reply_task(call, t))

    def _reply_task(self, call: Call, task: asyncio.Task[object]) -> None:
        """A coroutine's outcome; a ``BaseException`` it raised arrives boxed (``_boxed``)."""
        if task.cancelled():
            self._answer(call, asyncio.CancelledError(), None)
            return
        exc = task.exception()
        result = None if exc is not None else task.result()
        if isinstance(result, _Raised):
            exc, result = result.exc, None
        self._answer(call, exc, result)

    def _run_sync(self, call: Call, func: Callable[..., object]) -> None:
        def run() -> None:
            CALL_ID.set(call.cid)
            try:
                result = func(*call.args, **call.kwargs)
            except BaseException as exc:  # noqa: BLE001  (sent to pytest's process)
                self._answer(call, exc, None)
                return
            if inspect.isawaitable(result):
                awaitable = result

                async def wait() -> object:
                    CALL_ID.set(call.cid)
                    return await _boxed(awaitable)

                def start() -> None:
                    task = contextvars.Context().run(self.loop.create_task, wait())
                    task.add_done_callback(lambda t: self._reply_task(call, t))

                self.start_loop()
                self.loop.call_soon_threadsafe(start)
                return
            self._answer(call, None, result)

        contextvars.Context().run(run)

    def _answer(self, call: Call, exc: BaseException | None, result: object) -> None:
        """Send a call's outcome; when that fails or sends nothing (user code broke the reply
        path: a patched module, a replaced function), the worker ends at once with
        ``wire.REPLY_BROKEN``, which pytest's process reports, instead of leaving the run to wait
        for its whole ``timeout_s``."""
        try:
            self._reply(call, exc, result)
        except BaseException:  # noqa: BLE001  (whatever broke it, this worker can no longer answer)
            os._exit(REPLY_BROKEN)
        if call.cid not in self.answered:
            os._exit(REPLY_BROKEN)

    def _reply(self, call: Call, exc: BaseException | None, result: object) -> None:
        """Send a call's outcome with the arguments to copy back (mutated in place, even when the
        call raised, as in-process)."""
        _flush_stdio()  # what the call printed is in pytest's capture before its outcome arrives
        if isinstance(exc, MemoryError):
            self.send(CallResult(call.cid, OutOfMemory()))
            self.answered.add(call.cid)
            return
        args, kwargs = call.args, call.kwargs
        copies = [(key, to_data(args[key] if isinstance(key, int) else kwargs[key])) for key in call.back
                  if (isinstance(key, int) and key < len(args)) or key in kwargs]
        outcome = _outcome(exc, result, self.root)
        try:
            frame = wire.encode(CallResult(call.cid, outcome, copies))
        except BadFrame as too_big:
            frame = wire.encode(CallResult(call.cid, Untransferable(str(too_big))))
        with self.send_lock:
            self.conn.send_bytes(frame)
            self.answered.add(call.cid)

    def handle_release(self, message: Release) -> None:
        """The run that leased this worker ended (asked only when coverage is measured): save
        what was measured; pytest's process then kills this worker."""
        coverage_share.save(self.coverage)
        self.send(Released())

    def run_loop(self) -> None:
        """The worker's event loop; a ``BaseException`` that escapes a callback of user code does
        not end it (nor print a traceback: the call it belongs to reports it)."""
        while True:
            try:
                self.loop.run_forever()
                return
            except BaseException:  # noqa: BLE001, S112  (the loop goes on for the other calls)
                continue

    def start_loop(self) -> None:
        """The event loop's thread, started by the run's first coroutine (a run of sync code only
        never starts it)."""
        with self.loop_lock:
            if self.loop_thread is None:
                self._loop = asyncio.new_event_loop()
                self.loop_thread = threading.Thread(target=self.run_loop, name="connic-worker-loop", daemon=True)
                self.loop_thread.start()

    def serve(self) -> None:
        while True:
            try:
                message = wire.receive(self.conn, wire.TO_WORKER)
            except (EOFError, OSError, BadFrame):  # pytest's process went away: so do we, with our threads
                os._exit(0)
            self.handle(message)

    def handle(self, message: ToWorker) -> None:
        match message:
            case Call():
                self.handle_call(message)
            case ServiceReturned():
                self.handle_service_returned(message)
            case ServiceRaised():
                self.handle_service_raised(message)
            case Release():
                self.handle_release(message)
            case _:
                unhandled(message)


def _outcome(exc: BaseException | None, result: object, root: Path) -> Returned | Raised | Exited | RaisedBase:
    """A call's outcome for the wire: its result as data, or what it raised."""
    if exc is None:
        return Returned(to_data(result))
    if isinstance(exc, SystemExit):
        code = exc.code
        return Exited(code if code is None or (isinstance(code, int) and to_data(code) == code) else
                      text(safe_text(code)))
    if isinstance(exc, Exception):
        return Raised(encode_exception(exc, safe_text(exc)))
    # KeyboardInterrupt, GeneratorExit, CancelledError, a custom BaseException
    where = user_location(exc, root)
    return RaisedBase(text(type(exc).__name__), text(safe_text(exc)), text(where) if where else None)


class _Raised:
    """A ``BaseException`` of user code, carried out of its task as a value: raised in a task,
    ``KeyboardInterrupt`` and ``SystemExit`` would also escape the event loop."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


async def _boxed(awaitable: Awaitable[object]) -> object:
    try:
        return await awaitable
    except (Exception, asyncio.CancelledError):
        raise
    except BaseException as exc:  # noqa: BLE001  (KeyboardInterrupt, SystemExit, GeneratorExit, ...)
        return _Raised(exc)



class BreakpointInWorker(ConnicError):
    """``breakpoint()`` in user code running in a worker process: no terminal to debug in."""


def no_breakpoint(*args: object, **kwargs: object) -> None:
    """``sys.breakpointhook`` of a worker: the debugger needs pytest's process and terminal."""
    raise BreakpointInWorker(
        "breakpoint() in user code running in a worker process: run pytest with --pdb (or "
        "--connic-isolation=none) so user code runs in pytest's process and the debugger can stop there")



def _flush_stdio() -> None:
    """Flush user code's buffered ``sys.stdout``/``sys.stderr`` (a worker ends with ``os._exit``,
    which would drop what a block-buffered stream still holds)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()
