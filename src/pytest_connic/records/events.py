"""A run's lifecycle events (``RunRecord.events``): one frozen class per kind.

The runtime builds them as a run goes (middleware phases, tool hooks, retries, stages, triggers,
sessions, MCP servers, notes, outbound messages, ``StopProcessing``); the trace, the assertions'
helpers and the reports read their fields, dispatching on the class (``isinstance``, ``match``),
never on a string key. Their JSON shape (the ``events`` of a run in ``--connic-json``, the event
spans' metadata in the traces) is written here only: ``to_dict``, and read back here only:
:func:`event_from_dict` (``--connic-merge`` shards, xdist workers' outcomes). They pickle as they
are (the worker processes of ``execution/isolation``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal, TypeVar

from pytest_connic.errors import ConnicError

#: a run's status (``RunRecord.status``): how it ended
RunStatus = Literal["completed", "failed", "cancelled", "blocked", "awaiting_approval"]
RUN_STATUSES: tuple[RunStatus, ...] = ("completed", "failed", "cancelled", "blocked", "awaiting_approval")
#: a guardrail check's outcome
GuardrailStatus = Literal["passed", "blocked", "warned", "redacted", "not_evaluated"]
#: how a tool call's approval ended (None: the call needed none)
ApprovalState = Literal["approved", "rejected", "timeout", "pending"]
#: a case's status in every report
CaseStatus = Literal["passed", "failed", "error", "interrupted", "skipped", "xfailed"]
#: a session's status in the reports (Connic's)
SessionStatus = Literal["passed", "failed", "error", "interrupted"]
#: the phases of an agent's middleware
MiddlewarePhase = Literal["before", "after", "cleanup"]
#: the phases of a tool's hooks
HookPhase = Literal["before", "after"]
#: a word of one of the sets above
_W = TypeVar("_W", bound=str)
MIDDLEWARE_PHASES: tuple[MiddlewarePhase, ...] = ("before", "after", "cleanup")
HOOK_PHASES: tuple[HookPhase, ...] = ("before", "after")


@dataclass(frozen=True)
class HookEvent:
    """A tool hook ran (``hooks/<agent>.py``: ``before``/``after``), or its mock (``mock``)."""

    kind: ClassVar[Literal["hook"]] = "hook"
    phase: HookPhase
    tool: str  #: the tool's ref
    mock: str | None  #: the mock function that stood in for the hook

    def to_dict(self) -> dict[str, object]:
        return {"type": self.kind, "phase": self.phase, "tool": self.tool, "mock": self.mock}


@dataclass(frozen=True)
class MiddlewareEvent:
    """A middleware phase ran (or its mock); ``error``: a ``cleanup`` that raised (logged only)."""

    kind: ClassVar[Literal["middleware"]] = "middleware"
    phase: MiddlewarePhase
    mock: str | None
    error: str | None = None

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {"type": self.kind, "phase": self.phase, "mock": self.mock}
        if self.error is not None:
            data["error"] = self.error
        return data


@dataclass(frozen=True)
class McpToolsEvent:
    """An MCP server's tools were offered (to the model, or through ``search_tools``)."""

    kind: ClassVar[Literal["mcp"]] = "mcp"
    server: str
    tools: tuple[str, ...]
    name: str  #: the trace line

    def to_dict(self) -> dict[str, object]:
        return {"type": self.kind, "server": self.server, "tools": list(self.tools), "name": self.name}


@dataclass(frozen=True)
class McpSkippedEvent:
    """An optional MCP server could not be reached: the run went on without its tools."""

    kind: ClassVar[Literal["mcp"]] = "mcp"
    name: str  #: the trace line
    server: str
    error: str

    def to_dict(self) -> dict[str, object]:
        return {"type": self.kind, "name": self.name, "server": self.server, "error": self.error}


@dataclass(frozen=True)
class StageEvent:
    """A stage of a sequential agent ended (its spans are grouped under it in the trace)."""

    kind: ClassVar[Literal["stage"]] = "stage"
    agent: str
    status: RunStatus  #: the stage run's ``RunRecord.status``
    run_id: str
    error: str | None

    def to_dict(self) -> dict[str, object]:
        return {"type": self.kind, "agent": self.agent, "status": self.status, "run_id": self.run_id,
                "error": self.error}


