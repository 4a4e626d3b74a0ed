"""Runs of a case: the threshold verdict, concurrency. The same outcomes and failure reports under
xdist: the equivalence session (tests/plugin/test_xdist_reports.py)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from helpers.models import EVIDENCE_TOOLS
from helpers.project import ConnicProject

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

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


def test_a_case_passes_at_four_of_five_with_threshold_80_and_fails_at_three(calc: ConnicProject) -> None:
    calc.suite("calc", THRESHOLD_SUITE)
    calc.cassette("calc", "four of five", _answers(True, True, False, True, True))
    calc.cassette("calc", "three of five", _answers(True, False, True, False, True))
    result = calc.run("-q")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "tests/calc.yaml:7: case 'three of five' (calc) failed",
            ("    3/5 runs passed, threshold 80% needs 4: "
            "expected_result not satisfied: output.ok == true where output.ok = false"),
            # each failing run is reported with its evaluated operands
            "*Output:  {\"ok\": false, \"n\": 1}",
            "*Failed:  as above",  # the reason is said once, in the first line
            "*Output:  {\"ok\": false, \"n\": 3}",
        ]
    )
    result.stdout.fnmatch_lines(["*PASS*calc::four of five*4/5*80%*", "*FAIL*calc::three of five*3/5*80%*"])


def test_the_threshold_works_with_a_hook_model_that_differs_per_run(calc: ConnicProject) -> None:
    calc.write(
        "conftest.py",
        """
        def pytest_connic_make_model(config, agent, model, case, run_index):
            # run 2 of every case answers wrong
            return lambda request: '{"ok": %s}' % ("false" if run_index == 2 else "true")
        """,
    )
    calc.suite("calc", THRESHOLD_SUITE.replace("runs: 5", "runs: 3").replace("success_threshold: 80", "success_threshold: 66", 1))
    result = calc.run("-q")
    # 2/3 passes at 66 % (2*100 >= 66*3), fails at 80 % (200 < 240)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*case 'three of five' (calc) failed", "    2/3 runs passed, threshold 80% needs 3:*"])


def _naps(project: ConnicProject) -> list[dict[str, float]]:
    lines = (project.root / "naps.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines]


@pytest.fixture
def sleepy(calc: ConnicProject) -> ConnicProject:
    calc.tool("lab", EVIDENCE_TOOLS)
    calc.agent("lab", tools=["lab.nap"], max_concurrent_runs=8)  # Connic's default 1 would serialise the runs
    return calc


def test_runs_of_a_case_execute_concurrently(sleepy: ConnicProject) -> None:
    sleepy.suite("lab", "tests:\n  - name: naps\n    payload: hi\n    runs: 8\n")
    sleepy.replies("lab", "naps", [("nap", {"seconds": 0.3})], "rested")
    result = sleepy.run("-q", "--connic-concurrency", "8")
    result.assert_outcomes(passed=1)
    naps = _naps(sleepy)
    assert len(naps) == 8 and len({n["run_id"] for n in naps}) == 8
    # all eight sync tool calls were sleeping at the same moment (not one after another)
    assert max(n["start"] for n in naps) < min(n["end"] for n in naps)


def test_concurrency_1_runs_sequentially(sleepy: ConnicProject) -> None:
    sleepy.suite("lab", "tests:\n  - name: naps\n    payload: hi\n    runs: 3\n")
    sleepy.replies("lab", "naps", [("nap", {"seconds": 0.05})], "rested")
    result = sleepy.run("-q", "--connic-concurrency", "1")
    result.assert_outcomes(passed=1)
    naps = sorted(_naps(sleepy), key=lambda n: n["start"])
    assert len(naps) == 3
    assert all(a["end"] <= b["start"] for a, b in itertools.pairwise(naps))


MIXED_SUITE = """
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


def _outcomes(result: pytest.RunResult) -> dict[str, int]:
    return {k: v for k, v in result.parseoutcomes().items() if k in ("passed", "failed", "error", "errors")}


def test_outcomes_and_the_failure_report_of_a_mixed_suite(calc: ConnicProject) -> None:
    calc.suite("calc", MIXED_SUITE)
    calc.suite("echo", "tests:\n  - name: echoes\n    payload: '{\"a\": 1}'\n    expected_result: output.got.a == 1\n")
    calc.replies("calc", "adds", [("add", {"a": 1, "b": 2})], '{"sum": 3}')
    calc.replies("calc", "wrong sum", '{"sum": 10}')
    calc.cassette("calc", "threshold", _answers(True, True, False, True))
    result = calc.run("-q", "-p", "no:xdist")
    assert _outcomes(result) == {"passed": 3, "failed": 2}
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*tests/calc.yaml:5: case 'wrong sum' (calc) failed",
            ("    0/1 runs passed, threshold 100% needs 1: "
             "expected_result not satisfied: output.sum == 11 where output.sum = 10*"),
        ]
    )
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
