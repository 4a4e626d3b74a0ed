"""The ``expected_*`` checks against finished runs (spec §2.5–2.7, §3, §8.1)."""

from __future__ import annotations

from typing import Any

import pytest

from helpers.project import ConnicProject, esc
from pytest_connic.checks.compiled import compile_case
from pytest_connic.checks.evaluate import evaluate_run
from pytest_connic.records.run import RunRecord, ToolCallRecord

#: one run: add(4, 6), add(4, 1), add(2, 2), multiply(3, 3), then the answer
CALLS = [
    [("add", {"a": 4, "b": 6}), ("add", {"a": 4, "b": 1})],
    [("add", {"a": 2, "b": 2})],
    [("multiply", {"a": 3, "b": 3})],
    '{"sum": 10}',
]


def test_passing_checks_with_conjunct_splitting_result_and_both_name_forms(calc: ConnicProject) -> None:
    calc.suite(
        "calc",
        """
        tests:
          - name: all hold
            payload: hi
            expected_result: output.sum == 10 and status == "completed" and error == null
            expected_tool_calls:
              - add
              - calc.add
              - add: params.a == 4 and invocations == 2
              - add: invocations == 3
              - add: params.a == 4
              - calc.add: result.sum == 10 and params.b == 6
              - multiply: params.a == 3 and result.product == 9 and invocations >= 1
              - add: params.a == 99 and invocations == 0
            expected_tool_call_order: [add, multiply]
            expected_no_tool_calls: [echo, calc.echo]
        """,
    )
    calc.replies("calc", "all hold", *CALLS)
    result = calc.run("-q")
    result.assert_outcomes(passed=1)


def test_every_failed_check_is_reported_with_evaluated_operands(calc: ConnicProject) -> None:
    calc.suite(
        "calc",
        """
        tests:
          - name: many misses
            payload: hi
            expected_result: output.sum == 11
            expected_tool_calls:
              - add: params.a == 4 and invocations == 3
              - multiply: params.a == 5
              - add: result.sum > 100
              - subtract
            expected_tool_call_order: [multiply, add]
            expected_no_tool_calls: [multiply]
        """,
    )
    calc.replies("calc", "many misses", *CALLS)
    result = calc.run("-q")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            ("tests/calc.yaml:2: case 'many misses' (calc) failed: 0/1 runs passed, threshold 100% needs 1: "
            "expected_result not satisfied: output.sum == 11 where output.sum = 10"),
            "*Failed:  expected_result not satisfied: output.sum == 11 where output.sum = 10",
            ("*expected tool call add: params.a == 4 and invocations == 3 not satisfied (invocations=2): "
            "invocations == 3 where invocations = 2"),
            ("*expected tool call multiply: params.a == 5 not satisfied (invocations=0): none of 1 call(s) "
            "matched; first call: params.a == 5 where params.a = 3"),
            ("*expected tool call add: result.sum > 100 not satisfied (invocations=0): none of 3 call(s) matched; "
            "first call: result.sum > 100 where result.sum = 10"),
            ("*expected tool call subtract not satisfied (invocations=0): no call of subtract; calls in this run: "
            "calc.add, calc.multiply"),
            esc("*tool call order not satisfied: expected ['multiply', 'add'], got "
                "['calc.add', 'calc.add', 'calc.add', 'calc.multiply']"),
            "*tool multiply was called",
            # the trace follows the failed checks: each call with its params and result
            "*Trace:",
            '*add(a=4, b=6) → {"sum":10}*',
            '*multiply(a=3, b=3) → {"product":9}*',
        ]
    )
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


FAILING_BODY = '''
def explode(payload: dict) -> dict:
    """Fails."""
    raise RuntimeError("kaboom")
'''


def test_an_agent_error_short_circuits_unless_the_expression_reads_status_or_error(project: ConnicProject) -> None:
    project.tool("bad", FAILING_BODY)
    project.agent("bad", type="tool", tool_name="bad.explode")
    project.suite(
        "bad",
        """
        tests:
          - name: no expectation
            payload: hi
          - name: output expectation
            payload: hi
            expected_result: output.x == 1
            expected_tool_calls:
              - explode: result.x == 1
            expected_no_tool_calls: [explode]
          - name: reads status
            payload: hi
            expected_result: status == "failed" and output == null and "kaboom" in error
            expected_tool_calls: [explode, bad.explode]
          - name: reads error only
            payload: hi
            expected_result: error != null
        """,
    )
    result = project.run("-q")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines_random(
        [
            ("*case 'no expectation' (bad) failed: 0/1 runs passed, threshold 100% needs 1: "
            "agent error: RuntimeError: kaboom"),
            ("*case 'output expectation' (bad) failed: 0/1 runs passed, threshold 100% needs 1: "
            "agent error: RuntimeError: kaboom"),
        ]
    )
    # short-circuit: nothing else was evaluated for the failed run
    result.stdout.no_fnmatch_line("*expected_result not satisfied*")
    result.stdout.no_fnmatch_line("*expected tool call*")
    result.stdout.no_fnmatch_line("*was called*")


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
