"""A model a project supplies (``pytest_connic_make_model``) as the runtime reads it
(``runtime/services.py``): a string is a final answer, a ``ModelResponse`` is checked field by
field before the runtime trusts it, and calls without ids are given ids; anything else fails the
run with what is wrong (``RunAborted``), never a traceback into the runtime."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from helpers.harness import CaseProject, HookHost
from pytest_connic.models.base import ModelRequest, ModelResponse, ToolCallRequest
from pytest_connic.runtime.services import checked_response, predefined_schema
from pytest_connic.runtime.signals import RunAborted

SOURCE = "the model of the test"


def test_a_string_is_a_final_answer() -> None:
    assert checked_response("done", SOURCE) == ModelResponse(content="done")


def test_calls_without_ids_are_numbered_and_given_ids_kept() -> None:
    response = ModelResponse(tool_calls=[ToolCallRequest(None, "a", {}), ToolCallRequest("mine", "b", {"x": 1}),
                                         ToolCallRequest(None, "c", {})])  # type: ignore[arg-type]
    checked = checked_response(response, SOURCE)
    assert [(c.id, c.name, c.arguments) for c in checked.tool_calls] == [
        ("call_1", "a", {}), ("mine", "b", {"x": 1}), ("call_3", "c", {})]
    complete = ModelResponse(content="x", tool_calls=[ToolCallRequest("id", "a", {})])
    assert checked_response(complete, SOURCE) is complete


@pytest.mark.parametrize(("result", "says"), [
    ({"content": "x"}, f"{SOURCE} returned dict; expected a ModelResponse or a string"),
    (None, f"{SOURCE} returned NoneType; expected a ModelResponse or a string"),
    (ModelResponse(content=42), "content is int, expected a string or None"),  # type: ignore[arg-type]
    (ModelResponse(tool_calls=("a",)), "tool_calls is tuple, expected a list of ToolCallRequest"),  # type: ignore[arg-type]
    (ModelResponse(tool_calls=[{"name": "a"}]),  # type: ignore[list-item]
     "tool_calls[0] is dict, expected ToolCallRequest(id, name, arguments)"),
    (ModelResponse(tool_calls=[ToolCallRequest("i", "", {})]), "tool_calls[0] has no tool name (name='')"),
    (ModelResponse(tool_calls=[ToolCallRequest(7, "a", {})]), "tool_calls[0].id is int, expected a string"),  # type: ignore[arg-type]
    (ModelResponse(input_tokens=-1), "input_tokens is -1, expected an integer >= 0"),
    (ModelResponse(output_tokens=True), "output_tokens is True, expected an integer >= 0"),
    (ModelResponse(cost=float("nan")), "cost is nan, expected a number >= 0"),
    (ModelResponse(model=3), "model is int, expected a string or None"),  # type: ignore[arg-type]
])
def test_what_the_runtime_cannot_read_fails_the_run_with_what_is_wrong(result: object, says: str) -> None:
    with pytest.raises(RunAborted) as aborted:
        checked_response(result, SOURCE)
    assert says in str(aborted.value)


def test_every_problem_is_said_at_once() -> None:
    with pytest.raises(RunAborted) as aborted:
        checked_response(ModelResponse(content=1, input_tokens=-1, cost=-2), SOURCE)  # type: ignore[arg-type]
    assert str(aborted.value) == (f"{SOURCE} returned a malformed ModelResponse: content is int, expected a string "
                                  "or None; input_tokens is -1, expected an integer >= 0; cost is -2, expected a "
                                  "number >= 0")


def test_a_predefined_tool_the_sdk_does_not_have_gets_an_empty_object_schema() -> None:
    assert predefined_schema("no_such_predefined_tool") == {"type": "object", "properties": {}, "required": []}
    assert predefined_schema("db_find")["type"] == "object"


def test_a_hook_model_of_every_shape_runs_and_a_malformed_answer_fails_the_run(calc_cases: CaseProject) -> None:
    """Through a run: an object with ``complete``, a sync and an async function are each adapted
    and checked; a malformed answer ends the run with its problems, a non-model with its type."""
    calc_cases.suite("calc", """
        tests:
          - name: object
            payload: hi
            expected_result: output == "from object"
          - name: function
            payload: hi
            expected_result: output == "from function"
          - name: coroutine
            payload: hi
            expected_result: output == "from coroutine"
          - name: malformed
            payload: hi
          - name: not a model
            payload: hi
    """)

    class Model:
        async def complete(self, request: ModelRequest) -> Any:
            return "from object"

    async def coroutine(request: ModelRequest) -> str:
        await asyncio.sleep(0)
        return "from coroutine"

    models: dict[str, object] = {
        "object": Model(), "function": lambda request: "from function", "coroutine": coroutine,
        "malformed": lambda request: ModelResponse(content="x", input_tokens=-5), "not a model": 42,
    }
    calc_cases.host = HookHost(make_model=lambda agent, model, case, run_index: models[case["name"]])
    outcomes = calc_cases.cases("calc")
    assert {name: o.verdict_passed for name, o in outcomes.items()} == {
        "object": True, "function": True, "coroutine": True, "malformed": False, "not a model": False}
    (malformed,) = outcomes["malformed"].records
    assert malformed.error == ("the model that pytest_connic_make_model supplied for agent 'calc' returned a "
                               "malformed ModelResponse: input_tokens is -5, expected an integer >= 0")
    (not_a_model,) = outcomes["not a model"].records
    assert "pytest_connic_make_model returned int" in (not_a_model.error or "")
