"""Rebuild records from their ``to_dict`` form (xdist workers send outcomes as JSON)."""

from __future__ import annotations

from typing import Any

from pytest_connic.records.events import event_from_dict, run_status
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import (
    ApprovalRecord,
    GuardrailRecord,
    ModelTurnRecord,
    RunRecord,
    ToolCallRecord,
    TriggerRecord,
)


def _fields(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = cls.__dataclass_fields__  # type: ignore[attr-defined]
    return {k: v for k, v in data.items() if k in names}


def run_from_dict(data: dict[str, Any]) -> RunRecord:
    """The inverse of ``RunRecord.to_dict``."""
    record = RunRecord(
        run_id=data["run_id"], agent_name=data["agent_name"], index=data.get("index", 0),
        status=run_status(data.get("status", "completed")), error=data.get("error"), output_raw=data.get("output"),
        input=data.get("input"), run_context=data.get("run_context") or {}, duration_ms=data.get("duration_ms", 0.0),
        failures=list(data.get("failures") or []), infrastructure_error=data.get("infrastructure_error"),
        skipped=bool(data.get("skipped")), outbound=list(data.get("outbound") or []),
        events=[event_from_dict(e) for e in data.get("events") or []], error_traceback=data.get("error_traceback"),
        virtual_ms=float(data.get("virtual_ms") or 0.0),
    )
    record.tool_calls = [ToolCallRecord(**_fields(ToolCallRecord, c)) for c in data.get("tool_calls") or []]
    record.model_turns = [ModelTurnRecord(**_fields(ModelTurnRecord, t)) for t in data.get("model_turns") or []]
    record.guardrails = [GuardrailRecord(**_fields(GuardrailRecord, g)) for g in data.get("guardrails") or []]
    record.approvals = [ApprovalRecord(**_fields(ApprovalRecord, a)) for a in data.get("approvals") or []]
    record.triggers = [
        TriggerRecord(
            agent_name=t["agent_name"], tool=t["tool"], wait_for_response=t["wait_for_response"],
            payload=t.get("payload"), payload_raw=t.get("payload_raw", ""), scheduled_at=t.get("scheduled_at"),
            child_run=run_from_dict(t["child_run"]) if t.get("child_run") else None,
        )
        for t in data.get("triggers") or []
    ]
    return record


def outcome_from_dict(data: dict[str, Any]) -> CaseOutcome:
    """The inverse of ``CaseOutcome.to_dict``."""
    return CaseOutcome(
        nodeid=data["nodeid"], suite_path=data["suite"], line=data["line"], agent_name=data["agent_name"],
        case_name=data["test_name"], runs=data["runs"], success_threshold=data["success_threshold"],
        records=[run_from_dict(r) for r in data.get("records") or []], setup_error=data.get("setup_error"),
        skipped_runs=data.get("skipped_runs", 0), early_stop_reason=data.get("early_stop_reason"),
        interrupted=data.get("interrupted"), pytest_outcome=data.get("pytest_outcome"),
        pytest_reason=data.get("pytest_reason"), attempts=list(data.get("attempts") or []),
        left_out=data.get("left_out"), recording_error=data.get("recording_error"),
        setup_traceback=data.get("setup_traceback"), recorded_runs=data.get("recorded_runs"),
        replayed_runs=data.get("replayed_runs") or 0,
    )
