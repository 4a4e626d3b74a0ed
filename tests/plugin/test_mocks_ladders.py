"""Mocks (spec §5): every rung of every ladder, Connic's name normalisation, what can and
cannot be mocked, validation of mocked calls, and ``mocked`` in the trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers.models import SCRIPTED_MODEL
from helpers.project import ConnicProject, esc

# --------------------------------------------------------------------------- pytester: a CRM project


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


def _crm(project: ConnicProject) -> None:
    project.write("tools/data/customer.py", CUSTOMER)
    project.write("tools/data/orders.py", ORDERS)
    project.write("tools/billing.py", BILLING)
    project.agent("crm", tools=["data.customer.add_customer", "data.customer.remove_customer",
                                "data.orders.list_orders", "billing.refund", "db_count"])
    project.write("hooks/crm.py", HOOKS)
    project.write("conftest.py", SCRIPTED_MODEL)
    rungs = ["mock_data_customer_add_customer", "mock_data_customer", "mock_data", "mock"]
    # predefined tools are never mocked, even by name or by the catch-all `mock`
    project.write("tests/mocks/tool_rungs.py", _tool_mocks(*rungs, "mock_db_count"))
    project.write("tests/mocks/hook_rungs.py", _hook_mocks(*rungs[:3], "mock_db_count", "mock"))
    project.write("tests/mocks/catch_all.py", _tool_mocks("mock"))


def _runs(report: Path) -> dict[str, dict[str, Any]]:
    return {c["test_name"]: c["runs_detail"][0] for c in json.loads(report.read_text())["cases"]}


def test_every_rung_of_the_tool_and_hook_ladders(project: ConnicProject) -> None:
    _crm(project)
    project.suite("crm", f'''
        defaults:
          mocks: catch_all
        tests:
          - name: tool ladder
            payload: '{CALL_ALL}'
            mocks: tool_rungs.py
            expected_tool_calls:
              - data.customer.add_customer: result.by == "mock_data_customer_add_customer"
              - data.customer.remove_customer: result.by == "mock_data_customer"
              - data.orders.list_orders: result.by == "mock_data"
              - billing.refund: result.by == "mock" and result.tool == "billing.refund"
              - db_count: result.count == 0 and result.after == "real"
          - name: hook ladder
            payload: '{CALL_ALL}'
            mocks: hook_rungs
            expected_tool_calls:
              - data.customer.add_customer: >-
                  result.note == "mock_data_customer_add_customer_hook_before"
                  and result.after == "mock_data_customer_add_customer_hook_after"
              - data.customer.remove_customer: >-
                  result.note == "mock_data_customer_hook_before" and result.after == "mock_data_customer_hook_after"
              - data.orders.list_orders: >-
                  result.note == "mock_data_hook_before" and result.after == "mock_data_hook_after"
              - billing.refund: result.note == "mock_hook_before" and result.after == "mock_hook_after"
              - db_count: >-
                  params.collection == "mock_db_count_hook_before" and result.after == "mock_db_count_hook_after"
          - name: defaults mocks apply to cases without their own
            payload: '{CALL_ALL}'
            expected_tool_calls:
              - data.customer.add_customer: result.by == "mock" and result.after == "real"
              - db_count: result.count == 0
    ''')

    result = project.run("--connic-json", "report.json")

    result.assert_outcomes(passed=3)
    runs = _runs(project.root / "report.json")
    served = {c["ref"]: (c["mocked"], c["mock_function"]) for c in runs["tool ladder"]["tool_calls"]}
    assert served == {
        "data.customer.add_customer": (True, "mock_data_customer_add_customer"),
        "data.customer.remove_customer": (True, "mock_data_customer"),
        "data.orders.list_orders": (True, "mock_data"),
        "billing.refund": (True, "mock"),
        "db_count": (False, None),
    }
    hooks = [(e["tool"], e["phase"], e["mock"]) for e in runs["hook ladder"]["events"] if e["type"] == "hook"]
    assert ("billing.refund", "after", "mock_hook_after") in hooks
    assert ("db_count", "before", "mock_db_count_hook_before") in hooks
    assert all(not c["mocked"] for c in runs["hook ladder"]["tool_calls"])


def test_the_failure_report_shows_which_mock_served_each_call(project: ConnicProject) -> None:
    _crm(project)
    project.suite("crm", f'''
        tests:
          - name: mocked calls in a failing run
            payload: '{CALL_ALL}'
            mocks: tool_rungs
            expected_no_tool_calls:
              - billing.refund
    ''')

    result = project.run()

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*tool billing.refund was called*",
        esc("*✓ add_customer(name=\"Ada\") → *[mocked by mock_data_customer_add_customer]*"),
        esc("*✓ remove_customer(customer_id=7) → *[mocked by mock_data_customer]*"),
        esc("*✓ list_orders(customer_id=7) → *[mocked by mock_data]*"),
        esc("*✓ refund(charge_id=\"ch_1\", amount=4.5) → *[mocked by mock]*"),
        esc("*✓ db_count(collection=\"orders\") → {\"count\":0,\"after\":\"real\"} (*"),
    ])
    result.stdout.no_fnmatch_line(esc("*db_count(*[mocked*"))


def test_mocked_calls_are_validated_against_the_real_signature(project: ConnicProject) -> None:
    _crm(project)
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
    project.write("tests/crm.yaml", "tests:\n" + cases)

    result = project.run()

    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines_random([
        "*case 'wrong type' (crm) failed",
        ("*: mocked call to data.customer.add_customer does not match the "
        "tool's signature: argument 'name': 5 is not of type 'string'"),
        "*case 'missing argument' (crm) failed",
        ("*: mocked call to billing.refund does not match the tool's "
        "signature: missing required argument 'amount'"),
        "*case 'unknown argument' (crm) failed",
        ("*: mocked call to data.orders.list_orders does not match the "
        "tool's signature: unknown argument 'limit' (the tool takes: customer_id, note)"),
    ])
    # the call's own line says which mock refused it (not "no result: the run ended ...")
    result.stdout.fnmatch_lines(["*✗ refund(charge_id=\"ch_1\")*— rejected by mock * the call does not match*"])
    result.stdout.no_fnmatch_line("*no result: the run ended while this call was running*")


def test_a_missing_mocks_module_fails_the_case_before_the_agent(project: ConnicProject) -> None:
    _crm(project)
    project.suite("crm", '''
        tests:
          - name: typo
            payload: '{"calls": []}'
            mocks: tool_rung
    ''')

    result = project.run()

    result.assert_outcomes(errors=1)  # found at collection: the case fails in setup, no run starts
    result.stdout.fnmatch_lines([("tests/crm.yaml:4:12: tests[[]0[]].mocks: no mocks module tests/mocks/tool_rung.py*"
                                  "Connic fails the case before the agent starts")])


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


def test_middleware_mocks_replace_existing_phases_only(project: ConnicProject) -> None:
    project.agent("desk")
    project.agent("bare")
    project.write("middleware/desk.py", MIDDLEWARE)
    project.write("tests/mocks/mw.py", MIDDLEWARE_MOCKS)
    project.suite("desk", '''
        tests:
          - name: mocked
            payload: hi
            mocks: mw
            expected_result: output == "ok | before=middleware_before after=middleware_after"
          - name: real
            payload: hi
            expected_result: output == "ok | before=real after=real"
    ''')
    project.suite("bare", '''
        tests:
          - name: a mock never adds a phase
            payload: hi
            mocks: mw
            expected_result: output == "ok"
    ''')
    for suite, case in [("desk", "mocked"), ("desk", "real"), ("bare", "a mock never adds a phase")]:
        project.replies(suite, case, "ok")

    result = project.run()

    result.assert_outcomes(passed=3)
    assert sorted((project.root / "cleanup.log").read_text().splitlines()) == [
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


def test_every_rung_of_the_guardrail_ladder(project: ConnicProject) -> None:
    project.agent("guarded", guardrails={
        "input": [{"type": "custom", "name": "domain-check"}, {"type": "regex", "config": {"patterns": ["zzz"]}}],
        "output": [{"type": "custom", "name": "tone", "mode": "warn"}],
    })
    project.write("guardrails/domain-check.py", "def check(content, context):\n    return False\n")
    project.write("guardrails/tone.py", "def check(content, context):\n    return True\n")
    for name, source in GUARDRAIL_MOCKS.items():
        project.write(f"tests/mocks/{name}.py", source)
    project.suite("guarded", '''
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
    project.replies("guarded", "exact and direction rungs", "fine")
    project.replies("guarded", "direction and catch-all rungs", "fine")

    result = project.run("--connic-json", "report.json")

    result.assert_outcomes(passed=3)
    rails = {name: [(g["name"], g["status"], g["mock_function"], g["message"]) for g in run["guardrails"]]
             for name, run in _runs(project.root / "report.json").items()}
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
