"""Connic's lifecycle around the agent (spec §9.3–9.6): the order of the phases, the run
context each phase sees, and the middleware contracts (sync/async, None, exceptions)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from pathlib import Path

from helpers.project import ConnicProject

#: every user file below appends one line per phase to lifecycle.log (the cwd is the project)
NOTE = '''
import json


def note(*parts):
    with open("lifecycle.log", "a") as fh:
        fh.write(" ".join(str(p) for p in parts) + "\\n")


def dump(name, value):
    with open("context.jsonl", "a") as fh:
        fh.write(json.dumps({"at": name, "value": value}, default=str) + "\\n")
'''


def _shop(project: ConnicProject) -> None:
    """An agent with every lifecycle phase: guardrails, middleware, hooks, a tool, a builder."""
    project.tool("shop", NOTE + '''

def add(a: int, b: int, context: dict) -> dict:
    """Add two numbers."""
    note("tool add")
    dump("tool", sorted(context))
    return {"sum": a + b}
''')
    project.agent(
        "shop",
        tools=["shop.add"],
        system_prompt="Serve {user}.",
        guardrails={
            "input": [{"type": "custom", "name": "gate", "mode": "block"}],
            "output": [{"type": "custom", "name": "gate_out", "mode": "block"}],
        },
    )
    project.write("guardrails/gate.py", NOTE + '''
from connic import GuardrailResult


async def check(content, context):
    note("guardrail input gate")
    dump("input guardrail", sorted(context))
    return GuardrailResult(passed=True)
''')
    project.write("guardrails/gate_out.py", NOTE + '''
from connic import GuardrailResult


def check(content, context):
    note("guardrail output gate_out")
    dump("output guardrail", {"content": content, "keys": sorted(context)})
    return GuardrailResult(passed=True)
''')
    project.write("middleware/shop.py", NOTE + '''

async def before(content, context):
    note("middleware before")
    dump("before", {k: v for k, v in context.items()})
    context["user"] = "ada"
    return content


def after(response, context):
    note("middleware after")
    dump("after", {k: context.get(k) for k in ("user", "token_usage", "duration_ms")})
    return response


async def cleanup(run, context):
    note("middleware cleanup", run["status"])
    dump("cleanup", {"run": run, "user": context.get("user")})
''')
    project.write("hooks/shop.py", NOTE + '''

def before(tool_name, params, context):
    note("hook before", tool_name)
    dump("hook before", context.get("user"))
    return None


async def after(tool_name, params, result, context):
    note("hook after", tool_name)
    return None
''')
    project.write("tests/builders/seed.py", NOTE + '''

def build(context, builder_args, test_name, payload, files):
    note("build")
    return {"item": "pencil"}


async def cleanup(run, context, builder_args):
    note("builder cleanup")
    dump("builder cleanup", {"run_id": run["context"]["run_id"], "output": run["output"]})
''')
    project.suite("shop", '''
        tests:
          - name: order
            builder: seed
            expected_result: output == "done"
            expected_tool_calls:
              - shop.add: result.sum == 5
    ''')
    project.replies("shop", "order", [("add", {"a": 2, "b": 3})], "done")


def _context_dumps(root: Path) -> dict[str, object]:
    lines = (root / "context.jsonl").read_text().splitlines()
    return {entry["at"]: entry["value"] for entry in map(json.loads, lines)}


def test_phases_run_in_connics_order(project: ConnicProject) -> None:
    _shop(project)

    result = project.run()

    result.assert_outcomes(passed=1)
    assert (project.root / "lifecycle.log").read_text().splitlines() == [
        "build",
        "guardrail input gate",
        "middleware before",
        "hook before add",
        "tool add",
        "hook after add",
        "middleware after",
        "guardrail output gate_out",
        "middleware cleanup completed",
        "builder cleanup",
    ]


def test_each_phase_sees_the_run_context_of_connic(project: ConnicProject) -> None:
    _shop(project)

    project.run().assert_outcomes(passed=1)

    seen = _context_dumps(project.root)
    before = seen["before"]
    assert isinstance(before, dict)
    # pre-filled keys (spec §9.4); connector_id only exists for connector-triggered runs
    assert sorted(before) == ["agent_name", "payload", "run_id", "timestamp"]
    assert before["agent_name"] == "shop"
    assert before["payload"] == {"item": "pencil"}
    uuid.UUID(str(before["run_id"]))
    assert datetime.fromisoformat(str(before["timestamp"])).utcoffset() is not None
    # input guardrails run before `before`: nothing it sets is visible yet
    assert seen["input guardrail"] == ["agent_name", "payload", "run_id", "timestamp"]
    # what `before` sets reaches hooks, tools, `after`, output guardrails and cleanup
    assert seen["hook before"] == "ada"
    assert "user" in seen["tool"]  # type: ignore[operator]
    after = seen["after"]
    assert isinstance(after, dict) and after["user"] == "ada"
    assert set(after["token_usage"]) == {"prompt_tokens", "candidates_tokens", "total_tokens"}
    assert isinstance(after["duration_ms"], int)
    assert seen["output guardrail"] == {"content": "done", "keys": sorted([*before, "user", "token_usage",
                                                                            "duration_ms"])}
    assert seen["cleanup"] == {"run": {"status": "completed", "error": None, "output": "done"}, "user": "ada"}
    # the builder's cleanup gets the same run context and the raw output
    assert seen["builder cleanup"] == {"run_id": before["run_id"], "output": "done"}


MIDDLEWARE_CONTRACTS = '''
def _mode(context):
    return context["payload"].get("message", "")


async def before(content, context):
    mode = _mode(context)
    if mode == "before-none":
        return None
    if mode == "before-raises":
        raise ValueError("no entry")
    if mode == "before-text":
        return "not the content"
    if mode == "rewrite":
        content["parts"][0]["text"] = "rewritten by before"
    return content


def after(response, context):
    mode = _mode(context)
    if mode == "after-none":
        return None
    if mode == "after-raises":
        raise KeyError("lost")
    return response + " (checked)"


def cleanup(run, context):
    if _mode(context) == "cleanup-raises":
        raise RuntimeError("cleanup broke")
'''

ECHO_MODEL = '''
import json


def pytest_connic_make_model(config, agent, model, case, run_index):
    def answer(request):
        return json.dumps({"user": request.messages[0]["content"]})
    return answer
'''


def test_middleware_contracts(project: ConnicProject) -> None:
    project.agent("desk")
    project.write("middleware/desk.py", MIDDLEWARE_CONTRACTS)
    project.write("conftest.py", ECHO_MODEL)
    project.suite("desk", '''
        tests:
          - name: before returning None fails the run
            payload: before-none
            expected_result: >-
              status == "failed" and "middleware before of agent 'desk' returned None" in error
          - name: an exception in before fails the run
            payload: before-raises
            expected_result: >-
              error == "middleware before of agent 'desk' raised ValueError: no entry"
          - name: before may rewrite what the model reads
            payload: rewrite
            expected_result: >-
              output == '{"user": "rewritten by before"} (checked)'
          - name: after returning None fails the run
            payload: after-none
            expected_result: >-
              status == "failed" and "middleware after of agent 'desk' returned None" in error
          - name: an exception in after fails the run
            payload: after-raises
            expected_result: >-
              status == "failed" and error == "middleware after of agent 'desk' raised KeyError: 'lost'"
          - name: an exception in cleanup never changes the status
            payload: cleanup-raises
            expected_result: status == "completed" and "(checked)" in output
          - name: an unexpected middleware error is an agent error
            payload: before-raises
          - name: before returning something other than the content fails the run
            payload: before-text
            expected_result: >-
              status == "failed" and error == "middleware before of agent 'desk' returned str; it must return
              the content (a dict with role and parts)"
    ''')

    result = project.run()

    result.assert_outcomes(passed=7, failed=1)
    result.stdout.fnmatch_lines([
        "tests/desk.yaml:25: case 'an unexpected middleware error is an agent error'",  # folded at 80 columns,
        "  (desk) failed",  # the name whole
        "*: agent error: middleware before of agent 'desk' raised ValueError: no entry",
    ])
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_cleanup_middleware_error_is_logged_in_the_trace(project: ConnicProject) -> None:
    project.agent("desk")
    project.write("middleware/desk.py", MIDDLEWARE_CONTRACTS)
    project.write("conftest.py", ECHO_MODEL)
    project.suite("desk", '''
        tests:
          - name: cleanup raises
            payload: cleanup-raises
    ''')

    result = project.run("--connic-json", "report.json")

    result.assert_outcomes(passed=1)
    (run,) = json.loads((project.root / "report.json").read_text())["cases"][0]["runs_detail"]
    assert run["status"] == "completed"
    cleanup = [e for e in run["events"] if e.get("phase") == "cleanup"]
    assert cleanup == [{"type": "middleware", "phase": "cleanup", "mock": None,
                        "error": "RuntimeError: cleanup broke"}]
