"""A run past ``timeout_s`` fails with a timeout error, and its builder cleanup and
middleware cleanup still run (design: Runs; spec §4.3, §9.5). That a timed-out run's worker is
killed, its cleanup gets a fresh one and the next case's tool runs normally is tested below the
session: tests/unit/lifecycle/test_run_timeouts.py."""

from __future__ import annotations

import base64
import json
import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from helpers.project import ConnicProject
from pytest_connic.runtime import dispatch

MIDDLEWARE = '''
import asyncio
import json


async def before(content, context):
    if content["parts"][0]["text"] == "hang in before":
        await asyncio.sleep(60)
    return content


async def cleanup(run, context):
    with open("cleanups.jsonl", "a") as fh:
        fh.write(json.dumps({"by": "middleware", "status": run["status"], "error": run["error"]}) + "\\n")
'''

BUILDER = '''
import json


def build(context, builder_args, test_name, payload, files):
    context["built_for"] = test_name
    return payload


def cleanup(run, context, builder_args):
    with open("cleanups.jsonl", "a") as fh:
        fh.write(json.dumps({"by": "builder", "case": context["built_for"], "output": run["output"]}) + "\\n")
    return True
'''

TOOLS = '''
import time


def snooze() -> dict:
    """Sleep in a worker thread, longer than the run may take."""
    time.sleep(4)
    return {"slept": True}
'''


def test_a_timed_out_run_still_runs_builder_and_middleware_cleanup(project: ConnicProject) -> None:
    project.tool("sleepy", TOOLS)
    project.agent("slow", tools=["sleepy.snooze"])
    project.write("middleware/slow.py", MIDDLEWARE)
    project.write("tests/builders/fixture.py", BUILDER)
    project.suite("slow", '''
        defaults:
          timeout_s: 1
        tests:
          - name: hangs in before middleware
            payload: hang in before
            builder: fixture
            expected_result: status == "failed" and "timed out" in error
          - name: hangs in a sync tool
            payload: call snooze
            builder: fixture
            expected_result: status == "failed" and "timed out" in error
          - name: a timeout is an agent error
            payload: hang in before
            builder: fixture
    ''')
    project.replies("slow", "hangs in a sync tool", [("snooze", {})], "never reached")

    result = project.run()

    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*case 'a timeout is an agent error' (slow) failed",
        "*agent error: run timed out after 1s (timeout_s)*",
    ])
    entries = [json.loads(line) for line in (project.root / "cleanups.jsonl").read_text().splitlines()]
    middleware = [e for e in entries if e["by"] == "middleware"]
    builder = [e for e in entries if e["by"] == "builder"]
    assert len(middleware) == 3
    assert all(e["status"] == "failed" and "timed out" in e["error"] for e in middleware)
    assert sorted(e["case"] for e in builder) == [
        "a timeout is an agent error", "hangs in a sync tool", "hangs in before middleware",
    ]
    assert all(e["output"] is None for e in builder)
    # middleware cleanup runs inside the run, the builder's cleanup after it
    assert [e["by"] for e in entries[:2]] == ["middleware", "builder"]


# ========== fault injection (folded from test_hardening_faults.py) ==========================================
# Fault injection: whatever user code, a model or the machine does, the session finishes, the
# cleanups run, every case is reported, and the reports serialise.
#
# A tool that hangs, a builder whose cleanup raises, mocks returning what JSON cannot hold, models
# with malformed tool calls (through ``pytest_connic_make_model`` and through a cassette), a tool
# calling ``sys.exit()``, Ctrl-C in the middle of a run, an xdist worker that dies, and a bug in the
# plugin itself (never passed off as the user's tool failing).

pytestmark = pytest.mark.timeout(180)  # each test bounds its own sessions; this bounds the test

