"""Runs of a case below pytest: the threshold verdict, concurrency, and the same verdicts after
the JSON an xdist worker sends its controller (``records/serialize.py``; the session under
``-n 2`` is tests/plugin/test_xdist_reports.py's)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helpers.harness import CaseProject, HookHost
from helpers.project import esc
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.serialize import outcome_from_dict
from pytest_connic.reports.failure import failure_text
from pytest_connic.reports.terminal import results_table
from pytest_connic.secrets import Masker

THRESHOLD_SUITE = """
tests:
  - name: four of five
    payload: hi
    runs: 5
    success_threshold: 80
    expected_result: output.ok == true
  - name: three of five
    payload: hi
    runs: 5
    success_threshold: 80
    expected_result: output.ok == true
"""


def _answers(*oks: bool) -> list[dict[str, Any]]:
    return [{"turns": [{"content": json.dumps({"ok": ok, "n": i})}]} for i, ok in enumerate(oks)]


def test_a_case_passes_at_four_of_five_with_threshold_80_and_fails_at_three(calc_cases: CaseProject) -> None:
    calc_cases.suite("calc", THRESHOLD_SUITE)
    calc_cases.cassette("calc", "four of five", _answers(True, True, False, True, True))
    calc_cases.cassette("calc", "three of five", _answers(True, False, True, False, True))
    outcomes = calc_cases.cases("calc")
    four, three = outcomes["four of five"], outcomes["three of five"]
    assert (four.verdict_passed, four.successes, three.verdict_passed, three.successes) == (True, 4, False, 3)
    assert [r.passed for r in three.records] == [True, False, True, False, True]
    pytest.LineMatcher(failure_text(three, Masker()).split("\n")).fnmatch_lines([
        "tests/calc.yaml:7: case 'three of five' (calc) failed",
        ("    3/5 runs passed, threshold 80% needs 4: "
         "expected_result not satisfied: output.ok == true where output.ok = false"),
        # each failing run is reported with its evaluated operands
        "*Output:  {\"ok\": false, \"n\": 1}",
        "*Failed:  as above",  # the reason is said once, in the first line
        "*Output:  {\"ok\": false, \"n\": 3}",
    ])
    pytest.LineMatcher(results_table(outcomes.values())).fnmatch_lines([
        "*PASS*calc::four of five*4/5*80%*", "*FAIL*calc::three of five*3/5*80%*"])


def test_the_threshold_works_with_a_hook_model_that_differs_per_run(calc_cases: CaseProject) -> None:
    # run 2 of every case answers wrong
    calc_cases.host = HookHost(make_model=lambda agent, model, case, run_index: (
        lambda request: '{"ok": %s}' % ("false" if run_index == 2 else "true")))
    calc_cases.suite("calc", THRESHOLD_SUITE.replace("runs: 5", "runs: 3").replace(
        "success_threshold: 80", "success_threshold: 66", 1))
    outcomes = calc_cases.cases("calc")
    # 2/3 passes at 66 % (2*100 >= 66*3), fails at 80 % (200 < 240)
    assert [(o.successes, o.verdict_passed) for o in outcomes.values()] == [(2, True), (2, False)]
    assert failure_text(outcomes["three of five"], Masker()).split("\n")[:2] == [
        "tests/calc.yaml:7: case 'three of five' (calc) failed",
        "    2/3 runs passed, threshold 80% needs 3: expected_result not satisfied: output.ok == true where output.ok = false",
    ]


#: waits until ``expected`` runs are inside it at once (so they run concurrently), then answers the
#: most that ever were; ``within`` bounds the wait
MEETING = '''
import threading

LOCK = threading.Condition()
STATE = {"inside": 0, "most": 0}


def meet(expected: int, within: float) -> dict:
    """Wait for the other runs.

    Args:
        expected: how many runs to wait for
        within: for how long at most
    """
    with LOCK:
        STATE["inside"] += 1
        STATE["most"] = max(STATE["most"], STATE["inside"])
        LOCK.notify_all()
        LOCK.wait_for(lambda: STATE["most"] >= expected, timeout=within)
        STATE["inside"] -= 1
        return {"most": STATE["most"]}
'''


@pytest.mark.parametrize(("module", "concurrency", "runs", "expected", "within", "most"), [
    ("eight", 8, 8, 8, 30.0, 8),  # all eight runs were inside the tool at the same moment
    ("single", 1, 3, 2, 0.2, 1),  # a second run never joined the first: one after another
])
def test_runs_of_a_case_execute_concurrently_up_to_the_concurrency(
    case_project: CaseProject, module: str, concurrency: int, runs: int, expected: int, within: float, most: int,
) -> None:
    case_project.tool(module, MEETING)
    case_project.agent("lab", tools=[f"{module}.meet"], max_concurrent_runs=8)  # Connic's default 1 would serialise
    case_project.suite("lab", f"tests:\n  - name: meets\n    payload: hi\n    runs: {runs}\n")
    case_project.replies("lab", "meets", [("meet", {"expected": expected, "within": within})], "met")
    outcome = case_project.case("lab", "meets", concurrency=concurrency)
    assert outcome.verdict_passed, outcome.failure_reason
    assert len({r.run_id for r in outcome.records}) == runs
    assert [r.tool_calls[0].result for r in outcome.records] == [{"most": most}] * runs


XDIST_SUITE = """
tests:
  - name: adds
    payload: hi
    expected_tool_calls: [add]
  - name: wrong sum
    payload: hi
    expected_result: output.sum == 11
  - name: threshold
    payload: hi
    runs: 4
    success_threshold: 75
    expected_result: output.ok == true
  - name: missing cassette
    payload: hi
"""


def _verdicts(outcome: CaseOutcome) -> tuple[object, ...]:
    return (outcome.status, outcome.successes, outcome.runs, outcome.success_threshold, outcome.failure_reason,
            failure_text(outcome, Masker()) if not outcome.passed else None)


def test_verdicts_are_the_same_after_the_json_an_xdist_worker_sends(calc_cases: CaseProject) -> None:
    calc_cases.suite("calc", XDIST_SUITE)
    calc_cases.replies("calc", "adds", [("add", {"a": 1, "b": 2})], '{"sum": 3}')
    calc_cases.replies("calc", "wrong sum", '{"sum": 10}')
    calc_cases.cassette("calc", "threshold", _answers(True, True, False, True))
    calc_cases.suite("echo", "tests:\n  - name: echoes\n    payload: '{\"a\": 1}'\n    expected_result: output.got.a == 1\n")
    outcomes = [*calc_cases.cases("calc").values(), calc_cases.case("echo", "echoes")]
    assert [(o.case_name, o.status) for o in outcomes] == [
        ("adds", "passed"), ("wrong sum", "failed"), ("threshold", "passed"), ("missing cassette", "failed"),
        ("echoes", "passed")]
    assert outcomes[2].successes == 3  # 3/4 at 75 %
    pytest.LineMatcher(failure_text(outcomes[1], Masker()).split("\n")).fnmatch_lines([
        "tests/calc.yaml:5: case 'wrong sum' (calc) failed",
        esc("    0/1 runs passed, threshold 100% needs 1: "
            "expected_result not satisfied: output.sum == 11 where output.sum = 10"),
    ])
    sent = [outcome_from_dict(json.loads(json.dumps(o.to_dict()))) for o in outcomes]
    assert [_verdicts(o) for o in sent] == [_verdicts(o) for o in outcomes]
