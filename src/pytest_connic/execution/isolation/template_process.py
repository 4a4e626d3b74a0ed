"""The project's template process: loads the project once, then forks a fresh worker for every
run that pytest's process asks for (``wire.Fork``, the worker's end of its pipe passed along as a
descriptor), so every run starts in the state the template has: its modules' globals, signal
handlers, umask, limits, descriptors, never what an earlier run left.

Started by ``template.py`` (``multiprocessing``, ``forkserver`` on Linux with this module
preloaded). The template ignores SIGINT and leads its own process group; it is a child subreaper
(``procs.py``): a worker's detached descendants stay in the worker's tree while it lives and
become the template's children when it ends, and the template kills every child that is not a
live worker; it reports each worker's end (``wire.WorkerExited``) at once. Everything exits when
pytest's process closes the pipe. ``TemplateProcess`` handles the messages pytest's process sends the
template (``wire.ToTemplate``), one ``handle_<message>`` method each.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, ParamSpec, TypeVar

from pytest_connic.errors import ConnicError
from pytest_connic.execution.isolation import coverage_share, procs, wire
from pytest_connic.execution.isolation.values import text
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
    WorkerExited,
    WorkerSettings,
    unhandled,
)
from pytest_connic.execution.isolation.worker import Endpoint, no_breakpoint
from pytest_connic.project.loaded import LoadedProject
from pytest_connic.project.located import safe_text
from pytest_connic.pyparse import guard_ast_parse

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from pytest_connic.execution.isolation.coverage_share import Measurement


_P = ParamSpec("_P")
_R = TypeVar("_R")


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



def main(conn: Connection[FromTemplate, object], encoded: bytes) -> None:
    """The template's entry point (``multiprocessing.Process`` target; ``encoded``: its
    ``WorkerSettings``): load the project, then fork a worker per request until pytest's process
    closes the pipe."""
    settings = wire.decode(wire.SETTINGS, encoded)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.breakpointhook = no_breakpoint
    guard_ast_parse()  # a run's tool calls run in threads: user code and the SDK may parse at once
    if hasattr(os, "setpgid"):
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
    procs.become_subreaper()  # a worker's detached descendants come here when it ends
    wire.send(conn, Started(os.getpid(), procs.mark()))
    try:  # user code may start processes of its own (a daemonic process may not)
        import multiprocessing

        multiprocessing.current_process().daemon = False
    except (AssertionError, AttributeError):  # pragma: no cover
        pass
    os.chdir(settings.process.cwd)
    os.environ.clear()
    os.environ.update(settings.process.env)
    sys.path[:] = settings.process.sys_path
    measuring = coverage_share.start(settings.coverage)  # import-time lines count too
    worker = Endpoint(settings)
    try:
        worker.install_placeholders()
        with _reporting_imports(conn, Path(settings.root)):
            project = worker.project = load_project(Path(settings.root), worker.adopt)
        worker.rebind(project.modules())
    except BaseException as exc:  # noqa: BLE001  (reported to pytest's process)
        wire.send(conn, LoadFailed(text(f"{type(exc).__name__}: {safe_text(exc)}")))
        return
    coverage_share.save(measuring)
    import gc

    gc.collect()
    gc.freeze()  # the workers' collections leave the template's objects alone: shared, not copied
    wire.send(conn, Ready(os.getpid()))
    TemplateProcess(conn, settings, worker, measuring).serve()


def load_project(root: Path, on_import: Callable[[str, types.ModuleType], None]) -> LoadedProject:
    """The project as the template reads it, once (every worker is forked from it): statically,
    as pytest's process reads it, so no user module runs in the template; a run's worker imports
    the modules its calls name (``on_import`` sees each), so what a module does at import happens
    in that run's worker, bounded and reported like any call."""
    return LoadedProject(root, static=True, on_import=on_import)