ADD = '''
import os
import signal
import sys
import threading
import time


def add(a: int, b: int) -> dict:
    """Add two numbers.

    Args:
        a: the first number
        b: the second number
    """
    if a == 13:
        raise TypeError("thirteen is unlucky")
    return {"sum": a + b}


def hang(a: int) -> dict:
    """Never returns: a sleep, or a wait on an event nobody sets."""
    if a == 1:
        time.sleep(3600)
    threading.Event().wait()
    return {}


def leave(a: int) -> dict:
    """Calls sys.exit()."""
    sys.exit(a)


def interrupt(a: int) -> dict:
    """Ctrl-C, from inside a tool: the session gets SIGINT while the run waits for this tool (sent to
    the main thread, as a terminal's Ctrl-C is). asyncio notices a signal that lands just before its
    loop blocks only when the loop wakes up, so the tool returns after a while: the run is
    cancelled all the same, as the loop handles the signal before the tool's result."""
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
    time.sleep(3)
    return {"late": True}


def crash(a: int) -> dict:
    """The worker process dies at once (no cleanup, no report)."""
    os._exit(1)
'''

#: a model (``pytest_connic_make_model``) scripted by the case's payload: first the tool calls the
#: payload names, then an answer listing every tool result it read (JSON)
SCRIPTED_MODEL = '''
import json

from pytest_connic import ModelResponse, ToolCallRequest

CALLS = {
    "not json": [ToolCallRequest("c1", "add", \'{"a": 1,\')],
    "list arguments": [ToolCallRequest("c1", "add", [1, 2])],
    "unknown tool": [ToolCallRequest("c1", "subtract", {"a": 1, "b": 2})],
    "missing argument": [ToolCallRequest("c1", "add", {"a": 1})],
    "user TypeError": [ToolCallRequest("c1", "add", {"a": 13, "b": 0})],
    "sys.exit": [ToolCallRequest("c1", "leave", {"a": 3})],
    "no id": [ToolCallRequest(None, "add", {"a": 1, "b": 2})],
    "no name": [ToolCallRequest("c1", "", {"a": 1, "b": 2})],
    "none name": [ToolCallRequest("c1", None, {"a": 1, "b": 2})],
    "dict call": [{"name": "add", "arguments": {"a": 1, "b": 2}}],
}


def pytest_connic_make_model(config, agent, model, case, run_index):
    script = case["payload"]
    if script == "not a model":
        return 42

    def answer(request):
        results = [m["content"] for m in request.messages if m["role"] == "tool"]
        if results:
            return json.dumps({"read": results})
        if script == "bad tokens":
            return ModelResponse(content="hi", input_tokens="many")
        if script == "number":
            return 42
        calls = CALLS.get(script) or [ToolCallRequest("c1", "add", json.loads(script))]
        return ModelResponse(tool_calls=calls)

    return answer
'''


def run_case(project: ConnicProject, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    """Run in-process with every report; check that each report is there and parses."""
    result = project.run("-p", "no:timeout", "--connic-json", "report.json", "--connic-html", "report.html",
                         "--junitxml", "junit.xml", "--connic-traces", "traces", *args)
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text, text[-3000:]
    ET.parse(project.root / "junit.xml")
    assert (project.root / "report.html").read_text("utf-8").startswith("<!DOCTYPE html>")
    for trace in (project.root / "traces").iterdir():
        json.loads(trace.read_text("utf-8"))
    return result, json.loads((project.root / "report.json").read_text("utf-8"))


def case_of(report: dict[str, Any], name: str) -> dict[str, Any]:
    (case,) = [c for c in report["cases"] if c["test_name"] == name]
    return case


@pytest.fixture
def calc(project: ConnicProject) -> ConnicProject:
    project.tool("calc", ADD)
    project.agent("calc", tools=["calc.add", "calc.hang", "calc.leave", "calc.interrupt"])
    return project


# ----------------------------------------------------------------------------- a tool that hangs


def test_a_hanging_tool_is_ended_by_timeout_s_and_no_thread_keeps_pytest_alive(calc: ConnicProject) -> None:
    calc.suite("calc", "defaults:\n  timeout_s: 1\ntests:\n  - name: sleeps\n    payload: a\n"
                       "  - name: waits\n    payload: b\n  - name: fine\n    payload: c\n")
    calc.replies("calc", "sleeps", [("hang", {"a": 1})], "never")
    calc.replies("calc", "waits", [("hang", {"a": 2})], "never")
    calc.replies("calc", "fine", [("add", {"a": 1, "b": 2})], "3")
    # the process exits (a hang past timeout=60 fails the test): the hung threads did not hold it
    result = calc.pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:timeout", timeout=60)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*sleeps*run timed out after 1s (timeout_s)*"])
    result.stdout.fnmatch_lines(["*waits*run timed out after 1s (timeout_s)*"])


