"""Mocks below pytest (spec §5): every rung of every ladder, Connic's name normalisation, what can
and cannot be mocked, validation of mocked calls, and which mock served a call (``mocked``,
``mock_function``, the hook events) in the run's records and its failure report."""

from __future__ import annotations

import fnmatch
import json
from typing import Any

from helpers.harness import CaseProject, HookHost, first_failure
from pytest_connic.models.base import ModelRequest, ModelResponse, ToolCallRequest
from pytest_connic.project.index import index_project
from pytest_connic.records.events import HookEvent
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord
from pytest_connic.reports.failure import failure_text
from pytest_connic.secrets import Masker
from pytest_connic.suite.loader import load_suite
from pytest_connic.suite.static import check_suite


def _load(text: object) -> object:
    try:
        return json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return text


def scripted_model(agent: Any, model: str, case: Any, run_index: int) -> object:
    """Asks for the calls the payload lists (``{"calls": [[name, args], ...]}``), then answers with
    every tool result it read back: ``{"read": [...]}``."""

    def answer(request: ModelRequest) -> object:
        read = [_load(m["content"]) for m in request.messages if m["role"] == "tool"]
        if read:
            return json.dumps({"read": read})
        plan = _load(request.messages[0]["content"])
        calls = plan.get("calls", []) if isinstance(plan, dict) else []
        if not calls:
            return json.dumps({"read": []})
        return ModelResponse(tool_calls=[ToolCallRequest(f"call{i}", name, args) for i, (name, args) in enumerate(calls)])

    return answer


CUSTOMER = '''
def add_customer(name: str, note: str = "") -> dict:
    """Add a customer."""
    return {"real": "add_customer", "note": note}


def remove_customer(customer_id: int, note: str = "") -> dict:
    """Remove a customer."""
    return {"real": "remove_customer", "note": note}
'''

ORDERS = '''
def list_orders(customer_id: int, note: str = "") -> dict:
    """List orders."""
    return {"real": "list_orders", "note": note}
'''

BILLING = '''
def refund(charge_id: str, amount: float, note: str = "") -> dict:
    """Refund a charge."""
    return {"real": "refund", "note": note}
'''

HOOKS = '''
def before(tool_name, params, context):
    return None


def after(tool_name, params, result, context):
    return {**result, "after": "real"} if isinstance(result, dict) else result
'''


def _rung(name: str, body: str) -> str:
    return f"def {name}(*args):\n    {body}\n\n\n"


def _tool_mocks(*names: str) -> str:
    return "".join(_rung(n, f'return {{"by": "{n}", "tool": args[0]}}') for n in names)


def _hook_mocks(*rungs: str) -> str:
    src = ""
    for rung in rungs:
        param = "collection" if rung == "mock_db_count" else "note"
        src += _rung(f"{rung}_hook_before", f'return {{"{param}": "{rung}_hook_before"}}')
        src += _rung(f"{rung}_hook_after", f'return {{**args[2], "after": "{rung}_hook_after"}}')
    return src


CALL_ALL = json.dumps({"calls": [
    ["add_customer", {"name": "Ada"}],
    ["remove_customer", {"customer_id": 7}],
    ["list_orders", {"customer_id": 7}],
    ["refund", {"charge_id": "ch_1", "amount": 4.5}],
    ["db_count", {"collection": "orders"}],
]})


def _crm(project: CaseProject) -> None:
    project.host = HookHost(make_model=scripted_model)
    project.write("tools/data/customer.py", CUSTOMER)
    project.write("tools/data/orders.py", ORDERS)
    project.write("tools/billing.py", BILLING)
    project.agent("crm", tools=["data.customer.add_customer", "data.customer.remove_customer",
                                "data.orders.list_orders", "billing.refund", "db_count"])
    project.write("hooks/crm.py", HOOKS)
    rungs = ["mock_data_customer_add_customer", "mock_data_customer", "mock_data", "mock"]
    # predefined tools are never mocked, even by name or by the catch-all `mock`
    project.write("tests/mocks/tool_rungs.py", _tool_mocks(*rungs, "mock_db_count"))
    project.write("tests/mocks/hook_rungs.py", _hook_mocks(*rungs[:3], "mock_db_count", "mock"))
    project.write("tests/mocks/catch_all.py", _tool_mocks("mock"))


