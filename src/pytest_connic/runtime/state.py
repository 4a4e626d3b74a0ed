"""The state of a run and of one agent invocation in it, as declared data.

Every module of the runtime that works on an invocation (agents, dispatch, approvals,
guardrails, children, predefined tools) takes an :class:`InvocationState`; the lifecycle
(``runtime/invocation.py``) sits on top of them. Starting a child or a pipeline stage goes
through :meth:`RunScope.run_invocation`, the port the lifecycle sets on the run's scope.
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime as dt
import functools
import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pytest_connic.jsonsafe import JsonObject
from pytest_connic.project.located import safe_text, user_location
from pytest_connic.project.sdk import Agent, AgentConfig, Tool
from pytest_connic.records.events import SessionEvent
from pytest_connic.records.run import RunRecord
from pytest_connic.runtime.clock import RunClock
from pytest_connic.runtime.mocks import fresh_origin
from pytest_connic.runtime.payload import deliver
from pytest_connic.runtime.retries import ReflectionBudget
from pytest_connic.runtime.sessions import (
    Message,
    Session,
    begin_session,
    resolve_key,
    session_config,
    session_warnings,
)
from pytest_connic.runtime.signals import ExitCalled, UserCodeEnded

if TYPE_CHECKING:
    from pytest_connic.checks.compiled import ApprovalDecision
    from pytest_connic.models.base import Model, RunModels
    from pytest_connic.models.world import RunWorld
    from pytest_connic.runtime.mocks import MockSet
    from pytest_connic.runtime.predefined import ToolFunction
    from pytest_connic.runtime.services import RuntimeServices

#: runs one invocation's whole lifecycle (set on the scope by ``runtime/invocation.py``)
Lifecycle = Callable[["InvocationState"], Awaitable[RunRecord]]


class Runner(Protocol):
    """Where a run's user code executes when it is not in-process: the run's lease on a worker
    process (``execution/isolation``)."""

    def reference(self, func: Callable[..., object]) -> tuple[str, ...] | None:
        """A picklable reference to ``func`` the worker can resolve, or None (run it in-process)."""

    async def call(self, ref: tuple[str, ...], label: str, args: tuple[object, ...], kwargs: dict[str, object],
                   world: tuple[str | None, int | None] | None = None) -> object:
        """Call the function ``ref`` names in the worker; its exceptions re-raised here. ``world``:
        the wall clock the call starts at (ISO 8601, None: the real one) and the run's seed for
        ``random`` (models/world.py)."""


def describe(func: object) -> str:
    """``func`` in words, as messages name it: "the tool `calc.add`", "builder 'seed' build()"."""
    module = str(getattr(func, "__module__", "") or "")
    qualname = str(getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func))
    head, _, rest = module.partition(".")
    if head == "tools" and rest:
        return f"the tool `{rest}.{qualname}`"
    if head == "middleware" and rest:
        return f"middleware {qualname} of agent '{rest}'"
    if head == "hooks" and rest:
        return f"the {qualname} hook of agent '{rest}'"
    if head == "guardrails" and rest:
        return f"the guardrail `{rest}` {qualname}()"
    fresh = fresh_origin(module)
    if fresh is not None and fresh[0] == "builders":
        return f"builder '{fresh[1]}' {qualname}()"
    if fresh is not None:
        return f"mock {qualname} (tests/mocks/{fresh[1]}.py)"
    return f"`{qualname}`"


def base_exception_message(label: str, exc: BaseException, where: str | None) -> str:
    """The run's error for a ``BaseException`` (not an ``Exception``) raised by user code."""
    text = safe_text(exc)
    detail = f": {text}" if text else ""
    at = f" at {where}" if where else ""
    return f"{label} raised {type(exc).__name__}{detail}{at}"


