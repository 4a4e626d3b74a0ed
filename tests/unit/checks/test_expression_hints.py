"""Syntax errors Python explains badly get a hint and a caret at the spot (expressions.py)."""

from __future__ import annotations

import pytest

from pytest_connic.expressions.expression import compile_expression
from pytest_connic.expressions.values import ExpressionError


def _error(source: str) -> ExpressionError:
    with pytest.raises(ExpressionError) as info:
        compile_expression(source, ("output", "params"), where="expected_result")
    return info.value


@pytest.mark.parametrize(("source", "message", "pointer"), [
    ('output.risk_level = "low"', "a single '=' is not a comparison: did you mean '=='?",
     'output.risk_level = "low"\n                  ^'),
    ("output.a == 1 and output.b = 2", "did you mean '=='?", "output.a == 1 and output.b = 2\n" + " " * 27 + "^"),
    ("  output.x = 1", "did you mean '=='?", "  output.x = 1\n           ^"),  # leading blanks of a block scalar
    ("output.got.from == 1", "'from' is a Python keyword and cannot follow a dot; write output.got[\"from\"]",
     "output.got.from == 1\n           ^"),
    ("output.class", "write output[\"class\"]", "output.class\n       ^"),
    ('output["a"].import == 1', "write ...[\"import\"]", 'output["a"].import == 1\n            ^'),
])
def test_hint_and_caret(source: str, message: str, pointer: str) -> None:
    error = _error(source)
    assert message in str(error)
    assert error.pointer() == pointer


@pytest.mark.parametrize("source", ["output.a <= 1 x", "output.a !== 1", "output.a == (1"])
def test_other_syntax_errors_keep_pythons_message(source: str) -> None:
    error = _error(source)
    assert "did you mean '=='" not in str(error) and "Python keyword" not in str(error)
    assert str(error).startswith("invalid syntax in expected_result: ")


@pytest.mark.parametrize("source", ['output.a == "x = y"', "output.a >= 1 and output.b != 2", 'output["from"] == 1'])
def test_valid_expressions_are_untouched(source: str) -> None:
    assert compile_expression(source, ("output",), where="expected_result").source == source
