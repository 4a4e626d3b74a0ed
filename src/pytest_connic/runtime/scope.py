"""Running user code: the daemon-thread executor, and what a function's signature accepts."""

from __future__ import annotations

import inspect
import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any


class DaemonExecutor(Executor):
    """Runs each submitted call in its own daemon thread.

    Sync user code (tools, hooks, mocks, builders) runs here so that a slow sync
    tool does not hold up the other runs of a case. A run that times out stops
    waiting for its tool at once, but a Python thread cannot be killed: with
    ``ThreadPoolExecutor`` the interpreter would join that thread at exit and a
    hanging tool would hang pytest. Daemon threads are abandoned at exit instead.
    """

    _ids = itertools.count(1)

    def __init__(self, name: str = "connic-run") -> None:
        self.name = name

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()

        def work() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001  (handed to the awaiting run, never lost)
                future.set_exception(exc)
            else:
                future.set_result(result)

        threading.Thread(target=work, name=f"{self.name}-{next(self._ids)}", daemon=True).start()
        return future


def accepts_positional(func: Callable[..., Any], count: int) -> bool:
    """Whether ``func`` can take ``count`` positional arguments."""
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return True
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return True
    positional = [
        p for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    return len(positional) >= count


def takes_context(func: Callable[..., Any]) -> bool:
    """Whether ``func`` declares a parameter named ``context``."""
    try:
        return "context" in inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
