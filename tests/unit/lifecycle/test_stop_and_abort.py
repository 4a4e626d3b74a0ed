"""``StopProcessing`` and ``AbortTool`` from every place they may come from (spec §9.5, §9.6),
below pytest (``StopProcessingEvent``s, aborted ``ToolCallRecord``s), and vendor projects whose
cases end in middleware, which pass unchanged without a cassette."""

from __future__ import annotations

import json

import pytest

from helpers.harness import CaseProject, conftest_hooks
from helpers.models import SCRIPTED_MODEL
from helpers.project import esc
from pytest_connic.records.events import StopProcessingEvent
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord
from pytest_connic.reports.failure import failure_text
from pytest_connic.reports.terminal import summary_line

OPS = '''
from connic import AbortTool, StopProcessing


def add(a: int, b: int) -> dict:
    """Add two numbers."""
    with open("tool-ran.log", "a") as fh:
        fh.write(f"{a}\\n")
    if a == 99:
        raise StopProcessing("stopped by tool")
    if a == 77:
        raise AbortTool({"error": "tool aborted"})
    return {"sum": a + b}
'''

HOOKS = '''
from connic import AbortTool, StopProcessing


def before(tool_name, params, context):
    if params["a"] == 13:
        raise AbortTool({"error": "unlucky"})
    if params["a"] == 66:
        raise StopProcessing("stopped by before hook")
    return None


async def after(tool_name, params, result, context):
    if result.get("sum") == 100:
        raise StopProcessing("stopped by after hook")
    if result.get("sum") == 200:
        raise AbortTool("after says no")
    return None
'''

MIDDLEWARE = '''
import json

from connic import StopProcessing


async def before(content, context):
    if content["parts"][0]["text"] == "halt":
        raise StopProcessing('{"status": "rejected"}')
    return content


def after(response, context):
    return json.dumps({"after": json.loads(response)})


def cleanup(run, context):
    with open("cleanup.log", "a") as fh:
        fh.write(f"{run['status']} {run['output']}\\n")
'''

MOCKS = {
    "stops_tool": '''
from connic import AbortTool, StopProcessing


def mock_ops_add(tool_name, params, context):
    if params["a"] == 98:
        raise StopProcessing("stopped by mock")
    if params["a"] == 76:
        raise AbortTool({"error": "mock aborted"})
    return {"sum": 0}
''',
    "stops_hook": '''
from connic import AbortTool, StopProcessing


def mock_hook_before(tool_name, params, context):
    if params["a"] == 65:
        raise StopProcessing("stopped by hook mock")
    if params["a"] == 12:
        raise AbortTool({"error": "hook mock aborted"})
    return None
''',
    "stops_mw": '''
from connic import StopProcessing


def middleware_before(content, context):
    raise StopProcessing("stopped by middleware mock")
''',
}


def _calls(a: int, b: int = 1) -> str:
    return json.dumps({"calls": [["add", {"a": a, "b": b}]]})


STOPS = [
    # (case, payload, mocks, expected output)
    ("stop in before middleware", "halt", None, '{"status": "rejected"}'),
    ("stop in the tool", _calls(99), None, "stopped by tool"),
    ("stop in the before hook", _calls(66), None, "stopped by before hook"),
    ("stop in the after hook", _calls(50, 50), None, "stopped by after hook"),
    ("stop in a tool mock", _calls(98), "stops_tool", "stopped by mock"),
    ("stop in a hook mock", _calls(65), "stops_hook", "stopped by hook mock"),
    ("stop in a middleware mock", _calls(1), "stops_mw", "stopped by middleware mock"),
]

ABORTS = [
    # (case, payload, mocks, what the model read back, the trace's error)
    ("abort in the before hook", _calls(13), None, {"error": "unlucky"},
     'aborted by before hook (AbortTool): {"error": "unlucky"}'),
    ("abort in a before hook mock", _calls(12), "stops_hook", {"error": "hook mock aborted"},
     'aborted by before hook mock mock_hook_before (AbortTool): {"error": "hook mock aborted"}'),
    ("abort in the tool", _calls(77), None, {"error": "tool aborted"},
     'aborted by the tool (AbortTool): {"error": "tool aborted"}'),
    ("abort in a tool mock", _calls(76), "stops_tool", {"error": "mock aborted"},
     'aborted by mock mock_ops_add (AbortTool): {"error": "mock aborted"}'),
    ("abort in the after hook", _calls(100, 100), None, "after says no",
     "aborted by after hook (AbortTool): after says no"),
]


