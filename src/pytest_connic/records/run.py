"""The records one run leaves behind, the verdict of a case, and a run's trace.

These are plain data: the runtime fills them, assertions read them, reports
render them. Everything here is JSON-serialisable through ``to_dict``.

The trace (:func:`build_spans`, ``RunRecord.trace``) lives here with the records it is
derived from, so that the record can offer it without an import cycle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from pytest_connic.jsonsafe import JsonObject, masked, parse_json
from pytest_connic.records.events import (
    ApprovalState,
    GuardrailStatus,
    HookEvent,
    McpSkippedEvent,
    MiddlewareEvent,
    RetryEvent,
    RunEvent,
    RunStatus,
    StageEvent,
    StopProcessingEvent,
    TriggerEvent,
    event_failed,
    event_label,
)
from pytest_connic.records.spans import (
    AgentMeta,
    EventMeta,
    GuardrailMeta,
    HookMark,
    ModelMeta,
    RunMeta,
    Span,
    SpanMeta,
    ToolMeta,
    TriggerMeta,
)
from pytest_connic.secrets import Masker


@dataclass
class ToolCallRecord:
    """One tool call the agent issued, in call order."""

    seq: int
    name: str  #: the name as exposed to the model (short function name)
    ref: str  #: canonical ref (``module.function``, predefined name, ``api:spec.tool``)
    params: dict[str, object]
    has_result: bool = False
    result: object = None
    error: str | None = None
    mocked: bool = False
    mock_function: str | None = None  #: which mock function served the call
    aborted: bool = False  #: a before-hook raised ``AbortTool``
    approval: ApprovalState | None = None
    via_discovery: bool = False  #: issued through ``use_tool``
    duration_ms: float = 0.0
    agent: str = ""  #: the agent (run) that issued the call
    #: the user's traceback when the tool (its mock, a hook) raised: ``usertb.for_record``
    traceback: JsonObject | None = None

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclass
class ModelTurnRecord:
    """One model call: what it answered and what it cost (None: no price known for its model,
    ``models/pricing.py``)."""

    agent: str
    index: int
    content: str | None = None
    tool_calls: list[dict[str, object]] = field(default_factory=list)  #: ``{id, name, arguments}``
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = 0.0
    duration_ms: float = 0.0
    model: str | None = None  #: the model that answered

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclass
class GuardrailRecord:
    """One guardrail evaluation (a span of the trace)."""

    direction: str  #: input | output
    type: str
    name: str | None
    status: GuardrailStatus
    message: str | None = None
    mocked: bool = False
    mock_function: str | None = None
    #: ``guardrails/g.py:3``: where the check raised (its traceback is the run's ``error_traceback``)
    where: str | None = None

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclass
class TriggerRecord:
    """One ``trigger_agent`` / ``trigger_agent_at`` call and, when waited, the child run."""

    agent_name: str
    tool: str  #: trigger_agent | trigger_agent_at
    wait_for_response: bool
    payload: object  #: JSON-parsed when the parent passed a JSON string
    payload_raw: str  #: the string form when applicable, else ""
    child_run: RunRecord | None = None
    scheduled_at: str | None = None  #: ``trigger_agent_at``: when the child would start (ISO 8601 UTC)

    def to_dict(self) -> dict[str, object]:
        return {
            "agent_name": self.agent_name,
            "tool": self.tool,
            "wait_for_response": self.wait_for_response,
            "payload": self.payload,
            "payload_raw": self.payload_raw,
            "scheduled_at": self.scheduled_at,
            "child_run": self.child_run.to_dict() if self.child_run else None,
        }


@dataclass
class ApprovalRecord:
    """One approval request raised during a run and how it was answered."""

    tool: str
    params: dict[str, object]
    decision: str | None  #: approve | reject | timeout (the suite's word); None: unanswered
    decision_index: int | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclass
class RunRecord:
    """Everything one invocation of an agent produced."""

    run_id: str
    agent_name: str
    index: int = 0  #: which run of the case (0-based); children keep the parent's
    status: RunStatus = "completed"
    error: str | None = None
    output_raw: object = None  #: the unparsed output (a string for LLM agents)
    input: object = None  #: the delivered payload
    run_context: dict[str, object] = field(default_factory=dict)
    duration_ms: float = 0.0
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    model_turns: list[ModelTurnRecord] = field(default_factory=list)
    triggers: list[TriggerRecord] = field(default_factory=list)
    guardrails: list[GuardrailRecord] = field(default_factory=list)
    approvals: list[ApprovalRecord] = field(default_factory=list)
    outbound: list[dict[str, object]] = field(default_factory=list)
    events: list[RunEvent] = field(default_factory=list)  #: lifecycle events, in order (``records/events.py``)
    #: checks that failed (filled by the assertions after the run)
    failures: list[str] = field(default_factory=list)
    #: an infrastructure error (a provider down): the case errors, exit code 2
    infrastructure_error: str | None = None
    #: the run was never started (early stop)
    skipped: bool = False
    #: the user's traceback when user code (middleware, a hook, a guardrail) ended the run
    error_traceback: JsonObject | None = None
    #: how much of ``duration_ms`` is retry delays a replay skipped (runtime/clock.py)
    virtual_ms: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.failures and not self.skipped and self.infrastructure_error is None

    @property
    def stopped(self) -> bool:
        """The run ended through ``StopProcessing`` (middleware or a tool): it completed, early,
        for its own reason, so recorded model turns it left unused are no divergence."""
        return any(isinstance(event, StopProcessingEvent) for event in self.events)

    @property
    def output(self) -> object:
        """The output as expressions see it (https://connic.co/docs/v1/test/assertions): JSON-parsed when it is a JSON
        string, else as is; None for a run that ended neither completed nor blocked."""
        if self.status not in ("completed", "blocked"):
            return None
        return parse_json(self.output_raw)

    @property
    def trace(self) -> list[JsonObject]:
        """The run's spans (Connic's trace shape, children included), as reports show them."""
        return build_spans(self, masker=Masker())

    @property
    def input_tokens(self) -> int:
        own = sum(t.input_tokens for t in self.model_turns)
        return own + sum(t.child_run.input_tokens for t in self.triggers if t.child_run)

    @property
    def output_tokens(self) -> int:
        own = sum(t.output_tokens for t in self.model_turns)
        return own + sum(t.child_run.output_tokens for t in self.triggers if t.child_run)

    @property
    def cost(self) -> float:
        """The known part of the run's cost (``cost_known``: whether that is all of it)."""
        own = sum(t.cost or 0.0 for t in self.model_turns)
        return own + sum(t.child_run.cost for t in self.triggers if t.child_run)

    @property
    def cost_known(self) -> bool:
        """Whether every model turn (child runs' too) has a price: else the cost is unknown."""
        return (all(t.cost is not None for t in self.model_turns)
                and all(t.child_run.cost_known for t in self.triggers if t.child_run))

    def to_dict(self) -> dict[str, object]:
        return {
            "run_id": self.run_id,
            "agent_name": self.agent_name,
            "index": self.index,
            "status": self.status,
            "error": self.error,
            "output": self.output_raw,
            "input": self.input,
            "run_context": self.run_context,
            "duration_ms": self.duration_ms,
            "passed": self.passed,
            "skipped": self.skipped,
            "failures": list(self.failures),
            "infrastructure_error": self.infrastructure_error,
            "tokens": {"input": self.input_tokens, "output": self.output_tokens},
            "cost": self.cost,
            "cost_known": self.cost_known,
            "virtual_ms": self.virtual_ms,
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "model_turns": [t.to_dict() for t in self.model_turns],
            "triggers": [t.to_dict() for t in self.triggers],
            "guardrails": [g.to_dict() for g in self.guardrails],
            "approvals": [a.to_dict() for a in self.approvals],
            "outbound": list(self.outbound),
            "events": [event.to_dict() for event in self.events],
            "error_traceback": self.error_traceback,
        }


