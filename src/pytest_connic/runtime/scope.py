"""What one run of a case shares across the agent invocations it makes."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_connic.checks.compiled import ApprovalDecision
    from pytest_connic.models.base import RunModels
    from pytest_connic.runtime.mocks import MockSet
    from pytest_connic.runtime.services import ProjectServices


class RunAborted(Exception):
    """Ends the run at once and fails it with ``message`` as a check failure
    (strict mocks, a mocked call that misses the signature, a cassette problem)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class RunFailed(Exception):
    """Ends the run with status ``failed`` and ``message`` as its error."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class AwaitingApproval(Exception):
    """A gated call has no scripted decision: the run ends ``awaiting_approval``."""


class InfrastructureFailure(Exception):
    """A provider failed: the case is an error, the session exits 2."""


class ExitCalled(Exception):
    """User code called ``sys.exit()``: it ends that call (a failing tool, hook, builder, ...),
    never the run's event loop or the pytest session."""

    def __init__(self, code: Any) -> None:
        super().__init__(f"sys.exit({code!r}) was called")
        self.code = code


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


@dataclass
class RunScope:
    """Shared by the root invocation of a run and every child it triggers."""

    services: ProjectServices
    case: dict[str, Any]  #: the resolved case record ({} for the connic fixture without one)
    run_index: int
    builder_context: dict[str, Any]
    mocks: MockSet
    models: RunModels
    executor: Executor
    approvals: list[ApprovalDecision] = field(default_factory=list)
    approvals_used: set[int] = field(default_factory=set)
    strict_approvals: bool = False
    notes: list[str] = field(default_factory=list)
    #: the invocation currently running (for connic.tools placeholders)
    invocations: int = 0
    #: ``time.perf_counter()`` value at which the run times out (set by the root invocation)
    deadline: float | None = None

    async def call(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call user code: coroutines awaited, sync functions in a worker thread
        (so a slow sync tool does not hold up the other runs)."""
        try:
            if inspect.iscoroutinefunction(func):
                return await func(*args, **kwargs)
            loop = asyncio.get_running_loop()
            ctx = contextvars.copy_context()
            result = await loop.run_in_executor(self.executor, functools.partial(ctx.run, func, *args, **kwargs))
            if inspect.isawaitable(result):
                result = await result
            return result
        except SystemExit as exc:  # left alone, asyncio would let it end the whole session
            raise ExitCalled(exc.code) from None


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
