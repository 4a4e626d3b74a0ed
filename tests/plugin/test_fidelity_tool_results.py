"""Issue 16, tool results and tool runs as Connic handles them: ``ToolFile`` results reach the
model as file parts, raw ``bytes`` are refused, the calls of one model turn run concurrently
(the first ``StopProcessing`` wins), ``TransferCall`` and ``voice_config`` are refused, and
an agent may have at most 100 tools (docs/fidelity.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helpers.project import ConnicProject

pytestmark = pytest.mark.timeout(120)

TOOLS = '''
import asyncio

from connic import StopProcessing, ToolFile, TransferCall

EVENTS = {}


def _event(context):
    return EVENTS.setdefault(context["run_id"], asyncio.Event())


def report() -> ToolFile:
    """A PDF report."""
    return ToolFile(mime_type="application/pdf", data=b"%PDF-1", name="report.pdf")


def mixed() -> list:
    """Text, data and a file by uri."""
    return ["see the file", {"pages": 2}, ToolFile(mime_type="image/png", uri="https://example.com/a.png")]


def raw() -> bytes:
    """Raw bytes."""
    return b"%PDF-1"


async def waiter(context) -> str:
    """Waits for the signal of another call of the same turn (a hang guard of 5 s)."""
    try:
        await asyncio.wait_for(_event(context).wait(), 5)
        return "overlapped"
    except asyncio.TimeoutError:
        return "alone"


async def signaller(context) -> str:
    """Signals the waiter."""
    _event(context).set()
    return "signalled"


async def slow_stop(context) -> str:
    """Stops the run once the fast one has had its chance (a hang guard of 5 s)."""
    try:
        await asyncio.wait_for(_event(context).wait(), 5)
    except asyncio.TimeoutError:
        pass
    raise StopProcessing("slow")


async def fast_stop(context) -> str:
    """Stops the run at once."""
    _event(context).set()
    raise StopProcessing("fast")


def transfer() -> str:
    """Transfers the call."""
    raise TransferCall("+4930123456789")
'''

#: one turn with the case's payload as the calls (names separated by spaces), then the results
TURN_MODEL = '''
import json
from pytest_connic.models.base import ModelResponse, ToolCallRequest


def pytest_connic_make_model(config, agent, model, case, run_index):
    def answer(request):
        results = [m["content"] for m in request.messages if m["role"] == "tool"]
        if not results:
            names = request.messages[0]["content"].split()
            return ModelResponse(tool_calls=[ToolCallRequest(f"c{i}", n, {}) for i, n in enumerate(names)])
        return json.dumps(results)
    return answer
'''


@pytest.fixture
def toolbox(project: ConnicProject) -> ConnicProject:
    project.tool("box", TOOLS)
    project.agent("box", tools=["box.*"])
    project.write("conftest.py", TURN_MODEL)
    return project


def _runs(project: ConnicProject) -> dict[str, dict[str, Any]]:
    cases = json.loads((project.root / "report.json").read_text("utf-8"))["cases"]
    return {c["test_name"]: c["runs_detail"][0] for c in cases}


def test_tool_files_reach_the_model_as_file_parts_and_raw_bytes_are_refused(toolbox: ConnicProject) -> None:
    toolbox.suite("box", '''
        tests:
          - name: one file
            payload: report
            expected_result: >-
              output[0] == [{"type": "file", "mime_type": "application/pdf", "data": "JVBERi0x", "name": "report.pdf"}]
          - name: files alongside text and data
            payload: mixed
            expected_result: >-
              output[0] == [{"type": "text", "text": "see the file"}, {"type": "text", "text": '{"pages": 2}'},
                            {"type": "file", "mime_type": "image/png", "uri": "https://example.com/a.png"}]
          - name: raw bytes
            payload: raw
            expected_result: >-
              output[0] == "Error: box.raw: the tool returned raw bytes, which Connic rejects because they do
              not identify a MIME type; return connic.ToolFile(mime_type=..., data=...) instead"
    ''')

    result = toolbox.run("--connic-json", "report.json")

    result.assert_outcomes(passed=3)
    runs = _runs(toolbox)
    # the trace shows what the file is, not its bytes
    assert runs["one file"]["tool_calls"][0]["result"] == {
        "tool_file": {"mime_type": "application/pdf", "name": "report.pdf", "size_bytes": 6}}
    assert "raw bytes" in runs["raw bytes"]["tool_calls"][0]["error"]


def test_the_calls_of_one_turn_run_concurrently_and_the_first_stop_processing_wins(toolbox: ConnicProject) -> None:
    toolbox.suite("box", '''
        tests:
          - name: concurrent
            payload: waiter signaller
            expected_result: output == ["overlapped", "signalled"]
          - name: first stop wins
            payload: slow_stop fast_stop
            expected_result: output == "fast"
    ''')

    result = toolbox.run("--connic-json", "report.json")

    result.assert_outcomes(passed=2)
    calls = _runs(toolbox)["first stop wins"]["tool_calls"]
    assert [c["name"] for c in calls] == ["slow_stop", "fast_stop"]  # the model's order
    assert calls[0]["error"] == "cancelled: another call of this model turn ended the run (StopProcessing)"
    assert calls[1]["error"] is None  # the winner is traced as the call that ended the run


def test_transfer_call_and_voice_agents_are_refused(toolbox: ConnicProject) -> None:
    toolbox.agent("caller", model="openai/gpt-4o-realtime-preview", voice_config={"voice": "alloy"})
    toolbox.suite("box", '''
        tests:
          - name: transfer
            payload: transfer
    ''')
    toolbox.suite("caller", '''
        tests:
          - name: a call
            payload: hello
    ''')

    result = toolbox.run()

    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines_random([
        ("*TransferCall(+4930123456789) raised: transferring a voice call is a feature of voice agents, "
        "and a voice call cannot be tested offline*"),
        ("*agents/caller.yaml: agent 'caller' is a voice agent (voice_config): voice calls cannot be tested "
        "offline; pytest-connic runs text agents only*"),
    ])


def test_an_agent_may_have_at_most_100_tools(project: ConnicProject) -> None:
    project.tool("many", "".join(f'\ndef t{i}() -> str:\n    """Tool {i}."""\n    return "{i}"\n' for i in range(100)))
    project.tool("one", 'def extra() -> str:\n    """One more."""\n    return "x"\n')
    project.agent("full", tools=["many.*"])
    project.agent("over", tools=["many.*"], discoverable_tools=["one.extra"])
    # the SDK's README: "Generated input tools count toward the 100-tool agent limit"
    project.agent("asks", tools=["many.*"], approval={"inputs": [
        {"get_mfa": {"prompt": "Ask for the code.", "label": "MFA code"}}]})
    for agent in ("full", "over", "asks"):
        project.suite(agent, f'''
            tests:
              - name: {agent}
                payload: hi
        ''')
        project.replies(agent, agent, "done")

    result = project.run()

    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines_random([
        ("*agents/over.yaml: agent 'over' has 101 tools (tools and discoverable_tools after wildcard "
        "expansion); Connic allows at most 100 tools per agent*"),
        ("*agents/asks.yaml: agent 'asks' has 101 tools (tools and discoverable_tools after wildcard "
        "expansion, and 1 approval input tool); Connic allows at most 100 tools per agent*"),
    ])