# --------------------------------------------------------------------------- the trace
#
# A run's trace as Connic spans, derived from its :class:`RunRecord`.
#
# Connic's run API returns a flat list of spans ``{name, status, duration_ms, span_id,
# parent_span_id, span_order, metadata_json}``; ``connic test --json`` copies them into
# ``failed_runs`` and the CLI draws them as a tree. A local run has no spans of its own, so they are
# derived in the order of the lifecycle (https://connic.co/docs/v1/build/guardrails): the run's root span; input guardrails;
# ``before`` middleware; model turns, each followed by the tool calls it asked for (grouped under a
# span per stage for a sequential pipeline); ``after`` middleware and ``StopProcessing``; output
# guardrails; ``cleanup`` middleware. A ``trigger_agent`` call carries the child run's spans.
# Hook events are attached to their tool call's metadata (``hooks``). Span ids derive from run ids,
# so the same run always gives the same spans.

TRIGGER_TOOLS = ("trigger_agent", "trigger_agent_at")
_BAD_APPROVALS = ("rejected", "timeout", "pending")

Event = tuple[int, RunEvent]


def build_spans(record: RunRecord, *, masker: Masker) -> list[JsonObject]:
    """The spans of ``record`` and of every child run it waited for, in Connic's shape."""
    return [span.to_dict() for span in build_trace(record, masker=masker)]


