"""The Connic expression DSL (https://connic.co/docs/v1/test/assertions): compiled once through a whitelist over ``ast``, evaluated often.

Compiling validates the syntax tree and turns it into a tree of closures. Evaluating never calls
anything and never reads a Python attribute: ``a.b`` and ``a["b"]`` look a key up in a mapping,
``a[0]`` an index in a list, tuple or string. A failed lookup yields :data:`MISSING`, and a
comparison with a ``MISSING`` operand is false (https://connic.co/docs/v1/test/assertions).
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import functools
import io
import json
import keyword
import operator
import re
import tokenize
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, NoReturn

from pytest_connic.errors import ConnicError
from pytest_connic.pyparse import parse_expression

__all__ = ["LITERAL_NAMES", "MAX_DEPTH", "MAX_INT_DIGITS", "MAX_LENGTH", "MAX_NODES", "MISSING"]
__all__ += ["EvaluationError", "Expression", "ExpressionError", "compile_expression", "format_value"]
__all__ += ["split_tool_call_expression"]

MAX_LENGTH: Final = 2000
MAX_DEPTH: Final = 50
MAX_NODES: Final = 750
MAX_INT_DIGITS: Final = 100
LITERAL_NAMES: Final[Mapping[str, object]] = {"true": True, "false": False, "null": None}
_INT_LIMIT: Final = 10**MAX_INT_DIGITS


class _Missing:
    """Type of :data:`MISSING`: falsy; copy and pickle give back the one instance."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


class _LocatedError(ConnicError):
    """An error about ``source``; ``column`` is a 0-based character offset into it, or None."""

    def __init__(self, message: str, source: str, column: int | None = None) -> None:
        super().__init__(message)
        self.message, self.source, self.column = message, source, column

    def __str__(self) -> str:
        return self.message

    def pointer(self) -> str:
        """The source line holding ``column`` and a caret under it; "" without a column."""
        if self.column is None:
            return ""
        start = self.source.rfind("\n", 0, self.column) + 1
        end = self.source.find("\n", self.column)
        line = self.source[start : end if end >= 0 else len(self.source)]
        pad = "".join(c if c == "\t" else " " for c in line[: self.column - start])  # keep tabs aligned
        return f"{line}\n{pad}^"


class ExpressionError(_LocatedError, ValueError):
    """An expression that cannot be compiled (raised by :func:`compile_expression`)."""


class EvaluationError(_LocatedError):
    """A failed lookup or comparison during a strict evaluation."""


_Eval = Callable[[Mapping[str, object], bool], object]
_PATHS: Final = (ast.Name, ast.Attribute, ast.Subscript)


class _SourceOffsets:
    """Map ast positions (line, UTF-8 byte column) to character offsets in the original source."""

    def __init__(self, text: str, shift: int) -> None:
        self._text, self._shift = text, shift
        self._starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]

    def _line(self, lineno: int) -> tuple[int, str]:
        index = min(max(lineno, 1), len(self._starts)) - 1
        end = self._starts[index + 1] if index + 1 < len(self._starts) else len(self._text)
        return self._starts[index], self._text[self._starts[index] : end].rstrip("\r\n")

    def offset(self, lineno: int, col: int) -> int:
        """Offset of UTF-8 byte column ``col`` of line ``lineno`` (1-based)."""
        start, line = self._line(lineno)
        if not line.isascii():
            col = len(line.encode("utf-8", "surrogatepass")[:col].decode("utf-8", "replace"))
        return self._shift + start + col

    def char_offset(self, lineno: int, col: int) -> int:
        """Offset of character column ``col`` of line ``lineno``, clamped to the line."""
        start, line = self._line(lineno)
        return self._shift + start + min(max(col, 0), len(line))

    def span(self, node: ast.AST) -> tuple[int, int]:
        """Start and end offsets of an ast expression node."""
        lineno: int = getattr(node, "lineno")  # noqa: B009 - every node the compiler meets is an expression
        end_lineno: int | None = getattr(node, "end_lineno", None)
        end_col: int | None = getattr(node, "end_col_offset", None)
        start = self.offset(lineno, getattr(node, "col_offset"))  # noqa: B009
        return start, self.offset(end_lineno or lineno, end_col or 0)


