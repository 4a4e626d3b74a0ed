"""The records one run leaves behind, and the verdict of a case.

These are plain data: the runtime fills them, assertions read them, reports
render them. Everything here is JSON-serialisable through ``to_dict``.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass, field
from typing import Any

#: Statuses a run can end in (the test binding ``status``).
STATUSES = ("completed", "failed", "cancelled", "blocked", "awaiting_approval")


@dataclass
class ToolCallRecord:
    """One tool call the agent issued, in call order."""

    seq: int
    name: str  #: the name as exposed to the model (short function name)
    ref: str  #: canonical ref (``module.function``, predefined name, ``api:spec.tool``)
    params: dict[str, Any]
    has_result: bool = False
    result: Any = None
    error: str | None = None
    mocked: bool = False
    mock_function: str | None = None  #: which mock function served the call
    aborted: bool = False  #: a before-hook raised ``AbortTool``
    approval: str | None = None  #: None | approved | rejected | timeout | pending
    via_discovery: bool = False  #: issued through ``use_tool``
    duration_ms: float = 0.0
    agent: str = ""  #: the agent (run) that issued the call

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class ModelTurnRecord:
    """One model call: what it answered and what it cost."""

    agent: str
    index: int
    content: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    duration_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class GuardrailRecord:
    """One guardrail evaluation (a span of the trace)."""

    direction: str  #: input | output
    type: str
    name: str | None
    status: str  #: passed | blocked | warned | redacted | not_evaluated
    message: str | None = None
    mocked: bool = False
    mock_function: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class TriggerRecord:
    """One ``trigger_agent`` / ``trigger_agent_at`` call and, when waited, the child run."""

    agent_name: str
    tool: str  #: trigger_agent | trigger_agent_at
    wait_for_response: bool
    payload: Any  #: JSON-parsed when the parent passed a JSON string
    payload_raw: str  #: the string form when applicable, else ""
    child_run: RunRecord | None = None
    scheduled_at: str | None = None  #: ``trigger_agent_at``: when the child would start (ISO 8601 UTC)

    def to_dict(self) -> dict[str, Any]:
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
    params: dict[str, Any]
    decision: str | None  #: approve | reject | timeout | None (unanswered)
    decision_index: int | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class RunRecord:
    """Everything one invocation of an agent produced."""

    run_id: str
    agent_name: str
    index: int = 0  #: which run of the case (0-based); children keep the parent's
    status: str = "completed"
    error: str | None = None
    output_raw: Any = None  #: the unparsed output (a string for LLM agents)
    input: Any = None  #: the delivered payload
    run_context: dict[str, Any] = field(default_factory=dict)
    duration_ms: float = 0.0
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    model_turns: list[ModelTurnRecord] = field(default_factory=list)
    triggers: list[TriggerRecord] = field(default_factory=list)
    guardrails: list[GuardrailRecord] = field(default_factory=list)
    approvals: list[ApprovalRecord] = field(default_factory=list)
    outbound: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  #: lifecycle spans, in order
    #: checks that failed (filled by the assertions after the run)
    failures: list[str] = field(default_factory=list)
    #: an infrastructure error (a provider down): the case errors, exit code 2
    infrastructure_error: str | None = None
    #: the run was never started (early stop)
    skipped: bool = False

    @property
    def passed(self) -> bool:
        return not self.failures and not self.skipped and self.infrastructure_error is None

    @property
    def output(self) -> Any:
        """The output as expressions see it (spec §2.5): JSON-parsed when it is a JSON
        string, else as is; None for a run that ended neither completed nor blocked."""
        if self.status not in ("completed", "blocked"):
            return None
        from pytest_connic.runtime.payload import parse_json

        return parse_json(self.output_raw)

    @property
    def trace(self) -> list[dict[str, Any]]:
        """The run's spans (Connic's trace shape, children included), as reports show them."""
        from pytest_connic.records.spans import build_spans
        from pytest_connic.secrets import Masker

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
        own = sum(t.cost for t in self.model_turns)
        return own + sum(t.child_run.cost for t in self.triggers if t.child_run)

    def to_dict(self) -> dict[str, Any]:
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
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "model_turns": [t.to_dict() for t in self.model_turns],
            "triggers": [t.to_dict() for t in self.triggers],
            "guardrails": [g.to_dict() for g in self.guardrails],
            "approvals": [a.to_dict() for a in self.approvals],
            "outbound": list(self.outbound),
            "events": list(self.events),
        }


@dataclass
class CaseOutcome:
    """The verdict of one case over its runs."""

    nodeid: str
    suite_path: str  #: ``tests/<suite>.yaml`` relative to the project root
    line: int
    agent_name: str
    case_name: str
    runs: int
    success_threshold: int
    records: list[RunRecord] = field(default_factory=list)
    #: a failure that kept every run from starting (missing fixture, invalid case)
    setup_error: str | None = None
    skipped_runs: int = 0
    early_stop_reason: str | None = None

    @property
    def successes(self) -> int:
        return sum(1 for r in self.records if r.passed)

    @property
    def passed(self) -> bool:
        if self.setup_error is not None or self.infrastructure_error is not None:
            return False
        return self.successes * 100 >= self.success_threshold * self.runs

    @property
    def infrastructure_error(self) -> str | None:
        for record in self.records:
            if record.infrastructure_error:
                return record.infrastructure_error
        return None

    @property
    def failure_reason(self) -> str | None:
        if self.passed:
            return None
        if self.setup_error is not None:
            return self.setup_error
        for record in self.records:
            if record.infrastructure_error:
                return record.infrastructure_error
            if record.failures:
                return record.failures[0]
        return None

    @property
    def executed(self) -> list[RunRecord]:
        return [r for r in self.records if not r.skipped]

    @property
    def median_latency_ms(self) -> float | None:
        durations = [r.duration_ms for r in self.executed]
        return statistics.median(durations) if durations else None

    @property
    def input_tokens(self) -> int:
        return sum(r.input_tokens for r in self.records)

    @property
    def output_tokens(self) -> int:
        return sum(r.output_tokens for r in self.records)

    @property
    def cost(self) -> float:
        return sum(r.cost for r in self.records)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid,
            "suite": self.suite_path,
            "line": self.line,
            "agent_name": self.agent_name,
            "test_name": self.case_name,
            "passed": self.passed,
            "successes": self.successes,
            "runs": self.runs,
            "success_threshold": self.success_threshold,
            "failure_reason": self.failure_reason,
            "setup_error": self.setup_error,
            "skipped_runs": self.skipped_runs,
            "early_stop_reason": self.early_stop_reason,
            "agent_run_ids": [r.run_id for r in self.executed],
            "agent_run_passed": [r.passed for r in self.executed],
            "median_latency_ms": self.median_latency_ms,
            "tokens": {"input": self.input_tokens, "output": self.output_tokens},
            "cost": self.cost,
            "records": [r.to_dict() for r in self.records],
        }
