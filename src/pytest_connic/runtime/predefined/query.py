"""The JSON filter language shared by ``db_*``, ``file_list`` and retrieval metadata filters.

Connic documents one MongoDB-style engine for all three (``connic.tools`` docstrings):
shorthand ``{"field": value}`` is equality, operators are explicit, dot-notation
reaches nested keys, several operators on one field AND together, and the negations
``$ne``/``$nin`` also match documents where the field is missing.

A filter is compiled once (so a bad operator is reported even on an empty
collection) into a predicate over plain JSON values; evaluation is linear in the
number of documents.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TypeGuard, TypeVar

from pytest_connic.jsonsafe import MISSING, JsonObject, JsonValue, at_path, to_jsonable
from pytest_connic.patterns import Bounded, PatternError, PatternTimeout
from pytest_connic.runtime.predefined.errors import PredefinedToolError

Predicate = Callable[[object], bool]
"""A compiled filter: takes one JSON document (or any JSON value for field operators, or
:data:`~pytest_connic.jsonsafe.MISSING` where a field is absent)."""

Document = JsonObject
"""A stored document, a file's metadata: a JSON object."""

FIELD_OPERATORS = (
    "$eq",
    "$ne",
    "$gt",
    "$gte",
    "$lt",
    "$lte",
    "$in",
    "$nin",
    "$exists",
    "$contains",
    "$regex",
    "$options",
    "$not",
    "$elemMatch",
)
LOGICAL_OPERATORS = ("$and", "$or", "$nor", "$not")
_UNSUPPORTED = {
    "$near": "$near is listed by the Connic SDK but its syntax and semantics are not documented, "
    "so the local database does not support it",
}
MAX_LIMIT = 1000
#: what an ordering operator compares: two numbers, or two strings
_Ordered = TypeVar("_Ordered", float, str)


# --------------------------------------------------------------------------- values


