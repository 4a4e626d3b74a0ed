"""Unit tests for the expression DSL (spec §2): grammar, rejections, MISSING semantics, reports."""

from __future__ import annotations

import collections
import copy
import os
import pickle
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.budget import counting_calls
from pytest_connic.expressions.expression import Expression, compile_expression, split_tool_call_expression
from pytest_connic.expressions.values import (
    MAX_LENGTH,
    MISSING,
    EvaluationError,
    ExpressionError,
    format_value,
)

RESULT_NAMES = ("output", "error", "status", "context")
TOOL_NAMES = ("params", "result", "invocations", "context")

OUTPUT: dict[str, Any] = {
    "id": "inv-7",
    "total": 12.5,
    "count": 0,
    "valid": True,
    "items": [{"sku": "A1", "qty": 2}, {"sku": "B2", "qty": 0}],
    "tags": ["urgent", "billing"],
    "meta": {"source": "email", "empty": ""},
    "note": None,
}
BINDINGS: dict[str, Any] = {"output": OUTPUT, "error": None, "status": "completed", "context": {"n": 3}}


def result_expr(source: str) -> Expression:
    return compile_expression(source, RESULT_NAMES, where="expected_result")


# ----------------------------------------------------------------------------------- grammar


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('status == "completed"', True),
        ("status == 'completed'", True),
        ('status != "failed"', True),
        ("output.total > 10 and output.total <= 12.5", True),
        ("output.total >= 13 or output.count < 1", True),
        ("not output.count", True),
        ("(output.count == 0 or output.total == 0) and output.valid", True),
        ('output["id"] == "inv-7"', True),
        ("output.items[0].sku == 'A1'", True),
        ("output.items[-1]['qty'] == 0", True),
        ("output.tags[0:1] == ['urgent']", True),
        ("output.tags[::-1] == ['billing', 'urgent']", True),
        ("output.id[:3] == 'inv'", True),
        ("output.valid == true and output.note == null", True),
        ("output.valid is true and output.note is null and error is None", True),
        ("output.valid is not False", True),
        ("output.tags == ('urgent', 'billing') or output.tags == ['urgent', 'billing']", True),
        ("output.meta == {'source': 'email', 'empty': ''}", True),
        ("status in {'completed', 'blocked'}", True),
        ("output.count == -0 and -1 < output.count", True),
        ("context.n in [1, 2, 3]", True),
        ("[output.count, context.n] == [0, 3]", True),
        ("1 < context.n < 4", True),
        ("0 == output.count < context.n > 2 != 3", True),
        ("0 == output.count < context.n > 3 != 4", False),
        ("output.total > 100", False),
        ("1e3 == 1000", True),
        ("output['meta']['source'] == output.meta.source", True),
        ("(\n  status == 'completed'\n  and output.valid\n)", True),
        ("  status == 'completed'\n", True),
    ],
)
def test_allowed_grammar_evaluates_like_python(source: str, expected: bool) -> None:
    assert result_expr(source).evaluate(BINDINGS) is expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("output.meta.empty or 'fallback'", "fallback"),
        ("output.id and output.total", 12.5),
        ("output.missing or output.count", 0),
        ("output.missing and output.id", MISSING),
        ("output.tags", ["urgent", "billing"]),
        ("{'a': [1, (2, 3)], 'b': {4}}", {"a": [1, (2, 3)], "b": {4}}),
        ("-2.5", -2.5),
        ("output.missing", MISSING),
        ("null", None),
    ],
)
def test_value_returns_the_raw_value(source: str, expected: Any) -> None:
    assert result_expr(source).value(BINDINGS) == expected


def test_names_and_mentions_report_root_names_only() -> None:
    expr = compile_expression("params.x == 1 and invocations >= true or context.a.b is null", TOOL_NAMES)
    assert expr.names == frozenset({"params", "invocations", "context"})
    assert expr.mentions("params") and not expr.mentions("result") and not expr.mentions("true")


# ------------------------------------------------------------------------------ rejections


