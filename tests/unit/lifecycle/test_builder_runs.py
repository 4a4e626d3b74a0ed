"""Builders below pytest (spec §4.3): ``build`` and ``cleanup`` (sync or async), the arguments they
get, the ``context`` shared with assertions, files merged with the built payload, Connic's cleanup
verdicts, and a fresh builder and mocks module for every run, also when runs are concurrent. What
a builder leaves in the context crosses the process boundary: those tests also run process-isolated."""

from __future__ import annotations

import pytest

from helpers.harness import CaseProject, conftest_hooks
from pytest_connic.project.index import index_project
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord
from pytest_connic.suite.loader import load_suite
from pytest_connic.suite.static import check_suite

#: The model calls what the payload lists ({"calls": [...]}), then answers with the tool results
#: it read and the text of the user message (attached files as their mime types).
SCRIPTED_MODEL = '''
import json

from pytest_connic.models.base import ModelResponse, ToolCallRequest


def _load(text):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def pytest_connic_make_model(config, agent, model, case, run_index):
    def answer(request):
        content = request.messages[0]["content"]
        if isinstance(content, list):
            text = " ".join(p["text"] for p in content if p["type"] == "text")
            files = [p["mime_type"] for p in content if p["type"] == "file"]
        else:
            text, files = content, []
        read = [_load(m["content"]) for m in request.messages if m["role"] == "tool"]
        plan = _load(text)
        calls = plan.get("calls", []) if isinstance(plan, dict) else []
        if calls and not read:
            return ModelResponse(tool_calls=[
                ToolCallRequest(id=f"call{i}", name=name, arguments=args) for i, (name, args) in enumerate(calls)
            ])
        return json.dumps({"read": read, "user": text, "files": files})
    return answer
'''

BILLING = '''
def refund(charge_id: str, amount: float) -> dict:
    """Refund a charge."""
    return {"refunded": charge_id, "amount": amount}
'''


@pytest.fixture
def bill(case_project: CaseProject) -> CaseProject:
    case_project.tool("billing", BILLING)
    case_project.agent("bill", tools=["billing.refund"])
    case_project.host = conftest_hooks(SCRIPTED_MODEL)
    case_project.write("tests/files/note.txt", "a note")
    return case_project


def only(outcome: CaseOutcome) -> RunRecord:
    (record,) = outcome.records
    return record


ARGS_BUILDER = '''
def build(context, builder_args, test_name, payload, files):
    context["seen"] = {"builder_args": builder_args, "test_name": test_name, "payload": payload, "files": files}
    context["charge_id"] = "ch_" + test_name.split()[0]
    amount = builder_args.get("amount", 1)
    return {"calls": [["refund", {"charge_id": context["charge_id"], "amount": amount}]]}


def cleanup(run, context, builder_args):
    context["delivered_files"] = [f["name"] for f in run["input"].get("files", [])]
    context["raw_output"] = run["output"]
    context["run_context_id"] = run["context"]["run_id"]
    return True
'''

ASYNC_BUILDER = '''
import asyncio
import base64


async def build(context, builder_args, test_name, payload, files):
    await asyncio.sleep(0)
    built = {"data": base64.b64encode(b"built").decode(), "mime_type": "image/png", "name": "built.png"}
    if builder_args.get("text"):
        return "plain text"
    return {"calls": [], "files": [built]}


async def cleanup(run, context, builder_args):
    context["delivered_files"] = [f["name"] for f in run["input"].get("files", [])]
    context["delivered_keys"] = sorted(run["input"])
'''


