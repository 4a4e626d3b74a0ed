"""Connic's lifecycle around the agent, below pytest (spec §9.3–9.6): the order of the phases, the
run context each phase sees, and the middleware contracts (sync/async, None, exceptions). The
context travels to and from a worker process for each phase: the phase tests also run
process-isolated."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from helpers.harness import CaseProject, conftest_hooks
from pytest_connic.records.events import HookEvent, MiddlewareEvent
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord
from pytest_connic.reports.failure import failure_text
from pytest_connic.secrets import Masker

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


@pytest.fixture
def shop(case_project: CaseProject) -> CaseProject:
    """An agent with every lifecycle phase: guardrails, middleware, hooks, a tool, a builder."""
    case_project.tool("shop", NOTE + '''

def add(a: int, b: int, context: dict) -> dict:
    """Add two numbers."""
    note("tool add")
    dump("tool", sorted(context))
    return {"sum": a + b}
''')
    case_project.agent(
        "shop",
        tools=["shop.add"],
        system_prompt="Serve {user}.",
        guardrails={
            "input": [{"type": "custom", "name": "gate", "mode": "block"}],
            "output": [{"type": "custom", "name": "gate_out", "mode": "block"}],
        },
    )
    case_project.write("guardrails/gate.py", NOTE + '''
from connic import GuardrailResult


async def check(content, context):
    note("guardrail input gate")
    dump("input guardrail", sorted(context))
    return GuardrailResult(passed=True)
''')
    case_project.write("guardrails/gate_out.py", NOTE + '''
from connic import GuardrailResult


def check(content, context):
    note("guardrail output gate_out")
    dump("output guardrail", {"content": content, "keys": sorted(context)})
    return GuardrailResult(passed=True)
''')
    case_project.write("middleware/shop.py", NOTE + '''

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
    case_project.write("hooks/shop.py", NOTE + '''

def before(tool_name, params, context):
    note("hook before", tool_name)
    dump("hook before", context.get("user"))
    return None


async def after(tool_name, params, result, context):
    note("hook after", tool_name)
    return None
''')
    case_project.write("tests/builders/seed.py", NOTE + '''

def build(context, builder_args, test_name, payload, files):
    note("build")
    return {"item": "pencil"}


async def cleanup(run, context, builder_args):
    note("builder cleanup")
    dump("builder cleanup", {"run_id": run["context"]["run_id"], "output": run["output"]})
''')
    case_project.suite("shop", '''
        tests:
          - name: order
            builder: seed
            expected_result: output == "done"
            expected_tool_calls:
              - shop.add: result.sum == 5
    ''')
    case_project.replies("shop", "order", [("add", {"a": 2, "b": 3})], "done")
    return case_project


def only(outcome: CaseOutcome) -> RunRecord:
    (record,) = outcome.records
    return record


def _context_dumps(root: Path) -> dict[str, object]:
    lines = (root / "context.jsonl").read_text().splitlines()
    return {entry["at"]: entry["value"] for entry in map(json.loads, lines)}


@pytest.mark.parametrize("isolation", ["none", "process"])
def test_phases_run_in_connics_order(shop: CaseProject, isolation: str) -> None:
    outcome = shop.case("shop", "order", isolation=isolation)
    assert outcome.verdict_passed, outcome.failure_reason
    assert (shop.root / "lifecycle.log").read_text().splitlines() == [
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
    record = only(outcome)
    assert [(e.kind, e.phase) for e in record.events if isinstance(e, (HookEvent, MiddlewareEvent))] == [
        ("middleware", "before"), ("hook", "before"), ("hook", "after"), ("middleware", "after"),
        ("middleware", "cleanup")]
    assert [(g.direction, g.name, g.status) for g in record.guardrails] == [
        ("input", "gate", "passed"), ("output", "gate_out", "passed")]


@pytest.mark.parametrize("isolation", ["none", "process"])
def test_each_phase_sees_the_run_context_of_connic(shop: CaseProject, isolation: str) -> None:
    outcome = shop.case("shop", "order", isolation=isolation)
    assert outcome.verdict_passed, outcome.failure_reason

    seen = _context_dumps(shop.root)
    before = seen["before"]
    assert isinstance(before, dict)
    # pre-filled keys (spec §9.4); connector_id only exists for connector-triggered runs
    assert sorted(before) == ["agent_name", "payload", "run_id", "timestamp"]
    assert before["agent_name"] == "shop"
    assert before["payload"] == {"item": "pencil"}
    uuid.UUID(str(before["run_id"]))
    assert before["run_id"] == only(outcome).run_id
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
    assert only(outcome).run_context["user"] == "ada"  # the record keeps the context the run ended with


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


@pytest.fixture
def desk(case_project: CaseProject) -> CaseProject:
    case_project.agent("desk")
    case_project.write("middleware/desk.py", MIDDLEWARE_CONTRACTS)
    case_project.host = conftest_hooks(ECHO_MODEL)
    return case_project


def test_middleware_contracts(desk: CaseProject) -> None:
    desk.suite("desk", '''
        tests:
          - name: before returning None fails the run
            payload: before-none
          - name: an exception in before fails the run
            payload: before-raises
          - name: before may rewrite what the model reads
            payload: rewrite
          - name: after returning None fails the run
            payload: after-none
          - name: an exception in after fails the run
            payload: after-raises
          - name: an exception in cleanup never changes the status
            payload: cleanup-raises
          - name: an unexpected middleware error is an agent error
            payload: before-raises
          - name: before returning something other than the content fails the run
            payload: before-text
    ''')
    outcomes = desk.cases("desk")
    ended = {name: (only(o).status, only(o).error) for name, o in outcomes.items()}
    assert ended == {
        "before returning None fails the run": (
            "failed", "middleware before of agent 'desk' returned None; it must return the content"),
        "an exception in before fails the run": ("failed", "middleware before of agent 'desk' raised ValueError: no entry"),
        "before may rewrite what the model reads": ("completed", None),
        "after returning None fails the run": (
            "failed", "middleware after of agent 'desk' returned None; it must return the response"),
        "an exception in after fails the run": ("failed", "middleware after of agent 'desk' raised KeyError: 'lost'"),
        "an exception in cleanup never changes the status": ("completed", None),
        "an unexpected middleware error is an agent error": (
            "failed", "middleware before of agent 'desk' raised ValueError: no entry"),
        "before returning something other than the content fails the run": (
            "failed", ("middleware before of agent 'desk' returned str; it must return the content (a dict with role "
                      "and parts)")),
    }
    assert only(outcomes["before may rewrite what the model reads"]).output == (
        '{"user": "rewritten by before"} (checked)')
    assert only(outcomes["an exception in cleanup never changes the status"]).output == '{"user": "cleanup-raises"} (checked)'
    unexpected = outcomes["an unexpected middleware error is an agent error"]
    assert failure_text(unexpected, Masker()).split("\n")[:2] == [
        "tests/desk.yaml:14: case 'an unexpected middleware error is an agent error' (desk) failed",
        "    0/1 runs passed, threshold 100% needs 1: agent error: middleware before of agent 'desk' raised ValueError: no entry",
    ]


def test_cleanup_middleware_error_is_logged_in_the_trace(desk: CaseProject) -> None:
    desk.suite("desk", "tests:\n  - name: cleanup raises\n    payload: cleanup-raises\n")
    outcome = desk.case("desk", "cleanup raises")
    assert outcome.verdict_passed, outcome.failure_reason
    record = only(outcome)
    assert record.status == "completed"
    cleanup = [e for e in record.events if isinstance(e, MiddlewareEvent) and e.phase == "cleanup"]
    assert cleanup == [MiddlewareEvent(phase="cleanup", mock=None, error="RuntimeError: cleanup broke")]
    assert cleanup[0].to_dict() == {"type": "middleware", "phase": "cleanup", "mock": None,
                                    "error": "RuntimeError: cleanup broke"}