@pytest.mark.parametrize(
    ("source", "message", "column"),
    [
        ("len(output) > 0", "function calls are not allowed in expected_result: len(output)", 0),
        ("output.lower() == 'x'", "method calls are not allowed in expected_result: output.lower()", 0),
        ("status == 'a' or (lambda: 1)", "lambda expressions are not allowed in expected_result", 18),
        ("[x for x in output]", "comprehensions are not allowed in expected_result", 0),
        ("{k: 1 for k in output}", "comprehensions are not allowed in expected_result", 0),
        (
            "any(x for x in output)",
            "function calls are not allowed in expected_result: any(x for x in output)",
            0,
        ),
        ("status == f'{output}'", "f-strings are not allowed in expected_result", 10),
        ("[*output.tags]", "starred expressions (*x) are not allowed in expected_result", 1),
        ("(x := 1)", "assignment expressions (:=) are not allowed in expected_result", 1),
        ("output.total + 1 > 2", "arithmetic operator '+' is not allowed in expected_result", 13),
        ("output.total*2 > 2", "arithmetic operator '*' is not allowed in expected_result", 12),
        ("output.a // 2", "arithmetic operator '//' is not allowed in expected_result", 9),
        ("output.a % 2", "arithmetic operator '%' is not allowed in expected_result", 9),
        ("2 ** 8", "arithmetic operator '**' is not allowed in expected_result", 2),
        ("output.a | output.b", "arithmetic operator '|' is not allowed in expected_result", 9),
        ("output.a @ output.b", "arithmetic operator '@' is not allowed in expected_result", 9),
        ("'é' + output.x", "arithmetic operator '+' is not allowed in expected_result", 4),
        ("~output.count", "unary '~' is not allowed in expected_result", 0),
        ("+1 == output.count", "unary '+' is not allowed in expected_result", 0),
        ("-output.count == 0", "unary '-' is only allowed before a number in expected_result", 0),
        ("output.a if status else 1", "conditional expressions (a if b else c) are not allowed", 0),
        (
            "output._private",
            "attribute names starting with '_' are not allowed in expected_result: '_private'",
            7,
        ),
        (
            "output.__class__",
            "attribute names starting with '_' are not allowed in expected_result: '__class__'",
            7,
        ),
        ('output["__class__"]', "keys starting with '__' are not allowed in expected_result: '__class__'", 7),
        (
            "output[1:2, 3]",
            "slices are only allowed as the whole subscript in expected_result: x[1:3], not x[1:3, 0]",
            7,
        ),
        ("output.n is 5", "'is' with a literal in expected_result: use '==' or '!='", 12),
        ("'x' is not output.n", "'is' with a literal in expected_result", 0),
        ("output == b'x'", "bytes literals are not allowed in expected_result", 10),
        ("output == 1j", "complex numbers are not allowed in expected_result", 10),
        ("output == ...", "'...' is not allowed in expected_result", 10),
        ("{**output}", "'**' unpacking is not allowed in expected_result", 0),
        ("output.n == " + "9" * 101, "integer literals with more than 100 digits are not allowed", 12),
        ("await output", "'Await' is not allowed in expected_result", 0),
        ("(status == 'x'", "invalid syntax in expected_result: '(' was never closed", 0),
        ("   ", "expected_result is empty", None),
        ("", "expected_result is empty", None),
        ("status" + " " * MAX_LENGTH, "expected_result is 2006 characters long; the maximum is 2000", None),
    ],
)
def test_rejected_constructs_have_a_message_and_column(source: str, message: str, column: int | None) -> None:
    with pytest.raises(ExpressionError) as info:
        result_expr(source)
    assert message in str(info.value)
    assert info.value.message == str(info.value)
    assert info.value.source == source
    assert info.value.column == column


@pytest.mark.parametrize(
    "source",
    ["output ==", "status = 'x'", "import os", "status == 'x' x", "output[", "status ==\n  'x'", "a\x00"],
)
def test_syntax_errors_are_expression_errors(source: str) -> None:
    # Python's own wording and column vary between versions; the prefix and the bound do not.
    with pytest.raises(ExpressionError, match="^invalid (syntax|text) in expected_result") as info:
        result_expr(source)
    assert info.value.column is None or 0 <= info.value.column <= len(source)


def test_a_multiline_syntax_error_suggests_parentheses() -> None:
    with pytest.raises(ExpressionError, match="wrap the expression in parentheses"):
        result_expr("status == 'x'\nand output.valid")
    assert result_expr("(status == 'x'\nand output.valid)").evaluate({"status": "x", "output": {"valid": 1}})


