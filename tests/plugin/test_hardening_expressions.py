"""The expression evaluator against what ``test_expressions.py``'s escape catalogue leaves out:
format strings, attribute chains on functions, objects and modules, huge numbers, long strings,
data nested past Python's stack, user objects that raise, and long chains bounded in time and
memory."""

from __future__ import annotations

import os
import time
import tracemalloc
from typing import Any

import pytest

from pytest_connic.expressions import MISSING, EvaluationError, ExpressionError, compile_expression

pytestmark = pytest.mark.timeout(60)

NAMES = ("output", "error", "status", "context")


def expr(source: str) -> Any:
    return compile_expression(source, NAMES, where="expected_result")


@pytest.mark.parametrize(
    "source",
    [
        "f'{output!r}'",
        "f'{output:{context}}'",
        "f'{context.fn.__globals__}'",
        "'{0.__class__.__mro__}'.format(output)",
        "'{context}'.format_map(context)",
        "'%(x)s' % context",
        "'%s' % (output,)",
        "b'%s' % output",
    ],
)
def test_format_strings_fail_at_compile_time(source: str) -> None:
    with pytest.raises(ExpressionError):
        expr(source)


def _function() -> None:
    """A function with attributes, as a builder could put in its context."""


_function.secret = "attribute of a function"  # type: ignore[attr-defined]


class Holder:
    secret = "class attribute"

    def __init__(self) -> None:
        self.token = "instance attribute"

    def method(self) -> str:
        return "called"


@pytest.mark.parametrize(
    "source",
    [
        "context.fn.secret", "context.fn.method", "context.obj.secret", "context.obj.token",
        "context.obj.method", "context.obj.method.secret", "context.mod.environ", "context.mod.path.sep",
        "context.mod.system", "context.cls.secret", "context.bound.secret", "output.format", "output.upper.x",
        'context.obj["token"]', 'context.mod["environ"]', "context.fn[0]",
    ],
)
def test_attribute_chains_on_functions_objects_and_modules_find_nothing(source: str) -> None:
    bindings = {"context": {"fn": _function, "obj": Holder(), "mod": os, "cls": Holder,
                            "bound": Holder().method}, "output": "text"}
    assert expr(source).value(bindings) is MISSING
    assert expr(source + " == 'called'").evaluate(bindings) is False
    assert expr(f"not {source}").evaluate(bindings) is True


@pytest.mark.parametrize(
    "source",
    [
        "context.fn.__globals__", "context.fn.__code__.co_consts", "context.obj.__class__.__mro__",
        "context.obj.__dict__", "context.bound.__self__", "context.mod.__builtins__", "context.fn._private",
        "context['__class__']", "context.fn.__call__", "context.x.__getattribute__",
    ],
)
def test_private_attributes_anywhere_in_a_chain_fail_at_compile_time(source: str) -> None:
    with pytest.raises(ExpressionError, match="starting with"):
        expr(source)


# --------------------------------------------------------------------------------- huge numbers


def test_huge_numbers_in_data_compare_and_render_quickly() -> None:
    huge = 10**100_000  # past Python's 4300-digit limit for int <-> str
    bindings = {"output": huge, "context": {"items": [1, 2, 3], "big": -huge}}
    started = time.perf_counter()
    assert expr("output > 1").evaluate(bindings) is True
    assert expr("output == 1e308").evaluate(bindings) is False
    assert expr("output < 1e999").evaluate(bindings) is True  # 1e999 is inf
    assert expr("context.big < output").evaluate(bindings) is True
    assert expr("output == 1").explain(bindings) == "output == 1 where output = <int>"
    assert expr("context.items[" + "9" * 100 + "] == 1").evaluate(bindings) is False  # no OverflowError
    assert expr("context.items[-" + "9" * 100 + ":" + "9" * 100 + "] == [1, 2, 3]").evaluate(bindings) is True
    assert time.perf_counter() - started < 1.0
    with pytest.raises(ExpressionError, match="integer literals with more than 100 digits"):
        expr("output == " + "9" * 101)


# --------------------------------------------------------------------------------- long strings


def test_long_strings_are_bounded_in_time_and_in_reports() -> None:
    output = "ab" * 10_000_000  # 20 MB
    needle = "'" + "ab" * 993 + "c'"  # the longest literal an expression may hold
    source = f"{needle} in output"
    assert len(source) <= 2000
    started = time.perf_counter()
    assert expr(source).evaluate({"output": output}) is False
    explained = expr("output == 'x'").explain({"output": output}, limit=200)
    assert time.perf_counter() - started < 2.0
    assert len(explained) < 260 and "…" in explained


# ------------------------------------------------------------------------ data past the stack


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def test_data_nested_past_the_stack_makes_a_comparison_false_not_a_crash() -> None:
    bindings = {"context": {"a": nested(100_000), "b": nested(100_000)}, "output": nested(100_000)}
    assert expr("context.a == context.b").evaluate(bindings) is False  # RecursionError inside ==
    assert expr("context.a in [context.b]").evaluate(bindings) is False
    assert expr("output[0][0][0] == context.a").evaluate(bindings) is False
    assert expr("context.a == context.b").explain(bindings).startswith("context.a == context.b where")
    with pytest.raises(EvaluationError, match="maximum recursion depth"):
        expr("context.a == context.b").evaluate(bindings, strict=True)


class Refuses:
    """A user object whose truth value and equality raise (an array in a builder's context)."""

    def __bool__(self) -> bool:
        raise ValueError("the truth value of an array is ambiguous")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("cannot compare")

    def __contains__(self, item: object) -> bool:
        raise RuntimeError("cannot search")

    __hash__ = object.__hash__


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("context.obj", False), ("not context.obj", True), ("context.obj and status", False),
        ("context.obj or status", True), ("context.obj == 1", False), ("context.obj != 1", False),
        ("1 in context.obj", False), ("context.obj in [1]", False), ("[context.obj] == [context.obj]", True),
    ],
)
def test_user_objects_that_raise_make_the_predicate_false(source: str, expected: bool) -> None:
    bindings = {"context": {"obj": Refuses()}, "status": "completed"}
    assert expr(source).evaluate(bindings) is expected
    assert isinstance(expr(source).explain(bindings), str)


def test_strict_mode_reports_a_user_object_that_raises() -> None:
    with pytest.raises(EvaluationError, match="cannot compare"):
        expr("context.obj == 1").evaluate({"context": {"obj": Refuses()}}, strict=True)


# --------------------------------------------------------------------------------- long chains


@pytest.mark.parametrize("joiner", [" and ", " or ", " and not "])
def test_the_longest_chains_are_bounded_in_time_and_memory(joiner: str) -> None:
    source = joiner.join(f"output.n{i} == {i}" for i in range(300))[:1995].rsplit(joiner, 1)[0]
    bindings = {"output": {f"n{i}": i for i in range(300)}}
    tracemalloc.start()
    try:
        started = time.perf_counter()
        compiled = expr(source)
        for _ in range(50):
            compiled.evaluate(bindings)
            compiled.explain(bindings)
            for part in compiled.conjuncts():
                part.evaluate(bindings)
        elapsed = time.perf_counter() - started
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < 3.0
    assert peak < 20 * 1024 * 1024, peak


def test_a_chain_of_comparisons_is_bounded_by_the_part_limit() -> None:
    with pytest.raises(ExpressionError, match="too many parts"):
        expr("<".join(["1"] * 1000))  # 1999 characters, 1000 operands