def only(outcome: CaseOutcome) -> RunRecord:
    (record,) = outcome.records
    return record


def test_every_rung_of_the_tool_and_hook_ladders(case_project: CaseProject) -> None:
    _crm(case_project)
    case_project.suite("crm", f'''
        defaults:
          mocks: catch_all
        tests:
          - name: tool ladder
            payload: '{CALL_ALL}'
            mocks: tool_rungs.py
          - name: hook ladder
            payload: '{CALL_ALL}'
            mocks: hook_rungs
          - name: defaults mocks apply to cases without their own
            payload: '{CALL_ALL}'
    ''')

    runs = {name: only(o) for name, o in case_project.cases("crm").items()}

    tools = runs["tool ladder"]
    # a mock stands in for the tool, not for its hooks: the real after hook ran on each result
    assert {c.ref: (c.mocked, c.mock_function, c.result) for c in tools.tool_calls} == {
        "data.customer.add_customer": (True, "mock_data_customer_add_customer", {
            "by": "mock_data_customer_add_customer", "tool": "data.customer.add_customer", "after": "real"}),
        "data.customer.remove_customer": (True, "mock_data_customer", {
            "by": "mock_data_customer", "tool": "data.customer.remove_customer", "after": "real"}),
        "data.orders.list_orders": (True, "mock_data", {"by": "mock_data", "tool": "data.orders.list_orders",
                                                        "after": "real"}),
        "billing.refund": (True, "mock", {"by": "mock", "tool": "billing.refund", "after": "real"}),
        "db_count": (False, None, {"count": 0, "after": "real"}),  # a predefined tool: never mocked
    }
    hooks = runs["hook ladder"]
    assert {c.ref: (c.params.get("note", c.params.get("collection")), c.result) for c in hooks.tool_calls} == {
        "data.customer.add_customer": ("mock_data_customer_add_customer_hook_before", {
            "real": "add_customer", "note": "mock_data_customer_add_customer_hook_before",
            "after": "mock_data_customer_add_customer_hook_after"}),
        "data.customer.remove_customer": ("mock_data_customer_hook_before", {
            "real": "remove_customer", "note": "mock_data_customer_hook_before", "after": "mock_data_customer_hook_after"}),
        "data.orders.list_orders": ("mock_data_hook_before", {
            "real": "list_orders", "note": "mock_data_hook_before", "after": "mock_data_hook_after"}),
        "billing.refund": ("mock_hook_before", {"real": "refund", "note": "mock_hook_before", "after": "mock_hook_after"}),
        "db_count": ("mock_db_count_hook_before", {"count": 0, "after": "mock_db_count_hook_after"}),
    }
    assert all(not c.mocked for c in hooks.tool_calls)
    served = [(e.tool, e.phase, e.mock) for e in hooks.events if isinstance(e, HookEvent)]
    assert ("billing.refund", "after", "mock_hook_after") in served
    assert ("db_count", "before", "mock_db_count_hook_before") in served
    defaults = {c.ref: c.result for c in runs["defaults mocks apply to cases without their own"].tool_calls}
    assert defaults["data.customer.add_customer"] == {"by": "mock", "tool": "data.customer.add_customer", "after": "real"}
    assert defaults["db_count"] == {"count": 0, "after": "real"}


