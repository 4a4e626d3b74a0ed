"""The LLM agent loop: prompts, tools, tool errors, iterations, output schema, timeouts."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from helpers.models import ECHO_REQUEST_MODEL, EVIDENCE_TOOLS
from helpers.project import ConnicProject, esc

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)


@pytest.fixture
def lab(calc: ConnicProject) -> ConnicProject:
    """``calc`` plus an agent ``lab`` with the evidence tools."""
    calc.tool("lab", EVIDENCE_TOOLS)
    calc.agent("lab", tools=["lab.nap", "lab.anap", "lab.boom", "lab.whoami", "calc.add"])
    return calc


def _json_records(path: Path) -> list[dict[str, Any]]:
    report = json.loads(path.read_text("utf-8"))
    cases = report["cases"]
    return [r for case in cases for r in case["runs_detail"]]


def test_system_prompt_placeholders_are_filled_from_the_run_context(project: ConnicProject) -> None:
    project.agent("greeter", system_prompt="You serve {agent_name} in run {run_id}; {unknown} stays.")
    project.write("conftest.py", ECHO_REQUEST_MODEL)
    project.suite(
        "greeter",
        """
        tests:
          - name: prompt
            payload: hi
            expected_result: >-
              "You serve greeter in run " in output.system and "{unknown} stays." in output.system
              and "{run_id}" not in output.system and "{agent_name}" not in output.system
          - name: time left
            payload: hi
            timeout_s: 30
            expected_result: output.timeout_s > 25 and output.timeout_s <= 30
        """,
    )
    result = project.run("-q")
    result.assert_outcomes(passed=2)


def test_tools_are_offered_with_the_sdk_schemas_and_context_hidden(lab: ConnicProject) -> None:
    lab.write("conftest.py", ECHO_REQUEST_MODEL)
    lab.suite(
        "lab",
        """
        tests:
          - name: schemas
            payload: hi
            expected_result: >-
              output.tools.add.parameters.properties.a.type == "integer"
              and output.tools.add.parameters.required == ["a", "b"]
              and "Add two numbers." in output.tools.add.description
              and output.tools.nap.parameters.properties.seconds.type == "number"
              and "context" not in output.tools.whoami.parameters.properties
              and "context" not in output.tools.nap.parameters.properties
        """,
    )
    result = lab.run("-q")
    result.assert_outcomes(passed=1)


def test_a_tool_exception_goes_back_to_the_model_and_the_next_turn_runs(lab: ConnicProject) -> None:
    lab.suite(
        "lab",
        """
        tests:
          - name: recovers
            payload: hi
            expected_result: output == "recovered"
            expected_tool_calls:
              - boom
              - add: result.sum == 3
        """,
    )
    lab.replies("lab", "recovers", [("boom", {"reason": "x"})], [("add", {"a": 1, "b": 2})], "recovered")
    result = lab.run("-q")
    result.assert_outcomes(passed=1)


def test_the_model_reads_the_tool_error_text(lab: ConnicProject) -> None:
    lab.write(
        "conftest.py",
        """
        from pytest_connic.models.base import ModelResponse, ToolCallRequest

        def pytest_connic_make_model(config, agent, model, case, run_index):
            def answer(request):
                tool_messages = [m for m in request.messages if m["role"] == "tool"]
                if not tool_messages:
                    return ModelResponse(tool_calls=[ToolCallRequest("c1", "boom", {"reason": "disk full"})])
                return "model saw: " + tool_messages[0]["content"]
            return answer
        """,
    )
    lab.suite(
        "lab",
        """
        tests:
          - name: error text
            payload: hi
            expected_result: 'output == "model saw: Error: ValueError: kaboom: disk full"'
        """,
    )
    result = lab.run("-q")
    result.assert_outcomes(passed=1)


def test_async_tools_run_and_get_the_run_context(lab: ConnicProject) -> None:
    lab.suite(
        "lab",
        """
        tests:
          - name: context
            payload: hi
            expected_tool_calls:
              - anap: result.slept == 0.01
              - whoami: result.agent == "lab" and result.seen == 2 and invocations == 1
              - whoami: invocations == 2
        """,
    )
    lab.replies("lab", "context", [("anap", {"seconds": 0.01}), ("whoami", {})], [("whoami", {})], "done")
    result = lab.run("-q")
    result.assert_outcomes(passed=1)


def test_max_iterations_ends_the_run_failed(calc: ConnicProject) -> None:
    calc.agent("calc", tools=["calc.add"], max_iterations=2)
    calc.suite(
        "calc",
        """
        tests:
          - name: loops
            payload: hi
          - name: expects the failure
            payload: hi
            expected_result: status == "failed" and "max_iterations (2)" in error
        """,
    )
    turns = [[("add", {"a": 1, "b": 1})]] * 3 + ["never reached"]
    calc.replies("calc", "loops", *turns)
    calc.replies("calc", "expects the failure", *turns)
    result = calc.run("-q")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "tests/calc.yaml:2: case 'loops' (calc) failed",
            ("    0/1 runs passed, threshold 100% needs 1: "
            "agent error: max_iterations (2) reached before the model gave a final answer"),
        ]
    )
    # the run ended for its own reason: the unused turns are not reported on top
    result.stdout.no_fnmatch_line("*fewer steps than recorded*")


SUM_SCHEMA = {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}


def test_the_final_answer_is_validated_against_output_schema(calc: ConnicProject) -> None:
    calc.write("schemas/sum.json", json.dumps(SUM_SCHEMA))
    calc.agent("calc", tools=["calc.add"], output_schema="sum")
    calc.suite(
        "calc",
        """
        tests:
          - name: valid
            payload: hi
            expected_result: output.sum == 10
          - name: missing key
            payload: hi
          - name: wrong type
            payload: hi
          - name: not json
            payload: hi
        """,
    )
    calc.replies("calc", "valid", '{"sum": 10}')
    calc.replies("calc", "missing key", '{"total": 10}')
    calc.replies("calc", "wrong type", '{"sum": "ten"}')
    calc.replies("calc", "not json", "ten")
    result = calc.run("-q")
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines_random(
        [
            "*case 'missing key' (calc) failed",
            "*agent error: output does not match output_schema 'sum' at <root>: 'sum' is a required property",
            "*case 'wrong type' (calc) failed",
            "*agent error: output does not match output_schema 'sum' at sum: 'ten' is not of type 'integer'",
            "*case 'not json' (calc) failed",
            "*agent error: output does not match output_schema 'sum': not valid JSON",
        ]
    )


def test_timeout_s_ends_a_slow_run_failed_with_timed_out(lab: ConnicProject) -> None:
    lab.suite(
        "lab",
        """
        tests:
          - name: too slow
            payload: hi
            timeout_s: 1
          - name: expects the timeout
            payload: hi
            timeout_s: 1
            expected_result: status == "failed" and "timed out" in error
        """,
    )
    for case in ("too slow", "expects the timeout"):
        lab.replies("lab", case, [("nap", {"seconds": 2.5})], "done")
    result = lab.run("-q", "--connic-json", "report.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*case 'too slow' (lab) failed", "*agent error: run timed out after 1s (timeout_s)"])
    durations = [r["duration_ms"] for r in _json_records(lab.root / "report.json")]
    assert len(durations) == 2
    assert all(900 <= d < 2400 for d in durations), durations  # ended at the limit, not after the tool


def _stub_scope(agent_timeout: int | None) -> Any:
    config = SimpleNamespace(timeout=agent_timeout, name="slow")
    services = SimpleNamespace(
        agent=lambda name: SimpleNamespace(config=config),
        project=SimpleNamespace(middleware=lambda name: None),
    )
    return SimpleNamespace(services=services, run_index=0, world=None,
                           wall_now=lambda: datetime.datetime.now(datetime.timezone.utc))


@pytest.mark.parametrize(
    ("timeout_s", "agent_timeout", "expected", "label"),
    [
        (120.0, None, 120.0, "timeout_s"),
        (120.0, 30, 30.0, "timeout of agent 'slow'"),
        (10.0, 30, 10.0, "timeout_s"),
        (None, 30, 30.0, "timeout of agent 'slow'"),
    ],
)
def test_the_shorter_of_timeout_s_and_the_agent_timeout_wins(
    timeout_s: float | None, agent_timeout: int | None, expected: float, label: str
) -> None:
    from pytest_connic.runtime.invocation import Invocation

    inv = Invocation(_stub_scope(agent_timeout), "slow", "hi", root=True, timeout_s=timeout_s,
                     timeout_label="timeout_s" if timeout_s else None)
    assert (inv.timeout_s, inv.timeout_label) == (expected, label)


def test_every_run_has_its_own_run_id_and_context(lab: ConnicProject) -> None:
    lab.suite(
        "lab",
        """
        tests:
          - name: own context
            payload: hi
            runs: 4
            expected_tool_calls:
              - whoami: result.seen == 1
        """,
    )
    lab.replies("lab", "own context", [("whoami", {})], "done")
    result = lab.run("-q", "--connic-json", "report.json")
    result.assert_outcomes(passed=1)
    records = _json_records(lab.root / "report.json")
    run_ids = [r["run_id"] for r in records]
    assert len(set(run_ids)) == 4
    # the tool saw the run id of the run that called it
    assert [r["tool_calls"][0]["result"]["run_id"] for r in records] == run_ids
    assert all(r["run_context"]["run_id"] == r["run_id"] for r in records)


def test_a_cassette_calling_a_tool_the_agent_lacks_fails_clearly(calc: ConnicProject) -> None:
    calc.suite(
        "calc",
        """
        tests:
          - name: divides
            payload: hi
            expected_result: status == "failed"
        """,
    )
    calc.replies("calc", "divides", [("add", {"a": 1, "b": 2})], [("divide", {"a": 1})], "x")
    result = calc.run("-q")
    result.assert_outcomes(failed=1)
    # a cassette problem is the suite author's to fix: it fails the run even when the
    # expression would accept a failed run
    result.stdout.fnmatch_lines(
        [
            esc("tests/calc.yaml:2: case 'divides' (calc) failed"), esc("    0/1 runs passed, threshold 100% needs 1: "
                "cassettes/calc/divides.yaml: runs[0].turns[1].tool_calls[0]: the cassette calls tool "
                "'divide', but the request of 'calc' offers: add, multiply"),
        ]
    )
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_sync_user_code_runs_in_daemon_threads_so_a_hung_tool_never_blocks_exit() -> None:
    import threading

    from pytest_connic.execution.executors import ReusingDaemonExecutor as DaemonExecutor

    executor = DaemonExecutor()
    assert executor.submit(lambda: threading.current_thread().daemon).result(timeout=5) is True
    failing = executor.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing.result(timeout=5)