# ---------------------------------------------------------------------------------------- compile

_OPERATOR_SYMBOLS: Final[Mapping[type, str]] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^",
    ast.BitAnd: "&", ast.MatMult: "@", ast.UAdd: "+", ast.USub: "-", ast.Invert: "~",
}  # fmt: skip
_REJECTED: Final[Mapping[type, str]] = {
    ast.Lambda: "lambda expressions are not allowed",
    ast.ListComp: "comprehensions are not allowed",
    ast.SetComp: "comprehensions are not allowed",
    ast.DictComp: "comprehensions are not allowed",
    ast.GeneratorExp: "generator expressions are not allowed",
    ast.JoinedStr: "f-strings are not allowed",
    ast.Starred: "starred expressions (*x) are not allowed",
    ast.NamedExpr: "assignment expressions (:=) are not allowed",
    ast.IfExp: "conditional expressions (a if b else c) are not allowed",
    ast.Slice: "slices are only allowed as the whole subscript: x[1:3], not x[1:3, 0]",
}
_MULTILINE_HINT: Final = " (to continue on another line, wrap the expression in parentheses)"


def _is_value_literal(node: ast.expr) -> bool:
    """True for literals whose identity means nothing: numbers, strings, displays."""
    if isinstance(node, ast.Constant):
        return node.value is not None and not isinstance(node.value, bool)
    return isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
    )


def _parse(source: str, where: str) -> tuple[ast.expr, _SourceOffsets]:
    """Check the size and syntax of ``source``; return the expression node and its position map."""
    if not isinstance(source, str):
        raise ExpressionError(f"{where} must be a string, not {type(source).__name__}", repr(source))
    if not source.strip():
        raise ExpressionError(f"{where} is empty", source)
    if len(source) > MAX_LENGTH:
        raise ExpressionError(
            f"{where} is {len(source)} characters long; the maximum is {MAX_LENGTH}", source
        )
    text = source.lstrip()  # eval mode rejects leading whitespace, which YAML block scalars can leave
    positions = _SourceOffsets(text, len(source) - len(text))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "invalid escape sequence": Python's concern, not ours
            return parse_expression(text).body, positions
    except SyntaxError as exc:
        column = None
        if exc.offset is not None:  # 1-based characters; 0 means "at the end of the line"
            column = positions.char_offset(exc.lineno or 1, exc.offset - 1 if exc.offset > 0 else len(text))
        hint = _MULTILINE_HINT if "\n" in text.rstrip() else ""
        mistake = _common_mistake(text)
        if mistake is not None:
            message, at = mistake
            raise ExpressionError(f"invalid syntax in {where}: {message}", source, positions.char_offset(*at)) from None
        raise ExpressionError(f"invalid syntax in {where}: {exc.msg}{hint}", source, column) from None
    except (MemoryError, RecursionError):
        raise ExpressionError(f"{where} is nested too deeply", source) from None
    except ValueError as exc:  # e.g. a lone surrogate that cannot be encoded
        raise ExpressionError(f"invalid text in {where}: {exc}", source) from None


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    """The tokens of ``text`` up to the first one Python's tokenizer refuses."""
    out: list[tokenize.TokenInfo] = []
    with contextlib.suppress(tokenize.TokenError, SyntaxError, ValueError):
        out.extend(tokenize.generate_tokens(io.StringIO(text).readline))
    return out


_COMPARISON_OPS: Final = frozenset(("==", "!=", "<=", ">="))


