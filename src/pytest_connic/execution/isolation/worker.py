"""Worker processes: a template loads the project once; each run gets a worker forked from it.

Started by ``pool.py`` (``multiprocessing``, ``forkserver`` on Linux with this module preloaded):
the process ``multiprocessing`` starts is the project's *template*. It loads the project (the
SDK, ``LoadedProject``, the ``connic.tools`` forwarders) once, runs no user call, and then forks a
fresh worker for every run that pytest's process asks for (``("fork", token, ForkSettings)``, the
worker's end of its pipe passed along as a descriptor). So every run starts in the state the
template has: its modules' globals, signal handlers, umask, limits, descriptors, never what an
earlier run left. A worker serves one run and is killed when the run ends.

In a worker the main thread reads the pipe; a sync function runs on a thread, a coroutine
function on the worker's event loop (its own thread). ``connic.tools`` calls travel back to
pytest's process, which runs the service for the invocation that made the call.

The template and its workers ignore SIGINT and each worker leads its own process group (pytest's
process decides when a run stops, and kills the whole group, children of user code included).
The template is a child subreaper (``procs.py``): a worker's detached descendants stay in the
worker's tree while it lives and become the template's children when it ends, and the template
kills every child that is not a live worker; it reports each worker's end (``("exit", pid,
status)``) at once. Everything exits when pytest's process closes the pipes.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import datetime as dt
import inspect
import os
import pickle
import random
import signal
import sys
import threading
import types
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_connic.errors import ConnicError
from pytest_connic.execution.executors import ReusingDaemonExecutor
from pytest_connic.execution.isolation import coverage_share, procs
from pytest_connic.execution.isolation.wire import Ref, decode_exception, encode_exception
from pytest_connic.jsonsafe import to_jsonable
from pytest_connic.project.loaded import LoadedProject
from pytest_connic.project.located import safe_text, user_location
from pytest_connic.runtime.mocks import ModuleLoadError, import_fresh
from pytest_connic.runtime.placeholders import PlaceholderSwap
from pytest_connic.runtime.signals import UserCodeEnded
from pytest_connic.usertb import attach, import_in

#: the id of the call a piece of user code runs for (``connic.tools`` requests carry it)
CALL_ID: contextvars.ContextVar[int | None] = contextvars.ContextVar("connic_worker_call", default=None)


@dataclass(frozen=True)
class WorkerSettings:
    """What a worker needs of pytest's process to load the project as it does."""

    root: str
    cwd: str
    env: dict[str, str]
    sys_path: list[str]
    memory_mb: int | None
    #: coverage.py's settings when pytest's process measures coverage (``coverage_share.py``)
    coverage: dict[str, Any] | None = None


@dataclass(frozen=True)
class ForkSettings:
    """What a worker takes of pytest's process when it is forked for a run."""

    cwd: str
    env: dict[str, str]
    sys_path: list[str]