def json_equal(left: object, right: object) -> bool:
    """JSON equality: ``true`` is not ``1``, ``1`` equals ``1.0``, containers compare deeply."""
    if _is_number(left) and _is_number(right):
        return bool(left == right)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(json_equal(a, b) for a, b in zip(left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    return type(left) is type(right) and bool(left == right)


def canonical(value: object) -> str:
    """A stable text form of a JSON value, for hashing and de-duplication."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def as_text(value: object) -> str | None:
    """The text form ``$in``/``$nin`` compare (Connic: "compare values as text")."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return canonical(value)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# --------------------------------------------------------------------------- compiling


def compile_filter(spec: object, *, what: str = "filter") -> Predicate:
    """Compile a document filter; raise ``PredefinedToolError`` naming the first problem."""
    if spec is None:
        return lambda _document: True
    if not isinstance(spec, Mapping):
        raise PredefinedToolError(f"{what} must be a JSON object, got {type(spec).__name__}")
    parts = [_compile_entry(key, value, what) for key, value in spec.items()]
    return lambda document: all(part(document) for part in parts)


def _compile_entry(key: str, value: object, what: str) -> Predicate:
    if key in _UNSUPPORTED:
        raise PredefinedToolError(f"{what}: {_UNSUPPORTED[key]}")
    if key in ("$and", "$or", "$nor"):
        return _compile_logical(key, value, what)
    if key == "$not":
        inner = compile_filter(_require_object(value, key, what), what=what)
        return lambda document: not inner(document)
    if key.startswith("$"):
        raise PredefinedToolError(
            f"{what}: unknown operator {key!r} at the top level; "
            f"use one of {', '.join(LOGICAL_OPERATORS)} or a field name"
        )
    if not key or any(not segment for segment in key.split(".")):
        raise PredefinedToolError(f"{what}: invalid field path {key!r}")
    condition = compile_condition(value, what=f"{what} on {key!r}")
    return lambda document: condition(at_path(document, key))


def _compile_logical(key: str, value: object, what: str) -> Predicate:
    if not isinstance(value, list) or not value:
        raise PredefinedToolError(f"{what}: {key} takes a non-empty list of filters")
    parts = [compile_filter(_require_object(item, key, what), what=what) for item in value]
    if key == "$and":
        return lambda document: all(part(document) for part in parts)
    if key == "$or":
        return lambda document: any(part(document) for part in parts)
    return lambda document: not any(part(document) for part in parts)


def _require_object(value: object, operator: str, what: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise PredefinedToolError(f"{what}: {operator} takes a JSON object, got {value!r}")
    return value


def _is_operator_object(value: object, what: str) -> TypeGuard[dict[str, object]]:
    if not isinstance(value, dict) or not value:
        return False
    dollar = [key.startswith("$") for key in value]
    if all(dollar):
        return True
    if any(dollar):
        raise PredefinedToolError(
            f"{what}: do not mix operators and plain keys in one object: {sorted(value)}"
        )
    return False


def compile_condition(spec: object, *, what: str) -> Predicate:
    """Compile the condition on one field: an operator object, or a literal for equality."""
    if not _is_operator_object(spec, what):
        return _equals(spec)
    options = spec.get("$options")
    if options is not None and "$regex" not in spec:
        raise PredefinedToolError(f"{what}: $options is only valid together with $regex")
    parts = [
        _compile_operator(operator, argument, what, options)
        for operator, argument in spec.items()
        if operator != "$options"
    ]
    return lambda value: all(part(value) for part in parts)


def _compile_operator(operator: str, argument: object, what: str, options: object) -> Predicate:
    if operator in _UNSUPPORTED:
        raise PredefinedToolError(f"{what}: {_UNSUPPORTED[operator]}")
    factory = _OPERATORS.get(operator)
    if factory is not None:
        return factory(argument, what)
    if operator == "$regex":
        return _regex(argument, options, what)
    known = ", ".join(sorted(FIELD_OPERATORS))
    raise PredefinedToolError(f"{what}: unknown operator {operator!r}; supported: {known}")


def _equals(expected: object) -> Predicate:
    if expected is None:
        return lambda value: value is MISSING or value is None
    return lambda value: value is not MISSING and json_equal(value, expected)


def _not_equals(expected: object, _what: str) -> Predicate:
    equal = _equals(expected)
    return lambda value: not equal(value)


def _holds(operator: str, value: _Ordered, bound: _Ordered) -> bool:
    if operator == "$gt":
        return value > bound
    if operator == "$gte":
        return value >= bound
    if operator == "$lt":
        return value < bound
    return value <= bound


def _ordering(operator: str) -> Callable[[object, str], Predicate]:
    def factory(bound: object, what: str) -> Predicate:
        if not (_is_number(bound) or isinstance(bound, str)):
            raise PredefinedToolError(f"{what}: {operator} takes a number or a string, got {bound!r}")

        def predicate(value: object) -> bool:
            if _is_number(bound) and _is_number(value):
                return _holds(operator, value, bound)
            return isinstance(bound, str) and isinstance(value, str) and _holds(operator, value, bound)

        return predicate

    return factory


def _membership(negate: bool) -> Callable[[object, str], Predicate]:
    def factory(candidates: object, what: str) -> Predicate:
        name = "$nin" if negate else "$in"
        if not isinstance(candidates, list):
            raise PredefinedToolError(f"{what}: {name} takes a list, got {candidates!r}")
        texts = {as_text(item) for item in candidates}

        def member(value: object) -> bool:
            if value is MISSING or value is None:
                return None in texts
            return as_text(value) in texts

        return (lambda value: not member(value)) if negate else member

    return factory


def _exists(flag: object, what: str) -> Predicate:
    if not isinstance(flag, bool):
        raise PredefinedToolError(f"{what}: $exists takes true or false, got {flag!r}")
    return lambda value: (value is not MISSING) == flag


def _contains(needle: object, _what: str) -> Predicate:
    wanted = needle if isinstance(needle, list) else [needle]

    def predicate(value: object) -> bool:
        if not isinstance(value, list):
            return False
        return all(any(json_equal(item, want) for item in value) for want in wanted)

    return predicate


def _regex(pattern: object, options: object, what: str) -> Predicate:
    """``$regex``, always case-insensitive as on Connic ("``$regex`` matching is always
    case-insensitive", connic-skill ``predefined-tools.md``): ``$options`` adds ``m``, ``s``, ``x``;
    its ``i`` changes nothing. Python's syntax, applied with a time bound (``patterns.py``): a
    pattern that backtracks fails the call instead of hanging pytest's process."""
    if not isinstance(pattern, str):
        raise PredefinedToolError(f"{what}: $regex takes a string pattern, got {pattern!r}")
    if options is not None and not isinstance(options, (str, list)):
        raise PredefinedToolError(f"{what}: $options takes a string of flags, got {options!r}")
    flags = re.IGNORECASE
    for letter in options or "":
        flag = _REGEX_FLAGS.get(letter) if isinstance(letter, str) else None
        if flag is None:
            raise PredefinedToolError(f"{what}: unknown $options flag {letter!r} (use i, m, s, x)")
        flags |= flag
    try:
        compiled = Bounded(pattern, flags)  # a pattern that backtracks is stopped (patterns.py)
    except PatternError as error:
        raise PredefinedToolError(f"{what}: invalid $regex {pattern!r}: {error}") from None

    def matches(value: object) -> bool:
        try:
            return isinstance(value, str) and compiled.search(value) is not None
        except PatternTimeout as error:
            raise PredefinedToolError(f"{what}: $regex: {error}") from None

    return matches


_REGEX_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}


def _negation(spec: object, what: str) -> Predicate:
    if not _is_operator_object(spec, what):
        raise PredefinedToolError(f"{what}: $not takes an object of operators, e.g. {{'$gt': 5}}")
    inner = compile_condition(spec, what=what)
    return lambda value: not inner(value)


def _elem_match(spec: object, what: str) -> Predicate:
    if not isinstance(spec, dict) or not spec:
        raise PredefinedToolError(f"{what}: $elemMatch takes a non-empty object")
    if _is_operator_object(spec, what):
        element = compile_condition(spec, what=what)
    else:
        element = compile_filter(spec, what=what)
    return lambda value: isinstance(value, list) and any(element(item) for item in value)


_OPERATORS: dict[str, Callable[[object, str], Predicate]] = {
    "$eq": lambda expected, _what: _equals(expected),
    "$ne": _not_equals,
    "$gt": _ordering("$gt"),
    "$gte": _ordering("$gte"),
    "$lt": _ordering("$lt"),
    "$lte": _ordering("$lte"),
    "$in": _membership(negate=False),
    "$nin": _membership(negate=True),
    "$exists": _exists,
    "$contains": _contains,
    "$not": _negation,
    "$elemMatch": _elem_match,
}


# --------------------------------------------------------------------------- result shaping


def check_page(limit: object, skip: object) -> tuple[int, int]:
    """``limit`` (1..1000, Connic's documented maximum) and ``skip`` (>= 0), validated."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise PredefinedToolError(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}")
    if not isinstance(skip, int) or isinstance(skip, bool) or skip < 0:
        raise PredefinedToolError(f"skip must be a non-negative integer, got {skip!r}")
    return limit, skip


def _sort_key(value: object) -> tuple[int, float | str]:
    # MongoDB's cross-type order: missing/null < numbers < strings < objects < arrays < booleans.
    if value is MISSING or value is None:
        return (0, 0)
    if isinstance(value, bool):
        return (5, value)
    if _is_number(value):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    return (3 if isinstance(value, dict) else 4, canonical(value))


def _key_at(path: str) -> Callable[[Document], tuple[int, float | str]]:
    return lambda document: _sort_key(at_path(document, path))


def sort_documents(documents: list[Document], sort: object) -> list[Document]:
    """Sort by ``{"path": 1 | -1, ...}``, first key most significant; stable otherwise."""
    if not sort:
        return documents
    if not isinstance(sort, Mapping):
        raise PredefinedToolError(f"sort must be an object like {{'field': -1}}, got {sort!r}")
    for path, direction in sort.items():
        if direction not in (1, -1) or isinstance(direction, bool):
            raise PredefinedToolError(f"sort direction for {path!r} must be 1 or -1, got {direction!r}")
    ordered = list(documents)
    for path, direction in reversed(list(sort.items())):
        ordered.sort(key=_key_at(path), reverse=direction == -1)
    return ordered


def project(document: Document, fields: Iterable[str], always: Iterable[str] = ()) -> Document:
    """Keep only ``fields`` (dot paths, nested structure rebuilt) plus the ``always`` keys."""
    result: Document = {key: document[key] for key in always if key in document}
    for path in fields:
        value = at_path(document, path)
        if value is MISSING:
            continue
        target = result
        *parents, leaf = path.split(".")
        for segment in parents:
            child = target.setdefault(segment, {})
            if not isinstance(child, dict):  # "a" and "a.0" both asked for, "a" a list
                raise PredefinedToolError(f"fields: {path!r} reaches into {segment!r}, which is not an object")
            target = child
        target[leaf] = to_jsonable(value)
    return result


def check_fields(fields: object) -> list[str]:
    """Validate a ``fields`` argument: a list of field paths (not a projection map)."""
    if not isinstance(fields, list) or not all(isinstance(f, str) and f for f in fields):
        raise PredefinedToolError(f"fields must be a list of field paths, got {fields!r}")
    return fields


def distinct_values(documents: Iterable[Document], path: str) -> list[JsonValue]:
    """Unique values at ``path`` in document order; documents without the field are skipped."""
    seen: set[str] = set()
    values: list[JsonValue] = []
    for document in documents:
        value = at_path(document, path)
        if value is MISSING:
            continue
        key = canonical(value)
        if key not in seen:
            seen.add(key)
            values.append(to_jsonable(value))
    return values
