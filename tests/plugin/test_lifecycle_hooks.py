"""Tool hooks (spec §9.6): ``before`` returns a dict merged into the params or None for
unchanged, ``after`` a replacement result or None to keep it; sync or async, with or without
``context``; an ordinary hook exception fails only that call."""

from __future__ import annotations

import json

from helpers.models import SCRIPTED_MODEL
from helpers.project import ConnicProject

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


def test_hook_return_values_and_errors(project: ConnicProject) -> None:
    project.tool("words", TOOLS)
    project.agent("greeter", tools=["words.greet"])
    project.write("hooks/greeter.py", HOOKS)
    project.write("conftest.py", SCRIPTED_MODEL)
    names = ["unchanged", "merged", "in place", "replaced", "bad return", "raises", "after raises"]
    payload = json.dumps({"calls": [["greet", {"name": n}] for n in names]})
    project.suite("greeter", f'''
        tests:
          - name: every hook contract
            payload: {json.dumps(payload)}
            expected_result: >-
              output.read[0].text == "hello unchanged." and output.read[1].text == "hi merged."
              and output.read[2].text == "hello in place!"
              and output.read[3] == {{"text": "replaced by the after hook", "seen": "hello replaced."}}
              and output.read[4] == "Error: before hook returned list; expected a dict of params or None"
              and output.read[5] == "Error: before hook failed: PermissionError: not allowed"
              and output.read[6] == "Error: after hook failed: ValueError: after broke"
            expected_tool_calls:
              - words.greet: 'params == {{"name": "merged", "greeting": "hi"}}'
              - greet: params.name == "replaced" and result.seen == "hello replaced."
              - words.greet: invocations == 7
    ''')

    result = project.run("--connic-json", "report.json")

    result.assert_outcomes(passed=1)
    (run,) = json.loads((project.root / "report.json").read_text())["cases"][0]["runs_detail"]
    # hooks receive the short tool name; an error fails only its own call
    assert run["run_context"]["hooked"] == ["greet"] * 7
    errors = [(c["params"]["name"], c["error"]) for c in run["tool_calls"] if c["error"]]
    assert errors == [
        ("bad return", "before hook returned list; expected a dict of params or None"),
        ("raises", "before hook failed: PermissionError: not allowed"),
        ("after raises", "after hook failed: ValueError: after broke"),
    ]