class TemplateProcess:
    """The template's loop: fork a worker per request, report each worker's end, and kill what a
    dead worker left (its descendants become this subreaper's children). It handles what pytest's
    process sends the template (``ToTemplate``, one ``handle_<message>`` each)."""

    def __init__(self, conn: Connection[FromTemplate, object], settings: WorkerSettings, worker: Endpoint,
                 measuring: Measurement | None) -> None:
        self.conn = conn
        self.settings = settings
        #: what the last ``Fork`` that carried settings said (a ``Fork`` without them: the same)
        self.fork_settings = settings.process
        self.worker = worker
        self.measuring = measuring
        self.workers: set[int] = set()
        self.wake_r, self.wake_w = os.pipe()

    def serve(self) -> None:
        from multiprocessing.connection import wait

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
                message = wire.receive(self.conn, wire.TO_TEMPLATE)
            except (EOFError, OSError, BadFrame):  # pytest's process went away
                self.shutdown()  # the pipe closed (or something else than a message came)
            self.handle(message)

    def tell(self, message: FromTemplate) -> None:
        """Send pytest's process ``message``; a pipe that broke means it went away: so do we."""
        try:
            wire.send(self.conn, message)
        except OSError:
            self.shutdown()

    def handle(self, message: ToTemplate) -> None:
        match message:
            case Preload():
                self.handle_preload(message)
            case Fork():
                self.handle_fork(message)
            case _:
                unhandled(message)

    def handle_preload(self, message: Preload) -> None:
        """Import ``message.names`` here (modules a worker imported without trouble for an agent's
        first case) so the workers forked next start with them loaded; each import is bounded by
        ``message.timeout_s`` (an alarm: the template runs no other code meanwhile), and a failure
        only leaves the module to each run's worker, as before."""
        project = self.worker.project
        if project is None:
            return
        previous = signal.signal(signal.SIGALRM, _preload_timeout)
        try:
            for name in message.names:
                signal.setitimer(signal.ITIMER_REAL, max(message.timeout_s, 0.001))
                try:
                    project.preload(name)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
        finally:
            signal.signal(signal.SIGALRM, previous)

    def handle_fork(self, message: Fork) -> None:
        """Fork a worker; the descriptors it takes follow the message on the pipe."""
        import socket
        from multiprocessing.reduction import recvfds

        with socket.socket(fileno=os.dup(self.conn.fileno())) as sock:
            fd, out, err = recvfds(sock, 3)
        if message.settings is not None:
            self.fork_settings = message.settings
        self.fork(message.token, self.fork_settings, fd, (out, err))

    def fork(self, token: int, settings: ForkSettings, fd: int, stdio: tuple[int, int]) -> None:
        """Fork a worker whose pipe is ``fd`` and whose descriptors 1 and 2 are ``stdio`` (pytest's
        process's when it asked: its capture, or the terminal under ``-s``)."""
        if not hasattr(os, "fork"):  # pragma: no cover  (Windows)
            _close(fd, *stdio)
            why = "process isolation forks its workers, which Windows cannot: use --connic-isolation=none"
            self.tell(ForkFailed(token, why))
            return
        try:
            pid = os.fork()
        except OSError as exc:  # out of processes
            _close(fd, *stdio)
            self.tell(ForkFailed(token, text(f"{type(exc).__name__}: {safe_text(exc)}")))
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
        self.tell(Forked(token, pid))

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
        cwd, env = settings.cwd, settings.env
        if os.getcwd() != cwd:
            os.chdir(cwd)
        if os.environ != env:
            os.environ.clear()
            os.environ.update(env)
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
                    wire.send(self.conn, WorkerExited(pid, status))
        for child in procs.children(os.getpid()):
            if child not in self.workers:
                procs.kill_tree(child)
                with contextlib.suppress(OSError):
                    os.kill(child, signal.SIGKILL)

    def shutdown(self) -> NoReturn:
        """pytest's process is gone or asked: every worker and what they started ends, then this."""
        for pid in self.workers:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        procs.kill_tree(os.getpid())
        os._exit(0)


def _ignore(*args: object) -> None:
    """SIGCHLD's handler in the template: the signal only wakes its loop (``set_wakeup_fd``)."""


class _ImportReporter:
    """A ``sys.meta_path`` entry that finds nothing: it tells pytest's process which module of
    the project is being imported (``Importing``: a start that hangs then names it)."""

    def __init__(self, conn: Connection[FromTemplate, object], root: Path) -> None:
        self.conn = conn
        self.root = root

    def report(self, origin: object) -> None:
        try:
            path = Path(str(origin)).resolve()
            if path.is_relative_to(self.root):
                wire.send(self.conn, Importing(text(path.relative_to(self.root).as_posix())))
        except (OSError, ValueError):
            pass

    def find_spec(self, name: str, path: Sequence[str] | None = None, target: types.ModuleType | None = None) -> None:
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path)
        if spec is not None and spec.origin:
            self.report(spec.origin)


def _reporting(original: Callable[_P, _R], report: Callable[[object], None]) -> Callable[_P, _R]:
    """``importlib.util.spec_from_file_location`` that reports its ``location`` first."""

    def spec_from_file_location(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        report(args[1] if len(args) > 1 else kwargs.get("location"))
        return original(*args, **kwargs)

    return spec_from_file_location


@contextlib.contextmanager
def _reporting_imports(conn: Connection[FromTemplate, object], root: Path) -> Iterator[None]:
    """While the project loads: every module of the project imported (through ``import`` or the
    SDK's ``spec_from_file_location``) is named to pytest's process."""
    import importlib.util

    reporter = _ImportReporter(conn, root.resolve())
    original = importlib.util.spec_from_file_location
    sys.meta_path.insert(0, reporter)
    importlib.util.spec_from_file_location = _reporting(original, reporter.report)
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


def _preload_timeout(signum: int, frame: types.FrameType | None) -> None:
    raise _PreloadTimeout()


