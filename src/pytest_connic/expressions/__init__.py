"""The Connic expression DSL (https://connic.co/docs/v1/test/assertions): compiled once through a whitelist over ``ast``, evaluated often.

Compiling validates the syntax tree and turns it into a tree of closures (``compiler.py``).
Evaluating never calls anything and never reads a Python attribute: ``a.b`` and ``a["b"]`` look a
key up in a mapping, ``a[0]`` an index in a list, tuple or string. A failed lookup yields
:data:`MISSING`, and a comparison with a ``MISSING`` operand is false
(https://connic.co/docs/v1/test/assertions). The names below are the documented library API
(docs/expressions.md, "For plugin authors").
"""

from pytest_connic.expressions.expression import Expression, compile_expression, split_tool_call_expression
from pytest_connic.expressions.values import (
    LITERAL_NAMES,
    MAX_DEPTH,
    MAX_INT_DIGITS,
    MAX_LENGTH,
    MAX_NODES,
    MISSING,
    EvaluationError,
    ExpressionError,
    format_value,
)

__all__ = ["LITERAL_NAMES", "MAX_DEPTH", "MAX_INT_DIGITS", "MAX_LENGTH", "MAX_NODES", "MISSING", "EvaluationError",
           "Expression", "ExpressionError", "compile_expression", "format_value", "split_tool_call_expression"]
