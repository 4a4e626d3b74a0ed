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

from helpers.harness import CaseProject, HookHost
from pytest_connic.models.base import ModelRequest, ModelResponse, ToolCallRequest
from pytest_connic.records.run import CaseOutcome, RunRecord

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