def build_trace(record: RunRecord, *, masker: Masker) -> list[Span]:
    """The typed spans of ``record`` and of every child run it waited for (masked)."""
    builder = _SpanBuilder(masker)
    builder.run(record, parent=None, child=False)
    return builder.spans


def is_trigger_call(call: ToolCallRecord) -> bool:
    """Whether ``call`` is a ``trigger_agent``/``trigger_agent_at`` call (by name or ref)."""
    return call.name in TRIGGER_TOOLS or call.ref.rsplit(".", 1)[-1] in TRIGGER_TOOLS


@dataclass
class _Events:
    """A run's lifecycle events, sorted by where they belong in the tree: hooks on their tool
    calls, stages as spans of their own, waited triggers under their tool calls (so not shown
    again), the others before, after or at the end of the run (middleware phases)."""

    before: list[Event] = field(default_factory=list)
    after: list[Event] = field(default_factory=list)
    last: list[Event] = field(default_factory=list)
    stages: dict[str, StageEvent] = field(default_factory=dict)
    hooks: dict[int, list[HookEvent]] = field(default_factory=dict)

    @classmethod
    def of(cls, record: RunRecord) -> _Events:
        events = cls()
        for i, event in enumerate(record.events):
            match event:
                case StageEvent():
                    events.stages[event.agent] = event
                case HookEvent():
                    events.attach_hook(record, event)
                case TriggerEvent():
                    pass
                case MiddlewareEvent(phase="before"):
                    events.before.append((i, event))
                case MiddlewareEvent(phase="cleanup"):
                    events.last.append((i, event))
                case _:
                    events.after.append((i, event))
        return events

    def attach_hook(self, record: RunRecord, event: HookEvent) -> None:
        """Give a hook event to the first call of its tool that can have run that hook and has none."""
        for call in sorted(record.tool_calls, key=lambda c: c.seq):
            taken = [h.phase for h in self.hooks.get(call.seq, [])]
            possible = not call.aborted and (event.phase == "before" or call.error is None)
            if call.ref == event.tool and event.phase not in taken and possible:
                self.hooks.setdefault(call.seq, []).append(event)
                return