def test_a_syntax_error_column_counts_characters_and_leading_whitespace() -> None:
    with pytest.raises(ExpressionError) as info:
        result_expr("  'é' == output ]")
    assert info.value.column == 16
    assert info.value.pointer() == "  'é' == output ]\n                ^"


@pytest.mark.parametrize(
    ("source", "allowed", "message"),
    [
        (
            "outptu.total > 0",
            RESULT_NAMES,
            (
                "unknown name 'outptu' in expected_result; available: context, error, output, status. "
                "Did you mean 'output'?"
            ),
        ),
        (
            "zzz",
            RESULT_NAMES,
            "unknown name 'zzz' in expected_result; available: context, error, output, status",
        ),
        ("param.x == 1", ("params", "context"), "available: context, params. Did you mean 'params'?"),
        ("x", (), "unknown name 'x' in expected_result; available: (none)"),
    ],
)
def test_unknown_names_list_what_is_available(source: str, allowed: tuple[str, ...], message: str) -> None:
    with pytest.raises(ExpressionError, match="unknown name") as info:
        compile_expression(source, allowed, where="expected_result")
    assert message in info.value.message
    assert info.value.column == 0


@pytest.mark.parametrize(
    ("source", "pointer"),
    [
        ("\n  (x ==\n  'é' + 1)", "  'é' + 1)\n      ^"),
        ("\t x.__y", "\t x.__y\n\t   ^"),
    ],
)
def test_pointer_shows_the_offending_line(source: str, pointer: str) -> None:
    with pytest.raises(ExpressionError) as info:
        compile_expression(source, ["x"])
    assert info.value.pointer() == pointer


def test_allowed_must_not_be_a_single_string() -> None:
    with pytest.raises(TypeError, match="not a string"):
        compile_expression("o", "output")


def test_where_defaults_to_expression_and_non_strings_are_rejected() -> None:
    with pytest.raises(ExpressionError, match=r"^expression is empty$"):
        compile_expression("", ["x"])
    with pytest.raises(ExpressionError, match="approval_decisions\\[0\\].params must be a string, not int"):
        compile_expression(42, ["x"], where="approval_decisions[0].params")  # type: ignore[arg-type]


def test_expression_error_is_a_value_error_and_evaluation_error_is_not() -> None:
    assert issubclass(ExpressionError, ValueError)
    assert not issubclass(EvaluationError, ValueError)


# ----------------------------------------------------------------------------------- escapes


@pytest.mark.parametrize(
    "source",
    [
        "().__class__.__bases__",
        "().__class__.__bases__[0].__subclasses__()",
        "output.__class__",
        "output.__dict__",
        "output._x",
        'output["__class__"]',
        "output['__globals__']",
        "__import__('os')",
        "__import__",
        "open('x')",
        "eval('1')",
        "exec",
        "f'{output}'",
        "f'{output.__class__}'",
        "lambda: 1",
        "(lambda: 1)()",
        "[x for x in output]",
        "(x for x in output)",
        "output.get('a')",
        "output.items()",
        '"{0.__class__}".format(output)',
        "'%s' % output",
        "[].__class__",
        "{}.__class__",
        "output.__getattribute__('x')",
        "globals()",
        "__builtins__",
        "type(output)",
    ],
)
def test_escape_attempts_fail_at_compile_time(source: str) -> None:
    with pytest.raises(ExpressionError):
        result_expr(source)


@pytest.mark.parametrize(
    ("source", "bindings"),
    [
        ("output.real", {"output": 5}),
        ("output.upper", {"output": "text"}),
        ("output.items", {"output": {"a": 1}}),
        ("output.keys", {"output": {"a": 1}}),
        ("output.append", {"output": [1]}),
        ("output.count", {"output": [1]}),
        ("context.fn", {"context": {"other": print}}),
    ],
)
def test_attribute_syntax_never_reaches_python_attributes(source: str, bindings: dict[str, Any]) -> None:
    expr = result_expr(source)
    assert expr.value(bindings) is MISSING
    assert expr.evaluate(bindings) is False


def test_stored_callables_are_never_called() -> None:
    calls: list[int] = []
    assert result_expr("context.fn == 1").evaluate({"context": {"fn": lambda: calls.append(1)}}) is False
    assert calls == []


def test_lookup_does_not_trigger_defaultdict_factories() -> None:
    context: collections.defaultdict[str, int] = collections.defaultdict(int)
    assert result_expr("context.absent == 0").evaluate({"context": context}) is False
    assert "absent" not in context