def _common_mistake(text: str) -> tuple[str, tuple[int, int]] | None:
    """A hint for the two slips that Python's message does not explain, and where (line, character
    column): a single ``=`` meant as a comparison, and a Python keyword after a dot
    (``output.got.from``, which only the subscript form can reach)."""
    tokens = _tokens(text)
    for index, token in enumerate(tokens):
        previous = tokens[index - 1] if index else None
        glued = previous is not None and previous.end == token.start and previous.string in _COMPARISON_OPS
        if token.type == tokenize.OP and token.string == "=" and not glued:  # not JavaScript's !== or ===
            return "a single '=' is not a comparison: did you mean '=='?", token.start
        if (token.type == tokenize.NAME and keyword.iskeyword(token.string) and previous is not None
                and previous.type == tokenize.OP and previous.string == "."):
            owner = _dotted_before(tokens, index - 1)
            fixed = f'{owner}["{token.string}"]' if owner else f'...["{token.string}"]'
            return f"'{token.string}' is a Python keyword and cannot follow a dot; write {fixed}", token.start
    return None


def _dotted_before(tokens: list[tokenize.TokenInfo], dot: int) -> str:
    """The dotted path that ends just before the token at ``dot`` (``output.got`` in ``output.got.from``)."""
    parts: list[str] = []
    index = dot - 1
    while index >= 0 and tokens[index].type == tokenize.NAME:
        parts.insert(0, tokens[index].string)
        if index >= 1 and tokens[index - 1].type == tokenize.OP and tokens[index - 1].string == ".":
            index -= 2
            continue
        break
    return ".".join(parts)


# --------------------------------------------------------------------------------------- evaluate

#: Python's own operators over the user's values: what they accept is decided at run time
_COMPARATORS: Final[Mapping[type, Callable[[Any, Any], object]]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}  # fmt: skip
_DISPLAYS: Final[Mapping[type, Callable[[Iterator[object]], object]]] = {ast.List: list, ast.Tuple: tuple, ast.Set: set}  # fmt: skip
_SEQUENCES: Final = (list, tuple, str)


def _truth(value: object) -> bool:
    """``bool(value)``, false when the value refuses one (a user object whose ``__bool__`` raises,
    such as an array in a builder's context): an evaluation error makes the predicate false."""
    try:
        return bool(value)
    except Exception:  # noqa: BLE001 - user objects may raise anything
        return False


def _get(container: object, key: object) -> object:
    """``container[key]`` for a mapping, or a sequence with an int index or a slice; else MISSING."""
    try:
        if isinstance(container, dict):
            return dict.get(container, key, MISSING)  # never a subclass's __missing__
        if isinstance(container, _SEQUENCES):
            return container[key] if type(key) is int or type(key) is slice else MISSING
        if isinstance(container, Mapping):
            return container.get(key, MISSING)
    except (TypeError, IndexError, ValueError):  # unhashable key, index out of range, slice step 0
        pass
    return MISSING


def _why_missing(container: object, key: object) -> str:
    """Why :func:`_get` found nothing, for strict-mode messages."""
    if isinstance(container, Mapping):
        keys = ", ".join(repr(k) for _, k in zip(range(10), container))
        return f"no key {key!r} (keys: {keys or 'none'})"
    if isinstance(container, _SEQUENCES) and type(key) is int:
        return f"index {key} is out of range for length {len(container)}"
    return f"cannot look up {format_value(key, 40)} in {format_value(container, 40)}"


