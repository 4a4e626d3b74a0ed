"""pytest's side of the worker processes: a pool per project, a lease per run.

The project's template (``template.py``, ``template_process.py``) loads the project once, started in the background while
pytest collects (``prestart``); every run leases a worker freshly forked from it for its whole
duration (builder ``build()``, the agent, ``cleanup()``: one sandbox per run, as on Connic), and
the worker is killed when the run ends, so no run sees what another left. The pool keeps as many
workers forked ahead as runs have needed at once (at most ``size``), so a run rarely waits for a
fork. A run's calls, nested ones included, are multiplexed over its worker's pipe with call ids.
What crosses is the message set of ``wire.py``; ``template.Template`` and ``endpoint.Worker``
handle the messages of the template and of a worker, one ``handle_<message>`` method each; the
arguments a call changed come back through ``copyback.py``.
When a call is cancelled (the run's ``timeout_s`` passed, or the run was stopped) the worker is
killed with its process group and the lease takes a fresh one for what follows (cleanup). A
worker that dies ends the calls it was running with the cause in words.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import itertools
import os
import signal
import sys
import threading
import types
import weakref
from collections.abc import Callable
from pathlib import Path

from pytest_connic.errors import ConnicError
from pytest_connic.execution.executors import ReusingDaemonExecutor
from pytest_connic.execution.isolation import coverage_share
from pytest_connic.execution.isolation.copyback import copy_back, snapshot
from pytest_connic.execution.isolation.endpoint import Pending, Worker
from pytest_connic.execution.isolation.template import (
    DEFAULT_MEMORY_MB,
    START_TIMEOUT_S,
    Template,
    close_prestarted,
    has_user_code,
    prestart,
    taken,
    wait_prestarted,
)
from pytest_connic.execution.isolation.values import to_data
from pytest_connic.execution.isolation.wire import (
    Back,
    BadFrame,
    Call,
    LoadFailed,
    Ready,
    Ref,
    Release,
)
from pytest_connic.project.located import safe_text
from pytest_connic.project.sdk import static_reference
from pytest_connic.runtime.mocks import fresh_origin
from pytest_connic.runtime.signals import InfrastructureFailure, RunFailed, UserCodeEnded
from pytest_connic.runtime.state import CURRENT

__all__ = ["DEFAULT_MEMORY_MB", "Lease", "WorkerPool", "WorkerSpawnError", "WorkerStartError", "close_prestarted",
           "has_user_code", "prestart", "wait_prestarted"]

#: how long a fork of the template may take before the run that waits for it fails
FORK_TIMEOUT_S = 30.0

#: ends the workers of finished runs and asks the template for their successors, off the runs'
#: path (a run's end and its next run's start pay neither a process group's kill nor a fork request)
_KEEPER = ReusingDaemonExecutor("connic-pool-keeper", idle_s=30.0)


class WorkerStartError(ConnicError):
    """A worker process could not start or load the project."""


class WorkerSpawnError(WorkerStartError):
    """No worker process could be started (out of processes or threads, a fork that failed): the
    machine's trouble, not the project's, so an infrastructure error (the session exits 2)."""


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
        #: runs' workers being ended on the keeper thread (``retire``)
        self._retiring: set[Worker] = set()
        self._starting = 0
        #: how many workers runs have needed at once (leased and waiting): kept forked ahead
        self._wanted = 1
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[Worker | str]]] = []
        self._closed = False
        self._template: Template | None = taken(root, memory_mb)
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
                    break
            else:
                worker = None
                future: asyncio.Future[Worker | str] = loop.create_future()
                self._waiters.append((loop, future))
                self._top_up(template)
        if worker is not None:  # one forked ahead: its successor is asked for off this run's path
            self._keep(self._refill)
            return worker
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

    def _refill(self) -> None:
        """Fork what runs will need next (on the keeper thread)."""
        with self._lock:
            template = self._template
            if template is not None:
                self._top_up(template)

    def _keep(self, job: Callable[[], None]) -> None:
        """``job`` on the keeper thread, off the runs' path (here when no thread can start)."""
        try:
            _KEEPER.submit(job)
        except RuntimeError:
            job()

    def retire(self, worker: Worker, reason: str) -> None:
        """A run ended: its worker is killed now (``kill(2)`` of the worker alone: its threads, and
        so what they print, end with it), its process group and the fork of its successor on the
        keeper thread, off the run's path; the template reaps it and kills what is left of its tree."""
        if worker.stopped is None:
            worker.stopped = reason
        with self._lock:
            self._leased.discard(worker)
            self._retiring.add(worker)
        if not worker.process.ended.is_set():
            with contextlib.suppress(OSError):
                os.kill(worker.process.pid, signal.SIGKILL)

        def end() -> None:
            self.discard(worker, reason)
            with self._lock:
                self._retiring.discard(worker)

        self._keep(end)

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
            workers = [*self._leased, *self._idle, *self._retiring]
            self._leased.clear()
            self._idle.clear()
            self._retiring.clear()
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
        #: the acquisition in flight (``acquire``)
        self._taking: asyncio.Future[Worker] | None = None

    def reference(self, func: Callable[..., object]) -> Ref | None:
        return self.pool.reference(func)

    async def acquire(self) -> Worker:
        """The run's worker; calls that need it at once (a model turn's tool calls, the run's first)
        share one acquisition, so they share the worker."""
        worker = self.worker
        if worker is not None and not worker.dead and worker.stopped is None:
            return worker
        taking = self._taking
        if taking is None or taking.done():
            taking = self._taking = asyncio.ensure_future(self._take())
            taking.add_done_callback(_retrieved)
        return await asyncio.shield(taking)

    async def _take(self) -> Worker:
        worker = self.worker
        if worker is not None:  # dead, or stopped (killed after a timeout): a fresh one
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
                   world: tuple[str | None, int | None] | None = None) -> object:
        """Call ``ref`` in the run's worker with ``args`` and ``kwargs`` as data; ``world``: the
        run's recorded world for this call (``RunWorld.for_call``), of which the worker takes the
        seed for ``random`` (user code reads the real clock). The run's first call takes its
        worker: one that cannot start ends the run, an infrastructure error when no process could
        start (``WorkerSpawnError``), else a failure (the project did not load)."""
        try:
            worker = await self.acquire()
        except WorkerSpawnError as exc:
            raise InfrastructureFailure(str(exc)) from None
        except WorkerStartError as exc:
            raise RunFailed(str(exc)) from None
        loop = asyncio.get_running_loop()
        cid = next(self._ids)
        future: asyncio.Future[object] = loop.create_future()
        back: Back = tuple(i for i, a in enumerate(args) if type(a) in (dict, list))
        if type(kwargs.get("context")) is dict:
            back = (*back, "context")
        pending = worker.pending[cid] = Pending(loop, future, contextvars.copy_context(), label)
        data_args = tuple(to_data(a) for a in args)
        data_kwargs = {k: to_data(v) for k, v in kwargs.items()}
        sent = snapshot(back, data_args, data_kwargs)
        try:
            worker.send(Call(cid, ref, data_args, data_kwargs, back, world[1] if world is not None else None))
        except (OSError, ValueError):  # the worker is ending: its reader fails the call with the cause
            if worker.dead and worker.pending.pop(cid, None) is not None and not future.done():
                future.set_exception(UserCodeEnded(f"{label} {worker.cause()}"))
        except BadFrame as exc:  # arguments past the frame's limit
            worker.pending.pop(cid, None)
            raise UserCodeEnded(f"the arguments of {label} cannot be sent to its worker process ({exc})") from None
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
            copy_back(pending.copied, sent, args, kwargs)

    async def release(self) -> None:
        """The run ended: its worker is killed (a fresh one serves the next run); when coverage
        is measured it saves its data first."""
        taking, self._taking = self._taking, None
        if taking is not None and not taking.done():  # a worker it gets goes back to the pool
            taking.cancel()
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
        if self.abandoned or worker.stopped is not None:  # a call was left running, or it was stopped: at once
            self.pool.discard(worker, worker.stopped or "a call was left running")
        else:
            self.pool.retire(worker, "its run ended")



def _retrieved(taking: asyncio.Future[Worker]) -> None:
    """An acquisition's failure is its callers' (retrieved here when they all stopped waiting)."""
    if not taking.cancelled():
        taking.exception()


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


