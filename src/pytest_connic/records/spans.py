"""A run's trace as Connic spans, derived from its :class:`RunRecord`.

Connic's run API returns a flat list of spans ``{name, status, duration_ms, span_id,
parent_span_id, span_order, metadata_json}``; ``connic test --json`` copies them into
``failed_runs`` and the CLI draws them as a tree. A local run has no spans of its own, so they are
derived in the order of the lifecycle (spec §9.3): the run's root span; input guardrails;
``before`` middleware; model turns, each followed by the tool calls it asked for (grouped under a
span per stage for a sequential pipeline); ``after`` middleware and ``StopProcessing``; output
guardrails; ``cleanup`` middleware. A ``trigger_agent`` call carries the child run's spans.
Hook events are attached to their tool call's metadata (``hooks``). Span ids derive from run ids,
so the same run always gives the same spans.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_connic.jsonsafe import dumps, masked
from pytest_connic.records.run import ModelTurnRecord, RunRecord, ToolCallRecord, TriggerRecord
from pytest_connic.secrets import Masker

TRIGGER_TOOLS = ("trigger_agent", "trigger_agent_at")
_BAD_APPROVALS = ("rejected", "timeout", "pending")
#: event types shown elsewhere in the tree (tool call hooks, stage spans, trigger spans)
_FOLDED_EVENTS = ("hook", "stage", "trigger")

Event = tuple[int, dict[str, Any]]


def build_spans(record: RunRecord, *, masker: Masker) -> list[dict[str, Any]]:
    """The spans of ``record`` and of every child run it waited for, in Connic's shape."""
    builder = _SpanBuilder(masker)
    builder.run(record, parent=None, child=False)
    return builder.spans


def is_trigger_call(call: ToolCallRecord) -> bool:
    """Whether ``call`` is a ``trigger_agent``/``trigger_agent_at`` call (by name or ref)."""
    return call.name in TRIGGER_TOOLS or call.ref.rsplit(".", 1)[-1] in TRIGGER_TOOLS


@dataclass
class _Events:
    """A run's lifecycle events, sorted by where they belong in the tree."""

    before: list[Event] = field(default_factory=list)
    after: list[Event] = field(default_factory=list)
    last: list[Event] = field(default_factory=list)
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    hooks: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    @classmethod
    def of(cls, record: RunRecord) -> _Events:
        events = cls()
        for i, event in enumerate(record.events):
            kind, phase = event.get("type"), event.get("phase")
            if kind == "stage":
                events.stages[str(event.get("agent"))] = event
            elif kind == "hook":
                events.attach_hook(record, event)
            elif kind not in _FOLDED_EVENTS:
                slot = events.before if phase == "before" else events.last if phase == "cleanup" else events.after
                slot.append((i, event))
        return events

    def attach_hook(self, record: RunRecord, event: dict[str, Any]) -> None:
        """Give a hook event to the first call of its tool that can have run that hook and has none."""
        phase = event.get("phase")
        for call in sorted(record.tool_calls, key=lambda c: c.seq):
            taken = [h.get("phase") for h in self.hooks.get(call.seq, [])]
            possible = not call.aborted and (phase == "before" or call.error is None)
            if call.ref == event.get("tool") and phase not in taken and possible:
                self.hooks.setdefault(call.seq, []).append({"phase": phase, "mock": event.get("mock")})
                return


