"""Sequential agents: stages in order, each output the next input, one run, one trace."""

from __future__ import annotations

import json

import pytest

from helpers.project import ConnicProject, esc

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

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
def pipeline(calc: ConnicProject) -> ConnicProject:
    calc.tool("stages", STAGES)
    calc.agent("inc", type="tool", tool_name="stages.inc")
    calc.agent("talker", tools=["calc.add"])
    calc.agent("pipeline", type="sequential", agents=["inc", "talker", "echo"])
    calc.write("conftest.py", TALKER_MODEL)
    return calc


def test_stage_outputs_flow_to_the_next_stage_and_stage_tool_calls_are_visible(pipeline: ConnicProject) -> None:
    pipeline.suite(
        "pipeline",
        """
        tests:
          - name: flows
            payload: '{"n": 1}'
            expected_result: output.got.total == 12
            expected_tool_calls:
              - inc: params.payload.n == 1 and result.n == 2
              - calc.add: params.a == 2 and result.sum == 12
              - echo: params.payload.total == 12
            expected_tool_call_order: [stages.inc, add, echo]
        """,
    )
    result = pipeline.run("-q")
    result.assert_outcomes(passed=1)


def test_stages_replay_their_turns_from_cassette_children(pipeline: ConnicProject) -> None:
    pipeline.suite(
        "pipeline",
        """
        tests:
          - name: cassette children
            payload: '{"n": 1}'
            expected_result: output.got.total == 7
            expected_tool_calls:
              - add: params.a == 3
        """,
    )
    pipeline.cassette(
        "pipeline",
        "cassette children",
        [
            {
                "children": {
                    "talker": [
                        {"turns": [{"tool_calls": [{"name": "add", "arguments": {"a": 3, "b": 4}}]},
                                   {"content": '{"total": 7}'}]}
                    ]
                }
            }
        ],
    )
    result = pipeline.run("-q")
    result.assert_outcomes(passed=1)


def test_a_failing_stage_fails_the_run_and_the_trace_shows_the_stages(pipeline: ConnicProject) -> None:
    pipeline.suite(
        "pipeline",
        """
        tests:
          - name: no n
            payload: '{"m": 1}'
          - name: expects the stage failure
            payload: '{"m": 1}'
            expected_result: status == "failed" and "stage 'inc'" in error and "KeyError" in error
            expected_no_tool_calls: [add]
        """,
    )
    result = pipeline.run("-q")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "tests/pipeline.yaml:2: case 'no n' (pipeline) failed",
            ("    0/1 runs passed, threshold 100% needs 1: "
            "agent error: stage 'inc' ended failed: KeyError: 'n'"),
            "*Trace:",
            esc("*✗ pipeline [failed]*"),
            esc("*✗ agent inc [failed] — KeyError: 'n'"),
            esc("*✗ inc(payload={\"m\":1}) (*ms) — KeyError: 'n' at tools/stages.py:3"),
        ]
    )


def test_each_stage_is_an_invocation_of_its_agent_with_its_own_context_and_run_id(calc: ConnicProject) -> None:
    """Connic does not document a stage's context (docs/fidelity.md): here a stage is an
    invocation of its agent, as a child started with ``trigger_agent`` is: its own ``run_id``,
    ``agent_name`` and context, the pipeline's context untouched, one trace under the pipeline."""
    calc.tool("stages", '''
def first(payload: dict, context: dict) -> dict:
    context["marker"] = "set by first"
    return {"first_run": context["run_id"], "first_agent": context["agent_name"]}


def second(payload: dict, context: dict) -> dict:
    return {**payload, "second_run": context["run_id"], "second_agent": context["agent_name"],
            "marker": context.get("marker")}
''')
    calc.agent("first", type="tool", tool_name="stages.first")
    calc.agent("second", type="tool", tool_name="stages.second")
    calc.agent("pipeline", type="sequential", agents=["first", "second"])
    calc.suite("pipeline", """
        tests:
          - name: contexts
            payload: '{}'
            expected_result: >-
              output.first_agent == "first" and output.second_agent == "second" and output.marker == null
              and output.first_run != output.second_run
    """)
    calc.run("-q", "--connic-json", "report.json").assert_outcomes(passed=1)
    (run,) = json.loads((calc.root / "report.json").read_text("utf-8"))["cases"][0]["runs_detail"]
    output = run["output"]
    assert run["run_id"] not in (output["first_run"], output["second_run"])
