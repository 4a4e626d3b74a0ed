"""Models of a run: cassette replay and its strictness, the ``pytest_connic_make_model`` hook."""

from __future__ import annotations

import pytest

from helpers.models import ECHO_REQUEST_MODEL
from helpers.project import ConnicProject, esc

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

ONE_CASE = """
tests:
  - name: {name}
    payload: add 4 and 6
    expected_result: output.sum == 10
"""


def _clean(result: pytest.RunResult) -> None:
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_a_hand_written_cassette_drives_the_agent_and_its_real_tools(calc: ConnicProject) -> None:
    calc.suite("calc", ONE_CASE.format(name="adds") + "    expected_tool_calls:\n      - add: result.sum == 10\n")
    calc.replies("calc", "adds", [("add", {"a": 4, "b": 6})], '{"sum": 10}')
    result = calc.run("-q")
    result.assert_outcomes(passed=1)


def test_a_missing_cassette_fails_the_case_with_where_it_was_expected(calc: ConnicProject) -> None:
    calc.suite("calc", ONE_CASE.format(name="lonely"))
    result = calc.run("-q")
    result.assert_outcomes(failed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "tests/calc.yaml:2: case 'lonely' (calc) failed",
            ("    0/1 runs passed, threshold 100% needs 1: "
            "no cassette for this case: expected cassettes/calc/lonely.yaml; record one with "
            "--connic-record-mode=once*"),
        ]
    )
    _clean(result)


def test_a_cassette_that_runs_out_of_turns_fails(calc: ConnicProject) -> None:
    calc.suite("calc", ONE_CASE.format(name="short"))
    calc.replies("calc", "short", [("add", {"a": 4, "b": 6})])
    result = calc.run("-q")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            esc("tests/calc.yaml:2: case 'short' (calc) failed"), esc("    0/1 runs passed, threshold 100% needs 1: "
                "*cassettes/calc/short.yaml: runs[0].turns: the agent asked for model turn 2 of run 1 but "
                "the cassette has 1; the agent took more steps than recorded"),
        ]
    )
    _clean(result)


def test_a_completed_run_leaving_turns_unused_fails(calc: ConnicProject) -> None:
    calc.suite("calc", ONE_CASE.format(name="long"))
    calc.replies("calc", "long", '{"sum": 10}', '{"sum": 11}')
    result = calc.run("-q")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            esc("tests/calc.yaml:2: case 'long' (calc) failed"), esc("    0/1 runs passed, threshold 100% needs 1: "
                "*cassettes/calc/long.yaml: runs[0].turns: the agent completed run 1 after 1 of 2 recorded "
                "model turn(s); it took fewer steps than recorded"),
        ]
    )
    # the divergence is the reason: the expectations were not evaluated on top of it
    result.stdout.no_fnmatch_line("*expected_result not satisfied*")
    _clean(result)


def test_a_cassette_calling_an_unknown_tool_fails(calc: ConnicProject) -> None:
    calc.suite("calc", ONE_CASE.format(name="divides"))
    calc.replies("calc", "divides", [("divide", {"a": 4, "b": 2})], '{"sum": 10}')
    result = calc.run("-q")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            esc("*cassettes/calc/divides.yaml: runs[0].turns[0].tool_calls[0]: the cassette calls tool 'divide', "
                "but the request of 'calc' offers: add, multiply"),
        ]
    )
    _clean(result)


def test_no_cassette_is_read_when_no_model_is_called(calc: ConnicProject) -> None:
    # a tool agent never asks for a model: no cassette needed, even a broken one is never read
    calc.suite("echo", "tests:\n  - name: plain\n    payload: '{\"a\": 1}'\n    expected_result: output.got.a == 1\n")
    calc.write("cassettes/echo/plain.yaml", "version: 99\n")
    result = calc.run("-q")
    result.assert_outcomes(passed=1)


def test_the_make_model_hook_supplies_models_and_none_falls_back_to_cassettes(calc: ConnicProject) -> None:
    calc.write(
        "conftest.py",
        """
        def pytest_connic_make_model(config, agent, model, case, run_index):
            if case["name"] == "cassette":
                return None
            return lambda request: '{"sum": %d, "model": "%s", "agent": "%s"}' % (
                run_index, model, agent.config.name)
        """,
    )
    calc.suite(
        "calc",
        """
        tests:
          - name: hooked
            payload: hi
            runs: 3
            expected_result: output.sum < 3 and output.model == "openai/gpt-4o-mini" and output.agent == "calc"
          - name: cassette
            payload: hi
            expected_result: output.sum == 42
        """,
    )
    calc.replies("calc", "cassette", '{"sum": 42}')
    result = calc.run("-q")
    result.assert_outcomes(passed=2)


def test_the_make_model_hook_sees_the_resolved_case(calc: ConnicProject) -> None:
    calc.write("conftest.py", ECHO_REQUEST_MODEL)
    calc.suite("calc", "tests:\n  - name: echoed\n    payload: hi\n    expected_result: output.has_case == true\n")
    result = calc.run("-q")
    result.assert_outcomes(passed=1)
