"""Connic's sessions (``session:``) below pytest: the history a later run sees, the key resolved after
``before`` middleware, ``ttl`` on the session clock, ``files.session_only`` keyed on the session
(docs/lifecycle.md "Sessions"). A session's store is its runtime's, as it is a pytest session's; the
cases that share a session kept on one xdist worker are tests/plugin/test_sessions.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helpers.harness import CaseProject, HookHost, first_failure
from helpers.sessions import CHAT_SUITE, seen_model
from pytest_connic.models.base import ModelRequest, ModelResponse, ToolCallRequest
from pytest_connic.records.events import SessionEvent
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord


def only(outcome: CaseOutcome) -> RunRecord:
    (record,) = outcome.records
    return record


def chat(project: CaseProject, session: Any) -> dict[str, bool]:
    """The chat suite's cases in file order (one runtime, as one session): which passed."""
    fields: dict[str, Any] = {} if session is None else {"session": session}
    project.host = HookHost(make_model=seen_model)
    project.agent("chat", **fields)
    project.suite("chat", CHAT_SUITE)
    return {name: o.verdict_passed for name, o in project.cases("chat").items()}


def test_a_later_run_sees_the_history_of_its_session(case_project: CaseProject) -> None:
    assert chat(case_project, {"key": "input.user"}) == {
        "ann introduces herself": True, "ann is remembered": True, "bob has his own session": True}


def test_without_a_session_no_run_sees_another(case_project: CaseProject) -> None:
    assert chat(case_project, None) == {
        "ann introduces herself": True, "ann is remembered": False, "bob has his own session": True}


def test_session_true_is_one_session_for_every_run_of_the_agent(case_project: CaseProject) -> None:
    # bob sees ann's conversation too
    assert chat(case_project, True) == {
        "ann introduces herself": True, "ann is remembered": True, "bob has his own session": False}


def test_history_false_keeps_the_session_without_its_conversation(case_project: CaseProject) -> None:
    assert chat(case_project, {"key": "input.user", "history": False}) == {
        "ann introduces herself": True, "ann is remembered": False, "bob has his own session": True}


def adder_model(agent: Any, model: str, case: Any, run_index: int) -> object:
    def answer(request: ModelRequest) -> object:
        if request.messages[-1]["role"] == "user" and len(request.messages) == 1:
            return ModelResponse(tool_calls=[ToolCallRequest("c1", "calc_add", {"a": 2, "b": 3})])
        if request.messages[-1]["role"] == "tool":
            return "five"
        return json.dumps([{"role": m["role"], "content": m.get("content"),
                            "tools": [c["function"]["name"] for c in m.get("tool_calls") or []]}
                           for m in request.messages])

    return answer


def test_the_history_holds_the_tool_calls_and_the_final_answer(case_project: CaseProject) -> None:
    case_project.tool("calc", '''
def add(a: int, b: int) -> dict:
    """Add two numbers."""
    return {"sum": a + b}
''')
    case_project.host = HookHost(make_model=adder_model)
    case_project.agent("adder", tools=["calc.add"], session=True)
    case_project.suite("adder", '''
        tests:
          - name: adds
            payload: add 2 and 3
          - name: remembers
            payload: what did you do?
    ''')

    outcomes = case_project.cases("adder")

    assert only(outcomes["adds"]).output == "five"
    shown = only(outcomes["remembers"]).output
    assert isinstance(shown, list) and len(shown) == 5
    assert [m["role"] for m in shown] == ["user", "assistant", "tool", "assistant", "user"]
    assert shown[1]["tools"] == ["calc_add"]
    assert (shown[3]["content"], shown[4]["content"]) == ("five", "what did you do?")


def test_runs_of_one_case_share_the_session_in_order(case_project: CaseProject) -> None:
    case_project.host = HookHost(make_model=seen_model)
    case_project.agent("chat", session=True)
    case_project.suite("chat", '''
        tests:
          - name: five runs
            payload: hello
            runs: 5
            success_threshold: 100
    ''')

    outcome = case_project.case("chat", "five runs", concurrency=5)

    outputs = [r.output for r in outcome.records]
    assert all(isinstance(o, dict) for o in outputs)
    assert [o["messages"] for o in outputs if isinstance(o, dict)] == [1, 3, 5, 7, 9]


# --------------------------------------------------------------------------- the key

KEY_MIDDLEWARE = '''
async def before(content, context):
    chat_id = context["payload"].get("chat_id")
    if chat_id is not None:
        context["chat_id"] = chat_id
    return content
'''


def test_the_key_is_resolved_after_before_middleware_and_must_not_be_empty(case_project: CaseProject) -> None:
    case_project.host = HookHost(make_model=seen_model)
    case_project.agent("chat", session={"key": "context.chat_id"})
    case_project.write("middleware/chat.py", KEY_MIDDLEWARE)
    case_project.suite("chat", '''
        tests:
          - name: set by middleware
            payload: '{"chat_id": 7, "message": "hi"}'
          - name: missing
            payload: '{"message": "hi"}'
          - name: empty
            payload: '{"chat_id": "", "message": "hi"}'
    ''')

    outcomes = case_project.cases("chat")

    assert outcomes["set by middleware"].verdict_passed
    (joined,) = [e for e in only(outcomes["set by middleware"]).events if isinstance(e, SessionEvent)]
    assert joined.key == "7"
    missing = first_failure(outcomes["missing"])
    assert ("session key 'context.chat_id' of agent 'chat' resolved to nothing (the path does not exist): "
            "Connic needs it to resolve to a non-empty value before the run starts (set it in the agent's "
            "before middleware; ") in missing
    assert "agents/chat.yaml)" in missing
    assert "session key 'context.chat_id' of agent 'chat' resolved to an empty value (\"\")" in first_failure(
        outcomes["empty"])