# ------------------------------------------------------------------------- a builder that raises


RAISING_CLEANUP_BUILDER = '''
def build(context, builder_args, test_name, payload, files):
    return payload


def cleanup(run, context, builder_args):
    if builder_args.get("fail") == "raise":
        raise RuntimeError("the fixture server is gone")
    if builder_args.get("fail") == "exit":
        raise SystemExit(4)
    return None
'''


def test_a_builder_that_raises_in_cleanup_fails_its_case_only(calc: ConnicProject) -> None:
    calc.write("tests/builders/fixture.py", RAISING_CLEANUP_BUILDER)
    calc.suite("calc", "tests:\n" + "".join(
        f"  - name: {name}\n    payload: hi\n    builder: fixture\n    runs: 2\n    builder_args: {{fail: {name}}}\n"
        for name in ("raise", "exit", "none")))
    for name in ("raise", "exit", "none"):
        calc.replies("calc", name, "ok")
    result, report = run_case(calc)
    result.assert_outcomes(passed=1, failed=2)
    assert case_of(report, "raise")["runs_detail"][1]["failures"] == [
        "builder cleanup raised: the fixture server is gone"]
    assert case_of(report, "exit")["runs_detail"][0]["failures"] == ["builder cleanup raised: sys.exit(4) was called"]
    assert case_of(report, "none")["passed"]


# ------------------------------------------------------------- mocks returning what JSON cannot hold


MOCKS = '''
import socket


def mock_calc_add(tool_name, params, context):
    kind = params["a"]
    if kind == 1:
        return socket.socket()
    if kind == 2:
        return lambda x: x
    if kind == 3:
        return (i for i in range(3))
    if kind == 4:
        return b"\\xff\\x00 raw"
    if kind == 5:
        loop = {"name": "loop"}
        loop["self"] = loop
        return loop
    if kind == 6:
        return 10 ** 5000
    if kind == 7:
        return {(1, 2): "tuple key", "lone": "\\ud800"}
    if kind == 8:
        deep = []
        for _ in range(100_000):
            deep = [deep]
        return deep
    return {"context": context, "self": context}
'''

#: what the model reads for each: a text, whatever the value
READS = {
    1: "<socket.socket", 2: "<function", 3: "<generator object",
    # raw bytes from a custom tool (or its mock) are refused, as Connic refuses them (issue 16)
    4: "Error: calc.add: the tool returned raw bytes, which Connic rejects because they do not identify a MIME type",
    5: '"self": "<cycle>"', 6: "<int of about 5001 digits>", 7: '"(1, 2)": "tuple key"', 8: "<too deep>",
    9: '"agent_name": "calc"',
}


def test_mocks_returning_unserialisable_values_complete_and_every_report_serialises(calc: ConnicProject) -> None:
    calc.write("conftest.py", SCRIPTED_MODEL)
    calc.write("tests/mocks/odd.py", MOCKS)
    calc.suite("calc", "tests:\n" + "".join(
        f"  - name: kind {k}\n    payload: '{{\"a\": {k}, \"b\": 0}}'\n    mocks: odd\n"
        f"    expected_tool_calls: [calc.add]\n" for k in READS))
    result, report = run_case(calc)
    result.assert_outcomes(passed=len(READS))
    for kind, text in READS.items():
        (run,) = case_of(report, f"kind {kind}")["runs_detail"]
        (read,) = json.loads(run["output"])["read"]
        assert text in read, (kind, read[:300])
        if kind == 4:
            assert not run["tool_calls"][0]["has_result"] and "raw bytes" in run["tool_calls"][0]["error"]
            continue
        assert run["tool_calls"][0]["has_result"] and run["tool_calls"][0]["error"] is None


