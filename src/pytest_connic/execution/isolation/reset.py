"""A worker's process state between runs: what a fresh worker has, restored after every run.

Connic runs every invocation in a fresh sandbox, so a run must not see what an earlier run on the
same worker left behind. :class:`Baseline` is taken once the worker has loaded the project (the
state every run starts from); :meth:`Baseline.restore` runs when a run's lease ends and puts back
what user code may have changed: signal handlers, pending alarms and interval timers, the umask,
the environment, the working directory, ``sys.path``, resource limits, the recursion limit, file
descriptors 0-2 and ``sys.stdin``/``stdout``/``stderr``, and the project's modules in
``sys.modules`` (modules of the project a run imported are dropped, so the next run imports them
afresh). What cannot be put back (a lowered hard limit, a closed ``sys.stdout``, a changed
function or class of the plugin's own worker code, which could forge another run's verdict) is
named, and the pool retires the worker instead (a fresh one serves the next run).

``python benchmarks/bench_reset.py`` measures the cost per run (well under a millisecond).
"""

from __future__ import annotations

import operator
import os
import signal
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

#: modules whose functions and classes decide what a run's outcome is in the worker
_GUARDED_PREFIXES = ("pytest_connic.", "multiprocessing.connection", "pickle", "copyreg")
_TIMERS = tuple(getattr(signal, n) for n in ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF") if hasattr(signal, n))


def _signals() -> list[signal.Signals]:
    skip = {getattr(signal, n, None) for n in ("SIGKILL", "SIGSTOP")}
    return [s for s in signal.valid_signals() if s not in skip and isinstance(s, signal.Signals)]


def _limits() -> dict[int, tuple[int, int]]:
    if resource is None:
        return {}
    found = {}
    for name in dir(resource):
        if name.startswith("RLIMIT_"):
            number = getattr(resource, name)
            try:
                found[number] = resource.getrlimit(number)
            except (ValueError, OSError):
                continue
    return found


def _fd_identity(fd: int) -> tuple[int, int] | None:
    try:
        stat = os.fstat(fd)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


@dataclass(frozen=True)
class _Guard:
    """What one namespace of the plugin's worker code (a module's, or a class's defined there)
    holds under the names it had at the baseline, and the code of its functions. Read back with
    ``map`` and compared as tuples: the comparison runs in C (identity first), a few µs."""

    namespace: Any
    keys: tuple[str, ...]
    values: tuple[Any, ...]
    functions: tuple[types.FunctionType, ...]
    codes: tuple[types.CodeType, ...]

    @classmethod
    def of(cls, namespace: Any) -> _Guard:
        keys = tuple(k for k, v in list(namespace.items()) if not isinstance(v, types.ModuleType))
        values = tuple(map(namespace.__getitem__, keys))
        functions = tuple(v for v in values if isinstance(v, types.FunctionType))
        return cls(namespace, keys, values, functions, tuple(map(_CODE, functions)))

    def intact(self) -> bool:
        try:
            values = tuple(map(self.namespace.__getitem__, self.keys))
        except KeyError:
            return False
        return values == self.values and tuple(map(_CODE, self.functions)) == self.codes


_CODE = operator.attrgetter("__code__")


def guards(modules: dict[str, types.ModuleType]) -> list[_Guard]:
    """A guard per module and per class defined in it."""
    found = []
    for name, module in modules.items():
        namespace = vars(module)
        found.append(_Guard.of(namespace))
        found.extend(_Guard.of(vars(value)) for value in list(namespace.values())
                     if isinstance(value, type) and getattr(value, "__module__", None) == name)
    return found


def guarded_modules() -> dict[str, types.ModuleType]:
    return {name: module for name, module in list(sys.modules.items())
            if isinstance(module, types.ModuleType) and (name.startswith(_GUARDED_PREFIXES) or name == "pickle")}


def _inside(module: Any, root: str) -> bool:
    file = getattr(module, "__file__", None)
    return isinstance(file, str) and os.path.abspath(file).startswith(root)


@dataclass
class Baseline:
    """The state a fresh worker serves its first run in."""

    root: str
    handlers: dict[int, Any] = field(default_factory=dict)
    umask: int = 0o022
    environ: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    path: list[str] = field(default_factory=list)
    meta_path: list[Any] = field(default_factory=list)
    limits: dict[int, tuple[int, int]] = field(default_factory=dict)
    recursion: int = 1000
    fds: dict[int, tuple[tuple[int, int] | None, int | None]] = field(default_factory=dict)
    streams: tuple[Any, Any, Any] = (None, None, None)
    modules: set[str] = field(default_factory=set)
    project: dict[str, types.ModuleType] = field(default_factory=dict)
    guarded: dict[str, types.ModuleType] = field(default_factory=dict)
    prints: list[_Guard] = field(default_factory=list)
    #: the worker object's own attributes that are functions (``worker.send = ...`` is a patch too)
    owner: Any = None
    owner_calls: dict[str, int] = field(default_factory=dict)

    @classmethod
    def take(cls, root: Path, owner: Any = None) -> Baseline:
        """The current state as the baseline (call on the main thread, after the project loaded)."""
        base = cls(root=os.path.join(os.path.abspath(root), ""))
        base.handlers = {int(s): signal.getsignal(s) for s in _signals()}
        base.umask = os.umask(0o022)
        os.umask(base.umask)
        base.environ = dict(os.environ)
        base.cwd = os.getcwd()
        base.path = list(sys.path)
        base.meta_path = list(sys.meta_path)
        base.limits = _limits()
        base.recursion = sys.getrecursionlimit()
        for fd in (0, 1, 2):
            identity = _fd_identity(fd)
            base.fds[fd] = (identity, os.dup(fd) if identity is not None else None)
        base.streams = (sys.stdin, sys.stdout, sys.stderr)
        base.modules = set(sys.modules)
        base.project = {n: m for n, m in list(sys.modules.items()) if _inside(m, base.root)}
        base.guarded = guarded_modules()
        base.prints = guards(base.guarded)
        base.owner = owner
        base.owner_calls = _calls(owner)
        return base

    def adopt(self, name: str, module: types.ModuleType) -> None:
        """``module`` is part of the project as the worker loads it (middleware, hooks and
        guardrails are loaded on first use, as in pytest's process): kept from now on."""
        self.modules.add(name)
        self.project[name] = module

    def restore(self) -> str | None:
        """Put the baseline back; the reason the worker must be retired instead, or None."""
        for step in _STEPS:
            reason = step(self)
            if reason:
                return reason
        return None


def _calls(owner: Any) -> dict[str, int]:
    if owner is None:
        return {}
    return {k: id(v) for k, v in vars(owner).items() if callable(v)}


def _restore_timers(base: Baseline) -> str | None:
    if hasattr(signal, "alarm"):
        signal.alarm(0)
    for timer in _TIMERS:
        if signal.getitimer(timer) != (0.0, 0.0):
            signal.setitimer(timer, 0)
    return None


def _restore_handlers(base: Baseline) -> str | None:
    for number, handler in base.handlers.items():
        if signal.getsignal(number) is not handler:
            try:
                signal.signal(number, handler)
            except (OSError, ValueError, TypeError):
                return f"signal {number}'s handler could not be restored"
    return None


def _restore_process(base: Baseline) -> str | None:
    if os.umask(base.umask) != base.umask:
        pass  # os.umask set it back while reading it
    if os.environ != base.environ:
        os.environ.clear()
        os.environ.update(base.environ)
    try:
        if os.getcwd() != base.cwd:
            os.chdir(base.cwd)
    except OSError:
        try:
            os.chdir(base.cwd)
        except OSError:
            return f"the working directory {base.cwd} is gone"
    if sys.path != base.path:
        sys.path[:] = base.path
    if sys.meta_path != base.meta_path:
        sys.meta_path[:] = base.meta_path
    if sys.getrecursionlimit() != base.recursion:
        sys.setrecursionlimit(base.recursion)
    return None


def _restore_limits(base: Baseline) -> str | None:
    if resource is None:
        return None
    for number, limits in base.limits.items():
        if resource.getrlimit(number) != limits:
            try:
                resource.setrlimit(number, limits)
            except (ValueError, OSError):
                return f"resource limit {number} was lowered for good"
    return None


def _restore_fds(base: Baseline) -> str | None:
    for fd, (identity, saved) in base.fds.items():
        if saved is not None and _fd_identity(fd) != identity:
            os.dup2(saved, fd)
    stdin, stdout, stderr = base.streams
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    if any(getattr(s, "closed", False) for s in base.streams if s is not None):
        return "a standard stream was closed"
    return None


def _restore_modules(base: Baseline) -> str | None:
    if len(sys.modules) != len(base.modules) or not base.modules.issuperset(sys.modules):
        for name in set(sys.modules) - base.modules:
            if _inside(sys.modules.get(name), base.root):
                sys.modules.pop(name, None)
    for name, module in base.project.items():
        if sys.modules.get(name) is not module:
            sys.modules[name] = module
    return None


def _check_plugin(base: Baseline) -> str | None:
    if not all(guard.intact() for guard in base.prints) or _calls(base.owner) != base.owner_calls:
        return "user code changed the plugin's worker code"
    return None


_STEPS: tuple[Callable[[Baseline], str | None], ...] = (
    _check_plugin, _restore_timers, _restore_handlers, _restore_process, _restore_limits, _restore_fds,
    _restore_modules,
)
