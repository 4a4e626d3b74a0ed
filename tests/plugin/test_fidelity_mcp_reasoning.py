"""Issue 16: MCP servers said out loud (a required one fails the case, an optional one is skipped
into ``context["mcp_errors"]``), ``reasoning_budget`` passed to the model, ``context_compression``
warned, a sensitive approval input masked (docs/fidelity.md)."""

from __future__ import annotations

import json

from helpers.project import ConnicProject

#: a model that reports what it was asked with, and the run context the prompt shows
ECHO_MODEL = '''
import json
from pytest_connic.models.base import ModelResponse


def pytest_connic_make_model(config, agent, model, case, run_index):
    def answer(request):
        return json.dumps({"budget": request.reasoning_budget, "prompt": request.system_prompt})
    return answer
'''

SERVER = {"name": "docs", "url": "https://mcp.example.com/mcp"}


def _mcp_project(project: ConnicProject, server: dict[str, object]) -> None:
    project.agent("helper", mcp_servers=[server], system_prompt="errors: {mcp_errors}")
    project.write("conftest.py", ECHO_MODEL)
    project.suite("helper", '''
        tests:
          - name: answers
            payload: hi
            expected_result: output.budget == null
    ''')


def test_a_required_mcp_server_fails_the_case_naming_the_server(project: ConnicProject) -> None:
    _mcp_project(project, SERVER)

    result = project.run()

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*agents/helper.yaml: mcp_servers 'docs' of agent 'helper': MCP servers are not supported locally yet "
        "(issue: MCP support); the agent's tools from 'docs' would be missing*"])


def test_an_optional_mcp_server_is_skipped_into_mcp_errors_with_one_warning(project: ConnicProject) -> None:
    _mcp_project(project, {**SERVER, "optional": True})
    project.suite("helper", '''
        tests:
          - name: answers
            payload: hi
            runs: 2
            expected_result: '"docs" in output.prompt and "not supported locally" in output.prompt'
    ''')

    result = project.run("-W", "always")

    result.assert_outcomes(passed=1)
    text = result.stdout.str()
    assert text.count("optional mcp_servers 'docs' of agent 'helper' is skipped") == 1
    assert "agents/helper.yaml" in text and "the runs go on without its tools" in text


def test_an_mcp_server_whose_condition_is_false_is_never_connected(project: ConnicProject) -> None:
    _mcp_project(project, {**SERVER, "condition": "context.use_docs == True"})

    result = project.run()

    result.assert_outcomes(passed=1)


def test_reasoning_budget_reaches_the_model_with_a_located_deprecation_warning(project: ConnicProject) -> None:
    project.agent("thinker", reasoning_budget=2048)
    project.write("conftest.py", ECHO_MODEL)
    project.suite("thinker", '''
        tests:
          - name: thinks
            payload: hi
            expected_result: output.budget == 2048
    ''')

    result = project.run()

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*agents/thinker.yaml:*reasoning_budget is deprecated and only works with "
                                 "legacy models; use reasoning_effort instead*"])


def test_context_compression_is_warned_once_per_agent_as_not_applied(project: ConnicProject) -> None:
    project.agent("talker", context_compression={"max_prompt_tokens": 1000})
    project.agent("quiet")
    project.write("conftest.py", ECHO_MODEL)
    for name in ("talker", "quiet"):
        project.suite(name, '''
            tests:
              - name: talks
                payload: hi
                runs: 2
                expected_result: output.budget == null
        ''')

    result = project.run()

    result.assert_outcomes(passed=2)
    text = result.stdout.str()
    assert text.count("context_compression of agent 'talker' is not applied locally") == 1
    assert "agent 'quiet'" not in text
