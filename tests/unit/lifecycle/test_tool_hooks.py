"""Tool hooks below pytest (spec §9.6): ``before`` returns a dict merged into the params or None for
unchanged, ``after`` a replacement result or None to keep it; sync or async, with or without
``context``; an ordinary hook exception fails only that call (``ToolCallRecord.error``)."""

from __future__ import annotations

import json

from helpers.harness import CaseProject, conftest_hooks
from helpers.models import SCRIPTED_MODEL
from pytest_connic.records.events import HookEvent

TOOLS = '''
def greet(name: str, greeting: str = "hello", punctuation: str = ".") -> dict:
    """Greet someone."""
    return {"text": f"{greeting} {name}{punctuation}"}
'''

#: the hook's behaviour is chosen by the name the model passes
HOOKS = '''
async def before(tool_name, params, context):
    name = params["name"]
    context.setdefault("hooked", []).append(tool_name)
    if name == "unchanged":
        return None
    if name == "merged":
        return {"greeting": "hi"}  # the other params stay
    if name == "in place":
        params["punctuation"] = "!"
        return params
    if name == "bad return":
        return ["not", "a", "dict"]
    if name == "raises":
        raise PermissionError("not allowed")
    return None


def after(tool_name, params, result):  # no context parameter: it is optional
    if params["name"] == "replaced":
        return {"text": "replaced by the after hook", "seen": result["text"]}
    if params["name"] == "after raises":
        raise ValueError("after broke")
    return None
'''


def test_hook_return_values_and_errors(case_project: CaseProject) -> None:
    case_project.tool("words", TOOLS)
    case_project.agent("greeter", tools=["words.greet"])
    case_project.write("hooks/greeter.py", HOOKS)
    case_project.host = conftest_hooks(SCRIPTED_MODEL)
    names = ["unchanged", "merged", "in place", "replaced", "bad return", "raises", "after raises"]
    payload = json.dumps({"calls": [["greet", {"name": n}] for n in names]})
    case_project.suite("greeter", f'''
        tests:
          - name: every hook contract
            payload: {json.dumps(payload)}
            expected_tool_calls:
              - words.greet: 'params == {{"name": "merged", "greeting": "hi"}}'
              - greet: params.name == "replaced" and result.seen == "hello replaced."
              - words.greet: invocations == 7
    ''')
    outcome = case_project.case("greeter", "every hook contract")
    assert outcome.verdict_passed, outcome.failure_reason
    (run,) = outcome.records
    # what the model read back of each call
    assert run.output == {"read": [
        {"text": "hello unchanged."}, {"text": "hi merged."}, {"text": "hello in place!"},
        {"text": "replaced by the after hook", "seen": "hello replaced."},
        "Error: before hook returned list; expected a dict of params or None",
        "Error: before hook failed: PermissionError: not allowed",
        "Error: after hook failed: ValueError: after broke",
    ]}
    # hooks receive the short tool name; an error fails only its own call
    assert run.run_context["hooked"] == ["greet"] * 7
    errors = [(c.params["name"], c.error) for c in run.tool_calls if c.error]
    assert errors == [
        ("bad return", "before hook returned list; expected a dict of params or None"),
        ("raises", "before hook failed: PermissionError: not allowed"),
        ("after raises", "after hook failed: ValueError: after broke"),
    ]
    assert [c.params for c in run.tool_calls[:3]] == [
        {"name": "unchanged"}, {"name": "merged", "greeting": "hi"}, {"name": "in place", "punctuation": "!"}]
    phases = [e.phase for e in run.events if isinstance(e, HookEvent)]
    assert (phases.count("before"), phases.count("after")) == (7, 5)  # no after hook once the before hook failed
