"""Issue 16, agent settings said out loud, below pytest: MCP servers (a required one fails the
case, an optional one is skipped into ``context["mcp_errors"]``, MCP on a tool agent is unused),
``reasoning_budget`` passed to the model, ``context_compression`` warned, a sensitive approval input
masked in every report (docs/fidelity.md). The load warnings are the project's
(``index_project``); how a session shows them, once and located, is tests/plugin/test_load_warnings.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helpers.fake_provider import unused_port
from helpers.harness import CaseProject, HookHost, first_failure
from pytest_connic.execution.assembly import run_suite_case
from pytest_connic.models.base import ModelRequest, ModelResponse, ToolCallRequest
from pytest_connic.project.index import index_project
from pytest_connic.project.load import LoadWarning
from pytest_connic.records.events import McpSkippedEvent
from pytest_connic.reports.json_report import build_json_report
from pytest_connic.reports.terminal import results_table, run_details
from pytest_connic.reports.traces import trace_document


def echo_model(agent: Any, model: str, case: Any, run_index: int) -> object:
    """A model that reports what it was asked with, and the run context the prompt shows."""

    def answer(request: ModelRequest) -> object:
        return json.dumps({"budget": request.reasoning_budget, "prompt": request.system_prompt})

    return answer


#: a server where nothing listens (issue 17 connects servers for real: tests/plugin/test_mcp.py)
SERVER = {"name": "docs", "url": f"http://127.0.0.1:{unused_port()}/mcp"}


def load_warnings(project: CaseProject, key: str) -> list[LoadWarning]:
    return [w for w in index_project(project.root).warnings if w.key == key]


def _mcp_project(project: CaseProject, server: dict[str, object], runs: int = 1) -> None:
    project.host = HookHost(make_model=echo_model)
    project.agent("helper", mcp_servers=[server], system_prompt="errors: {mcp_errors}")
    project.suite("helper", f'''
        tests:
          - name: answers
            payload: hi
            runs: {runs}
    ''')


def test_a_required_mcp_server_fails_the_case_naming_the_server(case_project: CaseProject) -> None:
    _mcp_project(case_project, SERVER)

    outcome = case_project.case("helper", "answers", mode="once")

    assert not outcome.verdict_passed
    failure = first_failure(outcome)
    assert failure.startswith(f"agent error: agents/helper.yaml:7: mcp_servers 'docs' of agent 'helper' could not "
                              f"be reached: listing the tools at {SERVER['url']} failed")
    assert failure.endswith("; a required server fails the run (`optional: true` lets the run go on without its tools)")


def test_an_optional_mcp_server_is_skipped_into_mcp_errors_with_one_warning(case_project: CaseProject) -> None:
    _mcp_project(case_project, {**SERVER, "optional": True}, runs=2)

    outcome = case_project.case("helper", "answers", mode="once")

    assert outcome.verdict_passed and len(outcome.records) == 2
    for record in outcome.records:
        assert isinstance(record.output, dict) and record.output["budget"] is None
        assert "docs" in record.output["prompt"] and "failed" in record.output["prompt"]
        assert [e.server for e in record.events if isinstance(e, McpSkippedEvent)] == ["docs"]
    said = [w for w in case_project.warnings if "mcp_servers 'docs' of agent 'helper' (optional) could not be reached" in w]
    assert len(said) == 1  # once, however many runs skip it
    assert said[0].startswith("agents/helper.yaml") and "the run goes on without its tools" in said[0]


def test_an_mcp_server_whose_condition_is_false_is_never_connected(case_project: CaseProject) -> None:
    _mcp_project(case_project, {**SERVER, "condition": "context.use_docs == True"})

    outcome = case_project.case("helper", "answers")

    assert outcome.verdict_passed
    (record,) = outcome.records
    assert isinstance(record.output, dict) and record.output["budget"] is None
    assert not [e for e in record.events if isinstance(e, McpSkippedEvent)]


@pytest.mark.filterwarnings("ignore:AgentConfig.reasoning_budget is deprecated:DeprecationWarning")  # the SDK's own
def test_reasoning_budget_reaches_the_model_with_a_located_deprecation_warning(case_project: CaseProject) -> None:
    case_project.host = HookHost(make_model=echo_model)
    case_project.agent("thinker", reasoning_budget=2048)
    case_project.suite("thinker", '''
        tests:
          - name: thinks
            payload: hi
    ''')

    (record,) = case_project.case("thinker", "thinks").records

    assert isinstance(record.output, dict) and record.output["budget"] == 2048
    (warning,) = load_warnings(case_project, "reasoning_budget:thinker")
    assert warning.message.startswith("agents/thinker.yaml: reasoning_budget is deprecated and only works with "
                                      "legacy models; use reasoning_effort instead")
    assert (warning.path, warning.line) == (case_project.root / "agents/thinker.yaml", 6)


def test_context_compression_is_warned_once_per_agent_as_not_applied(case_project: CaseProject) -> None:
    case_project.host = HookHost(make_model=echo_model)
    case_project.agent("talker", context_compression={"max_prompt_tokens": 1000})
    case_project.agent("quiet")
    for name in ("talker", "quiet"):
        case_project.suite(name, '''
            tests:
              - name: talks
                payload: hi
                runs: 2
        ''')

    for name in ("talker", "quiet"):
        outcome = case_project.case(name, "talks")
        assert outcome.verdict_passed
        assert [r.output for r in outcome.records] == [{"budget": None, "prompt": f"You are {name}."}] * 2
    said = [w.message for w in index_project(case_project.root).warnings if "context_compression" in w.message]
    assert len(said) == 1
    assert said[0].startswith("agents/talker.yaml: context_compression of agent 'talker' is not applied locally")
    assert load_warnings(case_project, "context_compression:quiet") == []


def mfa_model(agent: Any, model: str, case: Any, run_index: int) -> object:
    """A model that asks for the MFA code, then says whether it read one."""

    def answer(request: ModelRequest) -> object:
        results = [m["content"] for m in request.messages if m["role"] == "tool"]
        if not results:
            return ModelResponse(tool_calls=[ToolCallRequest("c1", "get_mfa", {"reason": "login"})])
        return "logged in" if results[0] in ("918273", "564738", "4711") else "no code"

    return answer


def test_a_sensitive_approval_input_response_never_reaches_the_reports_in_clear(case_project: CaseProject) -> None:
    case_project.host = HookHost(make_model=mfa_model)
    for name, sensitive, code in (("vault", True, "918273"), ("open", False, "564738")):
        case_project.agent(name, approval={"inputs": [{"get_mfa": {
            "prompt": "Ask for the MFA code.", "label": "MFA code", "sensitive": sensitive, "params": [{"reason": "str"}]}}]})
        case_project.suite(name, f'''
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

    with case_project.runtime() as runtime:  # one runtime: the session's masker learns the code
        outcomes = {(suite, name): run_suite_case(runtime, f"tests/{suite}.yaml", name)
                    for suite in ("vault", "open") for name in ("long code", "short code")}
        masker = runtime.masker

    assert all(o.verdict_passed for o in outcomes.values())  # the model and the checks still read the codes
    assert [o.records[0].output for o in outcomes.values()] == ["logged in"] * 4

    def shown(*keys: tuple[str, str]) -> str:
        """Every report of these cases: the JSON report, the terminal's table and run details, the traces."""
        chosen = [outcomes[k] for k in keys]
        texts = [json.dumps(build_json_report(chosen, masker=masker)), *results_table(chosen, width=200)]
        for outcome in chosen:
            for record in outcome.records:
                texts += run_details(record, masker=masker)
                texts.append(json.dumps(trace_document(outcome, record, masker=masker)))
        return "\n".join(texts)

    vault = shown(("vault", "long code"), ("vault", "short code"))
    assert "918273" not in vault and "4711" not in vault and "***" in vault
    assert "564738" in shown(("open", "long code")) and "4711" in shown(("open", "short code"))


def test_mcp_servers_on_a_tool_agent_are_warned_as_unused(case_project: CaseProject) -> None:
    """MCP is LLM-only on Connic: a ``type: tool`` agent's ``mcp_servers`` are never connected,
    and the user hears it once, at the key's line."""
    case_project.tool("calc", 'def echo(payload: dict) -> dict:\n    return {"echo": payload}\n')
    case_project.agent("runner", type="tool", tool_name="calc.echo",
                       mcp_servers=[{"name": "crm", "url": "https://127.0.0.1:9/mcp"}])
    case_project.suite("runner", '''
        tests:
          - name: runs
            payload: hi
    ''')

    (record,) = case_project.case("runner", "runs").records

    assert record.status == "completed" and record.output == {"echo": {"message": "hi"}}
    (warning,) = load_warnings(case_project, "mcp_servers:runner")
    assert warning.message.startswith("agents/runner.yaml: mcp_servers of agent 'runner' are not used: MCP servers "
                                      "give tools to a model, and a 'tool' agent has none")
    assert (warning.path, warning.line) == (case_project.root / "agents/runner.yaml", 6)
    assert case_project.warnings == []  # the runtime says nothing more: the project's load warning is the one
