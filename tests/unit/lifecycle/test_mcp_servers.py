"""An agent's ``mcp_servers`` below the session (docs/mcp-and-api-tools.md): strict
``${context.*}`` headers, optional and required servers that are down, calls a cassette does not
record, hand-written cassettes (no hook fires), mocks refused for MCP tools, and a replay that
needs no ``mcp`` package. What the plugin wires (``--connic-mcp-url`` and the reports kept free of
the server's secrets, the ``connic_mcp_urls`` ini, a bad option, the JSON report, the
compliance-auditor example) stays in tests/plugin/test_mcp.py."""

from __future__ import annotations

import importlib.util
import re
import sys
from typing import Any

import pytest
import yaml

from helpers.fake_provider import Reply, text, unused_port
from helpers.harness import CaseProject, first_failure
from helpers.network import local_provider_env, no_network, serving
from pytest_connic.records.events import HookEvent

if importlib.util.find_spec("mcp") is None or importlib.util.find_spec("litellm") is None:
    pytest.skip("the [mcp] and [live] extras (mcp, litellm) are not installed", allow_module_level=True)

MCP_TOOLS = {"kind": "mcp_tools", "name": "docs",
             "result": [{"name": "search_docs", "description": "Search the docs",
                         "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}}]}


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    local_provider_env(monkeypatch, "sk-test-unused")


def nowhere() -> str:
    """A URL where nothing listens (an agent's own ``url``: a test never reaches the internet)."""
    return f"http://127.0.0.1:{unused_port()}/mcp"


def docs_agent(project: CaseProject, **server: Any) -> None:
    project.agent("helper", mcp_servers=[{"name": "docs", "url": nowhere(), **server}])


def searching(project: CaseProject, *calls: dict[str, Any], expected: str = 'output == "done"') -> None:
    """``docs_agent`` with a case ``searches`` whose cassette asks ``search_docs`` once and records ``calls``."""
    docs_agent(project)
    project.suite("helper", f'''
        tests:
          - name: searches
            payload: hi
            expected_result: '{expected}'
    ''')
    project.cassette("helper", "searches", [{
        "turns": [{"tool_calls": [{"name": "search_docs", "arguments": {"query": "q"}}]}, {"content": "done"}],
        "calls": [MCP_TOOLS, *calls],
    }])


def test_a_missing_context_key_in_a_header_fails_the_run(case_project: CaseProject) -> None:
    docs_agent(case_project, headers={"X-User": "${context.user.id}"})
    case_project.suite("helper", '''
        tests:
          - name: searches
            payload: hi
            expected_result: output == "never"
    ''')

    outcome = case_project.case("helper", "searches")

    assert not outcome.verdict_passed
    (record,) = outcome.records
    assert record.status == "failed" and record.error is not None
    assert re.match(r"agents/helper\.yaml:\d+: " + re.escape(
        "mcp_servers 'docs' of agent 'helper': header 'X-User' uses ${context.user.id}: "
        "KeyError: context.user is not set (resolution is strict"), record.error), record.error


@pytest.mark.usefixtures("litellm_imported")
def test_an_optional_server_that_is_down_goes_into_mcp_errors_recorded_and_replayed(
    case_project: CaseProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_project.agent("helper", mcp_servers=[{"name": "docs", "url": nowhere(), "optional": True}],
                       system_prompt="errors: {mcp_errors}")
    case_project.suite("helper", '''
        tests:
          - name: goes on
            payload: hi
            expected_result: '"docs" in output and "failed" in output'
    ''')

    def script(body: dict[str, Any]) -> Reply:
        assert "tools" not in body or not body["tools"]  # the server's tools are missing
        return text(body["messages"][0]["content"])

    with serving(monkeypatch, script):
        recorded = case_project.case("helper", "goes on", mode="once")
    assert recorded.verdict_passed, recorded.failure_reason
    assert any("mcp_servers 'docs' of agent 'helper' (optional) could not be reached" in w
               for w in case_project.warnings), case_project.warnings
    data = yaml.safe_load((case_project.root / "cassettes/helper/goes on.yaml").read_text("utf-8"))
    (call,) = [c for run in data["runs"] for c in run.get("calls", [])]
    assert call["kind"] == "mcp_tools" and "failed" in call["error"]
    with no_network(monkeypatch):
        assert case_project.case("helper", "goes on").verdict_passed


@pytest.mark.usefixtures("litellm_imported")
def test_a_required_server_that_is_down_fails_the_run_located(
    case_project: CaseProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs_agent(case_project)
    case_project.suite("helper", '''
        tests:
          - name: needs docs
            payload: hi
            expected_result: output == "x"
    ''')

    with serving(monkeypatch, ["unused"]) as fp:
        outcome = case_project.case("helper", "needs docs", mode="once")

    assert not outcome.verdict_passed
    (record,) = outcome.records
    assert re.match(r"agents/helper\.yaml:\d+: mcp_servers 'docs' of agent 'helper' could not be reached: "
                    r"listing the tools at http://127\.0\.0\.1:\d+/mcp failed.*a required server fails the run",
                    record.error or "", re.DOTALL), record.error
    assert fp.requests == []


def test_a_call_missing_in_replay_fails_the_case_naming_the_tool(case_project: CaseProject) -> None:
    docs_agent(case_project)
    case_project.suite("helper", '''
        tests:
          - name: searches
            payload: hi
            expected_result: output == "done"
    ''')
    case_project.cassette("helper", "searches", [{
        "turns": [{"tool_calls": [{"name": "search_docs", "arguments": {"query": "other"}}]}, {"content": "done"}],
        "calls": [MCP_TOOLS, {"kind": "mcp", "name": "docs/search_docs", "arguments": {"query": "install"},
                              "result": {"content": [{"type": "text", "text": "x"}], "is_error": False}}],
    }])

    outcome = case_project.case("helper", "searches")

    assert not outcome.verdict_passed
    failure = first_failure(outcome)
    assert ("runs[0].calls: run 1 made the mcp call 'docs/search_docs' with arguments {\"query\": \"other\"}, "
            "but the cassette records 1 such call(s), none unused with these arguments") in failure
    assert "--connic-record-mode=all" in failure


def test_a_hand_written_cassette_replays_results_and_hooks_do_not_fire(case_project: CaseProject) -> None:
    searching(case_project, {"kind": "mcp", "name": "docs/search_docs",
                             "result": {"content": [{"type": "text", "text": "no index"}], "is_error": True}})
    case_project.write("hooks/helper.py", 'def before(tool_name, params):\n    raise RuntimeError("hook ran")\n')
    case_project.suite("helper", '''
        tests:
          - name: searches
            payload: hi
            expected_tool_calls:
              - search_docs: result.is_error == true and result.parts[0].text == "no index"
            expected_result: output == "done"
    ''')

    outcome = case_project.case("helper", "searches")

    assert outcome.verdict_passed, outcome.failure_reason
    (record,) = outcome.records
    assert not [e for e in record.events if isinstance(e, HookEvent)]
    (call,) = record.tool_calls
    assert call.name == "search_docs"


def test_a_mock_naming_an_mcp_tool_is_refused(case_project: CaseProject) -> None:
    searching(case_project)
    case_project.write("tests/mocks/docs.py", "def mock_search_docs(ref, params, context):\n    return 'mocked'\n\n\n"
                                              "def mock(ref, params, context):\n    return 'any'\n")
    case_project.suite("helper", '''
        tests:
          - name: searches
            payload: hi
            mocks: docs
            expected_result: output == "done"
    ''')

    outcome = case_project.case("helper", "searches")

    assert not outcome.verdict_passed
    failure = first_failure(outcome)
    assert "mock_search_docs mocks 'search_docs', a tool of agents/helper.yaml:" in failure
    assert "mcp_servers 'docs' of agent 'helper'; MCP tools cannot be mocked on Connic" in failure


def _without_mcp(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in sys.modules if n == "mcp" or n.startswith("mcp.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)


@pytest.mark.usefixtures("litellm_imported")
def test_a_replay_does_not_need_the_mcp_package_a_recording_says_how_to_install_it(
    case_project: CaseProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    searching(case_project, {"kind": "mcp", "name": "docs/search_docs", "result": {"content": "found it"}})
    _without_mcp(monkeypatch)

    assert case_project.case("helper", "searches").verdict_passed
    with serving(monkeypatch, ["unused"]):
        recorded = case_project.case("helper", "searches", mode="all")
    # an incomplete recording is an error of the case (no cassette written)
    said = recorded.recording_error or ""
    assert "mcp_servers 'docs' of agent 'helper': the mcp package is not installed" in said, said
    assert "pip install pytest-connic[mcp]" in said, said