@dataclass
class RunScope:
    """Shared by the root invocation of a run and every child it triggers."""

    services: RuntimeServices
    case: Mapping[str, object]  #: the resolved case record ({} for the connic fixture without one)
    run_index: int
    builder_context: dict[str, object]
    mocks: MockSet
    models: RunModels
    executor: Executor
    approvals: list[ApprovalDecision] = field(default_factory=list)
    approvals_used: set[int] = field(default_factory=set)
    strict_approvals: bool = False
    #: ``clock.now()`` value at which the run times out (set by the root invocation)
    deadline: float | None = None
    #: the run's clock: virtual (retry delays skipped) unless the run is live (runtime/clock.py)
    clock: RunClock = field(default_factory=RunClock)
    #: the lifecycle that runs a child or a stage (set by the lifecycle of the root invocation)
    lifecycle: Lifecycle | None = None
    #: the run's worker process (None: user code runs in pytest's process, ``--connic-isolation=none``)
    runner: Runner | None = None
    #: the suite file and line of the case (warnings about the run are located there)
    location: tuple[Path, int] | None = None
    #: what the run's user code sees of the world, recorded or replayed (models/world.py; None: the
    #: real one, as in live mode and for a replayed cassette run without ``world:``)
    world: RunWorld | None = None
    #: the case's pytest node id (None outside a session): the command that re-records it
    nodeid: str | None = None

    def wall_now(self) -> dt.datetime:
        """The run's wall clock (UTC): the replayed world's when there is one."""
        if self.world is None:
            return dt.datetime.now(dt.timezone.utc)
        return self.world.wall_now(self.clock.now())

    def new_id(self) -> str:
        """An id the runtime makes for user code: the recorded one in a replay."""
        return self.world.new_id() if self.world is not None else str(uuid.uuid4())

    async def run_invocation(self, invocation: InvocationState) -> RunRecord:
        """Run ``invocation`` (a child or a pipeline stage of this run) through the lifecycle."""
        if self.lifecycle is None:
            raise RuntimeError("no lifecycle set on this run scope (start the run with runtime.invocation)")
        return await self.lifecycle(invocation)

    async def call(self, func: Callable[..., object], *args: object, **kwargs: object) -> object:
        """Call user code: in the run's worker process when there is one and ``func`` can be named
        there, else in-process (coroutines awaited, sync functions in a worker thread, so a slow
        sync tool does not hold up the other runs).

        ``sys.exit()`` becomes ``ExitCalled`` (that call's error); any other ``BaseException`` that
        is not an ``Exception`` (``KeyboardInterrupt``, ``GeneratorExit``, a subclass of the user's)
        ends the run with ``UserCodeEnded``, located in the user's file; neither reaches the loop.
        """
        runner = self.runner
        if runner is not None:
            ref = runner.reference(func)
            if ref is not None:
                world = self.world.for_call(self.clock.now()) if self.world is not None else None
                return await runner.call(ref, describe(func), args, kwargs, world)
        try:
            if inspect.iscoroutinefunction(func):
                return await func(*args, **kwargs)
            ctx = contextvars.copy_context()
            call = functools.partial(ctx.run, _caught, self.services.project.root, func, *args, **kwargs)
            submit = getattr(self.executor, "submit_async", None)  # the runtime's: no chained future
            result = await (submit(call) if submit is not None else
                            asyncio.get_running_loop().run_in_executor(self.executor, call))
            if inspect.isawaitable(result):
                result = await result
            return result
        except SystemExit as exc:  # left alone, asyncio would let it end the whole session
            raise ExitCalled(exc.code) from None
        except _BaseCaught as caught:
            raise UserCodeEnded(base_exception_message(describe(func), caught.exc, caught.where)) from None
        except (Exception, asyncio.CancelledError):
            raise
        except BaseException as exc:  # noqa: BLE001  (KeyboardInterrupt, GeneratorExit, ... of user code)
            where = user_location(exc, self.services.project.root)
            raise UserCodeEnded(base_exception_message(describe(func), exc, where)) from None


class _BaseCaught(UserCodeEnded):
    """A ``BaseException`` of sync user code, caught on its thread (where its traceback is whole)."""

    def __init__(self, exc: BaseException, where: str | None) -> None:
        super().__init__(type(exc).__name__)
        self.exc = exc
        self.where = where