def test_the_failure_report_shows_which_mock_served_each_call(case_project: CaseProject) -> None:
    _crm(case_project)
    case_project.suite("crm", f'''
        tests:
          - name: mocked calls in a failing run
            payload: '{CALL_ALL}'
            mocks: tool_rungs
            expected_no_tool_calls:
              - billing.refund
    ''')

    outcome = case_project.case("crm", "mocked calls in a failing run")

    assert not outcome.verdict_passed
    report = failure_text(outcome, Masker(()), 80).splitlines()
    expected = [
        "*tool billing.refund was called*",
        "*✓ add_customer(name=\"Ada\") → *[mocked by mock_data_customer_add_customer]*",
        "*✓ remove_customer(customer_id=7) → *[mocked by mock_data_customer]*",
        "*✓ list_orders(customer_id=7) → *[mocked by mock_data]*",
        "*✓ refund(charge_id=\"ch_1\", amount=4.5) → *[mocked by mock]*",
        "*✓ db_count(collection=\"orders\") → {\"count\":0,\"after\":\"real\"} (*",
    ]
    at = 0
    for pattern in expected:  # in this order
        at = next(i for i in range(at, len(report)) if fnmatch.fnmatchcase(report[i], pattern)) + 1
    assert not any(fnmatch.fnmatchcase(line, "*db_count(*[[]mocked*") for line in report)


def test_mocked_calls_are_validated_against_the_real_signature(case_project: CaseProject) -> None:
    _crm(case_project)
    calls = {
        "wrong type": [["add_customer", {"name": 5}]],
        "missing argument": [["refund", {"charge_id": "ch_1"}]],
        "unknown argument": [["list_orders", {"customer_id": 1, "limit": 3}]],
        "a valid call": [["refund", {"charge_id": "ch_1", "amount": 3}]],
    }
    cases = "".join(
        f"  - name: {name}\n    payload: '{json.dumps({'calls': c})}'\n    mocks: catch_all\n"
        for name, c in calls.items()
    )
    case_project.write("tests/crm.yaml", "tests:\n" + cases)

    outcomes = case_project.cases("crm")

    assert outcomes["a valid call"].verdict_passed
    assert {name: first_failure(o) for name, o in outcomes.items() if name != "a valid call"} == {
        "wrong type": ("mocked call to data.customer.add_customer does not match the tool's signature: "
                       "argument 'name': 5 is not of type 'string'"),
        "missing argument": ("mocked call to billing.refund does not match the tool's signature: "
                             "missing required argument 'amount'"),
        "unknown argument": ("mocked call to data.orders.list_orders does not match the tool's signature: "
                             "unknown argument 'limit' (the tool takes: customer_id, note)"),
    }
    # the call's own line says which mock refused it (not "no result: the run ended ...")
    missing = outcomes["missing argument"]
    (refused,) = only(missing).tool_calls
    assert refused.error is not None and refused.error.startswith("rejected by mock ")
    report = failure_text(missing, Masker(()), 80)
    assert any(fnmatch.fnmatchcase(line, "*✗ refund(charge_id=\"ch_1\")*— rejected by mock * the call does not match*")
               for line in report.splitlines()), report
    assert "no result: the run ended while this call was running" not in report


def test_a_missing_mocks_module_fails_the_case_before_the_agent(case_project: CaseProject) -> None:
    _crm(case_project)
    case_project.suite("crm", '''
        tests:
          - name: typo
            payload: '{"calls": []}'
            mocks: tool_rung
    ''')

    # found at collection (suite/static.py): the case fails in setup, no run starts
    suite = load_suite(case_project.root / "tests/crm.yaml", case_project.root)
    assert suite is not None
    check_suite(suite, index_project(case_project.root))

    (case,) = suite.cases
    assert case.error is not None and case.error.startswith(
        "tests/crm.yaml:4:12: tests[0].mocks: no mocks module tests/mocks/tool_rung.py")
    assert case.error.endswith("Connic fails the case before the agent starts")


# --------------------------------------------------------------------------- middleware and guardrail mocks

MIDDLEWARE = '''
def before(content, context):
    context["before"] = "real"
    return content


def after(response, context):
    return f"{response} | before={context.get('before')} after=real"


def cleanup(run, context):
    with open("cleanup.log", "a") as fh:
        fh.write(f"real {run['status']}\\n")
'''

