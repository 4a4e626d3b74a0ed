"""The ``expected_*`` checks (spec §2.5–2.7, §3, §8.1) on hand-made records: ``evaluate_run``."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_connic.checks.compiled import compile_case
from pytest_connic.checks.evaluate import evaluate_run
from pytest_connic.records.run import RunRecord, ToolCallRecord

# -- unit tests: evaluate_run on hand-made records ------------------------------------------------


def _call(seq: int, name: str, params: dict[str, Any], result: Any = None, *, error: str | None = None) -> ToolCallRecord:
    ref = f"calc.{name}"
    if error is not None:
        return ToolCallRecord(seq=seq, name=name, ref=ref, params=params, error=error)
    return ToolCallRecord(seq=seq, name=name, ref=ref, params=params, has_result=True, result=result)


RECORD = RunRecord(
    run_id="r1",
    agent_name="calc",
    status="completed",
    output_raw='{"sum": 10}',
    tool_calls=[
        _call(0, "add", {"a": 4, "b": 6}, {"sum": 10}),
        _call(1, "add", {"a": 4, "b": 1}, {"sum": 5}),
        _call(2, "lookup", {"key": "x"}, error="KeyError: 'x'"),
        _call(3, "multiply", {"a": 3, "b": 3}, {"product": 9}),
    ],
)


def _failures(case: dict[str, Any], record: RunRecord = RECORD, context: dict[str, Any] | None = None) -> list[str]:
    compiled = compile_case(case)
    return evaluate_run(record, compiled.checks, context or {})


@pytest.mark.parametrize(
    ("entry", "passes"),
    [
        ("add", True),
        ("calc.add", True),
        ("calc", False),  # neither the ref nor the function name
        ("other.add", False),
        ({"add": "invocations == 2"}, True),
        ({"add": "params.a == 4"}, True),  # filters only: invocations >= 1 implied
        ({"add": "params.a == 4 and invocations == 2"}, True),
        ({"add": "params.b == 1 and invocations == 1"}, True),
        ({"add": "params.b == 2"}, False),
        ({"add": "params.b == 2 and invocations == 0"}, True),
        ({"add": "result.sum == 5"}, True),
        ({"add": "result.sum == 5 and params.b == 6"}, False),  # both filters on one call
        ({"lookup": "invocations == 1"}, True),  # a raising call is still a call
        ({"lookup": "result == null"}, False),  # ... but it has no result to match
        ({"lookup": "params.key == context.wanted"}, True),  # context: the builder's dict
        ({"add": "params.a == 4 or invocations > 5"}, True),  # mixed conjunct: some call satisfies it
        ({"multiply": "params.a == 1 or invocations > 5"}, False),
        ({"divide": "invocations == 0"}, True),
    ],
)
def test_expected_tool_calls_table(entry: Any, passes: bool) -> None:
    failures = _failures({"expected_tool_calls": [entry]}, context={"wanted": "x"})
    assert (failures == []) is passes, failures


@pytest.mark.parametrize(
    ("order", "passes"),
    [
        (["add", "multiply"], True),
        (["add", "add", "multiply"], True),
        (["calc.add", "lookup", "calc.multiply"], True),
        (["add", "add", "add"], False),  # a repeated name needs repeated calls
        (["multiply", "add"], False),
        (["add", "divide"], False),
        ([], True),
    ],
)
def test_expected_tool_call_order_is_an_ordered_subsequence(order: list[str], passes: bool) -> None:
    failures = _failures({"expected_tool_call_order": order})
    assert (failures == []) is passes, failures


def test_expected_no_tool_calls_counts_failed_calls_and_both_name_forms() -> None:
    assert _failures({"expected_no_tool_calls": ["divide", "calc.divide"]}) == []
    assert _failures({"expected_no_tool_calls": ["lookup", "calc.multiply", "nope"]}) == [
        "tool lookup was called",
        "tool calc.multiply was called",
    ]


def test_failures_are_collected_in_connic_order() -> None:
    failures = _failures(
        {
            "expected_result": "output.sum == 1",
            "expected_tool_calls": ["divide", {"add": "invocations == 5"}],
            "expected_tool_call_order": ["multiply", "add"],
            "expected_no_tool_calls": ["add"],
        }
    )
    assert [f.split(":")[0] for f in failures] == [
        "expected_result not satisfied",
        "expected tool call divide not satisfied (invocations=0)",
        "expected tool call add",
        "tool call order not satisfied",
        "tool add was called",
    ]


@pytest.mark.parametrize(
    ("status", "error", "expected_result", "failures"),
    [
        ("failed", "boom", None, ["agent error: boom"]),
        ("blocked", None, None, ["agent error: run ended blocked"]),
        ("failed", "boom", "output.sum == 10", ["agent error: boom"]),
        ("failed", "boom", 'status == "failed"', []),
        ("failed", "run timed out after 1s", '"timed out" in error', []),
        ("awaiting_approval", None, 'status == "awaiting_approval" and output == null', []),
        ("completed", None, None, []),
        ("blocked", None, 'status == "blocked" and output.sum == 10', []),
    ],
)
def test_status_gate(status: str, error: str | None, expected_result: str | None, failures: list[str]) -> None:
    record = RunRecord(run_id="r", agent_name="calc", status=status, error=error, output_raw='{"sum": 10}')
    case = {"expected_result": expected_result} if expected_result else {}
    assert _failures(case, record) == failures


def test_output_is_parsed_json_or_the_raw_string() -> None:
    record = RunRecord(run_id="r", agent_name="calc", output_raw="```json\n{}\n```")
    assert _failures({"expected_result": 'output == "```json\\n{}\\n```"'}, record) == []
    assert RunRecord(run_id="r", agent_name="c", output_raw="42").output == 42
    assert RunRecord(run_id="r", agent_name="c", output_raw='{"a": [1]}').output == {"a": [1]}
    assert RunRecord(run_id="r", agent_name="c", status="failed", output_raw="x").output is None


def test_failure_messages_say_why_no_call_matched() -> None:
    assert _failures({"expected_tool_calls": [{"lookup": "result == null"}, "calc.divide"]}) == [
        ("expected tool call lookup: result == null not satisfied (invocations=0): none of 1 call(s) matched; "
        "first call (it raised: KeyError: 'x'): result == null where result = <missing>"),
        ("expected tool call calc.divide not satisfied (invocations=0): no call of calc.divide; calls in this run: "
        "calc.add, calc.lookup, calc.multiply"),
    ]
    empty = RunRecord(run_id="r", agent_name="calc")
    assert _failures({"expected_tool_calls": [{"add": "params.a == 1"}]}, empty) == [
        "expected tool call add: params.a == 1 not satisfied (invocations=0): no call of add; no tool was called"
    ]
