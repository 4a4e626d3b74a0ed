"""Human-in-the-loop approvals, scripted by ``approval_decisions`` (spec §6)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..expressions import EvaluationError, ExpressionError, compile_expression
from ..records import ApprovalRecord, ToolCallRecord
from .scope import AwaitingApproval, RunAborted, RunFailed

if TYPE_CHECKING:
    from .dispatch import CatalogEntry
    from .invocation import Invocation


def _requires_approval(inv: Invocation, entry: CatalogEntry, params: dict[str, Any]) -> bool:
    approval = inv.config.approval
    if approval is None:
        return False
    if entry.kind == "input":
        return True
    for item in approval.tools:
        ref, condition = (item, None) if isinstance(item, str) else next(iter(item.items()))
        if ref not in (entry.ref, entry.name):
            continue
        if condition is None:
            return True
        try:
            expr = compile_expression(condition, ("param", "context"), where="approval condition")
            return expr.evaluate({"param": params, "context": inv.context}, strict=True)
        except (ExpressionError, EvaluationError):
            return True  # fail-safe: an evaluation error requires approval
    return False


def _match(inv: Invocation, ref: str, params: dict[str, Any]) -> Any:
    scope = inv.scope
    for decision in scope.approvals:
        if decision.index in scope.approvals_used or decision.tool != ref:
            continue
        if decision.params is not None and not decision.params.evaluate(
            {"params": params, "context": scope.builder_context}
        ):
            continue
        scope.approvals_used.add(decision.index)
        return decision
    return None


async def gate(
    inv: Invocation, entry: CatalogEntry, record: ToolCallRecord, params: dict[str, Any]
) -> tuple[str, Any] | None:
    """Apply the approval gate to a call.

    Returns None when the call may proceed to the tool; ``("result", value)`` when
    the call is answered without running the tool (an input tool's response, or
    a rejection with ``on_rejection: continue``). Raises to end the run.
    """
    if not _requires_approval(inv, entry, params):
        return None
    decision = _match(inv, entry.ref, params)
    approval = inv.config.approval
    assert approval is not None
    entry_record = ApprovalRecord(tool=entry.ref, params=dict(params), decision=None)
    inv.record.approvals.append(entry_record)
    if decision is None:
        record.approval = "pending"
        message = f"approval request for '{entry.ref}' with params {params} has no matching approval_decisions entry"
        if inv.scope.strict_approvals:
            raise RunAborted(f"strict_approval_decisions: {message}")
        raise AwaitingApproval(message)
    entry_record.decision, entry_record.decision_index, entry_record.reason = (
        decision.decision, decision.index, decision.reason
    )
    if decision.decision == "approve":
        record.approval = "approved"
        if entry.kind == "input":
            return ("result", decision.response or "")
        return None
    record.approval = "rejected" if decision.decision == "reject" else "timeout"
    what = "rejected" if decision.decision == "reject" else "not approved in time (timeout)"
    reason = f": {decision.reason}" if decision.reason else ""
    if approval.on_rejection == "fail":
        record.error = f"approval {record.approval}"
        raise RunFailed(f"tool call {entry.ref} was {what}{reason}")
    record.error = f"approval {record.approval}"
    return ("rejected", f"The tool call was {what} by a human approver{reason}. The tool did not run.")
