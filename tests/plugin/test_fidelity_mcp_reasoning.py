"""Issue 16: MCP servers said out loud (a required one fails the case, an optional one is skipped
into ``context["mcp_errors"]``), ``reasoning_budget`` passed to the model, ``context_compression``
warned, a sensitive approval input masked (docs/fidelity.md)."""

from __future__ import annotations

import json

import pytest

from helpers.fake_provider import unused_port
from helpers.project import ConnicProject

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

#: a model that reports what it was asked with, and the run context the prompt shows
ECHO_MODEL = '''
import json
from pytest_connic.models.base import ModelResponse


def pytest_connic_make_model(config, agent, model, case, run_index):
    def answer(request):
        return json.dumps({"budget": request.reasoning_budget, "prompt": request.system_prompt})
    return answer
'''

#: a server where nothing listens (issue 17 connects servers for real: tests/plugin/test_mcp.py)
SERVER = {"name": "docs", "url": f"http://127.0.0.1:{unused_port()}/mcp"}


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

    result = project.run("--connic-record-mode", "once")

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        ("*agents/helper.yaml:*: mcp_servers 'docs' of agent 'helper' could not be reached: listing the tools at "
         "http://127.0.0.1:*/mcp failed*a required server fails the run*")])


def test_an_optional_mcp_server_is_skipped_into_mcp_errors_with_one_warning(project: ConnicProject) -> None:
    _mcp_project(project, {**SERVER, "optional": True})
    project.suite("helper", '''
        tests:
          - name: answers
            payload: hi
            runs: 2
            expected_result: '"docs" in output.prompt and "failed" in output.prompt'
    ''')

    result = project.run("-W", "always", "--connic-record-mode", "once")

    result.assert_outcomes(passed=1)
    text = result.stdout.str()
    assert text.count("mcp_servers 'docs' of agent 'helper' (optional) could not be reached") == 1
    assert "agents/helper.yaml" in text and "the run goes on without its tools" in text


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
    result.stdout.fnmatch_lines([("*agents/thinker.yaml:*reasoning_budget is deprecated and only works with "
                                 "legacy models; use reasoning_effort instead*")])


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


#: a model that asks for the MFA code, then says whether it read one
MFA_MODEL = '''
from pytest_connic.models.base import ModelResponse, ToolCallRequest


def pytest_connic_make_model(config, agent, model, case, run_index):
    def answer(request):
        results = [m["content"] for m in request.messages if m["role"] == "tool"]
        if not results:
            return ModelResponse(tool_calls=[ToolCallRequest("c1", "get_mfa", {"reason": "login"})])
        return "logged in" if results[0] in ("918273", "564738", "4711") else "no code"
    return answer
'''


def test_a_sensitive_approval_input_response_never_reaches_the_reports_in_clear(project: ConnicProject) -> None:
    for name, sensitive, code in (("vault", True, "918273"), ("open", False, "564738")):
        project.agent(name, approval={"inputs": [{"get_mfa": {
            "prompt": "Ask for the MFA code.", "label": "MFA code", "sensitive": sensitive, "params": [{"reason": "str"}]}}]})
        project.suite(name, f'''
            tests:
              - name: long code
                payload: log in
                approval_decisions: [{{tool: get_mfa, decision: approve, response: "{code}"}}]
                expected_tool_calls: [{{get_mfa: result == "{code}"}}]
              - name: short code
                payload: log in
                approval_decisions: [{{tool: get_mfa, decision: approve, response: "4711"}}]
                expected_result: output == "logged in"
        ''')
    project.write("conftest.py", MFA_MODEL)

    result = project.run("--connic-json", "report.json", "--connic-traces", "traces")

    result.assert_outcomes(passed=4)  # the model and the checks still read the codes
    cases = {(c["suite"].split("/")[-1].removesuffix(".yaml"), c["test_name"]): c for c in
             json.loads((project.root / "report.json").read_text("utf-8"))["cases"]}
    vault = json.dumps([cases["vault", "long code"], cases["vault", "short code"]])
    assert "918273" not in vault and "4711" not in vault and "***" in vault
    assert "918273" not in result.stdout.str() and "4711" not in result.stdout.str()
    traces = "".join(p.read_text("utf-8") for p in (project.root / "traces").rglob("*") if p.is_file())
    assert "918273" not in traces
    assert "564738" in json.dumps(cases["open", "long code"]) and "4711" in json.dumps(cases["open", "short code"])


def test_mcp_servers_on_a_tool_agent_are_warned_as_unused(project: ConnicProject) -> None:
    """MCP is LLM-only on Connic: a ``type: tool`` agent's ``mcp_servers`` are never connected,
    and the user hears it once, at the key's line."""
    project.tool("calc", 'def echo(payload: dict) -> dict:\n    return {"echo": payload}\n')
    project.agent("runner", type="tool", tool_name="calc.echo",
                  mcp_servers=[{"name": "crm", "url": "https://127.0.0.1:9/mcp"}])
    project.suite("runner", '''
        tests:
          - name: runs
            payload: hi
            expected_result: status == 'completed'
    ''')

    result = project.run("-W", "always")

    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines([("*agents/runner.yaml:*mcp_servers of agent 'runner' are not used: MCP servers "
                                  "give tools to a model, and a 'tool' agent has none*")])
