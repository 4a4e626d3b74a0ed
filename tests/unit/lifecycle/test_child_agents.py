"""Child agents below pytest (spec §7): ``trigger_agent`` runs the child (``TriggerRecord.child_run``),
``trigger_agent_at`` is recorded with when it would start, and ``expected_child_agents`` asserts on
the tree (its failures are the parent run's)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from helpers.harness import CaseProject
from pytest_connic.records.events import TriggerEvent
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord
from pytest_connic.runtime.children import MAX_DEPTH

WORK_TOOLS = '''
import asyncio

from connic.tools import trigger_agent


def step(x: int) -> dict:
    """Add one.

    Args:
        x: a number
    """
    return {"x": x + 1}


def lookup(key: str) -> dict:
    """Look a key up (mocked in the tests).

    Args:
        key: the key
    """
    return {"real": key}


def body_c(payload: dict) -> dict:
    """The body of the tool agent c."""
    return {"c_got": payload}


async def nap(payload: dict) -> dict:
    """The body of the tool agent slowpoke."""
    await asyncio.sleep(payload["seconds"])
    return {"slept": payload["seconds"]}


async def dispatch(target: str, note: str) -> dict:
    """Trigger another agent from code.

    Args:
        target: the agent
        note: what to tell it
    """
    result = await trigger_agent(target, {"note": note})
    return {"child_status": result["status"], "child_response": result["response"]}
'''


@pytest.fixture
def tree(case_project: CaseProject) -> CaseProject:
    """``a`` (LLM) triggers ``b`` (LLM, gated ``work.step``) triggers ``c`` (tool agent)."""
    case_project.tool("work", WORK_TOOLS)
    case_project.agent("a", tools=["trigger_agent", "trigger_agent_at", "work.dispatch"])
    case_project.agent("b", tools=["trigger_agent", "work.step", "work.lookup"], approval={"tools": ["work.step"]})
    case_project.agent("c", type="tool", tool_name="work.body_c")
    case_project.agent("slowpoke", type="tool", tool_name="work.nap")
    return case_project


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def turns(*items: Any) -> list[dict[str, Any]]:
    """Cassette turns: a string is a final answer, a list holds tool calls."""
    return [{"content": i} if isinstance(i, str) else {"tool_calls": list(i)} for i in items]


def trigger(agent: str, payload: Any, **more: Any) -> dict[str, Any]:
    return call("trigger_agent", agent_name=agent, payload=payload, **more)


def only(outcome: CaseOutcome) -> RunRecord:
    (record,) = outcome.records
    return record


def child(record: RunRecord, index: int = 0) -> RunRecord:
    run = record.triggers[index].child_run
    assert run is not None, record.triggers[index]
    return run


def test_a_three_level_chain_asserted_with_nested_expectations(tree: CaseProject) -> None:
    tree.suite("a", """
        version: "1.0"
        tests:
          - name: chain
            payload: go
            approval_decisions:
              - {tool: work.step, decision: approve}
            expected_tool_calls:
              - trigger_agent: params.agent_name == "b" and result.status == "completed"
            expected_child_agents:
              b:
                expected_payload: payload.n == 1
                expected_result: output.done == true and status == "completed"
                expected_tool_calls:
                  - work.step: result.x == 2
                expected_tool_call_order: [step, trigger_agent]
                expected_child_agents:
                  c:
                    expected_payload: >-
                      payload.k == "v" and payload_raw == '{"k": "v"}'
                    expected_result: output.c_got.k == "v"
          - name: grandchild mismatch
            payload: go
            approval_decisions:
              - {tool: work.step, decision: approve}
            expected_child_agents:
              b:
                expected_child_agents:
                  c:
                    expected_result: output.c_got.k == "w"
    """)
    run = {"turns": turns([trigger("b", {"n": 1})], "ok"),
           "children": {"b": [{"turns": turns([call("step", x=1), trigger("c", '{"k": "v"}')], '{"done": true}')}]}}
    tree.cassette("a", "chain", [run])
    tree.cassette("a", "grandchild mismatch", [run])
    outcomes = tree.cases("a")
    assert outcomes["chain"].verdict_passed, outcomes["chain"].failure_reason
    assert only(outcomes["grandchild mismatch"]).failures == [
        ("child 'b': no waited trigger satisfied the expectations: child 'c': no waited trigger satisfied the "
        "expectations: expected_result not satisfied: output.c_got.k == \"w\" where output.c_got.k = \"v\"")]
    chain = only(outcomes["chain"])
    (to_b,) = chain.triggers
    b = child(chain)
    (to_c,) = b.triggers
    c = child(b)
    assert (to_b.agent_name, to_b.wait_for_response, to_b.payload) == ("b", True, {"n": 1})
    assert (to_c.agent_name, to_c.payload, to_c.payload_raw) == ("c", {"k": "v"}, '{"k": "v"}')
    assert [b.agent_name, c.agent_name] == ["b", "c"]
    assert [t.agent for t in chain.events if isinstance(t, TriggerEvent)] == ["b"]
    assert [(x.name, x.approval) for x in b.tool_calls] == [("step", "approved"), ("trigger_agent", None)]
    assert c.tool_calls[0].result == {"c_got": {"k": "v"}}
    assert chain.tool_calls[0].result["response"] == '{"done": true}'  # type: ignore[index]


def test_fire_and_forget_children_run_in_the_background(tree: CaseProject) -> None:
    tree.suite("a", """
        version: "1.0"
        tests:
          - name: payload only
            payload: go
            approval_decisions:
              - {tool: work.step, decision: approve}
            expected_child_agents:
              b:
                expected_triggered: 2
                expected_payload: payload.which == "first"
          - name: run assertions need a waited trigger
            payload: go
            approval_decisions:
              - {tool: work.step, decision: approve}
            expected_child_agents:
              b:
                expected_payload: payload.which == "first"
                expected_result: output.which == "first"
          - name: cassette entries follow trigger order
            payload: go
            approval_decisions:
              - {tool: work.step, decision: approve}
            expected_child_agents:
              b:
                expected_result: output.which == "second"
    """)
    # b's before middleware is slow for the first child, so the waited second one would reach its
    # model first: the cassette entries still follow the order of the triggers
    tree.write("middleware/b.py", '''
        import time


        def before(content, context):
            if context["payload"].get("slow"):
                time.sleep(0.3)
            return content
    ''')
    # one model turn starts b twice: fire-and-forget first, then waited
    run = {"turns": turns([trigger("b", {"which": "first", "slow": True}, wait_for_response=False),
                           trigger("b", {"which": "second"})], "ok"),
           "children": {"b": [{"turns": turns([call("step", x=1)], '{"which": "first"}')},
                              {"turns": turns('{"which": "second"}')}]}}
    for case in ("payload only", "run assertions need a waited trigger", "cassette entries follow trigger order"):
        tree.cassette("a", case, [run])
    outcomes = tree.cases("a")
    assert [o.verdict_passed for o in outcomes.values()] == [True, False, True]
    (failure,) = only(outcomes["run assertions need a waited trigger"]).failures
    assert failure.startswith("child 'b': no waited trigger satisfied the expectations: expected_pay")
    detail = only(outcomes["payload only"])
    background, waited = detail.triggers
    assert (background.wait_for_response, waited.wait_for_response) == (False, True)
    assert detail.tool_calls[0].result == {"run_id": child(detail, 0).run_id}
    # the background child ran to completion, traced with its own (approved) tool call
    assert child(detail, 0).status == "completed"
    assert [(x.result, x.approval) for x in child(detail, 0).tool_calls] == [({"x": 2}, "approved")]
    assert child(detail, 1).output == {"which": "second"}


def test_fire_and_forget_alone_cannot_satisfy_run_assertions(tree: CaseProject) -> None:
    tree.suite("a", """
        version: "1.0"
        tests:
          - name: only background
            payload: go
            expected_child_agents:
              c:
                expected_result: output.c_got.k == 1
    """)
    tree.replies("a", "only background", [("trigger_agent", {"agent_name": "c", "payload": {"k": 1},
                                                             "wait_for_response": False})], "ok")
    (failure,) = only(tree.case("a", "only background")).failures
    assert "child 'c': assertions require wait_for_response=True" in failure


def test_expected_payload_over_several_triggers(tree: CaseProject) -> None:
    tree.suite("a", """
        version: "1.0"
        tests:
          - name: any trigger matches
            payload: go
            expected_child_agents:
              c:
                expected_triggered: 3
                expected_payload: >-
                  payload.k == 2 and payload_raw == '{"k": 2}'
          - name: plain text payload
            payload: go
            expected_child_agents:
              c:
                expected_payload: payload == "plain text" and payload_raw == "plain text"
          - name: payload and result from the same trigger
            payload: go
            expected_child_agents:
              c:
                expected_payload: payload.k == 1 and payload_raw == ""
                expected_result: output.c_got.k == 1
          - name: payload and result from different triggers
            payload: go
            expected_child_agents:
              c:
                expected_payload: payload.k == 1
                expected_result: output.c_got.k == 2
          - name: too few triggers
            payload: go
            expected_child_agents:
              c: {expected_triggered: 4}
          - name: no trigger matches
            payload: go
            expected_child_agents:
              c: {expected_payload: payload.k == 9}
          - name: never triggered
            payload: go
            expected_child_agents:
              b: {}
    """)
    payloads = ({"k": 1}, '{"k": 2}', "plain text")
    three = [("trigger_agent", {"agent_name": "c", "payload": p}) for p in payloads]
    for case in ("any trigger matches", "plain text payload", "payload and result from the same trigger",
                 "payload and result from different triggers", "too few triggers", "no trigger matches",
                 "never triggered"):
        tree.replies("a", case, three, "ok")
    outcomes = tree.cases("a")
    failures = {name: only(o).failures for name, o in outcomes.items()}
    assert failures == {
        "any trigger matches": [],
        "plain text payload": [],
        "payload and result from the same trigger": [],
        "payload and result from different triggers": [
            ("child 'c': no waited trigger satisfied the expectations: expected_result not satisfied: "
            "output.c_got.k == 2 where output.c_got.k = 1")],
        "too few triggers": ["child 'c' triggered 3 times, expected >= 4"],
        "no trigger matches": [
            "child 'c': no trigger satisfied expected_payload: payload.k == 9 where payload.k = 1"],
        "never triggered": ["child 'b' triggered 0 times, expected >= 1"],
    }
    assert [t.payload_raw for t in only(outcomes["any trigger matches"]).triggers] == ["", '{"k": 2}', "plain text"]


MOCKS = '''
def mock_work_lookup(tool_name, params, context):
    return {"mocked": params["key"], "agent": context["agent_name"]}
'''


def test_mocks_and_approval_decisions_apply_inside_a_child(tree: CaseProject) -> None:
    tree.write("tests/mocks/child_mocks.py", MOCKS)
    tree.suite("a", """
        version: "1.0"
        tests:
          - name: mocked and approved in the child
            payload: go
            mocks: child_mocks
            strict_approval_decisions: true
            approval_decisions:
              - {tool: work.step, decision: approve}
            expected_child_agents:
              b:
                expected_tool_calls:
                  - work.lookup: result.mocked == "k1" and result.agent == "b"
                  - work.step: result.x == 2
          - name: unanswered approval in the child
            payload: go
            mocks: child_mocks
            expected_tool_calls:
              - trigger_agent: result.status == "awaiting_approval"
            expected_child_agents:
              b: {expected_result: status == "awaiting_approval"}
          - name: strict mocks in the child fail the case
            payload: go
            mocks: child_mocks
            strict_mocks: true
            approval_decisions:
              - {tool: work.step, decision: approve}
    """)
    run = {"turns": turns([trigger("b", {"n": 1})], "ok"),
           "children": {"b": [{"turns": turns([call("lookup", key="k1"), call("step", x=1)], '{"done": true}')}]}}
    for case in ("mocked and approved in the child", "unanswered approval in the child",
                 "strict mocks in the child fail the case"):
        tree.cassette("a", case, [run])
    outcomes = tree.cases("a")
    assert [o.verdict_passed for o in outcomes.values()] == [True, True, False]
    # strict_mocks: the mocked lookup passes, the real step (no mock) would run: the child aborts
    strict = only(outcomes["strict mocks in the child fail the case"])
    reason = "strict_mocks: work.step has no mock (tried mock_work_step, mock_work, mock in tests/mocks/child_mocks.py)"
    assert (child(strict).status, child(strict).error) == ("failed", reason)
    # the child's failure is the parent run's, though the parent completed (its model read the result)
    assert (strict.status, strict.failures) == ("completed", [f"in child agent 'b' (run {child(strict).run_id}): {reason}"])
    mocked = child(only(outcomes["mocked and approved in the child"]))
    lookup, step = mocked.tool_calls
    assert (lookup.mocked, lookup.mock_function, lookup.result) == (True, "mock_work_lookup", {"mocked": "k1", "agent": "b"})
    assert (step.approval, step.mocked, step.result) == ("approved", False, {"x": 2})
    pending = only(outcomes["unanswered approval in the child"])
    assert (child(pending).status, [x.approval for x in child(pending).tool_calls]) == (
        "awaiting_approval", [None, "pending"])


def test_trigger_timeout_seconds(tree: CaseProject) -> None:
    tree.suite("a", """
        version: "1.0"
        tests:
          - name: slow child
            payload: go
            expected_tool_calls:
              - trigger_agent: result.status == "timeout" and "timed out" in result.error
            expected_child_agents:
              slowpoke:
                expected_result: status == "failed" and "timeout_seconds of trigger_agent" in error
    """)
    tree.replies("a", "slow child", [("trigger_agent", {"agent_name": "slowpoke", "payload": {"seconds": 60},
                                                        "timeout_seconds": 1})], "ok")
    outcome = tree.case("a", "slow child")
    assert outcome.verdict_passed, outcome.failure_reason
    record = only(outcome)
    assert record.tool_calls[0].result["status"] == "timeout"  # type: ignore[index]
    slow = child(record)
    assert slow.status == "failed" and "timeout_seconds of trigger_agent" in (slow.error or "")
    assert slow.tool_calls[0].has_result is False  # the child's nap never returned: it was cut off


def test_trigger_agent_at_is_recorded_with_scheduled_at(tree: CaseProject) -> None:
    tree.suite("a", """
        version: "1.0"
        tests:
          - name: scheduled
            payload: go
            expected_tool_calls:
              - trigger_agent_at: result.status == "scheduled" and params.delay.h == 2
            expected_child_agents:
              c: {expected_payload: payload.report == "daily"}
          - name: scheduled children cannot be asserted as runs
            payload: go
            expected_child_agents:
              c: {expected_result: output.c_got.report == "daily"}
    """)
    scheduled = [("trigger_agent_at", {"agent_name": "c", "payload": {"report": "daily"}, "delay": {"h": 2}}),
                 ("trigger_agent_at", {"agent_name": "c", "payload": {}, "delay": {"h": 1}, "unix_timestamp": 1}),
                 ("trigger_agent_at", {"agent_name": "c", "payload": {}, "unix_timestamp": 1_000_000_000}),
                 ("trigger_agent_at", {"agent_name": "c", "payload": {}, "delay": {"d": 31}})]
    tree.replies("a", "scheduled", scheduled, "ok")
    tree.replies("a", "scheduled children cannot be asserted as runs", scheduled, "ok")
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    outcomes = tree.cases("a")
    after = dt.datetime.now(dt.timezone.utc)
    assert outcomes["scheduled"].verdict_passed, outcomes["scheduled"].failure_reason
    (failure,) = only(outcomes["scheduled children cannot be asserted as runs"]).failures
    assert "child 'c': assertions require wait_for_response=True" in failure
    detail = only(outcomes["scheduled"])
    (record,) = detail.triggers
    assert (record.tool, record.wait_for_response, record.child_run) == ("trigger_agent_at", False, None)  # never run
    assert record.scheduled_at is not None
    when = dt.datetime.fromisoformat(record.scheduled_at.replace("Z", "+00:00"))
    assert before + dt.timedelta(hours=2) <= when <= after + dt.timedelta(hours=2)  # two hours after the call
    ok, both, past, far = detail.tool_calls
    assert ok.result["scheduled_at"] == record.scheduled_at  # type: ignore[index]
    assert "exactly one of delay or unix_timestamp" in (both.error or "")
    assert "is not in the future" in (past.error or "")
    assert "at most 30 days ahead" in (far.error or "")


@pytest.mark.parametrize("isolation", ["none", "process"])  # connic.tools.trigger_agent from user code
def test_a_child_triggered_from_tool_code(tree: CaseProject, isolation: str) -> None:
    tree.suite("a", """
        version: "1.0"
        tests:
          - name: from code
            payload: go
            expected_tool_calls:
              - work.dispatch: result.child_status == "completed" and "hi" in result.child_response
            expected_child_agents:
              c:
                expected_payload: payload.note == "hi"
                expected_result: output.c_got.note == "hi"
    """)
    tree.replies("a", "from code", [("dispatch", {"target": "c", "note": "hi"})], "ok")
    outcome = tree.case("a", "from code", isolation=isolation)
    assert outcome.verdict_passed, outcome.failure_reason
    record = only(outcome)
    assert [(t.agent_name, t.tool, t.payload) for t in record.triggers] == [("c", "trigger_agent", {"note": "hi"})]
    assert child(record).output == {"c_got": {"note": "hi"}}


#: a tool agent that triggers itself one level deeper, and reports how its child ended
CHAIN_TOOLS = '''
from connic.tools import trigger_agent


async def down(payload: dict) -> dict:
    """Trigger the next level."""
    below = await trigger_agent("deep", {"level": payload["level"] + 1})
    return {"level": payload["level"], "below": below["status"], "error": below.get("error")}


async def probe(payload: dict) -> dict:
    """Call trigger_agent with the arguments in the payload; say what it raised."""
    said = []
    for args in payload["calls"]:
        try:
            await trigger_agent(*args)
            said.append("ran")
        except (TypeError, ValueError) as exc:
            said.append(f"{type(exc).__name__}: {exc}")
    return {"said": said}
'''


def test_a_trigger_chain_stops_at_max_depth(case_project: CaseProject) -> None:
    case_project.tool("chain", CHAIN_TOOLS)
    case_project.agent("deep", type="tool", tool_name="chain.down")
    case_project.suite("deep", """
        tests:
          - name: recursion
            payload: '{"level": 0}'
            timeout_s: 600
    """)
    record = only(case_project.case("deep", "recursion"))
    chain = [record]
    while chain[-1].triggers and chain[-1].triggers[0].child_run is not None:
        chain.append(child(chain[-1]))
    # the root and MAX_DEPTH levels below it ran; the deepest one's trigger was refused
    assert len(chain) == MAX_DEPTH + 1
    deepest = chain[-1]
    assert (deepest.status, deepest.triggers) == ("failed", [])
    assert f"trigger chain deeper than {MAX_DEPTH} levels" in (deepest.error or "")
    assert [run.status for run in chain[:-1]] == ["completed"] * MAX_DEPTH
    assert chain[-2].output == {"level": MAX_DEPTH - 1, "below": "failed", "error": deepest.error}


def test_trigger_agents_arguments_are_checked_before_any_child_runs(case_project: CaseProject) -> None:
    case_project.tool("chain", CHAIN_TOOLS)
    case_project.agent("probe", type="tool", tool_name="chain.probe")
    case_project.agent("deep", type="tool", tool_name="chain.down")
    calls = [["nobody", {}], ["deep", 42], ["deep", {"level": 99}, True, 0], ["deep", {"level": 99}, True, "60"]]
    case_project.suite("probe", f"""
        tests:
          - name: bad arguments
            payload: '{json.dumps({"calls": calls})}'
    """)
    record = only(case_project.case("probe", "bad arguments"))
    assert record.status == "completed", record.error
    assert record.output == {"said": [
        "ValueError: unknown agent 'nobody'; agents in this project: deep, probe",
        "TypeError: payload must be a dict, a list or a string, got int",
        "ValueError: timeout_seconds must be a positive number, got 0",
        "ValueError: timeout_seconds must be a positive number, got '60'",
    ]}
    assert record.triggers == []  # nothing was recorded, nothing ran