# -------------------------------------------------------------- models with malformed tool calls


@pytest.mark.parametrize(
    ("script", "outcome"),
    [
        # a real model does these too: the model reads the error and the run goes on
        ("not json", 'Error: invalid arguments for calc.add: expected a JSON object, got \'{"a": 1,\''),
        ("list arguments", "Error: invalid arguments for calc.add: expected a JSON object, got '[1, 2]'"),
        ("unknown tool", "Error: unknown tool 'subtract'; this agent's tools: add, hang, interrupt, leave"),
        ("missing argument", "Error: calc.add: add() missing 1 required positional argument: 'b'"),
        ("user TypeError", "Error: TypeError: thirteen is unlucky"),  # the user's TypeError is the tool's error
        ("sys.exit", "Error: ExitCalled: sys.exit(3) was called"),
        ("no id", '{"sum": 3}'),
        # the runtime cannot read these: the run fails and says what is wrong
        ("no name", "returned a malformed ModelResponse: tool_calls[0] has no tool name (name='')"),
        ("none name", "returned a malformed ModelResponse: tool_calls[0] has no tool name (name=None)"),
        ("dict call", ("returned a malformed ModelResponse: tool_calls[0] is dict, expected ToolCallRequest(id, "
                       "name, arguments)")),
        ("bad tokens", "returned a malformed ModelResponse: input_tokens is 'many', expected an integer >= 0"),
        ("number", "returned int; expected a ModelResponse or a string (pytest_connic.models.base)"),
        ("not a model", ("pytest_connic_make_model returned int; expected an object with `async complete(request)` "
                        "or a function of the request")),
    ],
)
def test_a_hook_model_with_malformed_tool_calls(calc: ConnicProject, script: str, outcome: str) -> None:
    calc.write("conftest.py", SCRIPTED_MODEL)
    calc.suite("calc", f"tests:\n  - name: odd\n    payload: {json.dumps(script)}\n")
    result, report = run_case(calc)
    (run,) = case_of(report, "odd")["runs_detail"]
    if outcome.startswith(("Error: ", "{")):
        result.assert_outcomes(passed=1)
        assert json.loads(run["output"])["read"] == [outcome]
    else:
        result.assert_outcomes(failed=1)
        source = "the model that pytest_connic_make_model supplied for agent 'calc' "
        assert run["failures"] == [outcome if outcome.startswith("pytest_connic") else source + outcome]


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ({"name": "add", "arguments": '{"a": 1,'}, "+invalid arguments for calc.add: expected a JSON object"),
        ({"name": "subtract", "arguments": {}},
         r"runs\[0\]\.turns\[0\]\.tool_calls\[0\]: the cassette calls tool 'subtract', but the request of 'calc' offers: add$"),
        ({"arguments": {"a": 1}},
         r":\d+:\d+: runs\[0\]\.turns\[0\]\.tool_calls\[0\]\.name: expected a tool name, found nothing$"),
        ({"name": ["add"]},
         r":\d+:\d+: runs\[0\]\.turns\[0\]\.tool_calls\[0\]\.name: expected a tool name, found a list$"),
        ({"name": "add", "arguments": [1, 2]},
         r":\d+:\d+: runs\[0\]\.turns\[0\]\.tool_calls\[0\]\.arguments: expected a mapping of arguments, found a list$"),
    ],
)
def test_a_cassette_with_malformed_tool_calls(project: ConnicProject, call: dict[str, Any], expected: str) -> None:
    project.tool("calc", ADD)
    project.agent("calc", tools=["calc.add"])
    project.suite("calc", "tests:\n  - name: odd\n    payload: hi\n")
    project.cassette("calc", "odd", [{"turns": [{"tool_calls": [call]}, {"content": "done"}]}])
    result, report = run_case(project)
    (run,) = case_of(report, "odd")["runs_detail"]
    if expected.startswith("+"):  # the model reads the error, the run completes
        result.assert_outcomes(passed=1)
        assert run["tool_calls"][0]["error"].startswith(expected[1:])
    else:
        result.assert_outcomes(failed=1)
        (failure,) = run["failures"]
        assert failure.startswith("cassettes/calc/odd.yaml:"), failure  # relative to the project
        assert re.search(expected, failure), failure