@dataclass
class _SpanBuilder:
    masker: Masker
    spans: list[dict[str, Any]] = field(default_factory=list)

    def add(self, name: str, *, ok: bool, duration: float | None, sid: str, parent: str | None,
            meta: dict[str, Any]) -> str:
        self.spans.append({
            "name": name,
            "status": "ok" if ok else "error",
            "duration_ms": duration,
            "span_id": sid,
            "parent_span_id": parent,
            "span_order": len(self.spans),
            "metadata_json": dumps(masked(meta, self.masker)),
        })
        return sid

    def run(self, record: RunRecord, *, parent: str | None, child: bool) -> None:
        root = self.add("agent_run", ok=_run_ok(record), duration=record.duration_ms,
                        sid=f"{record.run_id}#run", parent=parent, meta=_run_meta(record, child))
        events = _Events.of(record)
        self.guardrails(record, "input", root)
        self.events(record, events.before, root)
        triggers = list(record.triggers)
        for agent, turns, calls in _agent_groups(record, list(events.stages)):
            owner = root if agent == record.agent_name else self.stage(record, agent, events, root)
            self.turns_and_calls(record.run_id, turns, calls, owner, triggers, events)
        for i, trigger in enumerate(triggers):  # triggers without a matching tool call
            sid = self.add(trigger.tool, ok=True, duration=None, sid=f"{record.run_id}#trigger{i}",
                           parent=root, meta=_trigger_meta(trigger))
            self.child(trigger, sid)
        self.events(record, events.after, root)
        self.guardrails(record, "output", root)
        self.events(record, events.last, root)

    def stage(self, record: RunRecord, agent: str, events: _Events, parent: str) -> str:
        stage = events.stages.get(agent, {})
        meta = {"kind": "agent", "name": agent, "run_id": stage.get("run_id"), "status": stage.get("status"),
                "error": stage.get("error")}
        return self.add("agent", ok=stage.get("status") in (None, "completed"), duration=None,
                        sid=f"{record.run_id}#agent:{agent}", parent=parent, meta=meta)

    def turns_and_calls(self, run_id: str, turns: list[ModelTurnRecord], calls: list[ToolCallRecord],
                        parent: str, triggers: list[TriggerRecord], events: _Events) -> None:
        queue = list(calls)
        for turn in turns:
            self.add("llm_call", ok=True, duration=turn.duration_ms, sid=f"{run_id}#model:{turn.agent}:{turn.index}",
                     parent=parent, meta=_turn_meta(turn))
            asked, queue = queue[: len(turn.tool_calls)], queue[len(turn.tool_calls):]
            for call in asked:
                self.call(run_id, call, parent, triggers, events)
        for call in queue:
            self.call(run_id, call, parent, triggers, events)

    def call(self, run_id: str, call: ToolCallRecord, parent: str, triggers: list[TriggerRecord],
             events: _Events) -> None:
        meta = _call_meta(call)
        if call.seq in events.hooks:
            meta["hooks"] = events.hooks[call.seq]
        # a refused trigger call (bad arguments, rejected approval) started no child
        trigger = triggers.pop(0) if is_trigger_call(call) and call.error is None and triggers else None
        if trigger is not None:
            meta["trigger"] = _trigger_meta(trigger)
        sid = self.add("tool_call", ok=_call_ok(call), duration=call.duration_ms, sid=f"{run_id}#tool{call.seq}",
                       parent=parent, meta=meta)
        if trigger is not None:
            self.child(trigger, sid)

    def child(self, trigger: TriggerRecord, parent: str) -> None:
        if trigger.child_run is not None:
            self.run(trigger.child_run, parent=parent, child=True)

    def guardrails(self, record: RunRecord, direction: str, parent: str) -> None:
        for i, rail in enumerate(record.guardrails):
            if rail.direction != direction:
                continue
            meta: dict[str, Any] = {"kind": "guardrail", **rail.to_dict()}
            meta["guardrail_name"] = meta.pop("name")
            meta["name"] = f"{direction} guardrail {rail.name or rail.type}"
            self.add("guardrail", ok=rail.status != "blocked", duration=None,
                     sid=f"{record.run_id}#guardrail{i}", parent=parent, meta=meta)

    def events(self, record: RunRecord, events: list[Event], parent: str) -> None:
        for i, event in events:
            label = str(event.get("name") or " ".join(str(event[k]) for k in ("type", "phase") if event.get(k)))
            meta: dict[str, Any] = {"kind": "event", **event, "name": label or "event"}
            if "mock" in event:
                meta.update(mocked=bool(event["mock"]), mock_function=event["mock"])
            failed = bool(event.get("error")) or event.get("status") in ("error", "failed", "blocked")
            duration = event.get("duration_ms")
            self.add(str(event.get("type") or "event"), ok=not failed, sid=f"{record.run_id}#event{i}",
                     parent=parent, meta=meta, duration=duration if isinstance(duration, (int, float)) else None)


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


def _run_meta(record: RunRecord, child: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "kind": "run",
        "name": record.agent_name,
        "agent_name": record.agent_name,
        "run_id": record.run_id,
        "status": record.status,
        "error": record.infrastructure_error or record.error,
        "tokens": {"input": record.input_tokens, "output": record.output_tokens},
        "cost": record.cost,
    }
    if child:
        meta.update(child=True, input=record.input, output=record.output_raw)
    return meta


def _turn_meta(turn: ModelTurnRecord) -> dict[str, Any]:
    return {"kind": "model", "name": f"model #{turn.index + 1}", **turn.to_dict()}


def _call_meta(call: ToolCallRecord) -> dict[str, Any]:
    meta: dict[str, Any] = {"kind": "tool", "tool_name": call.name, **call.to_dict()}
    if call.aborted and not call.error:
        meta["error"] = "aborted by a before-hook (AbortTool)"
    elif call.approval in _BAD_APPROVALS and not call.error:
        meta["error"] = f"approval {call.approval}"
    return meta


def _call_ok(call: ToolCallRecord) -> bool:
    return call.error is None and not call.aborted and call.approval not in _BAD_APPROVALS


def _trigger_meta(trigger: TriggerRecord) -> dict[str, Any]:
    return {
        "kind": "trigger",
        "name": f"{trigger.tool} → {trigger.agent_name}",
        "agent_name": trigger.agent_name,
        "tool": trigger.tool,
        "wait_for_response": trigger.wait_for_response,
        "payload": trigger.payload,
        "child_run_id": trigger.child_run.run_id if trigger.child_run else None,
    }
