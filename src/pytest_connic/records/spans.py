"""A run's trace as typed spans: what ``records.run.build_trace`` derives from a run record.

Each span carries what it is in ``meta``, one frozen class per kind of span (the run, a model
turn, a tool call, a guardrail, a pipeline stage, a trigger, a lifecycle event): the terminal's
trace tree reads their fields, dispatching on the class. Every value in them is masked already
(the builder masks as it builds), but for the event an ``EventMeta`` stands for. ``Span.to_dict`` is Connic's span shape, as ``--connic-json``
and ``--connic-traces`` write it; ``metadata`` is the span's ``metadata_json`` object, built with
the typed meta in one place (``records.run``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_connic.jsonsafe import JsonObject, JsonValue, dumps
from pytest_connic.records.events import GuardrailStatus, RunEvent, RunStatus


@dataclass(frozen=True)
class RunMeta:
    """The run's root span (a child run's too)."""

    name: str
    status: RunStatus
    error: str | None
    where: str | None  #: the user's file and line where the run's error was raised


@dataclass(frozen=True)
class ModelMeta:
    """One model turn."""

    name: str  #: ``model #<n>``
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class HookMark:
    """A hook that ran around a tool call; ``mock``: the mock function that stood in for it."""

    phase: str
    mock: str | None


@dataclass(frozen=True)
class ToolMeta:
    """One tool call (its trigger's child run hangs under it)."""

    name: str  #: the tool's name as the model saw it
    params: JsonValue
    has_result: bool
    result: JsonValue
    error: str | None
    mocked: bool
    mock_function: str | None
    aborted: bool
    approval: str | None
    via_discovery: bool
    where: str | None
    hooks: tuple[HookMark, ...]


@dataclass(frozen=True)
class GuardrailMeta:
    """One guardrail check."""

    name: str  #: ``<direction> guardrail <name or type>``
    status: GuardrailStatus
    message: str | None
    mocked: bool
    mock_function: str | None
    where: str | None


@dataclass(frozen=True)
class AgentMeta:
    """A stage of a sequential agent (its turns and calls hang under it)."""

    name: str
    status: RunStatus | None
    error: str | None


@dataclass(frozen=True)
class TriggerMeta:
    """A ``trigger_agent``/``trigger_agent_at`` call that no tool call span holds."""

    name: str


@dataclass(frozen=True)
class EventMeta:
    """A lifecycle event of the run (``RunRecord.events``), unmasked in ``event``."""

    event: RunEvent
    name: str  #: its line
    error: str | None
    mocked: bool
    mock_function: str | None


SpanMeta = (RunMeta | ModelMeta | ToolMeta | GuardrailMeta | AgentMeta | TriggerMeta | EventMeta)


@dataclass(frozen=True)
class Span:
    """One span of a run's trace."""

    name: str
    ok: bool
    duration_ms: float | None
    span_id: str
    parent_span_id: str | None
    span_order: int
    meta: SpanMeta
    metadata: JsonObject  #: the span's ``metadata_json`` object (masked)

    def to_dict(self) -> JsonObject:
        """The span in Connic's shape."""
        return {
            "name": self.name,
            "status": "ok" if self.ok else "error",
            "duration_ms": self.duration_ms,
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
            "span_order": self.span_order,
            "metadata_json": dumps(self.metadata),
        }