def _caught(root: Path, func: Callable[..., object], *args: object, **kwargs: object) -> object:
    try:
        return func(*args, **kwargs)
    except (Exception, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001  (KeyboardInterrupt, GeneratorExit, ...)
        raise _BaseCaught(exc, user_location(exc, root)) from None


@dataclass
class CatalogEntry:
    """A tool an agent can call, as the model names it."""

    name: str
    ref: str
    description: str
    parameters: JsonObject
    kind: str  #: custom | predefined | api | input | discovery | mcp
    tool: Tool | None = None
    condition: str | None = None
    discoverable: bool = False
    #: the MCP server of an ``mcp`` tool (runtime/mcp.py)
    server: str | None = None


@dataclass
class McpConnection:
    """A connected server of one invocation: what its calls need."""

    name: str
    url: str  #: ``${VAR}`` still unresolved (resolved when really contacted)
    headers: dict[str, str]  #: ``${context.*}`` resolved, ``${VAR}`` still unresolved
    where: str  #: "agents/x.yaml:12" (the server's entry)


@dataclass
class InvocationState:
    """One agent run, the case's own or a child's (or a stage of a pipeline)."""

    scope: RunScope
    services: RuntimeServices
    agent: Agent
    config: AgentConfig  #: the agent's configuration (its YAML)
    root: bool  #: the case's own agent (not a child, not a stage)
    depth: int
    original_payload: object
    delivered: dict[str, object]  #: the payload as Connic delivers it (https://connic.co/docs/v1/test/fixtures-and-mocks)
    timeout_s: float | None
    timeout_label: str | None
    record: RunRecord
    context: dict[str, object]  #: the run context user code sees
    middleware: object  #: what the SDK loaded from the agent's middleware file (None: none)
    #: the id of the run's session (runtime/sessions.py): until the agent's own session is entered
    #: (after ``before`` middleware), and for an agent without one, the case's run id (children of
    #: a run inherit their parent's)
    session_id: str
    #: ``scope.clock.now()`` value at which this invocation times out
    deadline: float | None = None
    started: float = 0.0
    background: list[asyncio.Task[object]] = field(default_factory=list)
    #: started by ``trigger_agent``: a run of its own (a pipeline stage is not)
    triggered: bool = False
    #: the model a triggered LLM child took when it was triggered (runtime/children.py)
    reserved_model: Model | None = None
    #: the agent's tools by model-facing name (built on first use, runtime/dispatch.py)
    catalog: dict[str, CatalogEntry] | None = None
    #: the local data tools bound to this run (built on first use, runtime/predefined_dispatch.py)
    data_tools: dict[str, ToolFunction] | None = None
    #: the tool-failure reflection budget spent so far (runtime/retries.py)
    reflection: ReflectionBudget = field(default_factory=ReflectionBudget)
    #: the agent's session this run is part of (``session:``; entered after ``before`` middleware)
    session: Session | None = None
    #: the MCP servers connected for this run, by name (``runtime/mcp.py``: ``McpConnection``)
    mcp: dict[str, McpConnection] = field(default_factory=dict)

    @classmethod
    def create(
        cls,
        scope: RunScope,
        agent_name: str,
        payload: object,
        files: Sequence[object] | None = None,
        *,
        root: bool,
        depth: int = 0,
        timeout_s: float | None = None,
        timeout_label: str | None = None,
        session_id: str | None = None,
    ) -> InvocationState:
        """A fresh invocation of ``agent_name`` with ``payload`` (and ``files``) in ``scope``."""
        services = scope.services
        agent = services.agent(agent_name)
        config = agent.config
        delivered = deliver(payload, files or [])
        # the agent's own `timeout` applies too, whichever is shorter (https://connic.co/docs/v1/build/agent-configuration/runtime-controls)
        if config.timeout and (timeout_s is None or float(config.timeout) < timeout_s):
            timeout_s, timeout_label = float(config.timeout), f"timeout of agent '{agent_name}'"
        run_id = scope.world.run_id() if scope.world is not None else str(uuid.uuid4())
        record = RunRecord(run_id=run_id, agent_name=agent_name, index=scope.run_index)
        record.input = delivered
        context: dict[str, object] = {
            "run_id": record.run_id,
            "agent_name": agent_name,
            "timestamp": scope.wall_now().isoformat(),
            "payload": delivered,
        }
        record.run_context = context
        return cls(
            scope=scope, services=services, agent=agent, config=config, root=root, depth=depth,
            original_payload=payload, delivered=delivered, timeout_s=timeout_s, timeout_label=timeout_label,
            record=record, context=context, middleware=services.project.middleware(agent_name),
            session_id=session_id or record.run_id,
        )

    def enter_session(self) -> None:
        """Join the agent's session (``session:``), after ``before`` middleware: resolve its key
        (``RunFailed`` when it resolves to nothing), start a new session when there is none or it
        expired (``ttl``, on the session clock), and key the file tools on it."""
        config = session_config(self.config)
        if config is None:
            return
        for key, message in session_warnings(self.config):
            self.services.host.warn_once(key, message)
        value = resolve_key(self.config, self.context, self.delivered)
        store = self.services.sessions
        session, expired = store.enter(self.config.name, value, config.ttl, store.now(self.scope.clock))
        self.session, self.session_id = session, session.id
        self.data_tools = None  # rebound to the session (files.session_only, file_list scope="session")
        if expired is not None:
            text = (f"session {session.label} expired (not updated for more than its ttl of {config.ttl}s): "
                    "this run starts a new session")
        elif session.runs:
            text = f"session {session.label}: run {session.runs + 1} of the session"
        else:
            text = f"session {session.label}: a new session"
        if config.history and session.history:
            text += f", {len(session.history)} messages of history"
        self.record.events.append(SessionEvent(name=text, session_id=session.id, key=value,
                                               history=len(session.history) if config.history else 0))

    def session_history(self) -> list[Message]:
        """The model messages of the session's earlier runs (``session.history``; [] without)."""
        config = session_config(self.config)
        if self.session is None or config is None or not config.history:
            return []
        begin_session(self.scope.models, self.session)  # a cassette's history comes first
        return [dict(m) for m in self.session.history]

    def remember(self, messages: list[Message]) -> None:
        """Add this run's conversation to its session (``session.history``)."""
        config = session_config(self.config)
        if self.session is None or config is None or not config.history:
            return
        store = self.services.sessions
        name = self.scope.case.get("name")
        store.remember(self.session, messages, store.now(self.scope.clock), name if isinstance(name, str) else None)

    def remaining_s(self) -> float | None:
        """Seconds left before this invocation or its run times out (None: no limit)."""
        deadlines = [d for d in (self.deadline, self.scope.deadline) if d is not None]
        if not deadlines:
            return None
        return max(min(deadlines) - self.scope.clock.now(), 0.001)


#: the invocation currently running (for the ``connic.tools`` placeholders)
CURRENT: contextvars.ContextVar[InvocationState | None] = contextvars.ContextVar("connic_invocation", default=None)
