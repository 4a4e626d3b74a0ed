"""Issue 17, MCP, through the plugin: an agent's ``mcp_servers`` against a real MCP server on
127.0.0.1 (the ``mcp`` SDK, Streamable HTTP) pointed at by ``--connic-mcp-url``, recorded with a
model from the fake provider, then replayed offline with the server stopped, its secrets in no
report; a discoverable server pointed at by the ``connic_mcp_urls`` ini; a bad option; the JSON
report; the compliance-auditor example (docs/mcp-and-api-tools.md). What a run does with its MCP
servers (strict headers, optional and required servers down, unrecorded calls, hand-written
cassettes, mocks refused, a replay without the mcp package) is tested below the session:
tests/unit/lifecycle/test_mcp_servers.py."""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers.fake_provider import FakeProvider, Reply, text, tool_call, unused_port
from helpers.project import ConnicProject

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

if importlib.util.find_spec("mcp") is None or importlib.util.find_spec("litellm") is None:
    pytest.skip("the [mcp] and [live] extras (mcp, litellm) are not installed", allow_module_level=True)

from helpers.mcp_server import McpTestServer, docs_tools
from helpers.network import no_network, warm_up_litellm

TOKEN = "tok-DONOTLEAK-7f3a9c"
USER = "user-DONOTLEAK-42"
MIDDLEWARE = '''
def before(content, context):
    context["user_id"] = "user-DONOTLEAK-42"
    return content
'''


@pytest.fixture(scope="module", autouse=True)
def litellm_imported() -> None:
    warm_up_litellm()


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-unused")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_BASE", f"http://127.0.0.1:{unused_port()}/v1")


@pytest.fixture
def docs_server() -> Iterator[McpTestServer]:
    with McpTestServer(docs_tools) as server:
        yield server


def nowhere() -> str:
    """A URL where nothing listens (an agent's own ``url``: a test never reaches the internet)."""
    return f"http://127.0.0.1:{unused_port()}/mcp"