@dataclass
class _SpanBuilder:
    masker: Masker
    spans: list[Span] = field(default_factory=list)

    def text(self, value: str | None) -> str | None:
        """``value`` as the reports show it (masked, bounded)."""
        return None if value is None else str(masked(value, self.masker))

    def add(self, name: str, *, ok: bool, duration: float | None, sid: str, parent: str | None,
            meta: SpanMeta, data: Mapping[str, object]) -> str:
        shown: JsonObject = masked(data, self.masker)
        self.spans.append(Span(name=name, ok=ok, duration_ms=duration, span_id=sid, parent_span_id=parent,
                               span_order=len(self.spans), meta=meta, metadata=shown))
        return sid

    def run(self, record: RunRecord, *, parent: str | None, child: bool) -> None:
        data = _run_meta(record, child)
        error = record.infrastructure_error or record.error
        where = data.get("where")
        meta = RunMeta(name=str(self.text(record.agent_name)), status=record.status, error=self.text(error),
                       where=self.text(where) if isinstance(where, str) else None)
        root = self.add("agent_run", ok=_run_ok(record), duration=record.duration_ms,
                        sid=f"{record.run_id}#run", parent=parent, meta=meta, data=data)
        events = _Events.of(record)
        self.guardrails(record, "input", root)
        self.events(record, events.before, root)
        triggers = list(record.triggers)
        for agent, turns, calls in _agent_groups(record, list(events.stages)):
            owner = root if agent == record.agent_name else self.stage(record, agent, events, root)
            self.turns_and_calls(record.run_id, turns, calls, owner, triggers, events)
        for i, trigger in enumerate(triggers):  # triggers without a matching tool call
            trigger_data = _trigger_meta(trigger)
            sid = self.add(trigger.tool, ok=True, duration=None, sid=f"{record.run_id}#trigger{i}", parent=root,
                           meta=TriggerMeta(name=str(self.text(_trigger_label(trigger)))), data=trigger_data)
            self.child(trigger, sid)
        self.events(record, events.after, root)
        self.guardrails(record, "output", root)
        self.events(record, events.last, root)

    def stage(self, record: RunRecord, agent: str, events: _Events, parent: str) -> str:
        stage = events.stages.get(agent)
        status = stage.status if stage is not None else None
        error = stage.error if stage is not None else None
        data = {"kind": "agent", "name": agent, "run_id": stage.run_id if stage is not None else None,
                "status": status, "error": error}
        meta = AgentMeta(name=str(self.text(agent)), status=status, error=self.text(error))
        return self.add("agent", ok=status in (None, "completed"), duration=None,
                        sid=f"{record.run_id}#agent:{agent}", parent=parent, meta=meta, data=data)

    def turns_and_calls(self, run_id: str, turns: list[ModelTurnRecord], calls: list[ToolCallRecord],
                        parent: str, triggers: list[TriggerRecord], events: _Events) -> None:
        queue = list(calls)
        for turn in turns:
            name = f"model #{turn.index + 1}"
            meta = ModelMeta(name=name, input_tokens=turn.input_tokens, output_tokens=turn.output_tokens)
            self.add("llm_call", ok=True, duration=turn.duration_ms, sid=f"{run_id}#model:{turn.agent}:{turn.index}",
                     parent=parent, meta=meta, data={"kind": "model", "name": name, **turn.to_dict()})
            asked, queue = queue[: len(turn.tool_calls)], queue[len(turn.tool_calls):]
            for call in asked:
                self.call(run_id, call, parent, triggers, events)
        for call in queue:
            self.call(run_id, call, parent, triggers, events)

    def call(self, run_id: str, call: ToolCallRecord, parent: str, triggers: list[TriggerRecord],
             events: _Events) -> None:
        data = _call_meta(call)
        hooks = events.hooks.get(call.seq, [])
        if hooks:
            data["hooks"] = [{"phase": h.phase, "mock": h.mock} for h in hooks]
        # a refused trigger call (bad arguments, rejected approval) started no child
        trigger = triggers.pop(0) if is_trigger_call(call) and call.error is None and triggers else None
        if trigger is not None:
            data["trigger"] = _trigger_meta(trigger)
        error = data.get("error")
        where = call.traceback.get("where") if call.traceback is not None else None
        meta = ToolMeta(
            name=str(self.text(call.name)), params=masked(call.params, self.masker), has_result=call.has_result,
            result=masked(call.result, self.masker), error=self.text(error) if isinstance(error, str) else None,
            mocked=call.mocked, mock_function=self.text(call.mock_function), aborted=call.aborted,
            approval=self.text(call.approval), via_discovery=call.via_discovery,
            where=self.text(where) if isinstance(where, str) else None,
            hooks=tuple(HookMark(phase=h.phase, mock=self.text(h.mock)) for h in hooks))
        sid = self.add("tool_call", ok=_call_ok(call), duration=call.duration_ms, sid=f"{run_id}#tool{call.seq}",
                       parent=parent, meta=meta, data=data)
        if trigger is not None:
            self.child(trigger, sid)

    def child(self, trigger: TriggerRecord, parent: str) -> None:
        if trigger.child_run is not None:
            self.run(trigger.child_run, parent=parent, child=True)

    def guardrails(self, record: RunRecord, direction: str, parent: str) -> None:
        for i, rail in enumerate(record.guardrails):
            if rail.direction != direction:
                continue
            data: dict[str, object] = {"kind": "guardrail", **rail.to_dict()}
            data["guardrail_name"] = data.pop("name")
            name = f"{direction} guardrail {rail.name or rail.type}"
            data["name"] = name
            meta = GuardrailMeta(name=str(self.text(name)), status=rail.status, message=self.text(rail.message),
                                 mocked=rail.mocked, mock_function=self.text(rail.mock_function),
                                 where=self.text(rail.where))
            self.add("guardrail", ok=rail.status != "blocked", duration=None,
                     sid=f"{record.run_id}#guardrail{i}", parent=parent, meta=meta, data=data)

    def events(self, record: RunRecord, events: list[Event], parent: str) -> None:
        for i, event in events:
            label = event_label(event) or "event"
            data: dict[str, object] = {"kind": "event", **event.to_dict(), "name": label}
            mock = event.mock if isinstance(event, (HookEvent, MiddlewareEvent)) else None
            if isinstance(event, (HookEvent, MiddlewareEvent)):
                data.update(mocked=bool(mock), mock_function=mock)
            error = event.error if isinstance(event, (MiddlewareEvent, McpSkippedEvent, RetryEvent, StageEvent)) else None
            meta = EventMeta(event=event, name=str(self.text(label)), error=self.text(error) or None,
                             mocked=bool(mock), mock_function=self.text(mock))
            duration = event.duration_ms if isinstance(event, TriggerEvent) else None
            self.add(event.kind, ok=not event_failed(event), sid=f"{record.run_id}#event{i}",
                     parent=parent, meta=meta, data=data, duration=duration)


