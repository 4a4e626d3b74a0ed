"""The LLM agent loop below pytest: prompts, tools, tool errors, iterations, output schema,
timeouts, each run's own context (docs/fidelity.md; spec §2)."""

from __future__ import annotations

import datetime
import json
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from helpers.harness import CaseProject, HookHost, conftest_hooks
from helpers.models import ECHO_REQUEST_MODEL, EVIDENCE_TOOLS
from pytest_connic.models.base import ModelResponse, ToolCallRequest
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord
from pytest_connic.reports.failure import failure_text
from pytest_connic.secrets import Masker


@pytest.fixture
def lab(calc_cases: CaseProject) -> CaseProject:
    """``calc`` plus an agent ``lab`` with the evidence tools."""
    calc_cases.tool("lab", EVIDENCE_TOOLS)
    calc_cases.agent("lab", tools=["lab.nap", "lab.anap", "lab.boom", "lab.whoami", "calc.add"])
    return calc_cases


def only(outcome: CaseOutcome) -> RunRecord:
    (record,) = outcome.records
    return record


def head(outcome: CaseOutcome) -> list[str]:
    """The first two lines of the case's failure report: which case failed, then how and why."""
    return failure_text(outcome, Masker()).split("\n")[:2]


def test_system_prompt_placeholders_are_filled_from_the_run_context(case_project: CaseProject) -> None:
    case_project.host = conftest_hooks(ECHO_REQUEST_MODEL)
    case_project.agent("greeter", system_prompt="You serve {agent_name} in run {run_id}; {unknown} stays.")
    case_project.suite("greeter", """
        tests:
          - name: prompt
            payload: hi
          - name: time left
            payload: hi
            timeout_s: 30
    """)
    outcomes = case_project.cases("greeter")
    prompt = only(outcomes["prompt"])
    assert prompt.output["system"] == f"You serve greeter in run {prompt.run_id}; {{unknown}} stays."  # type: ignore[index]
    left = only(outcomes["time left"]).output["timeout_s"]  # type: ignore[index]
    assert 25 < left <= 30  # what is left of timeout_s when the model is asked


def test_tools_are_offered_with_the_sdk_schemas_and_context_hidden(lab: CaseProject) -> None:
    lab.host = conftest_hooks(ECHO_REQUEST_MODEL)
    lab.suite("lab", "tests:\n  - name: schemas\n    payload: hi\n")
    tools = only(lab.case("lab", "schemas")).output["tools"]  # type: ignore[index]
    assert tools["add"]["parameters"]["properties"]["a"]["type"] == "integer"
    assert tools["add"]["parameters"]["required"] == ["a", "b"]
    assert "Add two numbers." in tools["add"]["description"]
    assert tools["nap"]["parameters"]["properties"]["seconds"]["type"] == "number"
    assert "context" not in tools["whoami"]["parameters"]["properties"]
    assert "context" not in tools["nap"]["parameters"]["properties"]


def test_a_tool_exception_goes_back_to_the_model_and_the_next_turn_runs(lab: CaseProject) -> None:
    lab.suite("lab", """
        tests:
          - name: recovers
            payload: hi
            expected_result: output == "recovered"
            expected_tool_calls:
              - boom
              - add: result.sum == 3
    """)
    lab.replies("lab", "recovers", [("boom", {"reason": "x"})], [("add", {"a": 1, "b": 2})], "recovered")
    outcome = lab.case("lab", "recovers")
    assert outcome.verdict_passed, outcome.failure_reason
    record = only(outcome)
    assert (record.status, record.output) == ("completed", "recovered")
    assert [(c.name, c.error, c.result) for c in record.tool_calls] == [
        ("boom", "ValueError: kaboom: x", None), ("add", None, {"sum": 3})]


def test_the_model_reads_the_tool_error_text(lab: CaseProject) -> None:
    def make_model(agent: object, model: str, case: object, run_index: int) -> object:
        def answer(request: Any) -> object:
            tool_messages = [m for m in request.messages if m["role"] == "tool"]
            if not tool_messages:
                return ModelResponse(tool_calls=[ToolCallRequest("c1", "boom", {"reason": "disk full"})])
            return "model saw: " + tool_messages[0]["content"]
        return answer

    lab.host = HookHost(make_model=make_model)
    lab.suite("lab", "tests:\n  - name: error text\n    payload: hi\n")
    assert only(lab.case("lab", "error text")).output == "model saw: Error: ValueError: kaboom: disk full"


def test_async_tools_run_and_get_the_run_context(lab: CaseProject) -> None:
    lab.suite("lab", """
        tests:
          - name: context
            payload: hi
            expected_tool_calls:
              - anap: result.slept == 0.01
              - whoami: result.agent == "lab" and result.seen == 2 and invocations == 1
              - whoami: invocations == 2
    """)
    lab.replies("lab", "context", [("anap", {"seconds": 0.01}), ("whoami", {})], [("whoami", {})], "done")
    outcome = lab.case("lab", "context")
    assert outcome.verdict_passed, outcome.failure_reason
    record = only(outcome)
    results = [(c.name, c.result) for c in record.tool_calls]
    assert results == [("anap", {"slept": 0.01}),
                       ("whoami", {"run_id": record.run_id, "agent": "lab", "seen": 1}),
                       ("whoami", {"run_id": record.run_id, "agent": "lab", "seen": 2})]
    assert record.run_context["seen"] == 2  # the tools wrote to the run's own context