@pytest.mark.parametrize("isolation", ["none", "process"])
def test_build_arguments_context_and_files(bill: CaseProject, isolation: str) -> None:
    bill.write("tests/builders/charge.py", ARGS_BUILDER)
    bill.write("tests/builders/attach.py", ASYNC_BUILDER)
    # what the builder leaves in ``context`` is read by the assertions (it is in no record)
    bill.suite("bill", '''
        tests:
          - name: refunds the built charge
            builder: charge
            builder_args: {amount: 42}
            payload: static text
            files: [note.txt]
            expected_result: >-
              context.seen.builder_args == {"amount": 42} and context.seen.payload == "static text"
              and context.seen.test_name == "refunds the built charge" and context.seen.files == ["note.txt"]
              and context.delivered_files == ["note.txt"] and output.read[0].refunded == context.charge_id
              and \'"refunded": "ch_refunds"\' in context.raw_output
            expected_tool_calls:
              - billing.refund: params.charge_id == context.charge_id and params.amount == 42
          - name: without builder_args or payload
            builder: charge.py
            expected_result: context.seen.builder_args == {} and context.seen.payload == None
          - name: built files come before the YAML files
            builder: attach
            files: [note.txt]
            expected_result: >-
              context.delivered_files == ["built.png", "note.txt"] and output.files == ["image/png", "text/plain"]
          - name: a built string becomes the message
            builder: attach
            builder_args: {text: true}
            files: [note.txt]
            expected_result: >-
              context.delivered_keys == ["files", "message"] and output.user == "plain text"
              and context.delivered_files == ["note.txt"]
    ''')
    outcomes = bill.cases("bill", isolation=isolation)
    assert {n: o.failure_reason for n, o in outcomes.items()} == dict.fromkeys(outcomes)  # every check held
    first = only(outcomes["refunds the built charge"])
    assert [(c.ref, c.params, c.result) for c in first.tool_calls] == [
        ("billing.refund", {"charge_id": "ch_refunds", "amount": 42}, {"refunded": "ch_refunds", "amount": 42})]
    assert first.input == {"calls": [["refund", {"charge_id": "ch_refunds", "amount": 42}]],
                           "files": [{"data": "YSBub3Rl", "mime_type": "text/plain", "name": "note.txt"}]}
    # the run context the builder's cleanup read is the run's own
    assert first.run_context["run_id"] == first.run_id
    assert only(outcomes["a built string becomes the message"]).output["user"] == "plain text"  # type: ignore[index]


VERDICTS = '''
def build(context, builder_args, test_name, payload, files):
    if builder_args.get("build") == "raise":
        raise ValueError("no stock")
    if builder_args.get("build") == "int":
        return 42
    return builder_args.get("payload", "hello")


def cleanup(run, context, builder_args):
    with open("cleanups.log", "a") as fh:
        fh.write(f"{builder_args['verdict']} output={run['output']!r}\\n")
    verdict = builder_args["verdict"]
    if verdict == "raise":
        raise RuntimeError("teardown failed")
    return {"none": None, "true": True, "false": False, "int": 42}[verdict]
'''

FAILING_MIDDLEWARE = '''
def before(content, context):
    if content["parts"][0]["text"] == "fail":
        raise RuntimeError("agent broke")
    return content
'''


def test_cleanup_verdicts_and_cleanup_after_failures(bill: CaseProject) -> None:
    bill.write("tests/builders/verdict.py", VERDICTS)
    bill.write("tests/builders/empty.py", "VALUE = 1\n")
    bill.write("middleware/bill.py", FAILING_MIDDLEWARE)
    bill.suite("bill", '''
        tests:
          - {name: returns None, builder: verdict, builder_args: {verdict: none}}
          - {name: returns True, builder: verdict, builder_args: {verdict: "true"}}
          - {name: returns False, builder: verdict, builder_args: {verdict: "false"}}
          - {name: returns an int, builder: verdict, builder_args: {verdict: int}}
          - {name: raises, builder: verdict, builder_args: {verdict: raise}}
          - {name: the agent fails, builder: verdict, builder_args: {verdict: "false", payload: fail}}
          - {name: build raises, builder: verdict, builder_args: {verdict: none, build: raise}}
          - {name: build returns an int, builder: verdict, builder_args: {verdict: "true", build: int}}
          - {name: missing builder, builder: nowhere}
          - {name: builder without build, builder: empty}
    ''')
    # a missing builder is found at collection: the case fails in setup, before the agent starts
    suite = load_suite(bill.root / "tests/bill.yaml", bill.root)
    assert suite is not None
    check_suite(suite, index_project(bill.root))
    assert {c.name: c.error for c in suite.cases if c.error} == {"missing builder": (
        "tests/bill.yaml:10:38: tests[8].builder: no builder module tests/builders/nowhere.py (builders: empty, "
        "verdict); Connic fails the case before the agent starts")}
    names = [c.name for c in suite.cases if c.error is None]
    outcomes = bill.cases("bill", *names)
    assert {name: o.failure_reason for name, o in outcomes.items()} == {
        "returns None": None,
        "returns True": None,
        "returns False": "builder cleanup returned False",
        "returns an int": "builder cleanup must return bool or None, got int",
        "raises": "builder cleanup raised: teardown failed",
        "the agent fails": "agent error: middleware before of agent 'bill' raised RuntimeError: agent broke",
        "build raises": "builder build raised: ValueError: no stock",
        "build returns an int": "builder build must return str or dict, got int",
        "builder without build": "builder 'empty': tests/builders/empty.py defines no build() function",
    }
    assert only(outcomes["builder without build"]).tool_calls == []  # the agent never started
    # a False verdict adds to the run's other failures
    assert only(outcomes["the agent fails"]).failures == [
        "agent error: middleware before of agent 'bill' raised RuntimeError: agent broke", "builder cleanup returned False"]
    # cleanup ran for every built run: after a failed agent and after a failed build too
    answered = "output='{\"read\": [], \"user\": \"hello\", \"files\": []}'"
    assert sorted((bill.root / "cleanups.log").read_text().splitlines()) == sorted([
        f"none {answered}", f"true {answered}", f"false {answered}", f"int {answered}", f"raise {answered}",
        "false output=None", "none output=None", "true output=None",
    ])