class _Worker:
    """The project as a worker uses it: built in the template (its pipe is the template's while
    the project loads), bound to a run's pipe in each forked worker (``bind``)."""

    def __init__(self, conn: Any, settings: WorkerSettings) -> None:
        self.conn = conn
        self.root = Path(settings.root)
        self.send_lock = threading.Lock()
        self.requests: dict[int, Future[Any]] = {}
        self.request_ids = iter(range(1, sys.maxsize))
        self.fresh: dict[str, types.ModuleType] = {}
        self.functions: dict[Ref, Callable[..., Any]] = {}
        self.project: LoadedProject | None = None
        self.world = _World()
        #: coverage.py measuring this worker (``coverage_share.py``; None: not measured)
        self.coverage: Any = None

    def bind(self, conn: Any) -> None:
        """In a forked worker: the run's pipe, and the threads and loop of its own."""
        self.conn = conn
        self.send_lock = threading.Lock()
        self.executor = ReusingDaemonExecutor("connic-call", idle_s=60.0)
        self.loop = asyncio.new_event_loop()
        self.loop_thread: threading.Thread | None = None
        self.loop_lock = threading.Lock()

    def send(self, message: tuple[Any, ...]) -> None:
        with self.send_lock:
            self.conn.send(message)

    # -- connic.tools, forwarded to pytest's process --------------------------------------
    def install_placeholders(self) -> None:
        self._placeholders = PlaceholderSwap(self._forward)
        self._placeholders.install()

    def rebind(self, modules: list[types.ModuleType]) -> None:
        self._placeholders.rebind(modules, undo=False)  # the run's fresh modules are dropped after it

    async def _forward(self, name: str, params: dict[str, Any]) -> Any:
        future: Future[Any] = Future()
        rid = next(self.request_ids)
        self.requests[rid] = future
        self.send(("service", CALL_ID.get(), rid, name, params))
        return await asyncio.wrap_future(future)

    # -- functions ----------------------------------------------------------------------
    def resolve(self, ref: Ref) -> Callable[..., Any]:
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
        value: Any = module
        for part in qualname.split("."):
            value = getattr(value, part)
        if ref[0] == "module":
            self.functions[ref] = value
        return value  # type: ignore[no-any-return]

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
    def call(self, cid: int, ref: Ref, args: tuple[Any, ...], kwargs: dict[str, Any],
             back: tuple[Any, ...], world: tuple[str | None, int | None] | None = None) -> None:
        if world is not None:
            self.world.enter(*world)
        try:
            func = self.resolve(ref)
        except BaseException as exc:  # noqa: BLE001  (a module of the user's failing to load here)
            self._reply(cid, exc, None, args, kwargs, back)
            return
        if inspect.iscoroutinefunction(func):
            self.start_loop()
            self.loop.call_soon_threadsafe(self._start_task, cid, func, args, kwargs, back)
        else:
            self.executor.submit(self._run_sync, cid, func, args, kwargs, back)

    def _start_task(self, cid: int, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                    back: tuple[Any, ...]) -> None:
        async def run() -> Any:
            CALL_ID.set(cid)
            return await _boxed(func(*args, **kwargs))

        task = contextvars.Context().run(self.loop.create_task, run())
        task.add_done_callback(lambda t: self._reply_task(cid, t, args, kwargs, back))

    def _reply_task(self, cid: int, task: asyncio.Task[Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                    back: tuple[Any, ...]) -> None:
        """A coroutine's outcome; a ``BaseException`` it raised arrives boxed (``_boxed``)."""
        if task.cancelled():
            self._reply(cid, asyncio.CancelledError(), None, args, kwargs, back)
            return
        exc = task.exception()
        result = None if exc is not None else task.result()
        if isinstance(result, _Raised):
            exc, result = result.exc, None
        self._reply(cid, exc, result, args, kwargs, back)

    def _run_sync(self, cid: int, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                  back: tuple[Any, ...]) -> None:
        def run() -> None:
            CALL_ID.set(cid)
            try:
                result = func(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001  (sent to pytest's process)
                self._reply(cid, exc, None, args, kwargs, back)
                return
            if inspect.isawaitable(result):
                async def wait() -> Any:
                    CALL_ID.set(cid)
                    return await _boxed(result)

                def start() -> None:
                    task = contextvars.Context().run(self.loop.create_task, wait())
                    task.add_done_callback(lambda t: self._reply_task(cid, t, args, kwargs, back))

                self.start_loop()
                self.loop.call_soon_threadsafe(start)
                return
            self._reply(cid, None, result, args, kwargs, back)

        contextvars.Context().run(run)

    def _reply(self, cid: int, exc: BaseException | None, result: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any], back: tuple[Any, ...]) -> None:
        """Send a call's outcome with the arguments to copy back (mutated in place, even when the
        call raised, as in-process)."""
        _flush_stdio()  # what the call printed is in pytest's capture before its outcome arrives
        copied = {key: (args[key] if isinstance(key, int) else kwargs[key]) for key in back
                  if (isinstance(key, int) and key < len(args)) or key in kwargs}
        try:
            returned = pickle.dumps(copied) if copied else None
        except BaseException:  # noqa: BLE001  (something unpicklable put in the context)
            try:
                returned = pickle.dumps({k: to_jsonable(v) for k, v in copied.items()})
            except BaseException:  # noqa: BLE001
                returned = None
        if exc is None:
            try:
                data = pickle.dumps(result)
            except BaseException:  # noqa: BLE001  (an unpicklable result crosses as its JSON-safe form)
                try:
                    data = pickle.dumps(to_jsonable(result))
                except BaseException as error:  # noqa: BLE001
                    self.send(("result", cid, "untransferable", f"{type(error).__name__}: {safe_text(error)}",
                               returned))
                    return
            self.send(("result", cid, "ok", data, returned))
        elif isinstance(exc, MemoryError):
            self.send(("result", cid, "memory", None, None))
        elif isinstance(exc, SystemExit):
            code = exc.code if exc.code is None or isinstance(exc.code, int) else safe_text(exc.code)
            self.send(("result", cid, "exit", code, returned))
        elif isinstance(exc, Exception):
            self.send(("result", cid, "error", encode_exception(exc, safe_text(exc)), returned))
        else:  # KeyboardInterrupt, GeneratorExit, CancelledError, a custom BaseException
            where = user_location(exc, self.root)
            self.send(("result", cid, "base", (type(exc).__name__, safe_text(exc), where), returned))

    def settle(self, rid: int, ok: bool, value: Any) -> None:
        future = self.requests.pop(rid, None)
        if future is None:
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(decode_exception(value))

    def release(self) -> None:
        """The run that leased this worker ended (asked only when coverage is measured): save
        what was measured; pytest's process then kills this worker."""
        coverage_share.save(self.coverage)
        self.send(("released", False))

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
                self.loop_thread = threading.Thread(target=self.run_loop, name="connic-worker-loop", daemon=True)
                self.loop_thread.start()

    def serve(self) -> None:
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):  # pytest's process went away: so do we, with our threads
                os._exit(0)
            kind = message[0]
            if kind == "call":
                try:
                    self.call(*message[1:])
                except BaseException as exc:  # noqa: BLE001  (no thread left: memory is short)
                    self._reply(message[1], exc, None, (), {}, ())
            elif kind == "service_result":
                self.settle(*message[1:])
            elif kind == "release":
                self.release()
            elif kind == "stop":
                os._exit(0)


class _World:
    """The recorded world of the run that leases this worker (models/world.py): ``random`` seeded
    before its first call, and the wall clock held (``time-machine``, imported only then) at the
    time each call reads, in the recording and in a replay alike, so a timestamp written into a
    prompt is the same to the microsecond; monotonic clocks and ``perf_counter`` are not
    touched. Calls are started one at a time on the main thread, so no lock is needed; the calls of
    one run that overlap read the clock of the one started last."""

    def __init__(self) -> None:
        self.seeded = False
        self.traveller: Any = None
        self.coordinates: Any = None

    def enter(self, at: str | None, seed: int | None) -> None:
        if seed is not None and not self.seeded:
            random.seed(seed)
            self.seeded = True
        if at is None:
            return
        destination = dt.datetime.fromisoformat(at)
        if self.traveller is None:
            import time_machine

            self.traveller = time_machine.travel(destination, tick=False)
            self.coordinates = self.traveller.start()
        else:
            self.coordinates.move_to(destination)

    def leave(self) -> None:
        """The run ended: the real clock again, and the next run seeds ``random`` anew."""
        if self.traveller is not None:
            self.traveller.stop()
        self.traveller = self.coordinates = None
        self.seeded = False


class _Raised:
    """A ``BaseException`` of user code, carried out of its task as a value: raised in a task,
    ``KeyboardInterrupt`` and ``SystemExit`` would also escape the event loop."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


async def _boxed(awaitable: Any) -> Any:
    try:
        return await awaitable
    except (Exception, asyncio.CancelledError):
        raise
    except BaseException as exc:  # noqa: BLE001  (KeyboardInterrupt, SystemExit, GeneratorExit, ...)
        return _Raised(exc)


def _limit_memory(memory_mb: int | None) -> None:
    if not memory_mb:
        return
    try:
        import resource
    except ImportError:  # Windows: no limit
        return
    limit = memory_mb * 1024 * 1024
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ValueError, OSError):
        pass


class BreakpointInWorker(ConnicError):
    """``breakpoint()`` in user code running in a worker process: no terminal to debug in."""


def _no_breakpoint(*args: Any, **kwargs: Any) -> None:
    """``sys.breakpointhook`` of a worker: the debugger needs pytest's process and terminal."""
    raise BreakpointInWorker(
        "breakpoint() in user code running in a worker process: run pytest with --pdb (or "
        "--connic-isolation=none) so user code runs in pytest's process and the debugger can stop there")


def main(conn: Any, settings: WorkerSettings) -> None:
    """The template's entry point (``multiprocessing.Process`` target): load the project, then
    fork a worker per request until pytest's process closes the pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.breakpointhook = _no_breakpoint
    if hasattr(os, "setpgid"):
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
    procs.become_subreaper()  # a worker's detached descendants come here when it ends
    conn.send(("started", os.getpid()))
    try:  # user code may start processes of its own (a daemonic process may not)
        import multiprocessing

        multiprocessing.current_process().daemon = False
    except (AssertionError, AttributeError):  # pragma: no cover
        pass
    os.chdir(settings.cwd)
    os.environ.clear()
    os.environ.update(settings.env)
    sys.path[:] = settings.sys_path
    measuring = coverage_share.start(settings.coverage)  # import-time lines count too
    worker = _Worker(conn, settings)
    try:
        worker.install_placeholders()
        with _reporting_imports(worker, Path(settings.root)):
            project = worker.project = load_project(Path(settings.root), worker.adopt)
        worker.rebind(project.modules())
    except BaseException as exc:  # noqa: BLE001  (reported to pytest's process)
        conn.send(("failed", f"{type(exc).__name__}: {safe_text(exc)}"))
        return
    coverage_share.save(measuring)
    import gc

    gc.collect()
    gc.freeze()  # the workers' collections leave the template's objects alone: shared, not copied
    conn.send(("ready", os.getpid()))
    _Template(conn, settings, worker, measuring).serve()


def load_project(root: Path, on_import: Callable[[str, types.ModuleType], None]) -> LoadedProject:
    """The project as the template reads it, once (every worker is forked from it): statically,
    as pytest's process reads it, so no user module runs in the template; a run's worker imports
    the modules its calls name (``on_import`` sees each), so what a module does at import happens
    in that run's worker, bounded and reported like any call."""
    return LoadedProject(root, static=True, on_import=on_import)


class _Template:
    """The template's loop: fork a worker per request, report each worker's end, and kill what a
    dead worker left (its descendants become this subreaper's children)."""

    def __init__(self, conn: Any, settings: WorkerSettings, worker: _Worker, measuring: Any) -> None:
        self.conn = conn
        self.settings = settings
        self.worker = worker
        self.measuring = measuring
        self.workers: set[int] = set()
        self.wake_r, self.wake_w = os.pipe()

    def serve(self) -> None:
        from multiprocessing.connection import wait
        from multiprocessing.reduction import recv_handle

        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, _ignore)
        while True:
            ready = wait([self.conn, self.wake_r])
            if self.wake_r in ready:
                with contextlib.suppress(OSError):
                    os.read(self.wake_r, 4096)
                self.reap()
            if self.conn not in ready:
                continue
            try:
                message = self.conn.recv()
                if message[0] == "preload":
                    self.preload(message[1], message[2])
                    continue
                if message[0] == "fork":
                    fd = recv_handle(self.conn)
                    stdio = (recv_handle(self.conn), recv_handle(self.conn))
                    self.fork(message[1], message[2], fd, stdio)
                    continue
            except (EOFError, OSError):  # pytest's process went away
                pass
            self.shutdown()

    def preload(self, names: list[str], timeout_s: float) -> None:
        """Import ``names`` here (modules a worker imported without trouble for an agent's first
        case) so the workers forked next start with them loaded; each import is bounded by
        ``timeout_s`` (an alarm: the template runs no other code meanwhile), and a failure only
        leaves the module to each run's worker, as before."""
        project = self.worker.project
        if project is None:
            return
        previous = signal.signal(signal.SIGALRM, _preload_timeout)
        try:
            for name in names:
                signal.setitimer(signal.ITIMER_REAL, max(timeout_s, 0.001))
                try:
                    project.preload(name)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
        finally:
            signal.signal(signal.SIGALRM, previous)

    def fork(self, token: int, settings: ForkSettings, fd: int, stdio: tuple[int, int]) -> None:
        """Fork a worker whose pipe is ``fd`` and whose descriptors 1 and 2 are ``stdio`` (pytest's
        process's when it asked: its capture, or the terminal under ``-s``)."""
        if not hasattr(os, "fork"):  # pragma: no cover  (Windows)
            _close(fd, *stdio)
            why = "process isolation forks its workers, which Windows cannot: use --connic-isolation=none"
            self.conn.send(("forked", token, why))
            return
        try:
            pid = os.fork()
        except OSError as exc:  # out of processes
            _close(fd, *stdio)
            self.conn.send(("forked", token, f"{type(exc).__name__}: {safe_text(exc)}"))
            return
        if pid == 0:
            try:
                for target, source in zip((1, 2), stdio):
                    os.dup2(source, target)
                _close(*stdio)
                self.become_worker(settings, fd)
            finally:
                os._exit(1)
        _close(fd, *stdio)
        self.workers.add(pid)
        self.conn.send(("forked", token, pid))

    def become_worker(self, settings: ForkSettings, fd: int) -> None:
        """In the forked child: a worker of one run, in the template's state."""
        from multiprocessing.connection import Connection

        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.close(self.wake_r)
        os.close(self.wake_w)
        self.conn.close()
        if hasattr(os, "setpgid"):
            with contextlib.suppress(OSError):
                os.setpgid(0, 0)
        procs.become_subreaper()  # a detached grandchild stays this worker's child while it lives
        procs.die_with_parent()
        if os.getcwd() != settings.cwd:
            os.chdir(settings.cwd)
        if os.environ != settings.env:
            os.environ.clear()
            os.environ.update(settings.env)
        sys.path[:] = settings.sys_path
        worker = self.worker
        worker.coverage = coverage_share.restart(self.measuring, self.settings.coverage)
        _limit_memory(self.settings.memory_mb)  # the limit is for user code's calls
        worker.bind(Connection(fd))
        worker.serve()

    def reap(self) -> None:
        """Report the workers that ended; kill every other child (what a dead worker left)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in self.workers:
                self.workers.discard(pid)
                with contextlib.suppress(OSError, ValueError):
                    self.conn.send(("exit", pid, status))
        for child in procs.children(os.getpid()):
            if child not in self.workers:
                procs.kill_tree(child)
                with contextlib.suppress(OSError):
                    os.kill(child, signal.SIGKILL)

    def shutdown(self) -> None:
        """pytest's process is gone or asked: every worker and what they started ends, then this."""
        for pid in self.workers:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        procs.kill_tree(os.getpid())
        os._exit(0)


