"""pytest's side of the worker processes: a pool per project, a lease per run.

A run leases one worker for its whole duration (builder ``build()``, the agent, ``cleanup()``:
one sandbox per run, as on Connic); its calls, nested ones included, are multiplexed over that
worker's pipe with call ids. When a call is cancelled (the run's ``timeout_s`` passed, or the run
was stopped) the worker is killed with its process group and the lease takes a fresh one for what
follows (cleanup). A worker that dies ends the calls it was running with the cause in words.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import copy
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
from typing import Any

from pytest_connic.errors import ConnicError
from pytest_connic.execution.isolation import coverage_share, procs
from pytest_connic.execution.isolation.wire import Ref, decode_exception, encode_exception
from pytest_connic.execution.isolation.worker import WorkerSettings, main
from pytest_connic.project.located import safe_text
from pytest_connic.project.sdk import static_reference
from pytest_connic.runtime import placeholders
from pytest_connic.runtime.mocks import fresh_origin
from pytest_connic.runtime.signals import ExitCalled, UserCodeEnded
from pytest_connic.runtime.state import CURRENT

#: how long a worker may take to start and load the project
START_TIMEOUT_S = 120.0
#: the default address-space limit of a worker (``connic_worker_memory_mb``)
DEFAULT_MEMORY_MB = 4096


class WorkerStartError(ConnicError):
    """A worker process could not start or load the project."""


def _context() -> Any:
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

    def preparation_data(name: str) -> dict[str, Any]:
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


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass
class _Pending:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    context: contextvars.Context
    label: str
    copied: dict[Any, Any] = field(default_factory=dict)


@dataclass(eq=False)
class Worker:
    """One worker process, as pytest's process sees it."""

    process: Any
    conn: Any
    memory_mb: int | None
    pending: dict[int, _Pending] = field(default_factory=dict)
    send_lock: threading.Lock = field(default_factory=threading.Lock)
    #: why pytest's process stopped it (its pending calls end with this), None: it was not
    stopped: str | None = None
    dead: bool = False
    ready: Any = None  #: the start's outcome: ("ready", pid) or ("failed", text)
    ready_event: threading.Event = field(default_factory=threading.Event)
    released: Any = None  #: (loop, future) awaiting the worker's answer to "release"
    services: set[asyncio.Task[Any]] = field(default_factory=set)
    #: the worker's own pid (under its keeper, ``procs.py``), once it said it started
    wpid: int | None = None
    #: the module of the project the worker said it is importing while it starts
    loading: str | None = None

    def send(self, message: tuple[Any, ...]) -> None:
        with self.send_lock:
            self.conn.send(message)

    def kill(self, reason: str) -> None:
        """SIGKILL the worker's process group; its keeper then ends every process left in its
        tree (detached ones included) and exits as the worker did (``procs.py``)."""
        if self.stopped is None:
            self.stopped = reason
        pid = self.wpid if self.wpid is not None and procs.supported() else self.process.pid
        if pid is None:
            return
        try:
            if hasattr(os, "killpg"):
                os.killpg(pid, signal.SIGKILL)
            else:  # pragma: no cover
                self.process.kill()
        except (ProcessLookupError, PermissionError, OSError):
            pass
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        if self.wpid is None:  # still starting: no user code ran yet, the keeper goes at once
            with contextlib.suppress(OSError, ValueError, AttributeError):
                self.process.kill()

    def messages(self) -> Iterator[tuple[Any, ...]]:
        """What the worker sends, until it ends: its pipe closes, or its process (the keeper)
        ends, even while a process user code left behind still holds the pipe open."""
        from multiprocessing.connection import wait

        sentinel = self.process.sentinel
        while True:
            ready = wait([self.conn, sentinel])
            if self.conn not in ready:  # ended with nothing more to read
                return
            try:
                yield self.conn.recv()
            except (EOFError, OSError, pickle.UnpicklingError):
                return

    def read(self) -> None:
        """The reader thread: settles calls, starts service requests, notices the worker's death."""
        for message in self.messages():
            kind = message[0]
            if kind == "started":
                self.wpid = message[1]
            elif kind == "importing":
                self.loading = message[1]
            elif kind in ("ready", "failed"):
                self.ready = message
                self.ready_event.set()
            elif kind == "result":
                pending = self.pending.pop(message[1], None)
                if pending is not None:
                    pending.loop.call_soon_threadsafe(_settle, pending, message[2], message[3], message[4], self)
            elif kind == "service":
                self._service(*message[1:])
            elif kind == "released" and self.released is not None:
                loop, future = self.released
                loop.call_soon_threadsafe(_set, future, message[1])
        self._died()

    def _died(self) -> None:
        self.dead = True
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
        if not self.ready_event.is_set():
            self.ready = ("failed", f"the worker process {cause.removeprefix('was ')}")
            self.ready_event.set()
        for pending in list(self.pending.values()):
            error = UserCodeEnded(f"{pending.label} {cause}")
            pending.loop.call_soon_threadsafe(_fail, pending.future, error)
        self.pending.clear()
        for task in list(self.services):
            task.get_loop().call_soon_threadsafe(task.cancel)
        if self.released is not None:
            loop, future = self.released
            loop.call_soon_threadsafe(_set, future, False)
        try:
            self.conn.close()
        except OSError:
            pass

    def _service(self, cid: int | None, rid: int, name: str, params: dict[str, Any]) -> None:
        pending = self.pending.get(cid) if cid is not None else None
        if pending is None:
            error = RuntimeError(f"connic.tools.{name} was called outside a call of user code "
                                 "(from a thread or task the user code left running)")
            self._reply(rid, False, encode_exception(error, str(error)))
            return

        async def serve() -> None:
            try:
                value = await placeholders.dispatch(name, params)
            except BaseException as exc:
                if isinstance(exc, asyncio.CancelledError) and self.dead:
                    raise
                self._reply(rid, False, encode_exception(exc, safe_text(exc)))
                if not isinstance(exc, Exception):
                    raise
                return
            self._reply(rid, True, value)

        def start() -> None:
            task = pending.context.copy().run(asyncio.ensure_future, serve())
            self.services.add(task)
            task.add_done_callback(self.services.discard)

        pending.loop.call_soon_threadsafe(start)

    def _reply(self, rid: int, ok: bool, value: Any) -> None:
        if self.dead:
            return
        try:
            self.send(("service_result", rid, ok, value))
        except (OSError, ValueError):
            pass
        except Exception as exc:  # noqa: BLE001  (a service result that does not pickle)
            self.send(("service_result", rid, False, encode_exception(exc, safe_text(exc))))