# --------------------------------------------------------------------------- a bug in the plugin


def test_a_bug_in_the_dispatch_fails_the_run_loudly_never_as_the_tools_error(
    calc: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken_gate(*args: Any) -> Any:
        raise TypeError("unsupported operand (a plugin bug)")

    monkeypatch.setattr(dispatch, "gate", broken_gate)
    calc.suite("calc", "tests:\n  - name: bug\n    payload: hi\n    expected_result: status == 'failed'\n")
    calc.replies("calc", "bug", [("add", {"a": 1, "b": 2})], "the model must never read the bug")
    result, report = run_case(calc)
    result.assert_outcomes(failed=1)
    (run,) = case_of(report, "bug")["runs_detail"]
    (failure,) = run["failures"]
    assert failure.startswith("internal error in pytest-connic while calling tool 'add': TypeError: unsupported "
                              "operand (a plugin bug) at pytest_connic/runtime/dispatch.py:")
    assert failure.endswith("This is a bug in pytest-connic, not in your project: please report it with this message")
    assert run["tool_calls"][0]["error"] is None  # not a tool error
    assert len(run["model_turns"]) == 1  # the model never read it: the run ended there


# ----------------------------------------------------------------------- bytes the model reads


FILES_TOOL = '''
from connic.tools import file_write


async def store(binary: bool) -> dict:
    """Store a file."""
    if binary:
        return await file_write("blob.bin", b"\\xff\\xfe\\x00binary", overwrite=True)
    return await file_write("note.txt", "héllo wörld", overwrite=True)
'''


def test_file_read_content_reaches_the_model_as_text_or_base64(project: ConnicProject) -> None:
    project.tool("files", FILES_TOOL)
    project.agent("keeper", tools=["files.store", "file_read"])
    project.suite("keeper", "tests:\n  - name: reads\n    payload: hi\n")
    project.replies("keeper", "reads", [("store", {"binary": False}), ("store", {"binary": True})],
                    [("file_read", {"path": "note.txt"}), ("file_read", {"path": "blob.bin"})], "done")
    project.write("conftest.py", '''
import json

from pytest_connic import ModelResponse, ToolCallRequest


def pytest_connic_make_model(config, agent, model, case, run_index):
    def answer(request):
        results = [json.loads(m["content"]) for m in request.messages if m["role"] == "tool"]
        if not results:
            return ModelResponse(tool_calls=[ToolCallRequest("1", "store", {"binary": False}),
                                             ToolCallRequest("2", "store", {"binary": True})])
        if len(results) == 2:
            return ModelResponse(tool_calls=[ToolCallRequest("3", "file_read", {"path": "note.txt"}),
                                             ToolCallRequest("4", "file_read", {"path": "blob.bin"})])
        return json.dumps([r["content"] for r in results[2:]])
    return answer
''')
    result, report = run_case(project)
    result.assert_outcomes(passed=1)
    (run,) = case_of(report, "reads")["runs_detail"]
    assert json.loads(run["output"]) == ["héllo wörld", base64.b64encode(b"\xff\xfe\x00binary").decode()]


# ------------------------------------------------------------------------------------- Ctrl-C


CLEANUPS_BUILDER = '''
def build(context, builder_args, test_name, payload, files):
    return payload


def cleanup(run, context, builder_args):
    with open("builder-cleanup.txt", "w") as fh:
        fh.write(str(run["output"]))
'''
CLEANUPS_MIDDLEWARE = '''
def cleanup(run, context):
    with open("middleware-cleanup.txt", "w") as fh:
        fh.write(run["status"])
'''


def test_ctrl_c_during_a_run_still_runs_its_cleanups_and_pytest_reports_interrupted(calc: ConnicProject) -> None:
    calc.write("tests/builders/fixture.py", CLEANUPS_BUILDER)
    calc.write("middleware/calc.py", CLEANUPS_MIDDLEWARE)
    calc.suite("calc", "tests:\n  - name: a first\n    payload: hi\n"
                       "  - name: b interrupted\n    payload: hi\n    builder: fixture\n"
                       "  - name: c never\n    payload: hi\n")
    calc.replies("calc", "a first", "ok")
    calc.replies("calc", "b interrupted", [("interrupt", {"a": 1})], "never")
    calc.replies("calc", "c never", "ok")
    # the process exits (a hang past timeout=60 fails the test)
    # in-process: the tool signals pytest's own main thread (a worker process ignores SIGINT)
    result = calc.pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:timeout", "-p", "no:xdist",
                                                "--connic-isolation=none", "--connic-json", "report.json", timeout=60)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*Interrupted: interrupted by SIGINT*"])
    assert (calc.root / "builder-cleanup.txt").read_text() == "None"  # the run never finished
    assert (calc.root / "middleware-cleanup.txt").read_text() == "cancelled"
    report = json.loads((calc.root / "report.json").read_text("utf-8"))
    statuses = {c["test_name"]: c["status"] for c in report["cases"]}  # every case, the rest interrupted
    assert statuses == {"a first": "passed", "b interrupted": "interrupted", "c never": "interrupted"}


