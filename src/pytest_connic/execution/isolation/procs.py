"""The processes user code starts, kept inside one tree and ended with it (Linux).

Workers are forked by the project's template (``worker.py``), which is a child subreaper
(``PR_SET_CHILD_SUBREAPER``); each worker is one too. So a process user code starts and detaches
(``os.setsid()``, ``start_new_session=True``, a double fork) stays in its worker's tree whatever
its session or process group while the worker lives, and becomes the template's child when the
worker ends (its own exit, a kill from pytest's process, a crash). The template kills every child
of its that is not a live worker, with that child's tree, and reports the worker's exit status to
pytest's process.

Elsewhere (no ``prctl``, no ``/proc``) a worker's process group is what pytest's process kills.
"""

from __future__ import annotations

import os
import signal
import sys

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


def children(pid: int) -> list[int]:
    """The direct children of ``pid``: one read of ``/proc/<pid>/task/*/children`` where the
    kernel has it (the cost of the template's check after each worker's end), else ``/proc``."""
    if not supported():
        return []
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        for task in tasks:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as fh:
                found.extend(int(c) for c in fh.read().split())
    except (OSError, ValueError):
        return [child for child, parent in _parents().items() if parent == pid]
    return found


def mark() -> int:
    """Open a pipe that every process forked below this one inherits (kept open for this
    process's life, inherited through ``exec`` too where the code does not close it), and return
    its inode: when this process is killed, what it started that has not ended (a plain
    ``os.fork()`` child of a worker, re-parented to init) is found by it (``kill_marked``). 0
    where there is no ``/proc`` to find it by."""
    if not supported():
        return 0
    read, write = os.pipe()
    os.close(read)
    os.set_inheritable(write, True)
    _MARKS.append(write)
    return os.fstat(write).st_ino


_MARKS: list[int] = []


def marked(inode: int) -> list[int]:
    """The processes that hold the pipe ``mark`` returned ``inode`` for."""
    target = f"pipe:[{inode}]"
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            links = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for fd in links:
            try:
                if os.readlink(f"/proc/{entry}/fd/{fd}") == target:
                    found.append(int(entry))
                    break
            except OSError:
                continue
    return found


def kill_marked(inode: int) -> None:
    """SIGKILL every process that holds the pipe of ``inode`` until none is left (new ones forked
    meanwhile too): what a killed template's workers started."""
    if not inode or not supported():
        return
    me = os.getpid()
    for _ in range(_ROUNDS):
        holders = [pid for pid in marked(inode) if pid != me]
        if not holders:
            return
        for pid in holders:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


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
