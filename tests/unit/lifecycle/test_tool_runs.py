"""Issue 16, tool results and tool runs as Connic handles them, below pytest: ``ToolFile`` results
reach the model as file parts, raw ``bytes`` are refused, the calls of one model turn run
concurrently (the first ``StopProcessing`` wins), ``TransferCall`` and ``voice_config`` are refused,
and an agent may have at most 100 tools (docs/fidelity.md)."""

from __future__ import annotations

import gc
import json
import logging
from typing import Any

import pytest

from helpers.harness import CaseProject, HookHost, first_failure
from pytest_connic.models.base import ModelRequest, ModelResponse, ToolCallRequest
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord

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


async def stop_a() -> str:
    """Stops the run at once."""
    raise StopProcessing("a")


async def stop_b() -> str:
    """Stops the run at once too (its call ends in the same step of the loop as stop_a's)."""
    raise StopProcessing("b")
'''


def turn_model(agent: Any, model: str, case: Any, run_index: int) -> object:
    """One turn with the case's payload as the calls (names separated by spaces), then the results."""

    def answer(request: ModelRequest) -> object:
        results = [m["content"] for m in request.messages if m["role"] == "tool"]
        if not results:
            names = request.messages[0]["content"].split()
            return ModelResponse(tool_calls=[ToolCallRequest(f"c{i}", n, {}) for i, n in enumerate(names)])
        return json.dumps(results)

    return answer


@pytest.fixture
def toolbox(case_project: CaseProject) -> CaseProject:
    case_project.host = HookHost(make_model=turn_model)
    case_project.tool("box", TOOLS)
    case_project.agent("box", tools=["box.*"])
    return case_project


def only(outcome: CaseOutcome) -> RunRecord:
    (record,) = outcome.records
    return record


def test_tool_files_reach_the_model_as_file_parts_and_raw_bytes_are_refused(toolbox: CaseProject) -> None:
    toolbox.suite("box", '''
        tests:
          - name: one file
            payload: report
          - name: files alongside text and data
            payload: mixed
          - name: raw bytes
            payload: raw
    ''')

    runs = {name: only(o) for name, o in toolbox.cases("box").items()}

    assert runs["one file"].output == [
        [{"type": "file", "mime_type": "application/pdf", "data": "JVBERi0x", "name": "report.pdf"}]]
    assert runs["files alongside text and data"].output == [[
        {"type": "text", "text": "see the file"}, {"type": "text", "text": '{"pages": 2}'},
        {"type": "file", "mime_type": "image/png", "uri": "https://example.com/a.png"}]]
    refusal = ("box.raw: the tool returned raw bytes, which Connic rejects because they do not identify a MIME "
               "type; return connic.ToolFile(mime_type=..., data=...) instead")
    assert runs["raw bytes"].output == [f"Error: {refusal}"]
    # the trace shows what the file is, not its bytes
    assert runs["one file"].tool_calls[0].result == {
        "tool_file": {"mime_type": "application/pdf", "name": "report.pdf", "size_bytes": 6}}
    assert runs["raw bytes"].tool_calls[0].error == refusal


def test_the_calls_of_one_turn_run_concurrently_and_the_first_stop_processing_wins(toolbox: CaseProject) -> None:
    toolbox.suite("box", '''
        tests:
          - name: concurrent
            payload: waiter signaller
          - name: first stop wins
            payload: slow_stop fast_stop
    ''')

    runs = {name: only(o) for name, o in toolbox.cases("box").items()}

    assert runs["concurrent"].output == ["overlapped", "signalled"]
    stopped = runs["first stop wins"]
    assert (stopped.status, stopped.output) == ("completed", "fast")
    calls = stopped.tool_calls
    assert [c.name for c in calls] == ["slow_stop", "fast_stop"]  # the model's order
    assert calls[0].error == "cancelled: another call of this model turn ended the run (StopProcessing)"
    assert calls[1].error is None  # the winner is traced as the call that ended the run


def test_calls_that_end_the_run_together_leave_no_exception_unretrieved(
        toolbox: CaseProject, caplog: pytest.LogCaptureFixture) -> None:
    """Of two calls ending the run in one step of the loop, the first wins; the other's exception is
    retrieved, not logged by asyncio as "never retrieved" when its task is collected (a log that, on
    Python 3.11, can break an ``ast.parse`` it interrupts: a project then loads without its tools)."""
    toolbox.suite("box", '''
        tests:
          - name: both stop
            payload: stop_a stop_b
    ''')

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        record = only(toolbox.case("box", "both stop"))
        gc.collect()

    assert (record.status, record.output) == ("completed", "a")
    assert [(c.name, c.error) for c in record.tool_calls] == [
        ("stop_a", None), ("stop_b", "cancelled: another call of this model turn ended the run (StopProcessing)")]
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


def test_transfer_call_and_voice_agents_are_refused(toolbox: CaseProject) -> None:
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

    transfer = toolbox.case("box", "transfer")
    voice = toolbox.case("caller", "a call")

    assert not transfer.verdict_passed and not voice.verdict_passed
    assert ("TransferCall(+4930123456789) raised: transferring a voice call is a feature of voice agents, "
            "and a voice call cannot be tested offline") in first_failure(transfer)
    assert ("agents/caller.yaml: agent 'caller' is a voice agent (voice_config): voice calls cannot be tested "
            "offline; pytest-connic runs text agents only") in first_failure(voice)


def test_an_agent_may_have_at_most_100_tools(case_project: CaseProject) -> None:
    case_project.tool("many", "".join(f'\ndef t{i}() -> str:\n    """Tool {i}."""\n    return "{i}"\n' for i in range(100)))
    case_project.tool("one", 'def extra() -> str:\n    """One more."""\n    return "x"\n')
    case_project.agent("full", tools=["many.*"])
    case_project.agent("over", tools=["many.*"], discoverable_tools=["one.extra"])
    # the SDK's README: "Generated input tools count toward the 100-tool agent limit"
    case_project.agent("asks", tools=["many.*"], approval={"inputs": [
        {"get_mfa": {"prompt": "Ask for the code.", "label": "MFA code"}}]})
    for agent in ("full", "over", "asks"):
        case_project.suite(agent, f'''
            tests:
              - name: {agent}
                payload: hi
        ''')
        case_project.replies(agent, agent, "done")

    full, over, asks = (case_project.case(agent, agent) for agent in ("full", "over", "asks"))

    assert full.verdict_passed and only(full).output == "done"
    assert not over.verdict_passed and not asks.verdict_passed
    assert ("agents/over.yaml: agent 'over' has 101 tools (tools and discoverable_tools after wildcard "
            "expansion); Connic allows at most 100 tools per agent") in first_failure(over)
    assert ("agents/asks.yaml: agent 'asks' has 101 tools (tools and discoverable_tools after wildcard "
            "expansion, and 1 approval input tool); Connic allows at most 100 tools per agent") in first_failure(asks)


def test_results_stops_and_refusals_keep_their_meaning_across_the_process_boundary(toolbox: CaseProject) -> None:
    """Under process isolation the tools run in a worker: a ``ToolFile`` (and raw bytes) come back
    as the values they were, a turn's calls share the run's worker and overlap there, the first
    ``StopProcessing`` still wins, and ``TransferCall`` is still known for what it is."""
    toolbox.suite("box", '''
        tests:
          - name: one file
            payload: report
          - name: raw bytes
            payload: raw
          - name: concurrent
            payload: waiter signaller
          - name: first stop wins
            payload: slow_stop fast_stop
          - name: transfer
            payload: transfer
    ''')

    outcomes = toolbox.cases("box", isolation="process")

    runs = {name: only(o) for name, o in outcomes.items()}
    assert runs["one file"].output == [
        [{"type": "file", "mime_type": "application/pdf", "data": "JVBERi0x", "name": "report.pdf"}]]
    assert runs["one file"].tool_calls[0].result == {
        "tool_file": {"mime_type": "application/pdf", "name": "report.pdf", "size_bytes": 6}}
    assert str(runs["raw bytes"].tool_calls[0].error).startswith("box.raw: the tool returned raw bytes")
    assert runs["concurrent"].output == ["overlapped", "signalled"]
    stopped = runs["first stop wins"]
    assert (stopped.status, stopped.output) == ("completed", "fast")
    assert [c.error for c in stopped.tool_calls] == [
        "cancelled: another call of this model turn ended the run (StopProcessing)", None]
    assert str(runs["transfer"].error).startswith("TransferCall(+4930123456789) raised: transferring a voice call")