def echo_tools(body: dict[str, Any]) -> Reply:
    """The fake model: call ``search_docs``, then answer with what the tool returned."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return text(mcp_text(last["content"]))
    return tool_call("search_docs", {"query": "install"})


def mcp_text(content: str) -> str:
    """The text of an MCP tool's result as the model reads it (MCP's ``CallToolResult`` JSON)."""
    result = json.loads(content)
    assert result["isError"] is False
    return " ".join(part["text"] for part in result["content"])


def calls_of(project: ConnicProject, suite: str, case: str) -> list[dict[str, Any]]:
    data = yaml.safe_load((project.root / "cassettes" / suite / f"{case}.yaml").read_text("utf-8"))
    return [c for run in data["runs"] for c in run.get("calls", [])]


def _docs_agent(project: ConnicProject, **server: Any) -> None:
    project.agent("helper", mcp_servers=[{"name": "docs", "url": nowhere(), **server}])


def test_record_against_a_real_server_then_replay_offline_without_it(
    project: ConnicProject, docs_server: McpTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _docs_agent(project, headers={"Authorization": "Bearer ${DOCS_TOKEN}", "X-User": "${context.user_id}"},
                tools=["search_docs", "get_page"])
    project.write("middleware/helper.py", MIDDLEWARE)
    project.suite("helper", '''
        tests:
          - name: searches
            payload: how do I install it?
            expected_tool_calls:
              - search_docs: params.query == "install" and result.is_error == false
            expected_result: '"intro, install" in output'
    ''')
    monkeypatch.setenv("DOCS_TOKEN", TOKEN)
    url = f"docs={docs_server.url}"
    with FakeProvider(echo_tools) as fp:
        monkeypatch.setenv("OPENAI_API_BASE", fp.base_url)
        recorded = project.run("--connic-record-mode", "once", "--connic-mcp-url", url,
                               "--connic-json", "recorded.json")
    recorded.assert_outcomes(passed=1)
    # the model was offered the filtered tools, under their own names
    offered = [t["function"]["name"] for t in fp.requests[0].body["tools"]]
    assert sorted(offered) == ["get_page", "search_docs"]
    # the server got the interpolated headers; the cassette and the report never see them
    assert any(h.get("authorization") == f"Bearer {TOKEN}" and h.get("x-user") == USER for h in docs_server.headers)
    assert docs_server.calls == [("search_docs", {"query": "install"})]
    cassette = (project.root / "cassettes" / "helper" / "searches.yaml").read_text("utf-8")
    report = (project.root / "recorded.json").read_text("utf-8")
    for secret in (TOKEN, USER):
        assert secret not in cassette and secret not in report and secret not in recorded.stdout.str()
    kinds = [(c["kind"], c["name"]) for c in calls_of(project, "helper", "searches")]
    assert kinds == [("mcp_tools", "docs"), ("mcp", "docs/search_docs")]

    docs_server.stop()
    monkeypatch.delenv("DOCS_TOKEN")  # a replay needs neither the server nor its secrets
    with no_network(monkeypatch) as attempts:
        replayed = project.run("--connic-mcp-url", url)
    replayed.assert_outcomes(passed=1)
    assert attempts == []


def test_a_discoverable_server_is_reached_through_search_tools_only(
    project: ConnicProject, docs_server: McpTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _docs_agent(project, discoverable=True)
    project.suite("helper", '''
        tests:
          - name: discovers
            payload: read the install page
            expected_tool_calls:
              - search_tools
              - get_page: 'params.page == "install" and result.parts[0].text == "page install: pip install things"'
            expected_result: '"pip install" in output'
    ''')

    def script(body: dict[str, Any]) -> Reply:
        tools = [m for m in body["messages"] if m["role"] == "tool"]
        if not tools:
            return tool_call("search_tools", {"query": "documentation page"})
        if len(tools) == 1:
            assert "get_page" in tools[0]["content"]
            return tool_call("use_tool", {"tool_name": "get_page", "arguments": {"page": "install"}})
        return text(mcp_text(tools[-1]["content"]))

    with FakeProvider(script) as fp:
        monkeypatch.setenv("OPENAI_API_BASE", fp.base_url)
        project.pytester.makeini(f"[pytest]\nconnic_mcp_urls =\n    docs={docs_server.url}\n")  # the ini form
        recorded = project.run("--connic-record-mode", "once")
    recorded.assert_outcomes(passed=1)
    assert [name for name, _ in docs_server.calls] == ["get_page"]
    offered = sorted(t["function"]["name"] for t in fp.requests[0].body["tools"])
    assert offered == ["search_tools", "use_tool"]  # not the server's tools themselves
    docs_server.stop()
    with no_network(monkeypatch):
        project.run().assert_outcomes(passed=1)


MCP_TOOLS = {"kind": "mcp_tools", "name": "docs",
             "result": [{"name": "search_docs", "description": "Search the docs",
                         "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}}]}


def test_a_bad_mcp_url_option_is_a_usage_error(project: ConnicProject) -> None:
    _docs_agent(project)
    project.suite("helper", "tests:\n  - name: x\n    payload: hi\n")

    result = project.run("--connic-mcp-url", "docs")

    assert result.ret == 4
    result.stderr.fnmatch_lines(["*invalid value 'docs' from --connic-mcp-url: expected NAME=URL*"])


def test_json_report_keeps_mcp_results(project: ConnicProject) -> None:
    _docs_agent(project)
    project.suite("helper", '''
        tests:
          - name: searches
            payload: hi
            expected_result: output == "done"
    ''')
    project.cassette("helper", "searches", [{
        "turns": [{"tool_calls": [{"name": "search_docs", "arguments": {"query": "q"}}]}, {"content": "done"}],
        "calls": [MCP_TOOLS, {"kind": "mcp", "name": "docs/search_docs", "result": {"content": "found it"}}],
    }])

    project.run("--connic-json", "r.json").assert_outcomes(passed=1)
    text_ = (project.root / "r.json").read_text("utf-8")
    assert "found it" in text_ and json.loads(text_)


# -- compliance-auditor (connic-awesome-agents), its context7 server pointed at a local stand-in --

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "projects" / "compliance-auditor"
ALIASES = ("--connic-model-alias", "gemini/gemini-3.5-flash=openai/gpt-4o-mini",
           "--connic-model-alias", "anthropic/claude-opus-4-8=openai/gpt-4o-mini")


def context7_tools(server: Any, calls: list[tuple[str, dict[str, Any]]]) -> None:
    """A stand-in for https://mcp.context7.com/mcp: its two tools, canned answers."""

    @server.tool(name="resolve-library-id", description="Resolve a library name to a Context7 library id")
    def resolve_library_id(libraryName: str) -> str:
        calls.append(("resolve-library-id", {"libraryName": libraryName}))
        return f"/docs/{libraryName.lower()}"

    @server.tool(name="get-library-docs", description="Fetch up-to-date documentation of a library")
    def get_library_docs(context7CompatibleLibraryID: str, topic: str = "") -> str:
        calls.append(("get-library-docs", {"context7CompatibleLibraryID": context7CompatibleLibraryID, "topic": topic}))
        return f"{context7CompatibleLibraryID}: {topic}: encrypt personal data at rest (Art. 32)"