COUNTING_BUILDER = '''
import asyncio

COUNT = 0


async def build(context, builder_args, test_name, payload, files):
    global COUNT
    COUNT += 1
    context["count"] = COUNT
    with open("arrivals.log", "a") as fh:
        fh.write("x\\n")
    wanted = builder_args.get("overlap", 0)
    for _ in range(1000):  # wait until every run has started its build (they run concurrently)
        with open("arrivals.log") as fh:
            if len(fh.read().split()) >= wanted:
                break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError("runs did not overlap")
    return {"calls": [["refund", {"charge_id": "ch_1", "amount": 1}], ["refund", {"charge_id": "ch_2", "amount": 2}]]}
'''

COUNTING_MOCKS = '''
import threading

CALLS = 0
LOCK = threading.Lock()


def mock_billing_refund(tool_name, params, context):
    # the two calls of one model turn run concurrently, as on Connic
    global CALLS
    with LOCK:
        CALLS += 1
        return {"calls_seen_by_this_module": CALLS}
'''


@pytest.mark.parametrize(("concurrency", "overlap", "isolation"), [(8, 3, "none"), (1, 0, "none"), (8, 3, "process")])
def test_each_run_gets_fresh_builder_and_mocks_modules(bill: CaseProject, concurrency: int, overlap: int,
                                                       isolation: str) -> None:
    bill.agent("bill", tools=["billing.refund"], max_concurrent_runs=8)  # the runs may overlap
    bill.write("tests/builders/counting.py", COUNTING_BUILDER)
    bill.write("tests/mocks/counting.py", COUNTING_MOCKS)
    bill.suite("bill", f'''
        tests:
          - name: module state does not leak between runs
            builder: counting
            builder_args: {{overlap: {overlap}}}
            mocks: counting
            runs: 3
            expected_result: >-
              context.count == 1
              and {{output.read[0].calls_seen_by_this_module, output.read[1].calls_seen_by_this_module}} == {{1, 2}}
            expected_tool_calls:
              - billing.refund: params.charge_id == "ch_1" and result.calls_seen_by_this_module in [1, 2]
    ''')
    outcome = bill.case("bill", "module state does not leak between runs", concurrency=concurrency, isolation=isolation)
    assert outcome.verdict_passed and outcome.successes == 3, outcome.failure_reason
    for record in outcome.records:  # context.count == 1: each run's own builder module
        seen = [r["calls_seen_by_this_module"] for r in record.output["read"]]  # type: ignore[index]
        assert sorted(seen) == [1, 2]  # each run's own mocks module
        assert [(c.mocked, c.mock_function) for c in record.tool_calls] == [(True, "mock_billing_refund")] * 2
    assert len((bill.root / "arrivals.log").read_text().split()) == 3

