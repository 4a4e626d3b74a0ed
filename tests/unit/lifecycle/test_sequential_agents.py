"""Sequential agents below pytest: stages in order, each output the next input, one run, one
trace (``StageEvent``s), each stage an invocation of its agent (docs/fidelity.md)."""

from __future__ import annotations

import fnmatch

import pytest

from helpers.harness import CaseProject, conftest_hooks
from helpers.project import esc
from pytest_connic.records.events import StageEvent
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord, build_trace
from pytest_connic.reports.failure import failure_text
from pytest_connic.reports.terminal import render_trace_tree
from pytest_connic.secrets import Masker

STAGES = '''
def inc(payload: dict) -> dict:
    """Add one to n."""
    return {"n": payload["n"] + 1}
'''

#: the LLM stage adds 10 to the n it reads (its user message is the previous stage's output)
TALKER_MODEL = """
import json
from pytest_connic.models.base import ModelResponse, ToolCallRequest


def pytest_connic_make_model(config, agent, model, case, run_index):
    if case["name"].startswith("cassette"):
        return None

    def answer(request):
        tool_results = [m["content"] for m in request.messages if m["role"] == "tool"]
        if not tool_results:
            n = json.loads(request.messages[0]["content"])["n"]
            return ModelResponse(tool_calls=[ToolCallRequest("c1", "add", {"a": n, "b": 10})])
        return json.dumps({"total": json.loads(tool_results[0])["sum"]})
    return answer
"""


@pytest.fixture
def pipeline(calc_cases: CaseProject) -> CaseProject:
    calc_cases.tool("stages", STAGES)
    calc_cases.agent("inc", type="tool", tool_name="stages.inc")
    calc_cases.agent("talker", tools=["calc.add"])
    calc_cases.agent("pipeline", type="sequential", agents=["inc", "talker", "echo"])
    calc_cases.host = conftest_hooks(TALKER_MODEL)
    return calc_cases


def only(outcome: CaseOutcome) -> RunRecord:
    (record,) = outcome.records
    return record


def stages(record: RunRecord) -> list[tuple[str, str, str | None]]:
    return [(e.agent, e.status, e.error) for e in record.events if isinstance(e, StageEvent)]


def test_stage_outputs_flow_to_the_next_stage_and_stage_tool_calls_are_visible(pipeline: CaseProject) -> None:
    pipeline.suite("pipeline", """
        tests:
          - name: flows
            payload: '{"n": 1}'
            expected_tool_call_order: [stages.inc, add, echo]
    """)
    outcome = pipeline.case("pipeline", "flows")
    assert outcome.verdict_passed, outcome.failure_reason
    record = only(outcome)
    assert record.output == {"got": {"total": 12}}
    assert [(c.ref, c.agent, c.params, c.result) for c in record.tool_calls] == [
        ("stages.inc", "inc", {"payload": {"n": 1}}, {"n": 2}),
        ("calc.add", "talker", {"a": 2, "b": 10}, {"sum": 12}),
        ("calc.echo", "echo", {"payload": {"total": 12}}, {"got": {"total": 12}}),
    ]
    assert stages(record) == [("inc", "completed", None), ("talker", "completed", None), ("echo", "completed", None)]


def test_stages_replay_their_turns_from_cassette_children(pipeline: CaseProject) -> None:
    pipeline.suite("pipeline", "tests:\n  - name: cassette children\n    payload: '{\"n\": 1}'\n")
    pipeline.cassette("pipeline", "cassette children", [{"children": {"talker": [
        {"turns": [{"tool_calls": [{"name": "add", "arguments": {"a": 3, "b": 4}}]}, {"content": '{"total": 7}'}]},
    ]}}])
    outcome = pipeline.case("pipeline", "cassette children")
    assert outcome.verdict_passed, outcome.failure_reason
    record = only(outcome)
    assert record.output == {"got": {"total": 7}}
    assert [(c.ref, c.params) for c in record.tool_calls if c.agent == "talker"] == [("calc.add", {"a": 3, "b": 4})]


def test_a_failing_stage_fails_the_run_and_the_trace_shows_the_stages(pipeline: CaseProject) -> None:
    pipeline.suite("pipeline", """
        tests:
          - name: no n
            payload: '{"m": 1}'
          - name: expects the stage failure
            payload: '{"m": 1}'
            expected_result: status == "failed" and "stage 'inc'" in error and "KeyError" in error
            expected_no_tool_calls: [add]
    """)
    outcomes = pipeline.cases("pipeline")
    assert outcomes["expects the stage failure"].verdict_passed
    outcome = outcomes["no n"]
    record = only(outcome)
    assert (record.status, record.error) == ("failed", "stage 'inc' ended failed: KeyError: 'n'")
    # each attempt of the pipeline (retry_options' default: 3) ended in its first stage
    assert stages(record) == [("inc", "failed", "KeyError: 'n'")] * 3
    assert failure_text(outcome, Masker()).split("\n")[:2] == [
        "tests/pipeline.yaml:2: case 'no n' (pipeline) failed",
        "    0/1 runs passed, threshold 100% needs 1: agent error: stage 'inc' ended failed: KeyError: 'n'",
    ]
    tree = render_trace_tree(build_trace(record, masker=Masker()), indent=0)
    expected = ["✗ pipeline [failed] (*ms) — stage 'inc' ended failed: KeyError: 'n'",
                "  ✗ agent inc [failed] — KeyError: 'n'",
                "    ✗ inc(payload={\"m\":1}) (*ms) — KeyError: 'n' at tools/stages.py:3"]
    assert all(fnmatch.fnmatchcase(line, esc(pattern)) for line, pattern in zip(tree, expected, strict=False)), tree


def test_each_stage_is_an_invocation_of_its_agent_with_its_own_context_and_run_id(calc_cases: CaseProject) -> None:
    """Connic does not document a stage's context (docs/fidelity.md): here a stage is an
    invocation of its agent, as a child started with ``trigger_agent`` is: its own ``run_id``,
    ``agent_name`` and context, the pipeline's context untouched, one trace under the pipeline."""
    calc_cases.tool("stages", '''
def first(payload: dict, context: dict) -> dict:
    context["marker"] = "set by first"
    return {"first_run": context["run_id"], "first_agent": context["agent_name"]}


def second(payload: dict, context: dict) -> dict:
    return {**payload, "second_run": context["run_id"], "second_agent": context["agent_name"],
            "marker": context.get("marker")}
''')
    calc_cases.agent("first", type="tool", tool_name="stages.first")
    calc_cases.agent("second", type="tool", tool_name="stages.second")
    calc_cases.agent("pipeline", type="sequential", agents=["first", "second"])
    calc_cases.suite("pipeline", "tests:\n  - name: contexts\n    payload: '{}'\n")
    record = only(calc_cases.case("pipeline", "contexts"))
    output = record.output
    assert isinstance(output, dict)
    assert (output["first_agent"], output["second_agent"], output["marker"]) == ("first", "second", None)
    run_ids = {e.agent: e.run_id for e in record.events if isinstance(e, StageEvent)}
    assert run_ids == {"first": output["first_run"], "second": output["second_run"]}
    assert len({record.run_id, output["first_run"], output["second_run"]}) == 3
    assert "marker" not in record.run_context  # the pipeline's context untouched
