"""Human-in-the-loop approvals, scripted by ``approval_decisions`` (https://connic.co/docs/v1/platform/approvals).

The gate runs for every tool call before the before-hook (where Connic's docs do not say, pytest-connic's choice): a call
that the agent's ``approval:`` config gates is answered by the first unused matching
entry of the case's ``approval_decisions``. The decisions belong to the run of the
case, so a child agent started with ``trigger_agent`` draws from the same list.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from pytest_connic.errors import ConnicError
from pytest_connic.expressions.expression import Expression, compile_expression
from pytest_connic.expressions.values import EvaluationError, ExpressionError
from pytest_connic.jsonsafe import json_text
from pytest_connic.records.events import NoteEvent
from pytest_connic.records.run import ApprovalRecord, ToolCallRecord
from pytest_connic.runtime.signals import AwaitingApproval, RunAborted, RunFailed
from pytest_connic.runtime.state import CatalogEntry, InvocationState
from pytest_connic.secrets import secret_forms

if TYPE_CHECKING:
    from pytest_connic.checks.compiled import ApprovalDecision
    from pytest_connic.project.sdk import ApprovalConfig

#: how the gate answered a call instead of the tool: ``(kind, what the model reads)``
Answer = tuple[Literal["result", "sensitive", "rejected"], object]

_JSON_TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,)}


class ApprovalInputError(ConnicError):
    """An ``approval.inputs`` tool was called with arguments its declared params refuse."""


@functools.lru_cache(maxsize=256)
def _condition(source: str) -> Expression:
    return compile_expression(source, ("param", "context"), where="approval condition")


def _requires_approval(inv: InvocationState, entry: CatalogEntry, params: Mapping[str, object]) -> bool:
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
            return _condition(str(condition)).evaluate({"param": params, "context": inv.context}, strict=True)
        except (ExpressionError, EvaluationError) as exc:
            # fail-safe (https://connic.co/docs/v1/test/assertions): a condition that cannot be evaluated requires approval
            note = (f"approval condition of {entry.ref} `{condition}` could not be evaluated ({exc}); "
                    "approval required")
            inv.record.events.append(NoteEvent(name=f"note: {note}", text=note))
            return True
    return False


def _has_type(value: object, expected: str) -> bool:
    if isinstance(value, bool):
        return expected == "boolean"
    if expected == "integer" and isinstance(value, float):
        return value.is_integer()  # JSON Schema: 1.0 is an integer
    return isinstance(value, _JSON_TYPES[expected])


def _check_input_params(entry: CatalogEntry, params: Mapping[str, object]) -> None:
    """All declared params are required, extras are refused, scalars must have their type."""
    schema = entry.parameters or {}
    declared = schema.get("properties")
    properties = declared if isinstance(declared, dict) else {}
    problems = [f"missing required parameter '{name}'" for name in properties if name not in params]
    problems += [f"unexpected parameter '{name}'" for name in params if name not in properties]
    for name, value in params.items():
        spec = properties.get(name)
        expected = str(spec.get("type") if isinstance(spec, dict) else None)
        if expected in _JSON_TYPES and not _has_type(value, expected):
            problems.append(f"parameter '{name}' must be {expected}, got {type(value).__name__}")
    if problems:
        raise ApprovalInputError(f"{entry.name}: {'; '.join(problems)}")


def _match(inv: InvocationState, ref: str, params: Mapping[str, object]) -> ApprovalDecision | None:
    """The first unused entry for ``ref`` whose ``params`` expression holds (the SDK's connic/test_schema.py, TestApprovalDecision)."""
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


def _unmatched_detail(inv: InvocationState, ref: str, params: Mapping[str, object]) -> str:
    """Why no entry answered: what the entries for this tool said (or that there are none)."""
    scope = inv.scope
    own = [d for d in scope.approvals if d.tool == ref]
    if not own:
        refs = sorted({d.tool for d in scope.approvals})
        listed = f" (entries exist for: {', '.join(refs)})" if refs else ""
        return f"no approval_decisions entry has tool '{ref}'{listed}"
    reasons = []
    for d in own:
        if d.index in scope.approvals_used:
            reasons.append(f"approval_decisions[{d.index}] already answered an earlier request")
        elif d.params is not None:
            bindings = {"params": params, "context": scope.builder_context}
            reasons.append(f"approval_decisions[{d.index}] params is false: {d.params.explain(bindings)}")
    return "; ".join(reasons)


async def gate(
    inv: InvocationState, entry: CatalogEntry, record: ToolCallRecord, params: Mapping[str, object]
) -> Answer | None:
    """Apply the approval gate to a call.

    Returns None when the call may proceed to the tool; ``("result", value)`` when an
    input tool is answered with the decision's ``response`` (``("sensitive", value)`` when that
    response of a ``sensitive`` input is too short for the masker: its record holds the mask); ``("rejected", text)`` when
    a rejection or timeout is returned to the model (``on_rejection: continue``).
    Raises ``AwaitingApproval`` (no decision), ``RunAborted`` (strict mode, or an input
    tool approved without a response) or ``RunFailed`` (``on_rejection: fail``).
    """
    if entry.kind == "input":
        _check_input_params(entry, params)
    if not _requires_approval(inv, entry, params):
        return None
    approval = inv.config.approval
    assert approval is not None
    decision = _match(inv, entry.ref, params)
    request = ApprovalRecord(tool=entry.ref, params=dict(params), decision=None)
    inv.record.approvals.append(request)
    if decision is None:
        record.approval = "pending"
        message = (f"approval request for {entry.ref} with params {params} has no matching "
                   f"approval_decisions entry: {_unmatched_detail(inv, entry.ref, params)}")
        if inv.scope.strict_approvals:
            raise RunAborted(f"strict_approval_decisions: {message}")
        raise AwaitingApproval(message)
    request.decision, request.decision_index = decision.decision, decision.index
    request.reason = decision.reason
    if decision.decision == "approve":
        record.approval = "approved"
        if entry.kind != "input":
            return None
        if decision.response is None:
            raise RunAborted(
                f"approval_decisions[{decision.index}] approves input tool '{entry.name}' without a "
                "response; add `response:` with the text a human would enter"
            )
        if _sensitive(approval, entry.name) and not _protect(inv, decision.response):
            return ("sensitive", decision.response)
        return ("result", decision.response)
    return _rejected(entry, record, decision, approval.on_rejection)


def _sensitive(approval: ApprovalConfig, name: str) -> bool:
    """Whether the approval input ``name`` is ``sensitive: true``."""
    for item in approval.inputs or []:
        spec = item.get(name) if isinstance(item, dict) else None
        if spec is not None:
            return bool(getattr(spec, "sensitive", False))
    return False


def _protect(inv: InvocationState, response: object) -> bool:
    """A sensitive input's response (``approval.inputs.<name>.sensitive``), protected as Connic
    protects it in storage and logs: the run's masker hides it in every trace, report and failure
    message (and wherever the model repeats it). False when the response is too short for the
    masker (under six characters): the call's record then holds the mask instead of it."""
    text = response if isinstance(response, str) else json_text(response, default=str)
    if not secret_forms(text):
        return False
    inv.services.masker.add([text])
    return True


def _rejected(entry: CatalogEntry, record: ToolCallRecord, decision: ApprovalDecision,
              on_rejection: str) -> Answer:
    timeout = decision.decision == "timeout"
    record.approval = "timeout" if timeout else "rejected"
    record.error = f"approval {record.approval}"
    what = "not approved in time (approval timeout)" if timeout else "rejected by a human approver"
    reason = f": {decision.reason}" if decision.reason else ""
    if on_rejection == "fail":
        raise RunFailed(f"tool call {entry.ref} was {what}{reason}")
    return ("rejected", f"The tool call was {what}{reason}. The tool did not run.")