def _set(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _fail(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


def _settle(pending: _Pending, status: str, data: Any, returned: bytes | None, worker: Worker) -> None:
    """Settle a call's future with (result, copied-back arguments) or its exception."""
    future = pending.future
    if future.done():
        return
    label = pending.label
    copied: dict[Any, Any] = {}
    if returned is not None:
        try:
            copied = pickle.loads(returned)
        except Exception:  # noqa: BLE001  (a class pytest's process cannot import: not copied back)
            copied = {}
    pending.copied = copied
    if status == "ok":
        try:
            future.set_result(pickle.loads(data))
        except Exception as exc:  # noqa: BLE001  (a class pytest's process cannot import)
            future.set_exception(UserCodeEnded(
                f"{label} returned a value pytest's process cannot rebuild "
                f"({type(exc).__name__}: {safe_text(exc)}); return JSON-like data"))
    elif status == "untransferable":
        future.set_exception(UserCodeEnded(
            f"{label} returned a value that cannot leave its worker process ({data}); return JSON-like data"))
    elif status == "error":
        future.set_exception(decode_exception(data))
    elif status == "exit":
        future.set_exception(ExitCalled(data))
    elif status == "memory":
        limit = f"{worker.memory_mb} MiB" if worker.memory_mb else "the machine's memory"
        future.set_exception(UserCodeEnded(
            f"{label} went past the memory limit of its worker process ({limit}, ini connic_worker_memory_mb)"))
        worker.kill("its memory limit was reached")
    else:  # a BaseException
        type_name, text, where = data
        detail = f": {text}" if text else ""
        at = f" at {where}" if where else ""
        future.set_exception(UserCodeEnded(f"{label} raised {type_name}{detail}{at}"))


class WorkerPool:
    """The worker processes of one project: started lazily, at most ``size``, reused across runs."""

    def __init__(self, root: Path, *, size: int, memory_mb: int | None = DEFAULT_MEMORY_MB) -> None:
        self.root = root
        self.size = max(1, size)
        self.memory_mb = memory_mb
        self._lock = threading.Lock()
        self._idle: list[Worker] = []
        self._all: set[Worker] = set()
        self._booting: set[Worker] = set()
        self._starting = 0
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[Worker | None]]] = []
        self._closed = False
        self._references: weakref.WeakKeyDictionary[Any, Ref | None] = weakref.WeakKeyDictionary()
        atexit.register(self.close)

    # -- references ----------------------------------------------------------------------
    def reference(self, func: Callable[..., Any]) -> Ref | None:
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

    # -- workers -------------------------------------------------------------------------
    def _spawn(self) -> Worker:
        """Start a worker process (blocking for the few milliseconds ``multiprocessing`` takes)."""
        ctx = _context()
        parent, child = ctx.Pipe(duplex=True)
        settings = WorkerSettings(root=str(self.root), cwd=os.getcwd(), env=dict(os.environ),
                                  sys_path=list(sys.path), memory_mb=self.memory_mb,
                                  coverage=coverage_share.settings_of_current())
        process = ctx.Process(target=main, args=(child, settings), name="connic-worker", daemon=True)
        with _without_main():
            process.start()
        child.close()
        worker = Worker(process, parent, self.memory_mb)
        with self._lock:
            self._booting.add(worker)  # from now on the session's end kills it, started or not
        try:
            threading.Thread(target=worker.read, name=f"connic-worker-reader-{process.pid}", daemon=True).start()
        except RuntimeError:
            self.discard(worker, "it could not start")
            raise
        return worker

    async def _start(self, timeout_s: float | None) -> Worker:
        """A new worker, once it loaded the project: within ``timeout_s`` (the timeout of the case
        that needs it), else it is killed and the error names the module it was importing."""
        loop = asyncio.get_running_loop()
        try:
            worker = await loop.run_in_executor(None, self._spawn)
        except (RuntimeError, OSError) as exc:  # out of processes or threads (a fork bomb, a pids limit)
            raise WorkerStartError(f"a worker process could not start: {type(exc).__name__}: {safe_text(exc)}") \
                from None
        limit = START_TIMEOUT_S if timeout_s is None else min(timeout_s, START_TIMEOUT_S)
        try:
            ready = await loop.run_in_executor(None, worker.ready_event.wait, limit)
        except BaseException as exc:  # cancelled (the session stops) or no thread left to wait on
            self.discard(worker, "its start was cancelled")
            if isinstance(exc, RuntimeError):
                raise WorkerStartError(f"a worker process could not start: RuntimeError: {safe_text(exc)}") from None
            raise
        if not ready:
            self.discard(worker, "it did not start in time")
            what = f"importing {worker.loading}" if worker.loading else "loading the project"
            label = "timeout_s" if timeout_s is not None and timeout_s <= START_TIMEOUT_S else "the start-up limit"
            raise WorkerStartError(f"a worker process did not finish {what} within {limit:g}s ({label})")
        if worker.ready[0] != "ready":
            self.discard(worker, "it failed to start")
            raise WorkerStartError(f"a worker process could not load the project: {worker.ready[1]}")
        with self._lock:
            self._booting.discard(worker)
            self._all.add(worker)
        return worker

    async def acquire(self, timeout_s: float | None = None) -> Worker:
        """An idle worker, a new one when fewer than ``size`` exist, else the next one released."""
        loop = asyncio.get_running_loop()
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if not worker.dead:
                    return worker
            if len(self._all) + self._starting < self.size:
                self._starting += 1
                start = True
            else:
                future: asyncio.Future[Worker | None] = loop.create_future()
                self._waiters.append((loop, future))
                start = False
        if not start:
            worker_or_none = await future
            if worker_or_none is None:  # a worker went away: there is room to start one
                return await self.acquire(timeout_s)
            return worker_or_none
        try:
            return await self._start(timeout_s)
        finally:
            with self._lock:
                self._starting -= 1

    def give_back(self, worker: Worker, healthy: bool) -> None:
        """A run's lease ended: the worker serves the next run, or is retired."""
        if not healthy or worker.dead or self._closed:
            self.discard(worker, "retired")
            return
        self._wake(worker)

    def _wake(self, worker: Worker | None) -> None:
        with self._lock:
            while self._waiters:
                loop, future = self._waiters.pop(0)
                if not future.done() and not loop.is_closed():
                    loop.call_soon_threadsafe(_set, future, worker)
                    return
            if worker is not None:
                self._idle.append(worker)

    def discard(self, worker: Worker, reason: str) -> None:
        """Kill ``worker`` (a timeout, a cancelled run, a crash) and forget it."""
        worker.kill(reason)
        with self._lock:
            self._all.discard(worker)
            self._booting.discard(worker)
        self._wake(None)

    def lease(self, timeout_s: float | None = None) -> Lease:
        """A run's lease; a worker it starts must load the project within ``timeout_s``."""
        return Lease(self, timeout_s)

    def close(self) -> None:
        """Kill every worker (the session ends; cleanup has run)."""
        self._closed = True
        with self._lock:
            workers = [*self._all, *self._booting]
            self._all.clear()
            self._booting.clear()
            self._idle.clear()
        for worker in workers:
            worker.kill("the session ended")
        for worker in workers:
            worker.process.join(2)


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

    def reference(self, func: Callable[..., Any]) -> Ref | None:
        return self.pool.reference(func)

    async def acquire(self) -> Worker:
        worker = self.worker
        if worker is None or worker.dead or worker.stopped is not None:
            if worker is not None:
                self.pool.discard(worker, worker.stopped or "it died")
            self.worker = None
            if self.failed is not None:
                raise WorkerStartError(str(self.failed))
            try:
                worker = self.worker = await self.pool.acquire(self.timeout_s)
            except WorkerStartError as exc:
                self.failed = exc
                raise
        return worker

    async def call(self, ref: Ref, label: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                   world: tuple[str | None, int | None] | None = None) -> Any:
        """``world``: the run's recorded wall clock for this call and its seed (worker.py)."""
        worker = await self.acquire()
        loop = asyncio.get_running_loop()
        cid = next(self._ids)
        future: asyncio.Future[Any] = loop.create_future()
        back: tuple[int | str, ...] = tuple(i for i, a in enumerate(args) if type(a) in (dict, list))
        if type(kwargs.get("context")) is dict:
            back = (*back, "context")
        pending = worker.pending[cid] = _Pending(loop, future, contextvars.copy_context(), label)
        sent = _snapshot(back, args, kwargs)
        try:
            worker.send(("call", cid, ref, args, kwargs, back, world))
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
        """The run ended: the worker goes back to the pool (retired when user code left threads)."""
        worker, self.worker = self.worker, None
        if worker is None:
            return
        if worker.dead or worker.stopped is not None or self.abandoned:
            self.pool.discard(worker, worker.stopped or ("a call was left running" if self.abandoned else "it died"))
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        worker.released = (loop, future)
        try:
            worker.send(("release",))
            clean = await asyncio.wait_for(future, 10)
        except (OSError, ValueError, asyncio.TimeoutError):
            clean = False
        finally:
            worker.released = None
        self.pool.give_back(worker, bool(clean))


def _snapshot(back: tuple[int | str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[Any, Any]:
    """What the mutable arguments held when the call was sent (the base of ``_copy_back``)."""
    try:
        return {key: copy.deepcopy(args[key] if isinstance(key, int) else kwargs[key]) for key in back}
    except Exception:  # noqa: BLE001  (an argument that does not copy: its mutations replace it)
        return {}


def _copy_back(copied: dict[Any, Any], sent: dict[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
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


def _merge(ours: Any, base: Any, theirs: Any) -> None:
    """Apply the change from ``base`` to ``theirs`` onto ``ours`` in place (dicts and lists)."""
    if isinstance(ours, dict) and isinstance(base, dict) and isinstance(theirs, dict):
        for key in set(base) | set(theirs):
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


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a is b or a == b)
    except Exception:  # noqa: BLE001  (a user value whose __eq__ raises)
        return False


def _reference(func: Any, root: Path) -> Ref | None:
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


def _lookup(namespace: Any, qualname: str) -> Any:
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
