"""The DSL's public API: an ``Expression`` compiled once and evaluated often, and the helpers
that compile the expressions of suites and tool conditions."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Mapping

from pytest_connic.expressions.compiler import (
    _Compiler,
    _flatten_and,
    _operands,
    _parse,
)
from pytest_connic.expressions.values import (
    LITERAL_NAMES,
    ExpressionError,
    _Eval,
    _SourceOffsets,
    _truth,
    format_value,
)

__all__ = ["Expression", "compile_expression", "split_tool_call_expression"]


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