def _yaml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid YAML double-quoted scalar


@pytest.fixture
def stops(case_project: CaseProject) -> CaseProject:
    """Agent ``desk``: its tool, hooks, middleware and mocks stop or abort by the numbers passed
    (``STOPS``, ``ABORTS``: a case each in ``tests/desk.yaml``)."""
    project = case_project
    project.tool("ops", OPS)
    project.agent("desk", tools=["ops.add"])
    project.write("hooks/desk.py", HOOKS)
    project.write("middleware/desk.py", MIDDLEWARE)
    project.host = conftest_hooks(SCRIPTED_MODEL)
    for name, source in MOCKS.items():
        project.write(f"tests/mocks/{name}.py", source)
    lines = ["tests:"]
    for name, payload, mocks, output in STOPS:
        lines += [f"  - name: {name}", f"    payload: {_yaml_str(payload)}"]
        if mocks:
            lines.append(f"    mocks: {mocks}")
        # a JSON response is parsed (spec §2.5); `after` never ran, or it would wrap the output
        check = 'output.status == "rejected"' if output.startswith("{") else f"output == {json.dumps(output)}"
        lines.append(f"    expected_result: {_yaml_str('status == ' + json.dumps('completed') + ' and ' + check)}")
    for name, payload, mocks, read, _ in ABORTS:
        lines += [f"  - name: {name}", f"    payload: {_yaml_str(payload)}"]
        if mocks:
            lines.append(f"    mocks: {mocks}")
        lines.append(f"    expected_result: {_yaml_str('output.after.read == ' + json.dumps([read]))}")
        lines += ["    expected_tool_calls:", "      - ops.add: invocations == 1"]
    project.write("tests/desk.yaml", "\n".join(lines) + "\n")
    return project


def only(outcome: CaseOutcome) -> RunRecord:
    (record,) = outcome.records
    return record


def test_stop_processing_from_every_place_completes_the_run(stops: CaseProject) -> None:
    outcomes = stops.cases("desk", *(name for name, *_ in STOPS))
    assert {n: o.failure_reason for n, o in outcomes.items()} == dict.fromkeys(outcomes)
    for name, _, _, output in STOPS:
        run = only(outcomes[name])
        assert (run.status, run.output_raw, run.error) == ("completed", output, None), name
        stopped = [e.response for e in run.events if isinstance(e, StopProcessingEvent)]
        assert stopped == [output], name
    # the tool never ran when a hook or a mock stopped the run first
    assert sorted((stops.root / "tool-ran.log").read_text().split()) == ["50", "99"]
    # cleanup middleware ran last for every run, with the response as the output
    cleanups = (stops.root / "cleanup.log").read_text().splitlines()
    assert sorted(cleanups) == sorted(f"completed {output}" for *_, output in STOPS)


def test_abort_tool_from_every_place_skips_the_call(stops: CaseProject) -> None:
    outcomes = stops.cases("desk", *(name for name, *_ in ABORTS))
    assert {n: o.failure_reason for n, o in outcomes.items()} == dict.fromkeys(outcomes)
    for name, _, _, read, error in ABORTS:
        run = only(outcomes[name])
        (call,) = run.tool_calls
        # the model read the abort result as the tool's answer; the trace marks an error,
        # and no result is recorded (result predicates never match an aborted call)
        assert (call.aborted, call.error, call.has_result) == (True, error, False), name
        assert run.output == {"after": {"read": [read]}}, name
    # a before hook (or its mock) skips the tool; the tool itself and the after hook come later
    assert sorted((stops.root / "tool-ran.log").read_text().split()) == ["100", "77"]


def test_an_aborted_call_fails_a_result_predicate_and_the_trace_says_why(stops: CaseProject) -> None:
    stops.suite("aborts", '''
        agent: desk
        tests:
          - name: result of an aborted call
            payload: '{"calls": [["add", {"a": 13, "b": 1}]]}'
            expected_tool_calls:
              - ops.add: result.error == "unlucky"
    ''')
    outcome = stops.case("aborts", "result of an aborted call")
    (failure,) = only(outcome).failures
    assert failure.startswith('expected tool call ops.add: result.error == "unlucky" not satisfied')
    pytest.LineMatcher(failure_text(outcome, stops.masker).split("\n")).fnmatch_lines([
        esc('*✗ add(a=13, b=1) [aborted]* — aborted by before hook (AbortTool): {"error": "unlucky"}')])


