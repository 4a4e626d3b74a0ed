"""The four strict flags below pytest (spec §5.5): each fails the case before the real code would
run, names the functions it tried, passes when a mock exists, and exempts what cannot be mocked or
is not configured. The flags are independent; ``defaults`` sets them for every case."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers.harness import CaseProject, HookHost, first_failure
from pytest_connic.models.base import ModelRequest, ModelResponse, ToolCallRequest
from pytest_connic.reports.failure import failure_text
from pytest_connic.secrets import Masker


def scripted_model(agent: Any, model: str, case: Any, run_index: int) -> object:
    """Asks for the calls the payload lists, then answers "done"."""

    def answer(request: ModelRequest) -> object:
        if any(m["role"] == "tool" for m in request.messages):
            return "done"
        plan = json.loads(request.messages[0]["content"])
        return ModelResponse(tool_calls=[
            ToolCallRequest(id=f"call{i}", name=name, arguments=args) for i, (name, args) in enumerate(plan["calls"])
        ])

    return answer


#: every piece of real code notes "<what> <case>" in real.log, so a test can tell what ran
REAL = '''
def note(what, context):
    with open("real.log", "a") as fh:
        fh.write(f"{what} {context['payload']['case']}\\n")
'''

TOOLS = REAL + '''

def refund(charge_id: str, amount: float, context: dict) -> dict:
    """Refund a charge."""
    note("tool", context)
    return {"refunded": amount}
'''

HOOKS = REAL + '''

def before(tool_name, params, context):
    note("hook", context)
    return None
'''

MIDDLEWARE = REAL + '''

def before(content, context):
    note("middleware-before", context)
    return content


def after(response, context):
    note("middleware-after", context)
    return response
'''

GUARDRAIL = REAL + '''

def check(content, context):
    note("guardrail", context)
    return True
'''

MOCKS = {
    "nothing": "# no replacements at all\n",
    "tools_only": "def mock_billing(tool_name, params, context):\n    return {'refunded': 0}\n",
    "hooks_too": "def mock_billing(tool_name, params, context):\n    return {'refunded': 0}\n"
                 "def mock_hook_before(tool_name, params, context):\n    return None\n",
    "mw_before_only": "def middleware_before(content, context):\n    return content\n",
    "mw_full": "def middleware_before(content, context):\n    return content\n"
               "def middleware_after(response, context):\n    return response\n",
    "rails": "def guardrail_input(content, context):\n    return True\n",
    "everything": "def mock_billing(tool_name, params, context):\n    return {'refunded': 0}\n"
                  "def mock_hook_before(tool_name, params, context):\n    return None\n"
                  "def middleware_before(content, context):\n    return content\n"
                  "def middleware_after(response, context):\n    return response\n"
                  "def guardrail_input(content, context):\n    return True\n",
}

#: (case, flags, mocks module or None, the failure or None when the case passes)
CASES = [
    ("strict_mocks fails", ["strict_mocks"], "nothing",
     ("strict_mocks: billing.refund has no mock (tried mock_billing_refund, mock_billing, mock in "
     "tests/mocks/nothing.py)")),
    ("strict_mocks without a mocks module", ["strict_mocks"], None,
     ("strict_mocks: billing.refund has no mock (tried mock_billing_refund, mock_billing, mock "
     "(the case sets no `mocks:` module))")),
    ("strict_mocks passes; predefined tools are exempt", ["strict_mocks"], "tools_only", None),
    ("strict_hook_mocks fails", ["strict_hook_mocks"], "tools_only",
     ("strict_hook_mocks: the before hook of agent 'desk' would run for billing.refund without a mock (tried "
     "mock_billing_refund_hook_before, mock_billing_hook_before, mock_hook_before in tests/mocks/tools_only.py)")),
    ("strict_hook_mocks passes; the after phase is not configured", ["strict_hook_mocks"], "hooks_too", None),
    ("strict_middleware_mocks fails", ["strict_middleware_mocks"], "mw_before_only",
     ("strict_middleware_mocks: middleware after of agent 'desk' has no mock (tried middleware_after in "
     "tests/mocks/mw_before_only.py)")),
    ("strict_middleware_mocks passes; cleanup is not configured", ["strict_middleware_mocks"], "mw_full", None),
    ("strict_guardrail_mocks fails", ["strict_guardrail_mocks"], "mw_full",
     ("strict_guardrail_mocks: custom input guardrail 'policy' would run without a mock (tried "
     "guardrail_input_policy, guardrail_input, guardrail in tests/mocks/mw_full.py)")),
    ("strict_guardrail_mocks passes; built-in guardrails are exempt", ["strict_guardrail_mocks"], "rails", None),
    ("all four flags with a complete mocks module",
     ["strict_mocks", "strict_hook_mocks", "strict_middleware_mocks", "strict_guardrail_mocks"], "everything", None),
]


def _project(project: CaseProject) -> None:
    project.host = HookHost(make_model=scripted_model)
    project.tool("billing", TOOLS)
    project.agent("desk", tools=["billing.refund", "db_count"], guardrails={
        "input": [{"type": "custom", "name": "policy"}, {"type": "regex", "config": {"patterns": ["forbidden"]}}],
    })
    project.write("hooks/desk.py", HOOKS)
    project.write("middleware/desk.py", MIDDLEWARE)
    project.write("guardrails/policy.py", GUARDRAIL)
    for name, source in MOCKS.items():
        project.write(f"tests/mocks/{name}.py", source)


def _payload(case: str) -> str:
    calls = [["refund", {"charge_id": "ch_1", "amount": 5}], ["db_count", {"collection": "orders"}]]
    return json.dumps(json.dumps({"case": case, "calls": calls}))  # a YAML double-quoted scalar


def _real_log(root: Path) -> set[str]:
    path = root / "real.log"
    return set(path.read_text().splitlines()) if path.exists() else set()


def test_each_strict_flag_fails_before_the_real_code_and_passes_with_a_mock(case_project: CaseProject) -> None:
    _project(case_project)
    lines = ["tests:"]
    for name, flags, mocks, _ in CASES:
        lines += [f"  - name: {name}", f"    payload: {_payload(name)}"]
        lines += [f"    {flag}: true" for flag in flags]
        if mocks:
            lines.append(f"    mocks: {mocks}")
    case_project.write("tests/desk.yaml", "\n".join(lines) + "\n")

    outcomes = case_project.cases("desk")

    assert {name: None if o.verdict_passed else first_failure(o) for name, o in outcomes.items()} == {
        name: failure for name, *_, failure in CASES}
    for name, *_, failure in CASES:  # the report says it right under the case's first line
        if failure is not None:
            head = failure_text(outcomes[name], Masker(()), 500).splitlines()[:2]
            assert head[0].endswith(f": case '{name}' (desk) failed")
            assert head[1] == f"    0/1 runs passed, threshold 100% needs 1: {failure}"
    ran = _real_log(case_project.root)
    # the strict check comes first: the real code it guards never ran
    for forbidden in ["tool strict_mocks fails", "tool strict_mocks without a mocks module",
                      "hook strict_hook_mocks fails", "middleware-after strict_middleware_mocks fails",
                      "guardrail strict_guardrail_mocks fails"]:
        assert forbidden not in ran
    # a flag governs its own phase only: the other phases ran for real
    assert {"guardrail strict_mocks fails", "middleware-before strict_mocks fails", "hook strict_mocks fails",
            "middleware-after strict_hook_mocks passes; the after phase is not configured"} <= ran
    assert not any(line.endswith("all four flags with a complete mocks module") for line in ran)


def test_defaults_set_strict_flags_and_a_case_may_turn_them_off(case_project: CaseProject) -> None:
    _project(case_project)
    case_project.suite("desk", f'''
        defaults:
          strict_mocks: true
          strict_hook_mocks: true
          mocks: tools_only
        tests:
          - name: inherits the defaults
            payload: {_payload("inherits")}
          - name: turns them off
            payload: {_payload("off")}
            strict_hook_mocks: false
            strict_mocks: false
            mocks: nothing
    ''')

    outcomes = case_project.cases("desk")

    assert outcomes["turns them off"].verdict_passed
    assert first_failure(outcomes["inherits the defaults"]).startswith("strict_hook_mocks: the before hook")
    assert {"tool off", "hook off"} <= _real_log(case_project.root)