@dataclass(frozen=True)
class TriggerEvent:
    """A waited ``trigger_agent`` call returned (the child's spans hang under the call)."""

    kind: ClassVar[Literal["trigger"]] = "trigger"
    agent: str
    duration_ms: float

    def to_dict(self) -> dict[str, object]:
        return {"type": self.kind, "agent": self.agent, "waited": True, "duration_ms": self.duration_ms}


@dataclass(frozen=True)
class SessionEvent:
    """The run joined its session (``session:``): new, continued or expired."""

    kind: ClassVar[Literal["session"]] = "session"
    name: str  #: the trace line
    session_id: str
    key: str | None  #: the resolved key (None: ``session: true``)
    history: int  #: messages of history the run starts with

    def to_dict(self) -> dict[str, object]:
        return {"type": self.kind, "name": self.name, "session_id": self.session_id, "key": self.key,
                "history": self.history}


@dataclass(frozen=True)
class NoteEvent:
    """A note in the trace: what the run did that a reader should know (a condition that could
    not be evaluated, skipped retry delays, connectors not recorded)."""

    kind: ClassVar[Literal["note"]] = "note"
    name: str  #: the trace line (``note: <text>``)
    text: str

    def to_dict(self) -> dict[str, object]:
        return {"type": self.kind, "name": self.name, "text": self.text}


@dataclass(frozen=True)
class DivergenceNoteEvent:
    """A request of the run differs from its recording (a ``CassetteDivergenceWarning``)."""

    kind: ClassVar[Literal["note"]] = "note"
    name: str
    text: str

    def to_dict(self) -> dict[str, object]:
        return {"type": self.kind, "name": self.name, "text": self.text, "divergence": True}


@dataclass(frozen=True)
class PredefinedFailedNoteEvent:
    """A predefined tool failed and the model read the error (it still counts as a call)."""

    kind: ClassVar[Literal["note"]] = "note"
    name: str
    text: str
    tool: str

    def to_dict(self) -> dict[str, object]:
        return {"type": self.kind, "name": self.name, "text": self.text, "tool": self.tool,
                "failed_predefined": True}


@dataclass(frozen=True)
class OutboundEvent:
    """An outbound message recorded, never delivered (``send_connector``, automatic connectors);
    ``entry`` is the run's ``outbound`` entry (its ``kind``: ``send_connector`` or ``automatic``)."""

    kind: ClassVar[Literal["outbound"]] = "outbound"
    name: str
    entry: Mapping[str, object]

    def to_dict(self) -> dict[str, object]:
        return {"type": self.kind, "name": self.name, **self.entry}


@dataclass(frozen=True)
class StopProcessingEvent:
    """The run ended through ``StopProcessing`` (middleware or a tool), with its response."""

    kind: ClassVar[Literal["stop_processing"]] = "stop_processing"
    response: object
    publish_outbound: bool

    def to_dict(self) -> dict[str, object]:
        return {"type": self.kind, "response": self.response, "publish_outbound": self.publish_outbound}


@dataclass(frozen=True)
class RetryEvent:
    """An attempt of a tool or sequential agent's operation failed: the next one starts after
    ``delay_s`` (``retry_options``). ``waiting``: the run is in that delay now (never written)."""

    kind: ClassVar[Literal["retry"]] = "retry"
    name: str  #: ``retry <n> of <attempts>``
    attempt: int
    delay_s: float
    error: str
    waiting: bool = field(default=False, compare=False)

    def to_dict(self) -> dict[str, object]:
        return {"type": self.kind, "name": self.name, "attempt": self.attempt, "delay_s": self.delay_s,
                "error": self.error}


RunEvent = (HookEvent | MiddlewareEvent | McpToolsEvent | McpSkippedEvent | StageEvent | TriggerEvent |
            SessionEvent | NoteEvent | DivergenceNoteEvent | PredefinedFailedNoteEvent | OutboundEvent |
            StopProcessingEvent | RetryEvent)


def event_label(event: RunEvent) -> str:
    """The event's line in the trace tree: its ``name``, else its kind and phase."""
    match event:
        case HookEvent(phase=phase) | MiddlewareEvent(phase=phase):
            return f"{event.kind} {phase}"
        case TriggerEvent() | StopProcessingEvent() | StageEvent():
            return event.kind
        case _:
            return event.name or event.kind


