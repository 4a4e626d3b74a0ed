"""What a case cost, through real pytest runs: LiteLLM's price map for a model it knows, ``—`` for
one nobody priced (never ``$0.0000``), ``connic_model_prices`` for the rest, and its bad values."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helpers.project import ConnicProject
from pytest_connic.models.pricing import litellm_map

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

SUITE = """
tests:
  - name: adds
    payload: "4 + 6?"
    expected_result: output.sum == 10
"""
#: two turns as a live recording leaves them: usage, no reported cost
RECORDED = {"turns": [{"tool_calls": [{"name": "add", "arguments": {"a": 4, "b": 6}}],
                       "usage": {"input_tokens": 1000, "output_tokens": 20}},
                      {"content": '{"sum": 10}', "usage": {"input_tokens": 1100, "output_tokens": 10}}]}


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("CI", raising=False)


def run(calc: ConnicProject, model: str, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    calc.agent("calc", tools=["calc.add", "calc.multiply"], model=model)
    calc.suite("calc", SUITE)
    calc.cassette("calc", "adds", [RECORDED])
    result = calc.run("-p", "no:randomly", "--connic-json", "report.json", "--connic-html", "report.html", *args)
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    report = json.loads((calc.root / "report.json").read_text("utf-8"))
    return result, report["cases"][0]


def cost_cell(result: pytest.RunResult) -> str:
    section = result.stdout.str().split("= connic results =")[1]
    header = next(line for line in section.splitlines() if "│ Result" in line)
    row = next(line for line in section.splitlines() if "calc::adds" in line)
    column = [c.strip() for c in header.split("│")].index("Cost")
    return [c.strip() for c in row.split("│")][column]


def test_a_model_litellm_knows_is_priced_from_its_map(calc: ConnicProject, wide: None) -> None:
    if "gpt-4.1-mini" not in litellm_map():
        pytest.skip("LiteLLM (the [live] extra) is not installed: no price map")
    result, case = run(calc, "openai/gpt-4.1-mini")
    assert result.ret == 0
    price_in, price_out = (litellm_map()["gpt-4.1-mini"][k] for k in ("input_cost_per_token", "output_cost_per_token"))
    assert case["cost_known"] is True
    assert case["cost"] == pytest.approx(2100 * price_in + 30 * price_out) and case["cost"] > 0
    assert cost_cell(result) == f"${case['cost']:.4f}"
    assert case["runs_detail"][0]["model_turns"][0]["model"] == "openai/gpt-4.1-mini"


def test_an_unknown_model_costs_a_dash_not_zero(calc: ConnicProject, wide: None) -> None:
    result, case = run(calc, "ollama/my-own-model")
    assert case["cost_known"] is False and case["runs_detail"][0]["model_turns"][0]["cost"] is None
    assert cost_cell(result) == "—"
    assert "$0.0000" not in result.stdout.str()


def test_connic_model_prices_prices_a_model(calc: ConnicProject, wide: None) -> None:
    calc.write("pytest.ini", "[pytest]\nconnic_model_prices =\n    ollama/my-own-model = 2/10\n")
    result, case = run(calc, "ollama/my-own-model")
    assert case["cost_known"] is True
    assert case["cost"] == pytest.approx((2100 * 2 + 30 * 10) / 1e6)
    assert cost_cell(result) == "$0.0045"


def test_a_bad_price_is_a_usage_error_naming_the_ini_key(calc: ConnicProject) -> None:
    calc.write("pytest.ini", "[pytest]\nconnic_model_prices =\n    ollama/my-own-model = cheap\n")
    calc.suite("calc", SUITE)
    result = calc.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    message = ("*invalid value 'ollama/my-own-model = cheap' from ini connic_model_prices: "
               "expected MODEL=IN/OUT*for example openai/gpt-4.1-mini=0.4/1.6*")
    result.stderr.fnmatch_lines([message])