# --------------------------------------------------------------------------- vendor projects

ORDER_VALIDATOR_MIDDLEWARE = '''
"""Middleware for order-validator (connic-awesome-agents, sqs-order-processor)."""

import json
from typing import Any

try:
    from connic.exceptions import StopProcessing
except ImportError:
    class StopProcessing(Exception):
        pass


async def before(content: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    """Extract order metadata and reject empty/malformed orders."""
    parts = content.get("parts", [])
    for part in parts:
        if isinstance(part, dict) and "text" in part:
            try:
                payload = json.loads(part["text"])
                if "order_id" not in payload:
                    raise StopProcessing(
                        '{"error": "Missing order_id", "status": "rejected"}'
                    )
                context["order_id"] = payload["order_id"]
                context["customer_id"] = payload.get("customer_id", "unknown")

                items = payload.get("items", [])
                if not items:
                    raise StopProcessing(
                        '{"error": "Order has no items", "status": "rejected", '
                        f'"order_id": "{payload["order_id"]}"' + '}'
                    )
            except json.JSONDecodeError:
                raise StopProcessing(
                    '{"error": "Invalid JSON payload", "status": "rejected"}'
                )
    return content


async def after(response: str, context: dict[str, Any]) -> str:
    return response
'''

ORDER_TOOLS = '''
"""Order processing tools for validation and fulfillment."""

from typing import Any


def calculate_order_total(
    items: list[dict[str, Any]],
    shipping_cost: float = 0.0,
    tax_rate: float = 0.0,
) -> dict[str, Any]:
    """Calculate the expected order total from line items.

    Args:
        items: List of items, each with "price" and "quantity" keys
        shipping_cost: Shipping fee
        tax_rate: Tax rate as decimal (e.g. 0.19 for 19%)
    """
    subtotal = sum(item.get("price", 0) * item.get("quantity", 1) for item in items)
    tax = round(subtotal * tax_rate, 2)
    return {"subtotal": subtotal, "tax": tax, "total": round(subtotal + tax + shipping_cost, 2)}


def check_inventory(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Check inventory availability for all order items.

    Args:
        items: List of items with "sku" and "quantity" keys
    """
    return {"all_available": True, "items": []}
'''

ORDER_MOCKS = '''
def mock_order_tools_calculate_order_total(tool_name, params, context):
    items = params.get("items", [])
    subtotal = sum(i.get("price", 0) * i.get("quantity", 1) for i in items)
    return {"subtotal": subtotal, "tax": 0, "total": subtotal}


def mock_order_tools_check_inventory(tool_name, params, context):
    return {"all_available": True, "items": []}
'''

ORDER_SUITE = '''
version: "1.0"

defaults:
  runs: 1
  timeout_s: 60
  mocks: order_mocks
  strict_mocks: true

tests:
  - name: rejects_empty_order_in_middleware
    # The before() middleware short-circuits empty orders before the LLM runs,
    # so no validation tools are called.
    payload: '{"order_id": "A125", "customer_id": "c1", "items": []}'
    expected_result: output.status == "rejected"
    expected_no_tool_calls:
      - order_tools.calculate_order_total
      - order_tools.check_inventory

  - name: rejects_malformed_order_in_middleware
    payload: '{"customer_id": "c1", "items": [{"sku": "SKU1"}]}'
    expected_result: output.error == "Missing order_id" and status == "completed"
'''

TRIAGER_MIDDLEWARE = '''
"""Middleware for support-triager (connic-awesome-agents, customer-support)."""

from typing import Any

try:
    from connic.exceptions import StopProcessing
except ImportError:
    class StopProcessing(Exception):
        pass

BLOCKED_DOMAINS = {"spam.example.com", "throwaway.mail"}


async def before(content: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    parts = content.get("parts", [])
    text = ""
    for part in parts:
        if isinstance(part, dict) and "text" in part:
            text += part["text"]

    text_lower = text.lower()
    for domain in BLOCKED_DOMAINS:
        if domain in text_lower:
            raise StopProcessing(
                "This message has been automatically filtered. "
                "Please contact support through our official channels."
            )

    context["channel"] = "websocket" if context.get("connector_id", "").startswith("ws-") else "async"

    return content


async def after(response: str, context: dict[str, Any]) -> str:
    return response
'''