class _Compiler:
    """One walk over a parsed expression: check each node against the whitelist, return its closure.

    A closure maps ``(bindings, strict)`` to a value. Offsets are relative to ``source``, which
    starts at ``base`` in the text that was parsed.
    """

    def __init__(
        self, source: str, positions: _SourceOffsets, base: int, allowed: frozenset[str], where: str
    ) -> None:
        self.source, self.positions, self.base = source, positions, base
        self.allowed, self.where, self.nodes = allowed, where, 0
        #: the root names met while building (every name node is built, or compiling fails)
        self.names: set[str] = set()

    def build(self, node: ast.AST, depth: int = 1) -> _Eval:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            self.fail(node, f"too many parts: more than {MAX_NODES}; split it into several checks")
        if depth > MAX_DEPTH:
            self.fail(node, f"nesting too deep: more than {MAX_DEPTH} levels")
        factory = _DISPLAYS.get(type(node))
        if factory is not None:
            return self._display(node, factory, node.elts, depth + 1)  # type: ignore[attr-defined]
        method: Callable[[ast.AST, int], _Eval] | None = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            self.fail(node, _REJECTED.get(type(node), f"'{type(node).__name__}' is not allowed"))
        return method(node, depth + 1)

    def fail(self, node: ast.AST, problem: str, column: int | None = None) -> NoReturn:
        """Raise for ``problem`` ("what: detail") as "what in <where>: detail" at ``node``."""
        column = self.positions.span(node)[0] - self.base if column is None else column
        problem, _, detail = problem.partition(": ")
        message = f"{problem} in {self.where}" + (f": {detail}" if detail else "")
        raise ExpressionError(message, self.source, column)

    def _raiser(self, node: ast.AST) -> Callable[[str], NoReturn]:
        # the segment is located only when an evaluation fails: most never do, and locating
        # every node up front was most of the cost of compiling
        positions, base, source = self.positions, self.base, self.source

        def fail(reason: str) -> NoReturn:
            start, end = (offset - base for offset in positions.span(node))
            raise EvaluationError(f"{source[start:end]}: {reason}", source, start)

        return fail

    def _Constant(self, node: ast.Constant, depth: int) -> _Eval:
        value = node.value
        if type(value) is int and abs(value) >= _INT_LIMIT:
            self.fail(node, f"integer literals with more than {MAX_INT_DIGITS} digits are not allowed")
        if value is not None and type(value) not in (str, int, bool, float):
            kind = {bytes: "bytes literals are", complex: "complex numbers are"}.get(type(value), "'...' is")
            self.fail(node, f"{kind} not allowed")
        return lambda bindings, strict: value

    def _Name(self, node: ast.Name, depth: int) -> _Eval:
        if node.id in LITERAL_NAMES:
            literal = LITERAL_NAMES[node.id]
            return lambda bindings, strict: literal
        if node.id not in self.allowed:
            close = difflib.get_close_matches(node.id, sorted(self.allowed), n=1)
            raise ExpressionError(
                f"unknown name {node.id!r} in {self.where}; available: {', '.join(sorted(self.allowed)) or '(none)'}"
                + (f". Did you mean {close[0]!r}?" if close else ""),
                self.source,
                self.positions.span(node)[0] - self.base,
            )
        name, fail = node.id, self._raiser(node)
        self.names.add(name)

        def name_value(bindings: Mapping[str, object], strict: bool) -> object:
            value = bindings.get(name, MISSING)
            return fail("has no value") if strict and value is MISSING else value

        return name_value

    def _lookup(self, node: ast.AST, container: _Eval, key: _Eval) -> _Eval:
        fail = self._raiser(node)

        def lookup(bindings: Mapping[str, object], strict: bool) -> object:
            outer, index = container(bindings, strict), key(bindings, strict)
            value = _get(outer, index)
            return fail(_why_missing(outer, index)) if strict and value is MISSING else value

        return lookup

    def _Attribute(self, node: ast.Attribute, depth: int) -> _Eval:
        container, attr = self.build(node.value, depth), node.attr  # the leftmost offence is reported first
        if attr.startswith("_"):
            column = self.positions.span(node)[1] - self.base - len(attr)
            self.fail(node, f"attribute names starting with '_' are not allowed: {attr!r}", column)
        return self._lookup(node, container, lambda bindings, strict: attr)

    def _Subscript(self, node: ast.Subscript, depth: int) -> _Eval:
        container, key = self.build(node.value, depth), node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value.startswith("__"):
            self.fail(key, f"keys starting with '__' are not allowed: {key.value!r}")
        index = self._slice(key, depth) if isinstance(key, ast.Slice) else self.build(key, depth)
        return self._lookup(node, container, index)

    def _slice(self, node: ast.Slice, depth: int) -> _Eval:
        parts = [self.build(p, depth) if p is not None else None for p in (node.lower, node.upper, node.step)]

        def make_slice(bindings: Mapping[str, object], strict: bool) -> object:
            values = [p(bindings, strict) if p is not None else None for p in parts]
            return slice(*values) if all(v is None or type(v) is int for v in values) else MISSING

        return make_slice

    def _Compare(self, node: ast.Compare, depth: int) -> _Eval:
        operands = [node.left, *node.comparators]
        for index, op in enumerate(node.ops):
            for side in operands[index : index + 2] if isinstance(op, (ast.Is, ast.IsNot)) else ():
                if _is_value_literal(side):
                    self.fail(side, "'is' with a literal: use '==' or '!=' ('is' suits true, false, null)")
        first, *rest = (self.build(operand, depth) for operand in operands)
        steps, fail = (
            [(_COMPARATORS[type(op)], right) for op, right in zip(node.ops, rest)],
            self._raiser(node),
        )

        def compare(bindings: Mapping[str, object], strict: bool) -> bool:
            left = first(bindings, strict)
            for function, right_value in steps:
                right = right_value(bindings, strict)
                if left is MISSING or right is MISSING:
                    return fail("an operand is missing") if strict else False
                try:
                    if not function(left, right):
                        return False
                except Exception as exc:  # noqa: BLE001 - a user object's __eq__ may raise anything, deep data RecursionError
                    return fail(str(exc)) if strict else False
                left = right
            return True

        return compare

    def _BoolOp(self, node: ast.BoolOp, depth: int) -> _Eval:
        values, stop_at = [self.build(v, depth) for v in node.values], isinstance(node.op, ast.Or)

        def boolean(bindings: Mapping[str, object], strict: bool) -> object:
            for value in values:
                result = value(bindings, strict)
                if _truth(result) is stop_at:  # Python's short circuit: first truthy (or) / falsy (and)
                    return result
            return result

        return boolean

    def _UnaryOp(self, node: ast.UnaryOp, depth: int) -> _Eval:
        operand, symbol = node.operand, _OPERATOR_SYMBOLS.get(type(node.op), "not")
        inner = self.build(operand, depth)
        if symbol == "not":
            return lambda bindings, strict: not _truth(inner(bindings, strict))
        number = operand.value if isinstance(operand, ast.Constant) else None
        if symbol == "-" and isinstance(number, (int, float)) and not isinstance(number, bool):
            value = -number
            return lambda bindings, strict: value
        self.fail(
            node,
            "unary '-' is only allowed before a number"
            if symbol == "-"
            else f"unary '{symbol}' is not allowed",
        )

    def _BinOp(self, node: ast.BinOp, depth: int) -> _Eval:
        symbol = _OPERATOR_SYMBOLS[type(node.op)]
        gap = (self.positions.span(node.left)[1] - self.base, self.positions.span(node.right)[0] - self.base)
        found = self.source.find(symbol, *gap)
        self.fail(node, f"arithmetic operator '{symbol}' is not allowed", found if found >= 0 else None)

    def _Call(self, node: ast.Call, depth: int) -> _Eval:
        start, end = (offset - self.base for offset in self.positions.span(node))
        text = self.source[start:end] if end - start <= 40 else self.source[start : start + 39] + "…"
        kind = "method" if isinstance(node.func, ast.Attribute) else "function"
        self.fail(node, f"{kind} calls are not allowed: {text}")

    def _display(
        self, node: ast.AST, factory: Callable[[Iterator[object]], object], items: list[ast.expr], depth: int
    ) -> _Eval:
        parts, fail = [self.build(item, depth) for item in items], self._raiser(node)

        def display(bindings: Mapping[str, object], strict: bool) -> object:
            try:
                return factory(part(bindings, strict) for part in parts)
            except TypeError as exc:  # an unhashable set element or dict key
                return fail(str(exc)) if strict else MISSING

        return display

    def _Dict(self, node: ast.Dict, depth: int) -> _Eval:
        if any(key is None for key in node.keys):
            self.fail(node, "'**' unpacking is not allowed")
        count = len(node.keys)

        def pairs(values: Iterator[object]) -> dict[object, object]:
            flat = list(values)
            return dict(zip(flat[:count], flat[count:]))

        keys = [key for key in node.keys if key is not None]  # '**' was refused above
        return self._display(node, pairs, [*keys, *node.values], depth)