MIDDLEWARE_MOCKS = '''
async def middleware_before(content, context):
    context["before"] = "middleware_before"
    return content


def middleware_after(response, context):
    return f"{response} | before={context.get('before')} after=middleware_after"


def middleware_cleanup(run, context):
    with open("cleanup.log", "a") as fh:
        fh.write(f"middleware_cleanup {run['status']}\\n")
'''


def test_middleware_mocks_replace_existing_phases_only(case_project: CaseProject) -> None:
    case_project.agent("desk")
    case_project.agent("bare")
    case_project.write("middleware/desk.py", MIDDLEWARE)
    case_project.write("tests/mocks/mw.py", MIDDLEWARE_MOCKS)
    case_project.suite("desk", '''
        tests:
          - name: mocked
            payload: hi
            mocks: mw
          - name: real
            payload: hi
    ''')
    case_project.suite("bare", '''
        tests:
          - name: a mock never adds a phase
            payload: hi
            mocks: mw
    ''')
    for suite, case in [("desk", "mocked"), ("desk", "real"), ("bare", "a mock never adds a phase")]:
        case_project.replies(suite, case, "ok")

    desk = case_project.cases("desk")
    bare = case_project.case("bare", "a mock never adds a phase")

    assert only(desk["mocked"]).output == "ok | before=middleware_before after=middleware_after"
    assert only(desk["real"]).output == "ok | before=real after=real"
    assert only(bare).output == "ok"
    assert sorted((case_project.root / "cleanup.log").read_text().splitlines()) == [
        "middleware_cleanup completed", "real completed"]


GUARDRAIL_MOCKS = {
    "g_exact": "from connic import GuardrailResult\n"
               "def guardrail_input_domain_check(content, context):\n"
               "    return GuardrailResult(passed=True, message='exact')\n"
               "def guardrail_output(content, context):\n"
               "    return GuardrailResult(passed=True, message='output')\n"
               "def guardrail(content, context):\n"
               "    raise AssertionError('a more specific rung exists')\n",
    "g_direction": "from connic import GuardrailResult\n"
                   "async def guardrail_input(content, context):\n"
                   "    return GuardrailResult(passed=True, message='input:' + content)\n"
                   "def guardrail(content, context):\n"
                   "    return GuardrailResult(passed=False, message='catch-all')\n",
}


def test_every_rung_of_the_guardrail_ladder(case_project: CaseProject) -> None:
    case_project.agent("guarded", guardrails={
        "input": [{"type": "custom", "name": "domain-check"}, {"type": "regex", "config": {"patterns": ["zzz"]}}],
        "output": [{"type": "custom", "name": "tone", "mode": "warn"}],
    })
    case_project.write("guardrails/domain-check.py", "def check(content, context):\n    return False\n")
    case_project.write("guardrails/tone.py", "def check(content, context):\n    return True\n")
    for name, source in GUARDRAIL_MOCKS.items():
        case_project.write(f"tests/mocks/{name}.py", source)
    case_project.suite("guarded", '''
        tests:
          - name: exact and direction rungs
            payload: hello
            mocks: g_exact
          - name: direction and catch-all rungs
            payload: hello
            mocks: g_direction
          - name: the real check runs without a mock
            payload: hello
            expected_result: status == "blocked"
    ''')
    case_project.replies("guarded", "exact and direction rungs", "fine")
    case_project.replies("guarded", "direction and catch-all rungs", "fine")

    outcomes = case_project.cases("guarded")

    assert all(o.verdict_passed for o in outcomes.values())
    rails = {name: [(g.name, g.status, g.mock_function, g.message) for g in only(o).guardrails]
             for name, o in outcomes.items()}
    assert rails == {
        "exact and direction rungs": [
            ("domain-check", "passed", "guardrail_input_domain_check", "exact"),
            (None, "passed", None, None),  # built-in guardrails are never mocked
            ("tone", "passed", "guardrail_output", "output"),
        ],
        "direction and catch-all rungs": [
            ("domain-check", "passed", "guardrail_input", "input:hello"),
            (None, "passed", None, None),
            ("tone", "warned", "guardrail", "catch-all"),
        ],
        "the real check runs without a mock": [("domain-check", "blocked", None, None)],
    }
