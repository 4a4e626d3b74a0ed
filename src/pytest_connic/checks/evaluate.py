"""The ``expected_*`` checks against a finished run (https://connic.co/docs/v1/test/assertions; the SDK's connic/test_schema.py, ChildAgentExpectation; the SDK's connic/test_schema.py, TestCase.expected_result).

Every failed check is collected, in Connic's order, with its evaluated operands.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_connic.checks.compiled import Checks, ChildCheck, ToolCallCheck
from pytest_connic.expressions.expression import Expression
from pytest_connic.expressions.values import MISSING
from pytest_connic.records.run import RunRecord, ToolCallRecord, TriggerRecord


def _calls(record: RunRecord, tool: str) -> list[ToolCallRecord]:
    return [c for c in record.tool_calls if tool in (c.ref, c.name)]


def _result(call: ToolCallRecord) -> object:
    return call.result if call.has_result else MISSING


def _tool_check(record: RunRecord, check: ToolCallCheck, context: dict[str, object]) -> str | None:
    calls = _calls(record, check.tool)
    if check.source is None:
        if calls:
            return None
        return f"expected tool call {check.tool} not satisfied (invocations=0): {_never_called(record, check.tool)}"
    matched = [
        c for c in calls
        if all(f.evaluate({"params": c.params, "result": _result(c), "context": context}) for f in check.filters)
    ]
    count_bindings = {"invocations": len(matched), "params": MISSING, "result": MISSING, "context": context}
    failed = [e for e in check.counts if not e.evaluate(count_bindings)]
    ok = not failed and (bool(check.counts) or bool(check.mixed) or len(matched) >= 1)
    for mixed in check.mixed:
        if not _mixed_holds(mixed, matched, context):
            ok, failed = False, [*failed, mixed]
    if ok:
        return None
    message = f"expected tool call {check.label} not satisfied (invocations={len(matched)})"
    return f"{message}: {_tool_detail(record, check, calls, matched, failed, count_bindings, context)}"


def _never_called(record: RunRecord, tool: str) -> str:
    made = list(dict.fromkeys(c.ref for c in record.tool_calls))
    return f"no call of {tool}; calls in this run: {', '.join(made)}" if made else f"no call of {tool}; no tool was called"


def _tool_detail(record: RunRecord, check: ToolCallCheck, calls: list[ToolCallRecord], matched: list[ToolCallRecord],
                 failed: list[Expression], count_bindings: dict[str, object], context: dict[str, object]) -> str:
    """Why an entry failed: the evaluated count predicates, or how the first call missed the filters."""
    if not calls:
        return _never_called(record, check.tool)
    if not matched and check.filters:
        first = calls[0]
        bindings = {"params": first.params, "result": _result(first), "context": context}
        missed = "; ".join(f.explain(bindings) for f in check.filters if not f.evaluate(bindings))
        why = f" (it raised: {first.error})" if first.error and not first.has_result else ""
        return f"none of {len(calls)} call(s) matched; first call{why}: {missed}"
    return "; ".join(e.explain(count_bindings) for e in failed)


def _mixed_holds(expr: Expression, calls: list[ToolCallRecord], context: dict[str, object]) -> bool:
    if not calls:
        return expr.evaluate({"params": MISSING, "result": MISSING, "invocations": 0, "context": context})
    return any(
        expr.evaluate({"params": c.params, "result": _result(c), "invocations": len(calls), "context": context})
        for c in calls
    )


def _order_holds(record: RunRecord, order: Sequence[str]) -> bool:
    position = 0
    for call in record.tool_calls:
        if position < len(order) and order[position] in (call.ref, call.name):
            position += 1
    return position == len(order)


def result_bindings(record: RunRecord, context: dict[str, object]) -> dict[str, object]:
    """The ``expected_result`` bindings of a run."""
    return {"output": record.output, "error": record.error, "status": record.status, "context": context}


def _ended(record: RunRecord) -> str:
    """``run ended <status>``; a blocked run names the guardrail that blocked it, its kind and why."""
    if record.status == "blocked":
        rail = next((g for g in record.guardrails if g.status == "blocked"), None)
        if rail is not None:
            name = f"'{rail.name}' ({rail.type})" if rail.name and rail.name != rail.type else f"'{rail.type}'"
            mocked = f", mocked by {rail.mock_function}" if rail.mocked and rail.mock_function else ""
            reason = f": {rail.message}" if rail.message else ""
            return f"run ended blocked by the {rail.direction} guardrail {name}{mocked}{reason}"
    return f"run ended {record.status}"


def evaluate_run(record: RunRecord, checks: Checks, context: dict[str, object]) -> list[str]:
    """Every failed check of ``checks`` for ``record``, in Connic's order."""
    result = checks.result
    decides_status = result is not None and (result.mentions("status") or result.mentions("error"))
    if not decides_status and record.status != "completed":
        return [f"agent error: {record.error or _ended(record)}"]
    failures = []
    bindings = result_bindings(record, context)
    if result is not None and not result.evaluate(bindings):
        failures.append(f"expected_result not satisfied: {result.explain(bindings)}")
    for check in checks.tool_calls:
        failure = _tool_check(record, check, context)
        if failure:
            failures.append(failure)
    if checks.order and not _order_holds(record, checks.order):
        got = [c.ref for c in record.tool_calls]
        failures.append(f"tool call order not satisfied: expected {checks.order}, got {got}")
    for name in checks.no_calls:
        if _calls(record, name):
            failures.append(f"tool {name} was called")
    for child in checks.children:
        failure = _child_check(record, child, context)
        if failure:
            failures.append(failure)
    return failures


def _payload_holds(trigger: TriggerRecord, expr: Expression | None, context: dict[str, object]) -> bool:
    if expr is None:
        return True
    return expr.evaluate({"payload": trigger.payload, "payload_raw": trigger.payload_raw, "context": context})


def _child_check(record: RunRecord, child: ChildCheck, context: dict[str, object]) -> str | None:
    triggers = [t for t in record.triggers if t.agent_name == child.name]
    if len(triggers) < child.expected_triggered:
        return f"child '{child.name}' triggered {len(triggers)} times, expected >= {child.expected_triggered}"
    if not child.checks.needs_run:
        if any(_payload_holds(t, child.payload, context) for t in triggers):
            return None
        assert child.payload is not None
        first = triggers[0]
        explained = child.payload.explain({"payload": first.payload, "payload_raw": first.payload_raw,
                                           "context": context})
        return f"child '{child.name}': no trigger satisfied expected_payload: {explained}"
    waited = [t for t in triggers if t.wait_for_response and t.child_run is not None]
    if not waited:
        return f"child '{child.name}': assertions require wait_for_response=True"
    first_failures: list[str] = []
    for trigger in waited:
        assert trigger.child_run is not None
        failures = [] if _payload_holds(trigger, child.payload, context) else ["expected_payload not satisfied"]
        failures += evaluate_run(trigger.child_run, child.checks, context)
        if not failures:
            return None
        first_failures = first_failures or failures
    return f"child '{child.name}': no waited trigger satisfied the expectations: {'; '.join(first_failures)}"
