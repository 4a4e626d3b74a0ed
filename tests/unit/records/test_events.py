"""Run events: each kind's JSON is today's shape, reads back to the same event, and pickles (the
worker processes of ``execution/isolation`` send records across)."""

from __future__ import annotations

import json
import pickle

import pytest

from pytest_connic.records.events import (
    DivergenceNoteEvent,
    EventShapeError,
    HookEvent,
    McpSkippedEvent,
    McpToolsEvent,
    MiddlewareEvent,
    NoteEvent,
    OutboundEvent,
    PredefinedFailedNoteEvent,
    RetryEvent,
    RunEvent,
    SessionEvent,
    StageEvent,
    StopProcessingEvent,
    TriggerEvent,
    event_from_dict,
)

EVENTS: list[tuple[RunEvent, dict[str, object]]] = [
    (HookEvent(phase="before", tool="t.f", mock=None), {"type": "hook", "phase": "before", "tool": "t.f", "mock": None}),
    (MiddlewareEvent(phase="cleanup", mock="m", error="E: x"),
     {"type": "middleware", "phase": "cleanup", "mock": "m", "error": "E: x"}),
    (MiddlewareEvent(phase="after", mock=None), {"type": "middleware", "phase": "after", "mock": None}),
    (McpToolsEvent(server="s", tools=("a", "b"), name="mcp server 's': 2 tool(s)"),
     {"type": "mcp", "server": "s", "tools": ["a", "b"], "name": "mcp server 's': 2 tool(s)"}),
    (McpSkippedEvent(name="skipped", server="s", error="down"),
     {"type": "mcp", "name": "skipped", "server": "s", "error": "down"}),
    (StageEvent(agent="x", status="failed", run_id="r", error="bad"),
     {"type": "stage", "agent": "x", "status": "failed", "run_id": "r", "error": "bad"}),
    (TriggerEvent(agent="c", duration_ms=1.5), {"type": "trigger", "agent": "c", "waited": True, "duration_ms": 1.5}),
    (SessionEvent(name="session ann: a new session", session_id="s-1", key="ann", history=0),
     {"type": "session", "name": "session ann: a new session", "session_id": "s-1", "key": "ann", "history": 0}),
    (NoteEvent(name="note: n", text="n"), {"type": "note", "name": "note: n", "text": "n"}),
    (DivergenceNoteEvent(name="note: d", text="d"), {"type": "note", "name": "note: d", "text": "d", "divergence": True}),
    (PredefinedFailedNoteEvent(name="note: web_search failed", text="t", tool="web_search"),
     {"type": "note", "name": "note: web_search failed", "text": "t", "tool": "web_search", "failed_predefined": True}),
    (OutboundEvent(name="outbound automatic c", entry={"kind": "automatic", "connector": "c", "payload": {"a": 1}}),
     {"type": "outbound", "name": "outbound automatic c", "kind": "automatic", "connector": "c", "payload": {"a": 1}}),
    (StopProcessingEvent(response={"status": "rejected"}, publish_outbound=False),
     {"type": "stop_processing", "response": {"status": "rejected"}, "publish_outbound": False}),
    (RetryEvent(name="retry 2 of 3", attempt=1, delay_s=10, error="boom", waiting=True),
     {"type": "retry", "name": "retry 2 of 3", "attempt": 1, "delay_s": 10, "error": "boom"}),
]


@pytest.mark.parametrize(("event", "shape"), EVENTS, ids=[type(e).__name__ for e, _ in EVENTS])
def test_an_event_is_written_in_its_shape_read_back_and_pickled(event: RunEvent, shape: dict[str, object]) -> None:
    assert json.dumps(event.to_dict()) == json.dumps(shape)  # key order too
    assert event_from_dict(json.loads(json.dumps(shape))) == event
    assert pickle.loads(pickle.dumps(event)) == event


def test_an_unknown_shape_is_a_connic_error() -> None:
    with pytest.raises(EventShapeError, match="unknown type: 'party'"):
        event_from_dict({"type": "party"})
    with pytest.raises(EventShapeError, match="'tool' is not a string"):
        event_from_dict({"type": "hook", "phase": "before", "tool": 3})
    with pytest.raises(EventShapeError, match="'phase' is none of before, after: 'sideways'"):
        event_from_dict({"type": "hook", "phase": "sideways", "tool": "t.f", "mock": None})
    with pytest.raises(EventShapeError, match="'phase' is none of before, after, cleanup: 'during'"):
        event_from_dict({"type": "middleware", "phase": "during", "mock": None})