def format_value(value: object, limit: int = 200) -> str:
    """Render a value JSON-ishly for a report, cut to ``limit`` characters (``…`` marks the cut)."""
    if value is MISSING:
        return "<missing>"
    if isinstance(value, str):
        value = value[: limit + 1]
    try:
        text = json.dumps(value, ensure_ascii=False, default=_jsonable)
    except Exception:  # noqa: BLE001 - a failure report must survive odd values (deep, huge int, bad repr)
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def _jsonable(value: object) -> object:
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return repr(value)


def _operands(node: ast.AST) -> list[ast.AST]:
    """The path operands (names, lookups) under ``node``, outermost paths only."""
    if isinstance(node, ast.Name) and node.id in LITERAL_NAMES:
        return []
    if isinstance(node, _PATHS):
        return [node]
    return [found for child in ast.iter_child_nodes(node) for found in _operands(child)]


def _flatten_and(node: ast.expr) -> Iterator[ast.expr]:
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        for value in node.values:
            yield from _flatten_and(value)
    else:
        yield node


# ------------------------------------------------------------------------------------- public API


class Expression:
    """A compiled expression: make it with :func:`compile_expression`, then evaluate it often.

    Immutable once made, so equal sources compiled for the same place share one instance
    (:func:`compile_expression` caches them). Compiling validates everything; the syntax tree and
    the evaluator are rebuilt from ``source`` on first use and kept from then on, so the many
    expressions a large collection holds cost a string each until a run evaluates them.
    """

    __slots__ = ("_parts", "_run", "_tree", "allowed", "names", "source", "where")

    def __init__(
        self,
        source: str,
        node: ast.expr | None,
        *,
        where: str,
        allowed: frozenset[str],
        positions: _SourceOffsets | None = None,
        base: int = 0,
        names: frozenset[str] | None = None,
    ) -> None:
        self.source, self.where, self.allowed = source, where, allowed
        #: ``(node, positions, base)``; None until needed for an expression compiled from its source
        self._tree: tuple[ast.expr, _SourceOffsets, int] | None = (
            None if node is None or positions is None else (node, positions, base)
        )
        if names is None:
            assert node is not None
            names = _root_names(node)
        self.names = names
        self._run: _Eval | None = None
        self._parts: list[Expression] | None = None

    def __repr__(self) -> str:
        return f"Expression({self.source!r})"

    def mentions(self, name: str) -> bool:
        """Whether the root name ``name`` occurs in the expression."""
        return name in self.names

    def value(self, bindings: Mapping[str, object], *, strict: bool = False) -> object:
        """The raw value, not coerced to bool (MISSING for a failed lookup); ``strict`` as in evaluate."""
        run = self._run
        if run is None:
            run = self._run = self._compiler().build(self._syntax()[0])
        return run(bindings, strict)

    def evaluate(self, bindings: Mapping[str, object], *, strict: bool = False) -> bool:
        """Evaluate to a bool.

        Not strict: a failed lookup yields MISSING; a comparison with a MISSING operand, or one that
        raises ``TypeError``, is false. Strict: both raise :class:`EvaluationError` (approval
        conditions, where an evaluation error means "approval required").
        """
        return _truth(self.value(bindings, strict=strict))

    def conjuncts(self) -> list[Expression]:
        """The operands of a top-level ``and``, nested ``and`` flattened; ``[self]`` for anything else."""
        if self._parts is None:
            nodes = list(_flatten_and(self._syntax()[0]))
            self._parts = [self] if len(nodes) == 1 else [self._child(node) for node in nodes]
        return list(self._parts)

    def explain(self, bindings: Mapping[str, object], *, limit: int = 200) -> str:
        """Failure-report text: each false conjunct with the values of its path operands.

        For example ``output.total > 0 where output.total = 0``; several conjuncts are joined with
        ``; ``. When nothing is false every conjunct is shown. Each value is cut to ``limit`` characters.
        """
        parts = self.conjuncts()
        failing = [part for part in parts if not part.evaluate(bindings)] or parts
        return "; ".join(part._explain_one(bindings, limit) for part in failing)

    def _explain_one(self, bindings: Mapping[str, object], limit: int) -> str:
        compiler, shown = self._compiler(), {}
        for node in _operands(self._syntax()[0]):
            text = self._segment(node)
            if text not in shown:
                shown[text] = format_value(compiler.build(node)(bindings, False), limit)
        if list(shown) == [self.source]:  # a bare path: "context.active = false"
            return f"{self.source} = {shown[self.source]}"
        values = ", ".join(f"{text} = {value}" for text, value in shown.items())
        return f"{self.source} where {values}" if shown else self.source

    def _syntax(self) -> tuple[ast.expr, _SourceOffsets, int]:
        tree = self._tree
        if tree is None:  # parsed and validated when compiled: this cannot fail
            node, positions = _parse(self.source, self.where)
            tree = self._tree = (node, positions, 0)
        return tree

    def _compiler(self) -> _Compiler:
        _, positions, base = self._syntax()
        return _Compiler(self.source, positions, base, self.allowed, self.where)

    def _segment(self, node: ast.AST) -> str:
        _, positions, base = self._syntax()
        start, end = positions.span(node)
        return self.source[start - base : end - base]

    def _child(self, node: ast.expr) -> Expression:
        _, positions, _ = self._syntax()
        start = positions.span(node)[0]
        return Expression(
            self._segment(node),
            node,
            where=self.where,
            allowed=self.allowed,
            positions=positions,
            base=start,
        )