# ---------------------------------------------------------------------------- MISSING semantics


def test_missing_is_a_falsy_singleton() -> None:
    assert repr(MISSING) == "<missing>"
    assert not MISSING
    assert copy.copy(MISSING) is MISSING and copy.deepcopy(MISSING) is MISSING
    assert pickle.loads(pickle.dumps(MISSING)) is MISSING


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("output.absent == 1", False),
        ("output.absent != 1", False),
        ('output.absent != ""', False),
        ("output.absent is null", False),
        ("output.absent is not null", False),
        ("output.absent < 1", False),
        ("output.absent in [1]", False),
        ("output.absent not in [1]", False),
        ("1 not in output.absent", False),
        ("output.absent == output.other_absent", False),
        ("output.absent", False),
        ("not output.absent", True),
        ("not (output.absent == 1)", True),
        ("output.absent or status == 'completed'", True),
        ("output.absent != 1 or true", True),
        ("output.items[5].sku == 'A1'", False),
        ("output.items[-3] != 1", False),
        ("output.items['0'] != 1", False),
        ("output.items[true] != 1", False),
        ("output.items.sku != 1", False),
        ("output.tags.length != 1", False),
        ("output.note.x != 1", False),
        ("output.count.x != 1", False),
        ("error.message != 1", False),
        ("output[[1]] != 1", False),
        ("output.tags['a':] != 1", False),
        ("output.tags[::0] != 1", False),
        ("nothing_bound != 1", False),
        ("'x' in error", False),
        ("'x' not in error", False),
        ("error > 0", False),
        ("1 < 'a'", False),
        ("[1] in output", False),
        ("output.tags < 3", False),
        ("{output.tags} != 1", False),
        ("not {output.tags: 1}", True),
    ],
)
def test_failed_lookups_and_type_errors_make_comparisons_false(source: str, expected: bool) -> None:
    allowed = (*RESULT_NAMES, "nothing_bound")
    assert compile_expression(source, allowed).evaluate(BINDINGS) is expected


@pytest.mark.parametrize(
    ("source", "bindings", "expected"),
    [
        ("'total' in output", {"output": {"total": 1}}, True),
        ("'total' in output", {"output": {"sum": "total"}}, False),
        ("1 in output", {"output": {"1": 0}}, False),
        ("'urgent' in output", {"output": ["urgent", "x"]}, True),
        ("'urg' in output", {"output": ["urgent"]}, False),
        ("'urg' in output", {"output": "urgent"}, True),
        ("'x' not in output", {"output": "urgent"}, True),
        ("2 in output", {"output": (1, 2)}, True),
        ("'a' in output", {"output": None}, False),
        ("'a' not in output", {"output": None}, False),
        ("1 in output", {"output": "123"}, False),
        ("'timed out' in error", {"error": "run timed out after 30s"}, True),
        ("status == 'failed' and 'timed out' in error", {"status": "completed", "error": None}, False),
    ],
)
def test_in_follows_python(source: str, bindings: dict[str, Any], expected: bool) -> None:
    assert result_expr(source).evaluate(bindings) is expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("0 < context.n < 5", True),
        ("0 < context.n < 3", False),
        ("0 < context.absent < 3", False),
        ("context.n == 3 == 3.0", True),
        ("1 < 2 < context.absent", False),
        ("1 < 2 > 3 < context.n", False),
        ("None == error != 'x'", True),
        ("'a' < 'b' < 1", False),
    ],
)
def test_chained_comparisons(source: str, expected: bool) -> None:
    assert result_expr(source).evaluate(BINDINGS) is expected


def test_and_or_short_circuit() -> None:
    class Exploding:
        def __eq__(self, other: object) -> bool:
            raise AssertionError("evaluated")

        __hash__ = None  # type: ignore[assignment]

    bindings = {"context": {"x": Exploding()}, "status": "completed"}
    assert result_expr("status == 'failed' and context.x == 1").evaluate(bindings) is False
    assert result_expr("status == 'completed' or context.x == 1").evaluate(bindings) is True


# ----------------------------------------------------------------------------------- strict