def event_failed(event: RunEvent) -> bool:
    """Whether the event's span is a failure (an error, a stage that did not complete)."""
    match event:
        case StageEvent(status=status, error=error):
            return bool(error) or status in ("failed", "blocked")
        case MiddlewareEvent(error=error) | McpSkippedEvent(error=error) | RetryEvent(error=error):
            return bool(error)
        case _:
            return False


# --------------------------------------------------------------------------- reading the JSON back


def run_status(value: object) -> RunStatus:
    """``value`` as a run's status (a report read back)."""
    for status in RUN_STATUSES:
        if value == status:
            return status
    raise EventShapeError(f"not a run's status: {value!r}")


class EventShapeError(ConnicError, ValueError):
    """An ``events`` entry that is none of the shapes :func:`event_from_dict` knows."""


def event_from_dict(data: Mapping[str, object]) -> RunEvent:
    """The inverse of ``to_dict``: the one place that reads an event's ``type`` (a report shard,
    an xdist worker's outcome)."""
    kind = data.get("type")
    text = _Reader(data)  # its string fields, checked
    if kind == "hook":
        return HookEvent(phase=text.choice("phase", HOOK_PHASES), tool=text.text("tool"), mock=text.optional("mock"))
    if kind == "middleware":
        return MiddlewareEvent(phase=text.choice("phase", MIDDLEWARE_PHASES), mock=text.optional("mock"),
                               error=text.optional("error"))
    if kind == "mcp":
        if "tools" in data:
            tools = data["tools"]
            return McpToolsEvent(server=text.text("server"),
                                 tools=tuple(str(t) for t in tools) if isinstance(tools, list) else (),
                                 name=text.text("name"))
        return McpSkippedEvent(name=text.text("name"), server=text.text("server"), error=text.text("error"))
    if kind == "stage":
        return StageEvent(agent=text.text("agent"), status=run_status(text.text("status")), run_id=text.text("run_id"),
                          error=text.optional("error"))
    if kind == "trigger":
        return TriggerEvent(agent=text.text("agent"), duration_ms=text.number("duration_ms"))
    if kind == "session":
        history = data.get("history")
        return SessionEvent(name=text.text("name"), session_id=text.text("session_id"), key=text.optional("key"),
                            history=history if isinstance(history, int) else 0)
    if kind == "note":
        if data.get("divergence"):
            return DivergenceNoteEvent(name=text.text("name"), text=text.text("text"))
        if data.get("failed_predefined"):
            return PredefinedFailedNoteEvent(name=text.text("name"), text=text.text("text"), tool=text.text("tool"))
        return NoteEvent(name=text.text("name"), text=text.text("text"))
    if kind == "outbound":
        return OutboundEvent(name=text.text("name"),
                             entry={k: v for k, v in data.items() if k not in ("type", "name")})
    if kind == "stop_processing":
        return StopProcessingEvent(response=data.get("response"), publish_outbound=data.get("publish_outbound") is not False)
    if kind == "retry":
        attempt = data.get("attempt")
        return RetryEvent(name=text.text("name"), attempt=attempt if isinstance(attempt, int) else 0,
                          delay_s=text.number("delay_s"), error=text.text("error"))
    raise EventShapeError(f"an event of an unknown type: {kind!r}")


@dataclass(frozen=True)
class _Reader:
    data: Mapping[str, object]

    def text(self, key: str) -> str:
        value = self.data.get(key)
        if not isinstance(value, str):
            raise EventShapeError(f"an event's {key!r} is not a string: {value!r}")
        return value

    def choice(self, key: str, allowed: tuple[_W, ...]) -> _W:
        """The string at ``key``, one of ``allowed``."""
        value = self.text(key)
        for word in allowed:
            if value == word:
                return word
        raise EventShapeError(f"an event's {key!r} is none of {', '.join(allowed)}: {value!r}")

    def optional(self, key: str) -> str | None:
        value = self.data.get(key)
        return value if isinstance(value, str) else None

    def number(self, key: str) -> float:
        value = self.data.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise EventShapeError(f"an event's {key!r} is not a number: {value!r}")
        return value