# ------------------------------------------------------------------------------ a worker dies


def test_a_crashed_xdist_worker_loses_no_other_result_and_the_reports_name_the_case(project: ConnicProject) -> None:
    pytest.importorskip("xdist")
    project.tool("calc", ADD.replace("def add(", "def echo(payload: dict) -> dict:\n    \"\"\"Echo.\"\"\"\n"
                                     "    if payload.get('crash'):\n        os._exit(1)\n    return payload\n\n\n"
                                     "def add("))
    project.agent("echo", type="tool", tool_name="calc.echo")
    names = [f"case {i:02}" for i in range(12)]
    project.suite("echo", "tests:\n" + "".join(
        f"  - name: {n}\n    payload: '{{\"crash\": {str(n == 'case 09').lower()}}}'\n" for n in names))
    # in-process, so the tool's os._exit ends the xdist worker (isolated, it ends only its run:
    # tests/plugin/test_isolation.py)
    result = project.run("-p", "no:timeout", "-n", "2", "--connic-isolation=none",
                         "--connic-json", "report.json", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=11, errors=1)  # a crashed worker is an error, as in JUnit and JSON
    result.stdout.fnmatch_lines(["*worker 'gw*' crashed while running 'tests/echo.yaml::case 09'*"])
    report = json.loads((project.root / "report.json").read_text("utf-8"))
    by_name = {c["test_name"]: c for c in report["cases"]}
    assert sorted(by_name) == names  # the crashed worker's earlier cases included
    crashed = by_name.pop("case 09")
    assert not crashed["passed"] and crashed["agent_name"] == "echo"
    assert crashed["failure_reason"].startswith("worker 'gw")
    assert "crashed while running 'tests/echo.yaml::case 09'" in crashed["failure_reason"]
    assert all(c["passed"] for c in by_name.values())
    cases = {c.get("name"): c for c in ET.parse(project.root / "junit.xml").getroot().iter("testcase")}
    assert len(cases) == 12
    (problem,) = [e for e in cases["case 09"] if e.tag in ("failure", "error")]  # xdist reports an error
    assert "crashed while running 'tests/echo.yaml::case 09'" in (problem.get("message") or "")
