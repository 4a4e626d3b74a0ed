"""pytest's side of a project's template process (``template_process.py``): started once per
project and session (in the background while pytest collects, ``prestart``), it forks a worker
per request; its messages (``FromTemplate``) are handled one ``handle_<message>`` each, on its
reader thread.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_connic.execution.executors import ReusingDaemonExecutor
from pytest_connic.execution.isolation import coverage_share, procs, wire
from pytest_connic.execution.isolation.endpoint import (
    ENDED,
    Waiter,
    Worker,
    WorkerProcess,
    hang_up,
    next_message,
    signal_name,
)
from pytest_connic.execution.isolation.template_process import main
from pytest_connic.execution.isolation.wire import (
    BadFrame,
    Fork,
    Forked,
    ForkFailed,
    ForkSettings,
    FromTemplate,
    Importing,
    LoadFailed,
    Preload,
    Ready,
    Started,
    ToTemplate,
    ToWorker,
    WorkerExited,
    WorkerSettings,
    unhandled,
)
from pytest_connic.project.located import safe_text

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.context import ForkServerContext, SpawnContext
    from multiprocessing.process import BaseProcess



#: how long the template may take to start and load the project
START_TIMEOUT_S = 120.0
#: how long the session waits, before its first case, for the templates started while collecting
PREWAIT_S = 5.0
#: the default address-space limit of a worker (``connic_worker_memory_mb``)
DEFAULT_MEMORY_MB = 4096


def _context() -> ForkServerContext | SpawnContext:
    import multiprocessing

    if sys.platform.startswith("linux"):
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([__name__.rsplit(".", 1)[0] + ".template_process"])
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
        #: why pytest's process ended the template (a frame that was not a message), None: it did not
        self.broken: str | None = None
        #: the template's mark (``procs.mark``): what holds it was started below the template
        self.mark = 0
        #: the session closes the template (its end is no loss)
        self.closing = False
        self._lock = threading.Lock()
        #: one joiner at a time: two threads polling the fork server's status pipe at once, one reads
        #: the exit code and the other the end of the pipe, which multiprocessing reports as 255
        self._join_lock = threading.Lock()
        self._tokens = itertools.count(1)
        #: the working directory, environment and ``sys.path`` of the last ``Fork`` sent (the
        #: template keeps them: a ``Fork`` whose settings are the same carries none)
        self._sent: tuple[str, dict[bytes, bytes], list[str]] | None = None
        self._forks: dict[int, _Asked] = {}
        self._workers: dict[int, WorkerProcess] = {}

    def start(self) -> None:
        """Start the process (the few milliseconds ``multiprocessing`` takes); it loads the project
        in the background. Raises ``RuntimeError``/``OSError`` when no process or thread is left."""
        ctx = _context()
        parent, child = ctx.Pipe(duplex=True)
        settings = WorkerSettings(raw_root=wire.raw(str(self.root)),
                                  process=ForkSettings.of(os.getcwd(), _environ(), list(sys.path)),
                                  memory_mb=self.memory_mb,
                                  coverage=coverage_share.settings_of_current())
        process = ctx.Process(target=main, args=(child, wire.encode(settings)), name="connic-template", daemon=True)
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
        waiter = Waiter(conn, process.sentinel)
        while True:
            try:
                received = next_message(conn, waiter, wire.FROM_TEMPLATE)
            except BadFrame as exc:  # the template is not itself: it goes
                self.broken = f"it sent pytest's process something that is not a message of the protocol: {exc}"
                self.kill()
                break
            if received is ENDED:
                break
            self.handle(received)  # type: ignore[arg-type]
        waiter.close()
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
        self.mark = message.mark

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
            forked = self._workers[pid] = WorkerProcess(pid)
            worker = Worker(forked, asked.conn, asked.memory_mb)
        try:
            _READERS.submit(worker.read)  # a thread of the last worker's, when one is idle
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
                f"was killed by signal {-code} ({signal_name(-code)})" if code is not None else "was lost"
            if self.broken is not None:
                cause = f"was stopped: {self.broken}"
            self.outcome = LoadFailed(f"the worker process {cause.removeprefix('was ')}")
            self.ready.set()
        with self._lock:
            forks, self._forks = list(self._forks.values()), {}
            workers, self._workers = list(self._workers.values()), {}
        lost = "the session ended" if self.closing else f"the project's template process {_ended(code)}"
        for asked in forks:
            asked.callback(lost)
        for forked in workers:  # they die with the template (``die_with_parent``)
            forked.end(None, lost)
        if not self.closing:  # killed from outside: what its workers started is ended here
            procs.kill_marked(self.mark)
        with contextlib.suppress(OSError):
            conn.close()

    def preload(self, names: list[str], timeout_s: float) -> None:
        """Ask the template to import ``names`` (each bounded by ``timeout_s``) for the workers it
        forks next; nothing is awaited (a failure leaves each run to import them itself)."""
        with self._lock:
            if self.dead or not names or self.conn is None:
                return
            with contextlib.suppress(OSError, ValueError):
                wire.send(self.conn, Preload(tuple(names), timeout_s))

    def fork(self, memory_mb: int | None, callback: Callable[[Worker | str], None]) -> None:
        """Ask for a worker; ``callback`` gets it (or why there is none) on the reader thread."""
        from multiprocessing.connection import Pipe

        parent, child = Pipe(duplex=True)
        now = (os.getcwd(), _environ(), list(sys.path))
        with self._lock:
            conn = self.conn
            if self.dead or conn is None:
                parent.close()
                child.close()
                _later(callback, "the project's template process ended")
                return
            token = next(self._tokens)
            self._forks[token] = _Asked(callback, parent, memory_mb)
            settings = None if now == self._sent else ForkSettings.of(*now)  # the template keeps the last
            self._sent = now
            try:
                wire.send(conn, Fork(token, settings))
                # the worker writes where pytest's process writes now (pytest's capture, -s: the
                # terminal), not where the template's descriptors pointed when it started
                _send_fds(conn, [child.fileno(), *_stdio()])
            except (OSError, ValueError) as exc:
                self._sent = None
                self._forks.pop(token, None)
                parent.close()
                _later(callback, f"{type(exc).__name__}: {safe_text(exc)}")
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
        self.closing = True
        if not self.ready.is_set():  # still loading: nothing of a run to end gracefully
            self.kill()
        if self.conn is not None:
            hang_up(self.conn)
        with contextlib.suppress(Exception):
            if self._join(self.process, 2) is None:
                self.kill()
                self._join(self.process, 2)


def _ended(code: int | None) -> str:
    """How a process ended, in words (``code`` as ``multiprocessing`` gives it; None: unknown)."""
    if code is None:
        return "ended"
    if code < 0:
        return f"was killed by signal {-code} ({signal_name(-code)})"
    return f"ended with exit code {code}"


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


def taken(root: Path, memory_mb: int | None) -> Template | None:
    with _PRESTART_LOCK:
        template = _PRESTARTED.get(root)
        if template is None or template.memory_mb != memory_mb or template.dead:
            return None
        return _PRESTARTED.pop(root)



#: the threads that read the workers' pipes, reused from one worker to the next (a thread's start
#: per run was a visible part of pytest's process's cost of a fresh worker)
_READERS = ReusingDaemonExecutor("connic-worker-reader", idle_s=30.0)


def _environ() -> dict[bytes, bytes]:
    """pytest's environment as bytes (what a worker gets): a copy of ``os.environ``'s own bytes
    where it has them (one C-level copy: comparing it with the last one is all a run pays)."""
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict) and all(isinstance(k, bytes) for k in list(data)[:1]):
        return dict(data)
    return {os.fsencode(k): os.fsencode(v) for k, v in os.environ.items()}


def _later(callback: Callable[[Worker | str], None], why: str) -> None:
    """Tell ``callback`` why there is no worker, on a thread of its own: as a fork's outcome comes
    on the reader thread, never in the caller's (which holds the pool's lock)."""
    try:
        threading.Thread(target=callback, args=(why,), name="connic-fork-failed", daemon=True).start()
    except RuntimeError:  # no thread left: the waiting run's fork timeout tells it
        pass


def _send_fds(conn: Connection[ToTemplate, object], fds: list[int]) -> None:
    """Pass ``fds`` to the template in one message (``reduction.sendfds``)."""
    import socket
    from multiprocessing.reduction import sendfds

    with socket.socket(fileno=os.dup(conn.fileno())) as sock:
        sendfds(sock, fds)


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