def _root_names(node: ast.AST) -> frozenset[str]:
    return frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name)) - LITERAL_NAMES.keys()


def compile_expression(source: str, allowed: Iterable[str], *, where: str = "expression") -> Expression:
    """Parse and validate ``source`` once; its root names must be in ``allowed`` (or true/false/null).

    Raises :class:`ExpressionError` whose message names ``where`` (the place, e.g.
    ``"expected_result"``) and whose ``column`` points at the offending part when there is one.
    The same ``(source, allowed, where)`` gives back the same (immutable) :class:`Expression`.
    """
    if isinstance(allowed, str):  # "output" would otherwise allow the names o, u, t and p
        raise TypeError("allowed must be an iterable of names, not a string")
    if not isinstance(source, str):
        raise ExpressionError(f"{where} must be a string, not {type(source).__name__}", repr(source))
    names = frozenset(allowed)
    if len(_ALLOWED) < 256:  # a handful of places share a few name sets: keep one copy of each
        names = _ALLOWED.setdefault(names, names)
    return _compile_cached(source, names, where)


_ALLOWED: dict[frozenset[str], frozenset[str]] = {}


@functools.lru_cache(maxsize=8192)
def _compile_cached(source: str, allowed: frozenset[str], where: str) -> Expression:
    """Compile once per place: the key holds everything a compiled expression depends on (the
    allowed names and the place named in its messages); errors are raised afresh, never cached."""
    node, positions = _parse(source, where)
    compiler = _Compiler(source, positions, 0, allowed, where)
    compiler.build(node)  # validates; the evaluator is rebuilt from the source on first use
    return Expression(source, None, where=where, allowed=allowed, names=frozenset(compiler.names))


def split_tool_call_expression(
    expr: Expression,
) -> tuple[list[Expression], list[Expression], list[Expression]]:
    """Split an ``expected_tool_calls`` expression into (filters, counts, mixed) conjuncts (https://connic.co/docs/v1/test/assertions).

    Filters do not mention ``invocations``; counts mention it but neither ``params`` nor ``result``;
    mixed conjuncts mention ``invocations`` together with ``params`` or ``result``.
    """
    filters: list[Expression] = []
    counts: list[Expression] = []
    mixed: list[Expression] = []
    for part in expr.conjuncts():
        if not part.mentions("invocations"):
            filters.append(part)
        else:
            (mixed if part.mentions("params") or part.mentions("result") else counts).append(part)
    return filters, counts, mixed