# --------------------------------------------------------------------------- ttl

#: fails on its first call, so that its tool agent waits ``initial_delay`` before the second
FLAKY_ONCE = '''
import pathlib


def flaky(payload: dict) -> dict:
    """Fail the first call."""
    path = pathlib.Path("flaky-called")
    if not path.exists():
        path.write_text("1")
        raise RuntimeError("first call fails")
    return {"ok": True}
'''


@pytest.mark.parametrize(("ttl", "remembered"), [(60, False), (600, True)])
def test_a_session_older_than_its_ttl_starts_empty_on_the_virtual_clock(
        case_project: CaseProject, ttl: int, remembered: bool) -> None:
    case_project.host = HookHost(make_model=seen_model)
    case_project.agent("chat", session={"key": "input.user", "ttl": ttl})
    case_project.tool("retry", FLAKY_ONCE)
    # a replayed retry delay of 120 s: no real waiting, but the session clock moves on
    case_project.agent("slow", type="tool", tool_name="retry.flaky",
                       retry_options={"attempts": 2, "initial_delay": 120, "max_delay": 300})
    case_project.suite("a_intro", '''
        agent: chat
        tests:
          - name: intro
            payload: '{"user": "ann", "message": "my name is Ann"}'
    ''')
    case_project.suite("b_slow", '''
        agent: slow
        tests:
          - name: waits two minutes
            payload: '{}'
            timeout_s: 600
    ''')
    case_project.suite("c_recall", '''
        agent: chat
        tests:
          - name: recall
            payload: '{"user": "ann", "message": "what is my name?"}'
            expected_result: '"my name is Ann" in output.seen[0]'
    ''')

    with case_project.runtime() as runtime:  # one runtime: one session store, one session clock
        from pytest_connic.execution.assembly import run_suite_case

        intro = run_suite_case(runtime, "tests/a_intro.yaml", "intro")
        slow = run_suite_case(runtime, "tests/b_slow.yaml", "waits two minutes")
        recall = run_suite_case(runtime, "tests/c_recall.yaml", "recall")

    assert intro.verdict_passed and slow.verdict_passed
    assert only(slow).virtual_ms == 120000
    assert recall.verdict_passed is remembered
    (joined,) = [e for e in only(recall).events if isinstance(e, SessionEvent)]
    if remembered:
        assert joined.name == "session 'chat' key 'ann': run 2 of the session, 2 messages of history"
    else:
        assert joined.name == ("session 'chat' key 'ann' expired (not updated for more than its ttl of 60s): "
                               "this run starts a new session")
        assert joined.history == 0


# --------------------------------------------------------------------------- files.session_only


def notes_model(agent: Any, model: str, case: Any, run_index: int) -> object:
    """List the notes, write one, answer with how many the listing showed."""

    def answer(request: ModelRequest) -> object:
        tools = [m for m in request.messages if m["role"] == "tool"]
        if not tools:
            return ModelResponse(tool_calls=[ToolCallRequest("l", "file_list", {"folder": "notes", "recursive": True})])
        if len(tools) == 1:
            name = case["name"].replace(" ", "-")
            return ModelResponse(tool_calls=[ToolCallRequest("w", "file_write", {"path": f"notes/{name}.txt",
                                                                                   "content": "x"})])
        listing = json.loads(tools[0]["content"]) if isinstance(tools[0]["content"], str) else tools[0]["content"]
        return json.dumps({"count": listing["count"]})

    return answer


@pytest.mark.parametrize(("session_only", "bob_sees"), [(True, 0), (False, 2)])
def test_files_session_only_sees_the_files_of_the_real_session(
        case_project: CaseProject, session_only: bool, bob_sees: int) -> None:
    case_project.host = HookHost(make_model=notes_model)
    case_project.agent("keeper", tools=["file_list", "file_write"],
                       session={"key": "input.user", "history": False}, files={"session_only": session_only})
    case_project.suite("keeper", '''
        tests:
          - name: ann first
            payload: '{"user": "ann"}'
          - name: ann again
            payload: '{"user": "ann"}'
          - name: bob
            payload: '{"user": "bob"}'
    ''')

    outcomes = case_project.cases("keeper")

    assert {name: only(o).output for name, o in outcomes.items()} == {
        "ann first": {"count": 0}, "ann again": {"count": 1}, "bob": {"count": bob_sees}}


# --------------------------------------------------------------------------- what is not simulated


@pytest.mark.parametrize(("fields", "said"), [
    ({"tools": ["web_browser_open"], "session": True},
     ("agents/chat.yaml: session.browser of agent 'chat' is not simulated: the web_browser_* tools have no local "
      "implementation (the pytest_connic_predefined_tool hook supplies them), so no cookies or local storage carry "
      "from one run of a session to the next")),
    ({"session": True, "context_compression": {"session_history": {"interval": 4}}},
     ("agents/chat.yaml: context_compression.session_history of agent 'chat' is not simulated: the stored session "
      "history is never compacted between runs, so a long session gives the model more history here than on Connic")),
], ids=["browser", "history compaction"])
def test_what_a_session_does_not_simulate_is_a_located_warning(
        case_project: CaseProject, fields: dict[str, object], said: str) -> None:
    case_project.host = HookHost(make_model=seen_model)
    case_project.agent("chat", **fields)
    case_project.suite("chat", '''
        tests:
          - name: hi
            payload: hi
    ''')

    assert case_project.case("chat", "hi").verdict_passed
    assert [w for w in case_project.warnings if "is not simulated" in w] == [said]
