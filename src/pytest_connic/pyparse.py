"""Python source into an ``ast`` tree, safe from CPython's shared AST recursion counter.

CPython 3.11 and 3.12 before 3.12.5 keep the recursion depth of the AST constructor in the
interpreter's state, shared by its threads (python/cpython#106905, seen here on 3.11.7). When the
garbage collector runs Python code in the middle of one thread's ``ast.parse`` and another thread
parses meanwhile, the first fails with ``SystemError: AST constructor recursion depth mismatch``.
Under ``--connic-isolation=none`` a run's threads (a tool call still running after its run ended,
a guardrail, the strict-mock check of a mocks module) and collection parse in one process, and
the parse that fails may be the SDK's, pytest's or the plugin's. So :func:`guard_ast_parse`
(called when a Connic project is in the session, on the affected versions only) makes
``ast.parse`` itself retry a parse that failed with that error, and the plugin's own parses retry
the same way everywhere: a parse is a pure function of its input, and the retry runs after the
other thread's parse has ended."""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

_MISMATCH = "AST constructor recursion depth mismatch"
_ATTEMPTS = 5
#: the versions with the shared counter (the fix reached 3.12.5 and 3.13)
AFFECTED = sys.version_info < (3, 12, 5)

_P = ParamSpec("_P")
_T = TypeVar("_T")


def retrying(parse: Callable[_P, _T]) -> Callable[_P, _T]:
    """``parse``, tried again (up to five times in all) when it fails with the shared counter's
    ``SystemError``; any other error, and the fifth such failure, propagate."""
    if getattr(parse, "__connic_retrying__", False):
        return parse

    @functools.wraps(parse)
    def parse_retrying(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                return parse(*args, **kwargs)
            except SystemError as exc:
                if _MISMATCH not in str(exc) or attempt == _ATTEMPTS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    parse_retrying.__connic_retrying__ = True  # type: ignore[attr-defined]
    return parse_retrying


def guard_ast_parse() -> None:
    """Make ``ast.parse`` retry the shared counter's failure, for every caller in the process
    (once; nothing on versions without the bug)."""
    if AFFECTED:
        ast.parse = retrying(ast.parse)


_PARSE = retrying(ast.parse)


def parse_expression(text: str) -> ast.Expression:
    """``ast.parse(text, mode="eval")``, retried as above."""
    return _PARSE(text, mode="eval")


def parse_module(source: str | bytes) -> ast.Module:
    """``ast.parse(source)``, retried as above."""
    return _PARSE(source)
