"""The DSL's values and errors: its bounds, ``MISSING`` (what a failed lookup yields), the located
errors of compiling and of a strict evaluation, positions in the source, and the lookups and
truth that evaluation uses."""

from __future__ import annotations

import ast
import json
import operator
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from pytest_connic.errors import ConnicError

__all__ = ["LITERAL_NAMES", "MAX_DEPTH", "MAX_INT_DIGITS", "MAX_LENGTH", "MAX_NODES", "MISSING", "EvaluationError",
           "ExpressionError", "format_value"]

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
