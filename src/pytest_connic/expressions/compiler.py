"""Compiling an expression: parsing it (with hints for common mistakes), checking every node
against the whitelist, and turning the tree into a tree of closures (``_Compiler``)."""

from __future__ import annotations

import ast
import contextlib
import difflib
import io
import keyword
import tokenize
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Final, NoReturn

from pytest_connic.expressions.values import (
    _COMPARATORS,
    _DISPLAYS,
    _INT_LIMIT,
    _PATHS,
    LITERAL_NAMES,
    MAX_DEPTH,
    MAX_INT_DIGITS,
    MAX_LENGTH,
    MAX_NODES,
    MISSING,
    EvaluationError,
    ExpressionError,
    _Eval,
    _get,
    _SourceOffsets,
    _truth,
    _why_missing,
)
from pytest_connic.pyparse import parse_expression

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
