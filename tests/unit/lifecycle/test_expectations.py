"""The ``expected_*`` checks against finished runs, below pytest (spec §2.5–2.7, §3, §8.1): each
failed check is one of ``RunRecord.failures``, with its evaluated operands."""

from __future__ import annotations

import pytest

from helpers.harness import CaseProject
from helpers.project import esc
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord
from pytest_connic.reports.failure import failure_text
from pytest_connic.secrets import Masker

#: one run: add(4, 6), add(4, 1), add(2, 2), multiply(3, 3), then the answer
CALLS = [
    [("add", {"a": 4, "b": 6}), ("add", {"a": 4, "b": 1})],
    [("add", {"a": 2, "b": 2})],
    [("multiply", {"a": 3, "b": 3})],
    '{"sum": 10}',
]


def only(outcome: CaseOutcome) -> RunRecord:
    (record,) = outcome.records
    return record


def test_passing_checks_with_conjunct_splitting_result_and_both_name_forms(calc_cases: CaseProject) -> None:
    calc_cases.suite("calc", """
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
    """)
    calc_cases.replies("calc", "all hold", *CALLS)
    outcome = calc_cases.case("calc", "all hold")
    assert only(outcome).failures == []
    assert outcome.verdict_passed


def test_every_failed_check_is_reported_with_evaluated_operands(calc_cases: CaseProject) -> None:
    calc_cases.agent("calc", tools=["calc.add", "calc.multiply", "calc.echo"])  # echo: a tool never called
    calc_cases.suite("calc", """
        tests:
          - name: many misses
            payload: hi
            expected_result: output.sum == 11
            expected_tool_calls:
              - add: params.a == 4 and invocations == 3
              - multiply: params.a == 5
              - add: result.sum > 100
              - echo
            expected_tool_call_order: [multiply, add]
            expected_no_tool_calls: [multiply]
    """)
    calc_cases.replies("calc", "many misses", *CALLS)
    outcome = calc_cases.case("calc", "many misses")
    assert only(outcome).failures == [
        "expected_result not satisfied: output.sum == 11 where output.sum = 10",
        ("expected tool call add: params.a == 4 and invocations == 3 not satisfied (invocations=2): "
         "invocations == 3 where invocations = 2"),
        ("expected tool call multiply: params.a == 5 not satisfied (invocations=0): none of 1 call(s) "
         "matched; first call: params.a == 5 where params.a = 3"),
        ("expected tool call add: result.sum > 100 not satisfied (invocations=0): none of 3 call(s) matched; "
         "first call: result.sum > 100 where result.sum = 10"),
        "expected tool call echo not satisfied (invocations=0): no call of echo; calls in this run: calc.add, calc.multiply",
        ("tool call order not satisfied: expected ['multiply', 'add'], got "
         "['calc.add', 'calc.add', 'calc.add', 'calc.multiply']"),
        "tool multiply was called",
    ]
    text = failure_text(outcome, Masker())
    assert text.split("\n")[:2] == [
        "tests/calc.yaml:2: case 'many misses' (calc) failed",
        "    0/1 runs passed, threshold 100% needs 1: expected_result not satisfied: output.sum == 11 where output.sum = 10",
    ]
    # the trace follows the failed checks: each call with its params and result
    pytest.LineMatcher(text.split("\n")).fnmatch_lines([
        "*tool multiply was called", "*Trace:", esc('*add(a=4, b=6) → {"sum":10}*'),
        esc('*multiply(a=3, b=3) → {"product":9}*')])


FAILING_BODY = '''
def explode(payload: dict) -> dict:
    """Fails."""
    raise RuntimeError("kaboom")
'''


def test_an_agent_error_short_circuits_unless_the_expression_reads_status_or_error(case_project: CaseProject) -> None:
    case_project.tool("bad", FAILING_BODY)
    case_project.agent("bad", type="tool", tool_name="bad.explode")
    case_project.suite("bad", """
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
    """)
    outcomes = case_project.cases("bad")
    # short-circuit: nothing else was evaluated for the failed run
    assert {name: only(o).failures for name, o in outcomes.items()} == {
        "no expectation": ["agent error: RuntimeError: kaboom"],
        "output expectation": ["agent error: RuntimeError: kaboom"],
        "reads status": [],
        "reads error only": [],
    }
    for name in ("no expectation", "output expectation"):
        assert failure_text(outcomes[name], Masker()).split("\n")[1] == (
            "    0/1 runs passed, threshold 100% needs 1: agent error: RuntimeError: kaboom")
    assert [o.verdict_passed for o in outcomes.values()] == [False, False, True, True]