@pytest.mark.parametrize(
    ("source", "bindings", "message", "column"),
    [
        ("param.amount > 100", {"param": {}}, "param.amount: no key 'amount' (keys: none)", 0),
        (
            "param.items[2] == 1",
            {"param": {"items": [1]}},
            "param.items[2]: index 2 is out of range for length 1",
            0,
        ),
        ("param.a.b == 1", {"param": {"a": [1]}}, 'param.a.b: cannot look up "b" in [1]', 0),
        ("param.a.b == 1", {"param": {"a": None}}, 'param.a.b: cannot look up "b" in null', 0),
        ("true and param.a > 1", {"param": {"a": None}}, "param.a > 1: '>' not supported", 9),
        ("'x' in param.a", {"param": {"a": None}}, "'x' in param.a: argument of type 'NoneType' is not", 0),
        ("context.user == 'x'", {"param": {}}, "context: has no value", 0),
        ("param.k == 1", {"param": {"a": 1, "b": 2}}, "no key 'k' (keys: 'a', 'b')", 0),
    ],
)
def test_strict_mode_raises_with_location(
    source: str, bindings: dict[str, Any], message: str, column: int
) -> None:
    expr = compile_expression(source, ["param", "context"], where="approval.tools")
    assert expr.evaluate(bindings) is False
    with pytest.raises(EvaluationError) as info:
        expr.evaluate(bindings, strict=True)
    assert message in info.value.message
    assert info.value.column == column
    assert info.value.source == source


def test_strict_mode_evaluates_well_formed_data_normally() -> None:
    expr = compile_expression("param.amount > 100 or not context.vip", ["param", "context"])
    assert expr.evaluate({"param": {"amount": 5}, "context": {"vip": True}}, strict=True) is False
    assert expr.evaluate({"param": {"amount": 500}, "context": {}}, strict=True) is True


def test_strict_errors_in_a_conjunct_are_relative_to_its_source() -> None:
    part = compile_expression("true and param.x == 1", ["param"]).conjuncts()[1]
    with pytest.raises(EvaluationError) as info:
        part.evaluate({"param": {}}, strict=True)
    assert (info.value.source, info.value.column) == ("param.x == 1", 0)


# ------------------------------------------------------------------------ conjuncts, explain


@pytest.mark.parametrize(
    ("source", "parts"),
    [
        ("a == 1", ["a == 1"]),
        ("a == 1 or b", ["a == 1 or b"]),
        ("a and b and c", ["a", "b", "c"]),
        ("a and (b and (c and d))", ["a", "b", "c", "d"]),
        ("(a or b) and not c", ["a or b", "not c"]),
        ("not (a and b)", ["not (a and b)"]),
        ("a == 'é' and b", ["a == 'é'", "b"]),
        ("(a and\n  b)", ["a", "b"]),
    ],
)
def test_conjuncts_split_top_level_and(source: str, parts: list[str]) -> None:
    expr = compile_expression(source, ["a", "b", "c", "d"])
    assert [part.source for part in expr.conjuncts()] == parts
    for part in expr.conjuncts():
        assert part.names <= expr.names


def test_a_single_conjunct_is_the_expression_itself() -> None:
    expr = compile_expression("a or b", ["a", "b"])
    assert expr.conjuncts() == [expr]


@pytest.mark.parametrize(
    ("source", "bindings", "text"),
    [
        (
            'output.total > 0 and status == "completed"',
            {"output": {"total": 0}, "status": "completed"},
            "output.total > 0 where output.total = 0",
        ),
        (
            'output.total > 0 and status == "completed"',
            {"output": {"total": 0}},
            'output.total > 0 where output.total = 0; status == "completed" where status = <missing>',
        ),
        ("output.id == 'x'", {"output": {"id": "y"}}, "output.id == 'x' where output.id = \"y\""),
        (
            "output.a == output.b",
            {"output": {"a": 1, "b": None}},
            "output.a == output.b where output.a = 1, output.b = null",
        ),
        ("context.active", {"context": {"active": False}}, "context.active = false"),
        (
            "not context.blocked",
            {"context": {"blocked": [1]}},
            "not context.blocked where context.blocked = [1]",
        ),
        ("'x' in error", {"error": None}, "'x' in error where error = null"),
        (
            "output.items[0].sku == 'A'",
            {"output": {"items": []}},
            ("output.items[0].sku == 'A' where output.items[0].sku = <missing>"),
        ),
        (
            "status in ['a', context.s]",
            {"status": "b", "context": {"s": "c"}},
            'status in [\'a\', context.s] where status = "b", context.s = "c"',
        ),
        ("1 > 2", {}, "1 > 2"),
        ("true and output.x == 1", {"output": {"x": 1}}, "true; output.x == 1 where output.x = 1"),
    ],
)
def test_explain_shows_the_operands_of_failing_conjuncts(
    source: str, bindings: dict[str, Any], text: str
) -> None:
    assert result_expr(source).explain(bindings) == text