def _agent_groups(record: RunRecord, stages: list[str]) -> list[tuple[str, list[ModelTurnRecord],
                                                                       list[ToolCallRecord]]]:
    """Model turns and tool calls per agent: the run's own agent, the stages in pipeline order,
    then any other agent by first appearance."""
    calls = sorted(record.tool_calls, key=lambda c: c.seq)
    order = [record.agent_name]
    for agent in [*stages, *(t.agent for t in record.model_turns), *(c.agent for c in calls)]:
        if agent and agent not in order:
            order.append(agent)
    groups = []
    for agent in order:
        own_turns = sorted((t for t in record.model_turns if (t.agent or record.agent_name) == agent),
                           key=lambda t: t.index)
        own_calls = [c for c in calls if (c.agent or record.agent_name) == agent]
        groups.append((agent, own_turns, own_calls))
    return groups


def _run_ok(record: RunRecord) -> bool:
    return record.status == "completed" and not record.error and record.infrastructure_error is None


def _run_meta(record: RunRecord, child: bool) -> dict[str, object]:
    meta: dict[str, object] = {
        "kind": "run",
        "name": record.agent_name,
        "agent_name": record.agent_name,
        "run_id": record.run_id,
        "status": record.status,
        "error": record.infrastructure_error or record.error,
        "tokens": {"input": record.input_tokens, "output": record.output_tokens},
        "cost": record.cost,
        "cost_known": record.cost_known,
    }
    if child:
        meta.update(child=True, input=record.input, output=record.output_raw)
    where = (record.error_traceback or {}).get("where")
    if where and not any(g.where for g in record.guardrails):  # a guardrail's line says it already
        meta["where"] = where
    return meta


def _call_meta(call: ToolCallRecord) -> dict[str, object]:
    meta: dict[str, object] = {"kind": "tool", "tool_name": call.name, **call.to_dict()}
    if call.traceback is not None:  # a span holds the traceback's text, not its frames
        meta.update(traceback=call.traceback.get("text"), where=call.traceback.get("where"))
    if call.aborted and not call.error:
        meta["error"] = "aborted by a before-hook (AbortTool)"
    elif call.approval in _BAD_APPROVALS and not call.error:
        meta["error"] = f"approval {call.approval}"
    elif _abandoned(call):
        meta["error"] = ABANDONED
    return meta


#: the error of a call that never returned: the run ended (a timeout, a stop, another call's
#: failure) while it ran
ABANDONED = "no result: the run ended while this call was running"


def _abandoned(call: ToolCallRecord) -> bool:
    return not call.has_result and call.error is None and not call.aborted and call.approval not in _BAD_APPROVALS


def _call_ok(call: ToolCallRecord) -> bool:
    # not failed, and not abandoned (``_abandoned``: no result although nothing else failed)
    return call.has_result and call.error is None and not call.aborted and call.approval not in _BAD_APPROVALS


def _trigger_label(trigger: TriggerRecord) -> str:
    return f"{trigger.tool} → {trigger.agent_name}"


def _trigger_meta(trigger: TriggerRecord) -> dict[str, object]:
    return {
        "kind": "trigger",
        "name": _trigger_label(trigger),
        "agent_name": trigger.agent_name,
        "tool": trigger.tool,
        "wait_for_response": trigger.wait_for_response,
        "payload": trigger.payload,
        "child_run_id": trigger.child_run.run_id if trigger.child_run else None,
    }