TRIAGER_SUITE = '''
version: "1.0"

# The triager has no custom tools, so a single file with these cases gives full
# coverage. No mocks are needed.
defaults:
  runs: 1
  timeout_s: 90

tests:
  - name: classifies_billing_issue
    payload: '{"text":"I was charged twice for my subscription this month and need a refund."}'
    expected_result: output.category == "billing"

  - name: blocks_spam_domain
    # The before() middleware raises StopProcessing for blocked domains, so the
    # LLM never classifies the ticket.
    payload: '{"text":"Cheap deals, reply now! Contact us at deals@spam.example.com"}'
    expected_result: status == "completed"
'''


def test_vendor_cases_that_end_in_middleware_pass_without_a_cassette(case_project: CaseProject) -> None:
    project = case_project
    project.write("agents/order-validator.yaml", '''
        version: "1.0"
        name: order-validator
        type: llm
        model: gemini/gemini-3-flash-preview
        description: "Validates incoming orders from SQS"
        system_prompt: "You validate e-commerce orders."
        temperature: 0.1
        output_schema: order-validation
        timeout: 30
        concurrency:
          key: "customer_id"
          on_conflict: queue
        tools:
          - order_tools.calculate_order_total
          - order_tools.check_inventory
    ''')
    project.write("agents/_defaults.yaml", "reasoning_effort: low\ntimeout: 60\n")
    project.write("schemas/order-validation.json", json.dumps({
        "type": "object", "properties": {"validation_status": {"type": "string"}},
        "required": ["validation_status"],
    }))
    project.write("tools/order_tools.py", ORDER_TOOLS)
    project.write("middleware/order-validator.py", ORDER_VALIDATOR_MIDDLEWARE)
    project.write("tests/mocks/order_mocks.py", ORDER_MOCKS)
    project.write("tests/order-validator.yaml", ORDER_SUITE)
    project.write("agents/support-triager.yaml", '''
        version: "1.0"
        name: support-triager
        type: llm
        model: gemini/gemini-3-flash-preview
        description: "Classifies incoming support tickets"
        system_prompt: "You are a support ticket triage specialist."
        temperature: 0.2
        output_schema: ticket-classification
    ''')
    project.write("schemas/ticket-classification.json", json.dumps({
        "type": "object", "properties": {"category": {"type": "string"}}, "required": ["category"],
    }))
    project.write("middleware/support-triager.py", TRIAGER_MIDDLEWARE)
    project.write("tests/support-triager.yaml", TRIAGER_SUITE)
    # only the case that reaches the model has a cassette
    project.replies("support-triager", "classifies_billing_issue", '{"category": "billing"}')

    outcomes = [*project.cases("order-validator").values(), *project.cases("support-triager").values()]

    assert summary_line(outcomes) == "4/4 cases passed."
    stopped = {o.case_name: [e.response for e in only(o).events if isinstance(e, StopProcessingEvent)]
               for o in outcomes}
    assert stopped == {
        "rejects_empty_order_in_middleware": ['{"error": "Order has no items", "status": "rejected", "order_id": "A125"}'],
        "rejects_malformed_order_in_middleware": ['{"error": "Missing order_id", "status": "rejected"}'],
        "classifies_billing_issue": [],
        "blocks_spam_domain": [("This message has been automatically filtered. Please contact support through our "
                                "official channels.")],
    }
    assert sorted(p.name for p in (project.root / "cassettes").rglob("*.yaml")) == ["classifies_billing_issue.yaml"]


def test_a_tool_stop_with_recorded_turns_left_over_is_no_divergence(case_project: CaseProject) -> None:
    """A run that a tool's ``StopProcessing`` ends completes early for its own reason: the turns a
    cassette still holds after it are no "fewer steps than recorded" (docs/models.md "Replay is
    strict"), as after a middleware stop; a run that simply completes early still diverges."""
    project = case_project
    project.tool("ops", OPS)
    project.agent("desk", tools=["ops.add"])
    project.suite("desk", '''
        tests:
          - name: stopped
            payload: go
            expected_result: output == "stopped by tool"
          - name: ends early
            payload: go
    ''')
    leftover = {"content": "never read"}
    project.cassette("desk", "stopped", [{"turns": [
        {"tool_calls": [{"name": "add", "arguments": {"a": 99, "b": 1}}]}, leftover]}])
    project.cassette("desk", "ends early", [{"turns": [{"content": "done"}, leftover]}])

    outcomes = project.cases("desk")

    assert only(outcomes["stopped"]).failures == []
    assert only(outcomes["stopped"]).stopped
    (failure,) = only(outcomes["ends early"]).failures
    assert failure.endswith("took fewer steps than recorded")
