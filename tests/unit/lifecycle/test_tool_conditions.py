"""Issue 16, tool conditions as Connic applies them, below pytest: an evaluation error makes the
condition false, and a tool hidden by its condition is unknown to every caller (docs/fidelity.md)."""

from __future__ import annotations

import json
from typing import Any

from helpers.harness import CaseProject, HookHost, first_failure
from pytest_connic.models.base import ModelRequest, ModelResponse, ToolCallRequest

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


def stubborn_model(agent: Any, model: str, case: Any, run_index: int) -> object:
    """A model that names ``nuke`` whatever it is offered, then reports what it was offered and read."""

    def answer(request: ModelRequest) -> object:
        results = [m["content"] for m in request.messages if m["role"] == "tool"]
        if not results:
            return ModelResponse(tool_calls=[
                ToolCallRequest("c1", "nuke", {"target": "moon"}),
                ToolCallRequest("c2", "search_tools", {"query": "target"}),
                ToolCallRequest("c3", "use_tool", {"tool_name": "peek", "arguments": {"target": "sun"}}),
            ])
        return json.dumps({"offered": sorted(t.name for t in request.tools), "results": results})

    return answer


def test_a_condition_that_cannot_be_evaluated_is_false_and_hides_the_tool_from_every_caller(
    case_project: CaseProject,
) -> None:
    case_project.host = HookHost(make_model=stubborn_model)
    case_project.tool("ops", TOOLS)
    # `not context.is_admin` with no is_admin: an evaluation error on Connic, so false
    case_project.agent("guarded", tools=[{"ops.nuke": "not context.is_admin"}],
                       discoverable_tools=[{"ops.peek": "not context.is_admin"}])
    case_project.agent("admin", tools=[{"ops.nuke": "not context.is_admin"}],
                       discoverable_tools=[{"ops.peek": "not context.is_admin"}])
    case_project.write("middleware/admin.py", '''
def before(content, context):
    context["is_admin"] = False
    return content
''')
    for agent in ("guarded", "admin"):
        case_project.suite(agent, f'''
            tests:
              - name: {agent} nukes
                payload: go
                expected_result: output.results[0] == "destroyed moon"
        ''')

    admin = case_project.case("admin", "admin nukes")
    guarded = case_project.case("guarded", "guarded nukes")

    assert admin.verdict_passed and not guarded.verdict_passed
    (admin_run,), (guarded_run,) = admin.records, guarded.records
    shown = admin_run.output
    assert isinstance(shown, dict)
    assert shown == {"offered": ["nuke", "search_tools", "use_tool"],
                     "results": ["destroyed moon", shown["results"][1], "looked at sun"]}
    assert "peek" in shown["results"][1]
    hidden = guarded_run.output
    assert isinstance(hidden, dict)
    assert hidden["offered"] == ["search_tools", "use_tool"]
    assert hidden["results"][0] == "Error: unknown tool 'nuke'; this agent's tools: search_tools, use_tool"
    assert "peek" not in hidden["results"][1]
    assert hidden["results"][2] == "Error: 'peek' is not a discoverable tool of this agent; call search_tools first"
    # the refused use_tool call is in the trace, with what the model read
    calls = {c.name: c for c in guarded_run.tool_calls}
    assert calls["use_tool"].error == "'peek' is not a discoverable tool of this agent; call search_tools first"
    assert calls["use_tool"].params == {"tool_name": "peek", "arguments": {"target": "sun"}}


def test_a_cassette_that_calls_a_hidden_tool_is_a_cassette_error(case_project: CaseProject) -> None:
    """A cassette records what the model was offered: a turn that names a tool the request does
    not offer (hidden by its condition) fails the run naming the turn, unlike a hook model, which
    reads "unknown tool" as a model naming an unoffered tool would."""
    case_project.tool("ops", TOOLS)
    case_project.agent("guarded", tools=[{"ops.nuke": "not context.is_admin"}])
    case_project.suite("guarded", '''
        tests:
          - name: nukes
            payload: go
    ''')
    case_project.cassette("guarded", "nukes", [{"turns": [
        {"tool_calls": [{"name": "nuke", "arguments": {"target": "moon"}}]}, {"content": "done"}]}])

    outcome = case_project.case("guarded", "nukes")

    assert not outcome.verdict_passed
    assert ("cassettes/guarded/nukes.yaml: runs[0].turns[0].tool_calls[0]: the cassette calls tool 'nuke', "
            "but the request of 'guarded' offers: no tools") in first_failure(outcome)
    assert outcome.records[0].tool_calls == []  # nuke never ran