def test_max_iterations_ends_the_run_failed(calc_cases: CaseProject) -> None:
    calc_cases.agent("calc", tools=["calc.add"], max_iterations=2)
    calc_cases.suite("calc", """
        tests:
          - name: loops
            payload: hi
          - name: expects the failure
            payload: hi
            expected_result: status == "failed" and "max_iterations (2)" in error
    """)
    turns = [[("add", {"a": 1, "b": 1})]] * 3 + ["never reached"]
    calc_cases.replies("calc", "loops", *turns)
    calc_cases.replies("calc", "expects the failure", *turns)
    outcomes = calc_cases.cases("calc")
    assert outcomes["expects the failure"].verdict_passed
    loops = outcomes["loops"]
    record = only(loops)
    assert (record.status, record.error) == (
        "failed", "max_iterations (2) reached before the model gave a final answer")
    assert len(record.tool_calls) == 2
    assert head(loops) == [
        "tests/calc.yaml:2: case 'loops' (calc) failed",
        ("    0/1 runs passed, threshold 100% needs 1: "
         "agent error: max_iterations (2) reached before the model gave a final answer"),
    ]
    # the run ended for its own reason: the unused turns are not reported on top
    assert record.failures == ["agent error: max_iterations (2) reached before the model gave a final answer"]
    assert "fewer steps than recorded" not in failure_text(loops, Masker())


SUM_SCHEMA = {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}


def test_the_final_answer_is_validated_against_output_schema(calc_cases: CaseProject) -> None:
    calc_cases.write("schemas/sum.json", json.dumps(SUM_SCHEMA))
    calc_cases.agent("calc", tools=["calc.add"], output_schema="sum")
    calc_cases.suite("calc", """
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
    """)
    calc_cases.replies("calc", "valid", '{"sum": 10}')
    calc_cases.replies("calc", "missing key", '{"total": 10}')
    calc_cases.replies("calc", "wrong type", '{"sum": "ten"}')
    calc_cases.replies("calc", "not json", "ten")
    outcomes = calc_cases.cases("calc")
    assert outcomes["valid"].verdict_passed
    errors = {name: (only(o).status, only(o).error) for name, o in outcomes.items() if name != "valid"}
    assert errors == {
        "missing key": ("failed", "output does not match output_schema 'sum' at <root>: 'sum' is a required property"),
        "wrong type": ("failed", "output does not match output_schema 'sum' at sum: 'ten' is not of type 'integer'"),
        "not json": ("failed", "output does not match output_schema 'sum': not valid JSON"),
    }
    for name, (_, error) in errors.items():
        assert not outcomes[name].verdict_passed
        assert outcomes[name].failure_reason == f"agent error: {error}"


def test_timeout_s_ends_a_slow_run_failed_with_timed_out(lab: CaseProject) -> None:
    lab.suite("lab", """
        tests:
          - name: too slow
            payload: hi
            timeout_s: 1
          - name: expects the timeout
            payload: hi
            timeout_s: 1
            expected_result: status == "failed" and "timed out" in error
    """)
    for case in ("too slow", "expects the timeout"):
        lab.replies("lab", case, [("nap", {"seconds": 30})], "done")  # a daemon thread: it sleeps on alone
    outcomes = lab.cases("lab")
    assert outcomes["expects the timeout"].verdict_passed
    slow = outcomes["too slow"]
    assert not slow.verdict_passed
    assert slow.failure_reason == "agent error: run timed out after 1s (timeout_s)"
    for outcome in outcomes.values():
        # ended at the limit, while the tool still ran: its call never returned
        (call,) = only(outcome).tool_calls
        assert (call.name, call.has_result, call.error) == ("nap", False, None)
        # and not before the limit (a lower bound only: load can only make a run longer)
        assert only(outcome).duration_ms >= 900


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


def test_every_run_has_its_own_run_id_and_context(lab: CaseProject) -> None:
    lab.suite("lab", """
        tests:
          - name: own context
            payload: hi
            runs: 4
            expected_tool_calls:
              - whoami: result.seen == 1
    """)
    lab.replies("lab", "own context", [("whoami", {})], "done")
    outcome = lab.case("lab", "own context")
    assert outcome.verdict_passed, outcome.failure_reason
    run_ids = [r.run_id for r in outcome.records]
    assert len(set(run_ids)) == 4
    # the tool saw the run id of the run that called it
    assert [r.tool_calls[0].result["run_id"] for r in outcome.records] == run_ids  # type: ignore[index]
    assert all(r.run_context["run_id"] == r.run_id for r in outcome.records)


def test_a_cassette_calling_a_tool_the_agent_lacks_fails_clearly(calc_cases: CaseProject) -> None:
    calc_cases.suite("calc", """
        tests:
          - name: divides
            payload: hi
            expected_result: status == "failed"
    """)
    calc_cases.replies("calc", "divides", [("add", {"a": 1, "b": 2})], [("divide", {"a": 1})], "x")
    outcome = calc_cases.case("calc", "divides")
    # a cassette problem is the suite author's to fix: it fails the run even when the
    # expression would accept a failed run
    assert not outcome.verdict_passed
    assert head(outcome) == [
        "tests/calc.yaml:2: case 'divides' (calc) failed",
        ("    0/1 runs passed, threshold 100% needs 1: cassettes/calc/divides.yaml: runs[0].turns[1].tool_calls[0]: "
         "the cassette calls tool 'divide', but the request of 'calc' offers: add, multiply"),
    ]
    assert "Traceback" not in failure_text(outcome, Masker())


def test_sync_user_code_runs_in_daemon_threads_so_a_hung_tool_never_blocks_exit() -> None:
    from pytest_connic.execution.executors import ReusingDaemonExecutor as DaemonExecutor

    executor = DaemonExecutor()
    assert executor.submit(lambda: threading.current_thread().daemon).result(timeout=5) is True
    failing = executor.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing.result(timeout=5)
