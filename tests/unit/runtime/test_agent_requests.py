"""What an LLM agent sends its model (``runtime/agents.py``): the system prompt filled from the
run's context (``{key}`` placeholders; unknown ones stay literal), and the middleware's content
as the user message (text parts joined, file parts base64-encoded)."""

from __future__ import annotations

from typing import Any

import pytest

from helpers.harness import CaseProject, HookHost
from pytest_connic.models.base import ModelRequest
from pytest_connic.runtime.agents import fill_prompt, user_message


@pytest.mark.parametrize(("prompt", "context", "filled"), [
    ("Serve {customer}.", {"customer": "Zoë"}, "Serve Zoë."),
    ("Keep {unknown} and {customer}", {"customer": "Ann"}, "Keep {unknown} and Ann"),
    ("Plan: {plan}", {"plan": {"tier": "gold", "name": "é"}}, 'Plan: {"tier": "gold", "name": "\\u00e9"}'),
    ("{n} items, {ok}", {"n": 3, "ok": True}, "3 items, true"),
    ("{not a key} {1st} {{x}}", {"x": "X", "1st": "no"}, "{not a key} {1st} {X}"),
])
def test_placeholders_are_filled_from_the_context(prompt: str, context: dict[str, Any], filled: str) -> None:
    assert fill_prompt(prompt, context) == filled


def test_text_parts_are_joined_and_file_parts_encoded() -> None:
    assert user_message({"role": "user", "parts": [{"text": "a"}, {"text": "b"}]}) == {
        "role": "user", "content": "a\nb"}
    assert user_message({"parts": "not a list"}) == {"role": "user", "content": ""}
    assert user_message({"parts": [{"text": "see"}, {"data": b"%PDF", "mime_type": "application/pdf"},
                                   {"data": "already-encoded"}]}) == {"role": "user", "content": [
        {"type": "text", "text": "see"},
        {"type": "file", "mime_type": "application/pdf", "data": "JVBERg=="},
        {"type": "file", "mime_type": "application/octet-stream", "data": "already-encoded"},
    ]}


MIDDLEWARE = '''
def before(content, context):
    context["customer"] = "Zoë"
    context["plan"] = {"tier": "gold"}
    return {"role": "user", "parts": [*content["parts"], {"data": b"%PDF", "mime_type": "application/pdf"}]}
'''


def test_a_run_sends_the_prompt_its_middleware_filled_and_the_content_it_returned(
        case_project: CaseProject) -> None:
    prompt = "Serve {customer} on {plan}; keep {unknown}."
    case_project.agent("helper", system_prompt=prompt)
    case_project.write("middleware/helper.py", MIDDLEWARE)
    case_project.suite("helper", """
        tests:
          - name: filled
            payload: hello
            expected_result: output == "done"
    """)
    requests: list[ModelRequest] = []

    def model(request: ModelRequest) -> str:
        requests.append(request)
        return "done"

    case_project.host = HookHost(make_model=lambda agent, name, case, run_index: model)
    outcome = case_project.case("helper", "filled")
    assert outcome.verdict_passed, outcome.failure_reason
    (request,) = requests
    assert request.system_prompt == 'Serve Zoë on {"tier": "gold"}; keep {unknown}.'
    assert request.messages[-1] == {"role": "user", "content": [
        {"type": "text", "text": "hello"}, {"type": "file", "mime_type": "application/pdf", "data": "JVBERg=="}]}
