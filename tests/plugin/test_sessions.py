"""Connic's sessions (``session:``): the history a later run sees, the key resolved after
``before`` middleware, ``ttl`` on the session clock, ``files.session_only`` keyed on the session,
and the cases that share a session kept on one xdist worker (docs/lifecycle.md "Sessions")."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from helpers.project import ConnicProject

#: the model answers with every user turn it was shown (this run's and the history's)
SEEN_MODEL = '''
import json


def pytest_connic_make_model(config, agent, model, case, run_index):
    def answer(request):
        return json.dumps({"seen": [m["content"] for m in request.messages if m["role"] == "user"],
                           "messages": len(request.messages)})
    return answer
'''

CHAT_SUITE = '''
    agent: chat
    tests:
      - name: ann introduces herself
        payload: '{"user": "ann", "message": "my name is Ann"}'
        expected_result: output.messages == 1
      - name: ann is remembered
        payload: '{"user": "ann", "message": "what is my name?"}'
        expected_result: '"my name is Ann" in output.seen[0]'
      - name: bob has his own session
        payload: '{"user": "bob", "message": "who am I?"}'
        expected_result: output.messages == 1
'''


def chat(project: ConnicProject, session: Any) -> None:
    fields: dict[str, Any] = {} if session is None else {"session": session}
    project.agent("chat", **fields)
    project.write("conftest.py", SEEN_MODEL)
    project.suite("chat", CHAT_SUITE)


def test_a_later_run_sees_the_history_of_its_session(project: ConnicProject) -> None:
    chat(project, {"key": "input.user"})
    result = project.run("-p", "no:randomly", "-v")
    result.assert_outcomes(passed=3)


def test_without_a_session_no_run_sees_another(project: ConnicProject) -> None:
    chat(project, None)
    result = project.run("-p", "no:randomly", "-v")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*tests/chat.yaml::ann is remembered FAILED*"])


def test_session_true_is_one_session_for_every_run_of_the_agent(project: ConnicProject) -> None:
    chat(project, True)  # bob sees ann's conversation too
    result = project.run("-p", "no:randomly", "-v")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*tests/chat.yaml::bob has his own session FAILED*"])


def test_history_false_keeps_the_session_without_its_conversation(project: ConnicProject) -> None:
    chat(project, {"key": "input.user", "history": False})
    result = project.run("-p", "no:randomly", "-v")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*tests/chat.yaml::ann is remembered FAILED*"])


def test_the_history_holds_the_tool_calls_and_the_final_answer(project: ConnicProject) -> None:
    project.tool("calc", '''
def add(a: int, b: int) -> dict:
    """Add two numbers."""
    return {"sum": a + b}
''')
    project.agent("adder", tools=["calc.add"], session=True)
    project.write("conftest.py", '''
import json
from pytest_connic.models.base import ModelResponse, ToolCallRequest


def pytest_connic_make_model(config, agent, model, case, run_index):
    def answer(request):
        if request.messages[-1]["role"] == "user" and len(request.messages) == 1:
            return ModelResponse(tool_calls=[ToolCallRequest("c1", "calc_add", {"a": 2, "b": 3})])
        if request.messages[-1]["role"] == "tool":
            return "five"
        return json.dumps([{"role": m["role"], "content": m.get("content"),
                            "tools": [c["function"]["name"] for c in m.get("tool_calls") or []]}
                           for m in request.messages])
    return answer
''')
    project.suite("adder", '''
        tests:
          - name: adds
            payload: add 2 and 3
            expected_result: output == "five"
          - name: remembers
            payload: what did you do?
            expected_result: >-
              output[0].role == "user" and output[1].tools[0] == "calc_add" and output[2].role == "tool"
              and output[3].content == "five" and output[4].content == "what did you do?"
    ''')
    result = project.run("-p", "no:randomly", "-v")
    result.assert_outcomes(passed=2)


def test_runs_of_one_case_share_the_session_in_order(project: ConnicProject) -> None:
    project.agent("chat", session=True)
    project.write("conftest.py", SEEN_MODEL)
    project.suite("chat", '''
        tests:
          - name: five runs
            payload: hello
            runs: 5
            success_threshold: 100
            expected_result: output.messages >= 1
    ''')
    result = project.run("-p", "no:randomly", "--connic-concurrency", "5", "--connic-json", "report.json")
    result.assert_outcomes(passed=1)


    runs = json.loads((project.root / "report.json").read_text())["cases"][0]["runs_detail"]
    assert [json.loads(r["output"])["messages"] for r in runs] == [1, 3, 5, 7, 9]


# --------------------------------------------------------------------------- the key

KEY_MIDDLEWARE = '''
async def before(content, context):
    chat_id = context["payload"].get("chat_id")
    if chat_id is not None:
        context["chat_id"] = chat_id
    return content
'''


def test_the_key_is_resolved_after_before_middleware_and_must_not_be_empty(project: ConnicProject) -> None:
    project.agent("chat", session={"key": "context.chat_id"})
    project.write("middleware/chat.py", KEY_MIDDLEWARE)
    project.write("conftest.py", SEEN_MODEL)
    project.suite("chat", '''
        tests:
          - name: set by middleware
            payload: '{"chat_id": 7, "message": "hi"}'
          - name: missing
            payload: '{"message": "hi"}'
          - name: empty
            payload: '{"chat_id": "", "message": "hi"}'
    ''')
    result = project.run("-p", "no:randomly", "-v")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines([
        ("*session key 'context.chat_id' of agent 'chat' resolved to nothing (the path does not exist): "
        "Connic needs it to resolve to a non-empty value before the run starts (set it in the agent's "
        "before middleware; *agents/chat.yaml)*"),
    ])
    result.stdout.fnmatch_lines(["*session key 'context.chat_id' of agent 'chat' resolved to an empty value (\"\")*"])


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


@pytest.mark.parametrize(("ttl", "outcomes"), [(60, {"passed": 2, "failed": 1}), (600, {"passed": 3})])
def test_a_session_older_than_its_ttl_starts_empty_on_the_virtual_clock(
        project: ConnicProject, ttl: int, outcomes: dict[str, int]) -> None:
    project.agent("chat", session={"key": "input.user", "ttl": ttl})
    project.write("conftest.py", SEEN_MODEL)
    project.tool("retry", FLAKY_ONCE)
    # a replayed retry delay of 120 s: no real waiting, but the session clock moves on
    project.agent("slow", type="tool", tool_name="retry.flaky",
                  retry_options={"attempts": 2, "initial_delay": 120, "max_delay": 300})
    project.suite("a_intro", '''
        agent: chat
        tests:
          - name: intro
            payload: '{"user": "ann", "message": "my name is Ann"}'
    ''')
    project.suite("b_slow", '''
        agent: slow
        tests:
          - name: waits two minutes
            payload: '{}'
            timeout_s: 600
    ''')
    project.suite("c_recall", '''
        agent: chat
        tests:
          - name: recall
            payload: '{"user": "ann", "message": "what is my name?"}'
            expected_result: '"my name is Ann" in output.seen[0]'
    ''')
    result = project.run("-p", "no:randomly", "-v")
    result.assert_outcomes(**outcomes)
    if ttl == 60:
        result.stdout.fnmatch_lines([
            ("*session 'chat' key 'ann' expired (not updated for more than its ttl of 60s): "
            "this run starts a new session*"),
        ])


# --------------------------------------------------------------------------- files.session_only

#: list the notes, write one, answer with how many the listing showed
NOTES_MODEL = '''
import json
from pytest_connic.models.base import ModelResponse, ToolCallRequest


def pytest_connic_make_model(config, agent, model, case, run_index):
    def answer(request):
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
'''


@pytest.mark.parametrize(("session_only", "outcomes"), [(True, {"passed": 3}), (False, {"passed": 2, "failed": 1})])
def test_files_session_only_sees_the_files_of_the_real_session(
        project: ConnicProject, session_only: bool, outcomes: dict[str, int]) -> None:
    project.agent("keeper", tools=["file_list", "file_write"],
                  session={"key": "input.user", "history": False}, files={"session_only": session_only})
    project.write("conftest.py", NOTES_MODEL)
    project.suite("keeper", '''
        tests:
          - name: ann first
            payload: '{"user": "ann"}'
            expected_result: output.count == 0
          - name: ann again
            payload: '{"user": "ann"}'
            expected_result: output.count == 1
          - name: bob
            payload: '{"user": "bob"}'
            expected_result: output.count == 0
    ''')
    result = project.run("-p", "no:randomly", "-v")
    result.assert_outcomes(**outcomes)
    if not session_only:
        result.stdout.fnmatch_lines(["*tests/keeper.yaml::bob FAILED*"])


# --------------------------------------------------------------------------- browser

def test_session_browser_with_browser_tools_is_a_located_warning(project: ConnicProject) -> None:
    project.agent("surfer", tools=["web_browser_open"], session=True)
    project.write("conftest.py", SEEN_MODEL)
    project.suite("surfer", '''
        tests:
          - name: browse
            payload: hi
    ''')
    result = project.run("-p", "no:randomly")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*agents/surfer.yaml: session.browser of agent 'surfer' is not simulated*"])


def test_session_history_compaction_is_a_located_warning(project: ConnicProject) -> None:
    project.agent("chat", session=True, context_compression={"session_history": {"interval": 4}})
    project.write("conftest.py", SEEN_MODEL)
    project.suite("chat", '''
        tests:
          - name: hi
            payload: hi
    ''')
    result = project.run("-p", "no:randomly")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([("*agents/chat.yaml: context_compression.session_history of agent 'chat' is not "
                                 "simulated*")])


# --------------------------------------------------------------------------- xdist

PLAIN_SUITES = {f"other{i}": f'''
    agent: other
    tests:
      - name: plain {i}
        payload: hi
''' for i in range(4)}


def xdist_project(project: ConnicProject) -> None:
    chat(project, {"key": "input.user"})
    project.agent("other")
    for name, text in PLAIN_SUITES.items():
        project.suite(name, text)


def test_the_cases_of_an_agent_with_a_session_get_an_xdist_group(project: ConnicProject) -> None:
    xdist_project(project)
    result = project.run("-p", "no:randomly", "--co", "-q", "-m", "xdist_group")
    result.stdout.fnmatch_lines(["*tests/chat.yaml::ann introduces herself*", "*3/7 tests collected*"])


def test_loadgroup_keeps_the_cases_that_share_a_session_on_one_worker(project: ConnicProject) -> None:
    xdist_project(project)
    result = project.run("-p", "no:randomly", "-n", "2", "--dist", "loadgroup", "-v")
    result.assert_outcomes(passed=7)
    workers = set(re.findall(r"\[(gw\d)\][^\n]*PASSED tests/chat\.yaml::", result.stdout.str()))
    assert len(workers) == 1, result.stdout.str()