def test_explain_truncates_long_values() -> None:
    text = result_expr("output == 'x'").explain({"output": "y" * 1000}, limit=20)
    assert text == "output == 'x' where output = \"yyyyyyyyyyyyyyyyyy…"


@pytest.mark.parametrize(
    ("value", "limit", "text"),
    [
        (MISSING, 200, "<missing>"),
        ({"a": [1, None, True]}, 200, '{"a": [1, null, true]}'),
        ("é", 200, '"é"'),
        ((1, 2), 200, "[1, 2]"),
        ({3, 1, 2}, 200, "[1, 2, 3]"),
        (list(range(100)), 10, "[0, 1, 2,…"),
        (object, 200, "\"<class 'object'>\""),
        ({(1, 2): 3}, 200, "<dict>"),
    ],
)
def test_format_value(value: Any, limit: int, text: str) -> None:
    assert format_value(value, limit) == text


# ------------------------------------------------------------------------- tool-call split


@pytest.mark.parametrize(
    ("source", "filters", "counts", "mixed"),
    [
        ("params.q == 'x'", ["params.q == 'x'"], [], []),
        ("invocations == 2", [], ["invocations == 2"], []),
        (
            "params.q == 'x' and context.k and invocations >= 2 and result.ok",
            ["params.q == 'x'", "context.k", "result.ok"],
            ["invocations >= 2"],
            [],
        ),
        ("params.x == 1 or invocations > 2", [], [], ["params.x == 1 or invocations > 2"]),
        (
            "invocations < 3 and (result.ok or invocations == 0) and invocations > context.min",
            [],
            ["invocations < 3", "invocations > context.min"],
            ["result.ok or invocations == 0"],
        ),
    ],
)
def test_split_tool_call_expression(
    source: str, filters: list[str], counts: list[str], mixed: list[str]
) -> None:
    expr = compile_expression(source, TOOL_NAMES, where="expected_tool_calls[0]")
    got = split_tool_call_expression(expr)
    assert [[part.source for part in group] for group in got] == [filters, counts, mixed]


def test_tool_call_conjuncts_evaluate_on_their_own() -> None:
    filters, counts, _ = split_tool_call_expression(
        compile_expression("params.q == 'x' and invocations == 2", TOOL_NAMES)
    )
    calls = [{"q": "x"}, {"q": "y"}, {"q": "x"}]
    matched = [call for call in calls if filters[0].evaluate({"params": call})]
    assert counts[0].evaluate({"invocations": len(matched), "params": MISSING}) is True


# ------------------------------------------------------------------------------------ limits


def test_a_long_and_chain_compiles_and_evaluates_quickly() -> None:
    source = " and ".join(f"output.n{i} == {i}" for i in range(200))[:1900].rsplit(" and ", 1)[0]
    assert len(source) > 1850
    with counting_calls() as work:
        expr = result_expr(source)
        bindings = {"output": {f"n{i}": i for i in range(200)}}
        assert all(expr.evaluate(bindings) for _ in range(200))
    assert len(expr.conjuncts()) > 80
    # linear: a bounded number of Python calls per comparison and evaluation (about 7 today)
    assert work.calls < 30 * len(expr.conjuncts()) * 200, work.calls


def test_sources_over_the_maximum_length_are_rejected() -> None:
    source = " and ".join(["status == 'completed'"] * 120)
    assert len(source) > 2900
    with pytest.raises(ExpressionError, match=r"is \d+ characters long; the maximum is 2000"):
        result_expr(source)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("not " * 200 + "status", "nesting too deep in expected_result: more than 50 levels"),
        ("[" * 200 + "]" * 200, "nesting too deep"),
        ("(" * 201 + "status" + ")" * 201, "too many nested parentheses"),
        ("status" + ".a" * 200, "nesting too deep"),
        ("status" + "[0]" * 200, "nesting too deep"),
        ("[1," * 300 + "1" + "]" * 300, "nest"),
        ("[" + "1," * 800 + "]", "too many parts in expected_result: more than 750"),
    ],
)
def test_size_and_depth_limits(source: str, message: str) -> None:
    with pytest.raises(ExpressionError) as info:
        result_expr(source)
    assert message in info.value.message


