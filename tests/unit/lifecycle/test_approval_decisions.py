"""Approvals below pytest (spec §6): the agent's ``approval:`` config answered by
``approval_decisions``; asserted on ``RunRecord.approvals``, the calls' ``approval`` marks, the
runs' status, errors and failures."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helpers.harness import CaseProject, conftest_hooks
from pytest_connic.records.events import NoteEvent
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import ApprovalRecord, RunRecord
from pytest_connic.reports.json_report import build_json_report
from pytest_connic.runtime.approvals import ApprovalInputError

OPS_TOOLS = '''
def delete_order(order_id: str) -> dict:
    """Delete an order.

    Args:
        order_id: the order
    """
    return {"deleted": order_id}


def refund(order_id: str, amount: float = 0) -> dict:
    """Refund an order.

    Args:
        order_id: the order
        amount: how much
    """
    return {"refunded": amount}
'''

#: the run context (not the builder's) is what approval conditions see as ``context``
OPS_MIDDLEWARE = '''
def before(content, context):
    context["refund_limit"] = 50
    return content
'''

APPROVAL = {
    "tools": ["ops.delete_order", {"ops.refund": "param.amount > context.refund_limit"}],
    "inputs": [{"get_mfa": {"prompt": "Ask the user for an MFA code.", "label": "MFA code",
                            "sensitive": True, "params": [{"reason": "str"}]}}],
}


@pytest.fixture
def ops(case_project: CaseProject) -> CaseProject:
    """Agent ``ops`` (on_rejection: fail) and ``ops-lenient`` (on_rejection: continue)."""
    case_project.tool("ops", OPS_TOOLS)
    case_project.write("middleware/ops.py", OPS_MIDDLEWARE)
    case_project.agent("ops", tools=["ops.delete_order", "ops.refund"], approval=APPROVAL)
    case_project.agent("ops-lenient", tools=["ops.delete_order", "ops.refund"],
                       approval={**APPROVAL, "on_rejection": "continue"})
    return case_project


def delete(order_id: str = "A1") -> list[tuple[str, dict[str, Any]]]:
    return [("delete_order", {"order_id": order_id})]


def refund(amount: Any = None) -> list[tuple[str, dict[str, Any]]]:
    args: dict[str, Any] = {"order_id": "A1"}
    if amount is not None:
        args["amount"] = amount
    return [("refund", args)]


def only(outcome: CaseOutcome) -> RunRecord:
    (record,) = outcome.records
    return record


def runs(outcomes: dict[str, CaseOutcome]) -> dict[str, RunRecord]:
    return {name: only(outcome) for name, outcome in outcomes.items()}


def test_approve_reject_and_timeout_with_on_rejection_fail(ops: CaseProject) -> None:
    ops.suite("ops", """
        version: "1.0"
        tests:
          - name: approve
            payload: delete A1
            approval_decisions:
              - {tool: ops.delete_order, decision: approve, reason: checked}
            expected_tool_calls:
              - ops.delete_order: result.deleted == "A1"
            expected_result: output == "deleted"
          - name: reject
            payload: delete A1
            approval_decisions:
              - {tool: ops.delete_order, decision: reject, reason: not today}
            expected_result: status == "failed" and "rejected" in error and "not today" in error
          - name: timeout
            payload: delete A1
            approval_decisions:
              - {tool: ops.delete_order, decision: timeout}
            expected_result: status == "failed" and "timeout" in error
          - name: reject unexpected
            payload: delete A1
            approval_decisions:
              - {tool: ops.delete_order, decision: reject, reason: nope}
    """)
    for case in ("approve", "reject", "timeout", "reject unexpected"):
        ops.replies("ops", case, delete(), "deleted")
    outcomes = ops.cases("ops")
    assert [o.verdict_passed for o in outcomes.values()] == [True, True, True, False]
    assert outcomes["reject unexpected"].failure_reason == (
        "agent error: tool call ops.delete_order was rejected by a human approver: nope")
    detail = runs(outcomes)
    (approved,) = detail["approve"].tool_calls
    assert (approved.approval, approved.result) == ("approved", {"deleted": "A1"})
    assert detail["approve"].approvals == [ApprovalRecord(tool="ops.delete_order", params={"order_id": "A1"},
                                                          decision="approve", decision_index=0, reason="checked")]
    for case, mark in (("reject", "rejected"), ("timeout", "timeout")):
        (call,) = detail[case].tool_calls
        assert (call.approval, call.has_result, call.error) == (mark, False, f"approval {mark}")
        assert detail[case].status == "failed"
    assert detail["reject"].error == "tool call ops.delete_order was rejected by a human approver: not today"
    assert detail["timeout"].error == "tool call ops.delete_order was not approved in time (approval timeout)"


CONTINUE_MODEL = '''
import json

from pytest_connic.models.base import ModelResponse, ToolCallRequest


def pytest_connic_make_model(config, agent, model, case, run_index):
    def answer(request):
        seen = [m["content"] for m in request.messages if m["role"] == "tool"]
        if not seen:
            return ModelResponse(tool_calls=[ToolCallRequest("c1", "delete_order", {"order_id": "A1"})])
        return json.dumps({"seen": seen})
    return answer
'''


def test_on_rejection_continue_returns_the_rejection_to_the_model(ops: CaseProject) -> None:
    ops.host = conftest_hooks(CONTINUE_MODEL)
    ops.suite("lenient", """
        version: "1.0"
        agent: ops-lenient
        tests:
          - name: reject
            payload: delete A1
            approval_decisions:
              - {tool: ops.delete_order, decision: reject, reason: too risky}
            expected_tool_calls:
              - ops.delete_order: invocations == 1
          - name: timeout
            payload: delete A1
            approval_decisions:
              - {tool: ops.delete_order, decision: timeout}
          - name: a rejected call has no result
            payload: delete A1
            approval_decisions:
              - {tool: ops.delete_order, decision: reject}
            expected_tool_calls:
              - ops.delete_order: result.deleted == "A1"
    """)
    outcomes = ops.cases("lenient")
    detail = runs(outcomes)
    assert {name: (r.status, r.output) for name, r in detail.items()} == {
        "reject": ("completed", {"seen": [
            "The tool call was rejected by a human approver: too risky. The tool did not run."]}),
        "timeout": ("completed", {"seen": [
            "The tool call was not approved in time (approval timeout). The tool did not run."]}),
        "a rejected call has no result": ("completed", {"seen": [
            "The tool call was rejected by a human approver. The tool did not run."]}),
    }
    assert [o.verdict_passed for o in outcomes.values()] == [True, True, False]
    (failure,) = detail["a rejected call has no result"].failures
    assert failure.startswith("expected tool call ops.delete_order: result.deleted == \"A1\" not satisfied")


def test_unanswered_requests_and_unused_entries_strict_and_not(ops: CaseProject) -> None:
    ops.suite("ops", """
        version: "1.0"
        tests:
          - name: pending
            payload: delete A1
            expected_result: status == "awaiting_approval" and "ops.delete_order" in error
          - name: pending unexpected
            payload: delete A1
          - name: unused entry ignored
            payload: delete A1
            approval_decisions:
              - {tool: ops.delete_order, decision: approve}
              - {tool: ops.refund, decision: approve}
          - name: strict pending
            payload: delete A1
            strict_approval_decisions: true
            approval_decisions:
              - {tool: ops.refund, decision: approve}
            expected_result: status == "awaiting_approval"
          - name: strict unused
            payload: delete A1
            strict_approval_decisions: true
            approval_decisions:
              - {tool: ops.delete_order, decision: approve}
              - {tool: ops.refund, decision: reject}
          - name: strict all used
            payload: delete A1
            strict_approval_decisions: true
            approval_decisions:
              - {tool: ops.delete_order, decision: approve}
    """)
    for case in ("pending", "pending unexpected", "unused entry ignored", "strict pending", "strict unused",
                 "strict all used"):
        ops.replies("ops", case, delete(), "deleted")
    outcomes = ops.cases("ops")
    assert {name: o.verdict_passed for name, o in outcomes.items()} == {
        "pending": True, "pending unexpected": False, "unused entry ignored": True, "strict pending": False,
        "strict unused": False, "strict all used": True}
    reasons = {name: o.failure_reason or "" for name, o in outcomes.items()}
    assert reasons["pending unexpected"] == (
        "agent error: approval request for ops.delete_order with params {'order_id': 'A1'} has no matching "
        "approval_decisions entry: no approval_decisions entry has tool 'ops.delete_order'")
    assert reasons["strict pending"] == (
        "strict_approval_decisions: approval request for ops.delete_order with params {'order_id': 'A1'} has no "
        "matching approval_decisions entry: no approval_decisions entry has tool 'ops.delete_order' (entries exist "
        "for: ops.refund)")
    assert reasons["strict unused"] == (
        "strict_approval_decisions: 1 approval decision(s) were never used: #1 ops.refund (reject)")
    detail = runs(outcomes)
    assert detail["pending"].status == "awaiting_approval"
    assert detail["pending"].tool_calls[0].approval == "pending"
    assert detail["pending"].approvals[0].decision is None
    assert detail["strict pending"].status == "failed"


def test_first_unused_matching_entry_with_params_and_builder_context(ops: CaseProject) -> None:
    ops.write("tests/builders/limits.py", '''
        def build(context, builder_args, test_name, payload, files):
            context["limit"] = 100
            return payload
    ''')
    ops.suite("ops", """
        version: "1.0"
        tests:
          - name: params pick the entry
            payload: refund twice
            strict_approval_decisions: true
            approval_decisions:
              - {tool: ops.refund, params: "params.amount > 100", decision: approve, reason: big}
              - {tool: ops.refund, decision: approve, reason: any}
            expected_tool_calls:
              - ops.refund: invocations == 2
          - name: one entry answers one request
            payload: delete twice
            approval_decisions:
              - {tool: ops.delete_order, decision: approve}
            expected_result: status == "awaiting_approval"
          - name: builder context in params
            payload: refund
            builder: limits
            strict_approval_decisions: true
            approval_decisions:
              - {tool: ops.refund, params: "params.amount < context.limit", decision: approve}
            expected_tool_calls:
              - ops.refund: result.refunded == 80
          - name: condition false needs no approval
            payload: small refund
            strict_approval_decisions: true
            expected_tool_calls:
              - ops.refund: result.refunded == 10
          - name: condition error requires approval
            payload: refund without amount
            expected_result: status == "awaiting_approval"
          - name: short name does not match
            payload: delete A1
            approval_decisions:
              - {tool: delete_order, decision: approve}
            expected_result: status == "awaiting_approval"
    """)
    ops.replies("ops", "params pick the entry", refund(80), refund(120), "ok")
    ops.replies("ops", "one entry answers one request", delete("A1"), delete("A2"), "ok")
    ops.replies("ops", "builder context in params", refund(80), "ok")
    ops.replies("ops", "condition false needs no approval", refund(10), "ok")
    ops.replies("ops", "condition error requires approval", refund(), "ok")
    ops.replies("ops", "short name does not match", delete(), "ok")
    outcomes = ops.cases("ops")
    assert all(o.verdict_passed for o in outcomes.values()), {n: o.failure_reason for n, o in outcomes.items()}
    detail = runs(outcomes)
    picked = [(a.params["amount"], a.decision_index, a.reason) for a in detail["params pick the entry"].approvals]
    assert picked == [(80, 1, "any"), (120, 0, "big")]
    assert [c.approval for c in detail["one entry answers one request"].tool_calls] == ["approved", "pending"]
    assert detail["condition false needs no approval"].approvals == []
    notes = [e.text for e in detail["condition error requires approval"].events if isinstance(e, NoteEvent)]
    assert any("could not be evaluated" in n and "approval required" in n for n in notes), notes


def test_input_tools_are_answered_with_the_response(ops: CaseProject) -> None:
    ops.suite("ops", """
        version: "1.0"
        tests:
          - name: response
            payload: log in
            strict_approval_decisions: true
            approval_decisions:
              - {tool: get_mfa, params: 'params.reason == "login"', decision: approve, response: "123456"}
            expected_tool_calls:
              - get_mfa: params.reason == "login" and result == "123456"
          - name: rejected input
            payload: log in
            approval_decisions:
              - {tool: get_mfa, decision: reject, reason: no code}
            expected_result: status == "failed" and "no code" in error
          - name: unanswered input
            payload: log in
            expected_result: status == "awaiting_approval" and "get_mfa" in error
          - name: approve without response
            payload: log in
            approval_decisions:
              - {tool: get_mfa, decision: approve}
          - name: params are checked
            payload: log in
            strict_approval_decisions: true
            expected_tool_calls:
              - get_mfa: invocations == 1
    """)
    mfa = [("get_mfa", {"reason": "login"})]
    for case in ("response", "rejected input", "unanswered input", "approve without response"):
        ops.replies("ops", case, mfa, "in")
    ops.replies("ops", "params are checked", [("get_mfa", {"why": "login"})], "in")
    outcomes = ops.cases("ops")
    assert [o.verdict_passed for o in outcomes.values()] == [True, True, True, False, True]
    assert "approval_decisions[0] approves input tool 'get_mfa' without a resp" in (
        outcomes["approve without response"].failure_reason or "")
    detail = runs(outcomes)
    (call,) = detail["response"].tool_calls
    assert (call.ref, call.approval, call.result) == ("get_mfa", "approved", "123456")
    # get_mfa is `sensitive: true`: its response is masked in the report (docs/fidelity.md)
    report = build_json_report([outcomes["response"]], masker=ops.masker)
    assert "123456" not in json.dumps(report)
    (shown,) = report["cases"][0]["runs_detail"][0]["tool_calls"]  # type: ignore[index]
    assert shown["result"] == "***"
    (bad,) = detail["params are checked"].tool_calls
    assert "missing required parameter 'reason'" in (bad.error or "")
    assert "unexpected parameter 'why'" in (bad.error or "")
    assert detail["params are checked"].approvals == []


def test_an_input_tools_arguments_must_have_their_declared_scalar_types(case_project: CaseProject) -> None:
    """JSON Schema's types (1.0 is an integer, 3 a number, True no integer), every problem said at once;
    a refused call consumes no decision and its error goes back to the model."""
    params = [{"digits": "int"}, {"amount": "float"}, {"urgent": "bool"}, {"note": "str"}]
    case_project.agent("desk", tools=[], approval={
        "inputs": [{"get_pin": {"prompt": "Ask for the PIN.", "label": "PIN", "params": params}}]})
    case_project.suite("desk", """
        tests:
          - name: typed
            payload: pay
            approval_decisions:
              - {tool: get_pin, decision: approve, response: "1234"}
          - name: mistyped
            payload: pay
            approval_decisions:
              - {tool: get_pin, decision: approve, response: "1234"}
    """)
    case_project.replies("desk", "typed", [("get_pin", {"digits": 4.0, "amount": 3, "urgent": False, "note": "x"})],
                         "paid")
    case_project.replies("desk", "mistyped", [("get_pin", {"digits": True, "amount": "3", "urgent": 1, "note": 5})],
                         "paid")
    detail = runs(case_project.cases("desk"))
    (typed,) = detail["typed"].tool_calls
    assert (typed.approval, typed.result, typed.error) == ("approved", "1234", None)
    (mistyped,) = detail["mistyped"].tool_calls
    refused = ApprovalInputError("get_pin: parameter 'digits' must be integer, got bool; parameter 'amount' must be "
                                 "number, got str; parameter 'urgent' must be boolean, got int; parameter 'note' must "
                                 "be string, got int")
    assert str(refused) in (mistyped.error or ""), mistyped.error
    assert (mistyped.approval, detail["mistyped"].approvals, detail["mistyped"].status) == (None, [], "completed")
