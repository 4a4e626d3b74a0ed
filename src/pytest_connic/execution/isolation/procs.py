"""The processes user code starts, kept inside one tree and ended with it (Linux).

A worker runs under a *keeper*: the process ``multiprocessing`` starts forks the worker and becomes
a child subreaper (``PR_SET_CHILD_SUBREAPER``), so a process user code starts and detaches
(``os.setsid()``, ``start_new_session=True``, a double fork) stays in the keeper's tree whatever its
session or process group. When the worker ends (its own exit, a kill from pytest's process, a
crash) the keeper kills every process left in its tree and then exits as the worker did (its exit
code, or the same signal), so pytest's process reads the worker's cause from the keeper. The worker
is a subreaper too, so that while it lives a detached grandchild is its child, which one cheap
``waitpid`` tells at the end of each run.

Elsewhere (no ``prctl``, no ``/proc``) the worker runs without a keeper and its process group is
what pytest's process kills.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

#: ``prctl`` option numbers (linux/prctl.h)
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_PDEATHSIG = 1
#: how many rounds of killing the keeper makes before it gives up on a tree that keeps forking
_ROUNDS = 200


def _prctl(option: int, value: int) -> bool:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def supported() -> bool:
    """Whether processes can be kept in a tree here (Linux with ``/proc``)."""
    return sys.platform.startswith("linux") and os.path.isdir("/proc/self")


def become_subreaper() -> bool:
    """Orphans of this process's descendants become its children (Linux 3.4+)."""
    return supported() and _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    """This process gets ``signum`` when its parent ends (a keeper killed from outside)."""
    if supported():
        _prctl(_PR_SET_PDEATHSIG, signum)


def _parents() -> dict[int, int]:
    """Every process's parent, read from ``/proc`` (processes that end meanwhile are skipped)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat.rsplit(b")", 1)[-1].split()
        if len(fields) > 1:
            parents[int(entry)] = int(fields[1])
    return parents


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (children first), whatever their session or process group."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found: list[int] = []
    todo = list(children.get(pid, ()))
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, ()))
    return found


def _reap() -> bool:
    """Reap the children that ended; True while some are still alive."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def has_children() -> bool:
    """Whether this process still has live children (ended ones are reaped). One system call when
    there are none: the cost of the end-of-run check."""
    return _reap()


def kill_tree(pid: int) -> None:
    """SIGKILL every process below ``pid`` until none is left (new ones forked meanwhile too)."""
    me = os.getpid()
    for _ in range(_ROUNDS):
        below = descendants(pid)
        if not below:
            return
        for child in below:
            if child != me:
                try:
                    os.kill(child, signal.SIGKILL)
                except OSError:
                    pass
        if pid == me:
            _reap()


def keep(run: Callable[..., None], *args: Any) -> None:
    """Run ``run(*args)`` in a forked worker under this process as its keeper; return never.

    The keeper ignores SIGINT (pytest's process ends workers by killing them), waits
    for the worker, kills what is left of the tree, and exits with the worker's status."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not become_subreaper():
        run(*args)
        os._exit(0)
    pid = os.fork()
    if pid == 0:  # the worker
        try:
            die_with_parent()
            run(*args)
        finally:
            os._exit(0)
    status = _wait_for(pid)
    kill_tree(os.getpid())
    _exit_as(status)


def _wait_for(pid: int) -> int:
    """The worker's wait status (adopted orphans that end meanwhile are reaped too)."""
    while True:
        try:
            ended, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 0
        except InterruptedError:  # pragma: no cover  (retried by Python since 3.5)
            continue
        if ended == pid:
            return status


def _exit_as(status: int) -> None:
    """End this process as the worker ended: the same exit code, or the same signal."""
    sys.stdout.flush()
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:  # SIGKILL has no handler to reset
            signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
        try:
            os.kill(os.getpid(), number)
        except OSError:
            pass
        os._exit(128 + number)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)
