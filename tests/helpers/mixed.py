"""The mixed project of the report tests: passing, failing and erroring cases in three suites of
the ``calc`` project (``tests/conftest.py``'s ``calc`` fixture), with their cassettes."""

from __future__ import annotations

from typing import Any

from helpers.project import ConnicProject

CALC_SUITE = """
defaults:
  runs: 3
tests:
  - name: adds
    payload: add 4 and 6
    expected_tool_calls:
      - add: params.a == 4
    expected_result: output.sum == 10
  - name: wrong sum
    runs: 4
    payload: add 4 and 6
    expected_result: output.sum == 11
  - name: missing fixture
    payload: x
    files: [nope.txt]
  - name: invalid
    payload: x
    expected_result: outptu.x == 1
"""
MULTIPLY_SUITE = """
agent: calc
tests:
  - name: multiplies
    payload: 6 times 7
    expected_tool_calls: [multiply]
    expected_result: output.product == 42
"""
ECHO_SUITE = """
tests:
  - name: echoes
    payload: '{"x": 1}'
    expected_result: output.got.x == 1
"""
#: the node ids of the mixed project, in collection order
MIXED_IDS = [
    "tests/b_multiply.yaml::multiplies", "tests/calc.yaml::adds", "tests/calc.yaml::wrong sum",
    "tests/calc.yaml::missing fixture", "tests/calc.yaml::invalid", "tests/echo.yaml::echoes",
]


def tool_turn(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def answer(content: str, tokens: tuple[int, int] = (100, 9)) -> dict[str, Any]:
    return {"content": content, "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]}}


def write_mixed(calc: ConnicProject) -> ConnicProject:
    """Passing, failing and erroring (invalid, missing fixture) cases in three suites.

    ``b_multiply.yaml`` and ``calc.yaml`` sort first, so ``--dist loadfile -n 2`` gives them to
    different workers: their tools (multiply, add) are called in different processes."""
    calc.suite("calc", CALC_SUITE)
    calc.suite("b_multiply", MULTIPLY_SUITE)
    calc.suite("echo", ECHO_SUITE)
    # one run per run of the case: a run replayed again would be a copy, not an independent run
    adds = [{"turns": [tool_turn("add", a=4, b=6), answer('{"sum": 10}')]}]
    calc.cassette("calc", "adds", adds * 3)
    calc.cassette("calc", "wrong sum", adds * 4)
    calc.cassette("b_multiply", "multiplies", [{"turns": [tool_turn("multiply", a=6, b=7),
                                                          answer('{"product": 42}', (50, 5))]}])
    return calc


PROVIDER_DOWN = """
from pytest_connic.models.base import ProviderError


def pytest_connic_make_model(config, agent, model, case, run_index):
    if case and case["name"] == "adds":
        def down(request):
            raise ProviderError("provider unavailable: HTTP 503 from api.example")
        return down
"""
