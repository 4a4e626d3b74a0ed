"""Issue 16, tool conditions as Connic applies them: an evaluation error makes the condition
false, and a tool hidden by its condition is unknown to every caller (docs/fidelity.md)."""

from __future__ import annotations

import json

import pytest

from helpers.project import ConnicProject

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

TOOLS = '''
def nuke(target: str) -> str:
    """Destroy a target.

    Args:
        target: what to destroy
    """
    return "destroyed " + target


def peek(target: str) -> str:
    """Look at a target (a discoverable tool).

    Args:
        target: what to look at
    """
    return "looked at " + target
'''

#: a model that names ``nuke`` whatever it is offered, then reports what it was offered and read
STUBBORN_MODEL = '''
import json
from pytest_connic.models.base import ModelResponse, ToolCallRequest


def pytest_connic_make_model(config, agent, model, case, run_index):
    def answer(request):
        results = [m["content"] for m in request.messages if m["role"] == "tool"]
        if not results:
            return ModelResponse(tool_calls=[
                ToolCallRequest("c1", "nuke", {"target": "moon"}),
                ToolCallRequest("c2", "search_tools", {"query": "target"}),
                ToolCallRequest("c3", "use_tool", {"tool_name": "peek", "arguments": {"target": "sun"}}),
            ])
        return json.dumps({"offered": sorted(t.name for t in request.tools), "results": results})
    return answer
'''


def test_a_condition_that_cannot_be_evaluated_is_false_and_hides_the_tool_from_every_caller(
    project: ConnicProject,
) -> None:
    project.tool("ops", TOOLS)
    # `not context.is_admin` with no is_admin: an evaluation error on Connic, so false
    project.agent("guarded", tools=[{"ops.nuke": "not context.is_admin"}],
                  discoverable_tools=[{"ops.peek": "not context.is_admin"}])
    project.agent("admin", tools=[{"ops.nuke": "not context.is_admin"}],
                  discoverable_tools=[{"ops.peek": "not context.is_admin"}])
    project.write("middleware/admin.py", '''
def before(content, context):
    context["is_admin"] = False
    return content
''')
    project.write("conftest.py", STUBBORN_MODEL)
    for agent in ("guarded", "admin"):
        project.suite(agent, f'''
            tests:
              - name: {agent} nukes
                payload: go
                expected_result: output.results[0] == "destroyed moon"
        ''')

    result = project.run("--connic-json", "report.json")

    result.assert_outcomes(passed=1, failed=1)
    cases = json.loads((project.root / "report.json").read_text("utf-8"))["cases"]
    outputs = {c["test_name"]: json.loads(c["runs_detail"][0]["output"]) for c in cases}
    assert outputs["admin nukes"] == {
        "offered": ["nuke", "search_tools", "use_tool"],
        "results": ["destroyed moon", outputs["admin nukes"]["results"][1], "looked at sun"],
    }
    assert "peek" in outputs["admin nukes"]["results"][1]
    hidden = outputs["guarded nukes"]
    assert hidden["offered"] == ["search_tools", "use_tool"]
    assert hidden["results"][0] == "Error: unknown tool 'nuke'; this agent's tools: search_tools, use_tool"
    assert "peek" not in hidden["results"][1]
    assert hidden["results"][2] == "Error: 'peek' is not a discoverable tool of this agent; call search_tools first"
    # the refused use_tool call is in the trace, with what the model read
    calls = {c["name"]: c for c in cases[[c["test_name"] for c in cases].index("guarded nukes")]["runs_detail"][0]["tool_calls"]}
    assert calls["use_tool"]["error"] == "'peek' is not a discoverable tool of this agent; call search_tools first"
    assert calls["use_tool"]["params"] == {"tool_name": "peek", "arguments": {"target": "sun"}}


def test_a_cassette_that_calls_a_hidden_tool_is_a_cassette_error(project: ConnicProject) -> None:
    """A cassette records what the model was offered: a turn that names a tool the request does
    not offer (hidden by its condition) fails the run naming the turn, unlike a hook model, which
    reads "unknown tool" as a model naming an unoffered tool would."""
    project.tool("ops", TOOLS)
    project.agent("guarded", tools=[{"ops.nuke": "not context.is_admin"}])
    project.suite("guarded", '''
        tests:
          - name: nukes
            payload: go
    ''')
    project.cassette("guarded", "nukes", [{"turns": [
        {"tool_calls": [{"name": "nuke", "arguments": {"target": "moon"}}]}, {"content": "done"}]}])

    result = project.run()

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([("*cassettes/guarded/nukes.yaml: runs?0?.turns?0?.tool_calls?0?: the cassette calls "
                                  "tool 'nuke', but the request of 'guarded' offers: no tools*")])