SCANNER_SUITE = """
version: "1.0"
# not part of compliance-auditor: its own suite tests audit-reporter only, which has no MCP
# server; this case runs compliance-scanner, whose context7 server is discoverable
defaults:
  mocks: compliance_mocks
tests:
  - name: gdpr_audit_reads_context7
    payload: '{"prompt": "GDPR audit"}'
    expected_tool_calls:
      - search_tools
      - get-library-docs: 'params.topic == "encryption" and result.is_error == false'
    expected_result: output.overall_posture == "yellow"
"""

REPORT = {"overall_posture": "yellow", "compliance_percentage": 70,
          "findings": [{"title": "Encryption at rest missing", "severity": "high",
                        "description": "GDPR Art. 32 requires it"}]}


def compliance_model(body: dict[str, Any]) -> Reply:
    """The fake model for both agents, as their prompts ask them to work."""
    system = body["messages"][0]["content"]
    tools = [m for m in body["messages"] if m["role"] == "tool"]
    if "You are a compliance officer" in system:  # compliance-scanner (audit-reporter names the scanner too)
        if not tools:
            return tool_call("search_tools", {"query": "library documentation"})
        if len(tools) == 1:
            assert "get-library-docs" in tools[0]["content"]
            return tool_call("use_tool", {"tool_name": "get-library-docs",
                                          "arguments": {"context7CompatibleLibraryID": "/docs/gdpr", "topic": "encryption"}})
        assert "Art. 32" in mcp_text(tools[-1]["content"])
        return text(json.dumps(REPORT))
    if not tools:
        return tool_call("get_audit_history", {})
    return text("Executive summary: posture yellow, one red finding. Compliance score: 70%, trend: first audit.")


def test_compliance_auditor_records_against_a_context7_stand_in_and_replays_offline(
    project: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(CORPUS, project.root, dirs_exist_ok=True)
    project.write("tests/compliance-scanner.yaml", SCANNER_SUITE)
    with McpTestServer(context7_tools, name="context7") as context7, FakeProvider(compliance_model) as fp:
        monkeypatch.setenv("OPENAI_API_BASE", fp.base_url)
        recorded = project.run("--connic-record-mode", "once", *ALIASES,
                               "--connic-mcp-url", f"context7={context7.url}")
    # the authors' case (audit-reporter: status completed, get_audit_history called) and ours
    recorded.assert_outcomes(passed=2)
    assert context7.calls == [("get-library-docs", {"context7CompatibleLibraryID": "/docs/gdpr", "topic": "encryption"})]
    kinds = [(c["kind"], c["name"]) for c in calls_of(project, "compliance-scanner", "gdpr_audit_reads_context7")]
    assert kinds == [("mcp_tools", "context7"), ("mcp", "context7/get-library-docs")]

    with no_network(monkeypatch) as attempts:
        replayed = project.run(*ALIASES)  # the agent's own url (mcp.context7.com) is never contacted
    replayed.assert_outcomes(passed=2)
    assert attempts == []