def test_depth_fifty_is_still_allowed() -> None:
    assert result_expr("not " * 49 + "status").evaluate({"status": ""}) is True


# ------------------------------------------------------------------------------------- fuzz

DSL_ALPHABET = st.sampled_from(
    list(" ()[]{}.,:'\"<>=!-+*_0123456789eé")
    + ["output", "status", "and", "or", "not", "in", "is", "true", "null"]
)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_random_text_only_ever_raises_expression_error(source: str) -> None:
    try:
        expr = result_expr(source)
    except ExpressionError as exc:
        assert exc.source == source
        assert exc.column is None or 0 <= exc.column <= len(source)
    else:
        assert isinstance(expr.evaluate(BINDINGS), bool)


@settings(max_examples=200, deadline=None)
@given(st.lists(DSL_ALPHABET, max_size=40).map("".join))
def test_dsl_like_text_compiles_or_fails_cleanly_and_evaluation_never_raises(source: str) -> None:
    try:
        expr = result_expr(source)
    except ExpressionError as exc:
        assert exc.column is None or 0 <= exc.column <= len(source)
        return
    assert isinstance(expr.evaluate(BINDINGS), bool)
    assert isinstance(expr.explain(BINDINGS), str)
    for part in expr.conjuncts():
        part.evaluate({})


# ========== hardening (folded from test_hardening_expressions.py) ===========================================
# The expression evaluator against what ``test_expressions.py``'s escape catalogue leaves out:
# format strings, attribute chains on functions, objects and modules, huge numbers, long strings,
# data nested past Python's stack, user objects that raise, and long chains bounded in time and
# memory.

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
    with counting_calls() as work:
        assert expr("output > 1").evaluate(bindings) is True
        assert expr("output == 1e308").evaluate(bindings) is False
        assert expr("output < 1e999").evaluate(bindings) is True  # 1e999 is inf
        assert expr("context.big < output").evaluate(bindings) is True
        assert expr("output == 1").explain(bindings) == "output == 1 where output = <int>"
        assert expr("context.items[" + "9" * 100 + "] == 1").evaluate(bindings) is False  # no OverflowError
        assert expr("context.items[-" + "9" * 100 + ":" + "9" * 100 + "] == [1, 2, 3]").evaluate(bindings) is True
    assert work.calls < 5000, work.calls  # nothing walks the 100,000 digits in Python
    with pytest.raises(ExpressionError, match="integer literals with more than 100 digits"):
        expr("output == " + "9" * 101)


# --------------------------------------------------------------------------------- long strings


def test_long_strings_are_bounded_in_time_and_in_reports() -> None:
    output = "ab" * 10_000_000  # 20 MB
    needle = "'" + "ab" * 993 + "c'"  # the longest literal an expression may hold
    source = f"{needle} in output"
    assert len(source) <= 2000
    with counting_calls() as work:
        assert expr(source).evaluate({"output": output}) is False
        explained = expr("output == 'x'").explain({"output": output}, limit=200)
    assert work.calls < 2000, work.calls  # nothing walks the 20 MB in Python
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
    """Ten rounds (fifty until issue 29): the bound is per comparison and round, so a quadratic
    evaluation fails it in the first round already; the rounds only show memory kept across them."""
    rounds = 10
    source = joiner.join(f"output.n{i} == {i}" for i in range(300))[:1995].rsplit(joiner, 1)[0]
    bindings = {"output": {f"n{i}": i for i in range(300)}}
    tracemalloc.start()
    try:
        with counting_calls() as work:
            compiled = expr(source)
            for _ in range(rounds):
                compiled.evaluate(bindings)
                compiled.explain(bindings)
                for part in compiled.conjuncts():
                    part.evaluate(bindings)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # linear: a bounded number of Python calls per comparison and round (under 90 today)
    assert work.calls < 300 * source.count("==") * rounds, work.calls
    assert peak < 20 * 1024 * 1024, peak


def test_a_chain_of_comparisons_is_bounded_by_the_part_limit() -> None:
    with pytest.raises(ExpressionError, match="too many parts"):
        expr("<".join(["1"] * 1000))  # 1999 characters, 1000 operands