def _ignore(*args: Any) -> None:
    """SIGCHLD's handler in the template: the signal only wakes its loop (``set_wakeup_fd``)."""


class _ImportReporter:
    """A ``sys.meta_path`` entry that finds nothing: it tells pytest's process which module of
    the project is being imported (a start that hangs then names it)."""

    def __init__(self, worker: _Worker, root: Path) -> None:
        self.worker = worker
        self.root = root

    def report(self, origin: Any) -> None:
        try:
            path = Path(str(origin)).resolve()
            if path.is_relative_to(self.root):
                self.worker.send(("importing", path.relative_to(self.root).as_posix()))
        except (OSError, ValueError):
            pass

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path)
        if spec is not None and spec.origin:
            self.report(spec.origin)


@contextlib.contextmanager
def _reporting_imports(worker: _Worker, root: Path) -> Iterator[None]:
    """While the project loads: every module of the project imported (through ``import`` or the
    SDK's ``spec_from_file_location``) is named to pytest's process."""
    import importlib.util

    reporter = _ImportReporter(worker, root.resolve())
    original = importlib.util.spec_from_file_location

    def spec_from_file_location(name: str, location: Any = None, *args: Any, **kwargs: Any) -> Any:
        reporter.report(location)
        return original(name, location, *args, **kwargs)

    sys.meta_path.insert(0, reporter)
    importlib.util.spec_from_file_location = spec_from_file_location
    try:
        yield
    finally:
        importlib.util.spec_from_file_location = original
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(reporter)


def _close(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


class _PreloadTimeout(ConnicError):
    """A preload in the template took longer than the case's ``timeout_s``."""


def _preload_timeout(signum: int, frame: Any) -> None:
    raise _PreloadTimeout()


def _flush_stdio() -> None:
    """Flush user code's buffered ``sys.stdout``/``sys.stderr`` (a worker ends with ``os._exit``,
    which would drop what a block-buffered stream still holds)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()
