"""Python source into an ``ast`` tree, one parse at a time in the process.

CPython 3.11 and 3.12 keep the recursion depth of the AST constructor in the interpreter's state,
shared by its threads (python/cpython#106905, seen here on 3.11.7): two threads in ``ast.parse``
at once can make either fail with ``SystemError: AST constructor recursion depth mismatch``. Under ``--connic-isolation=none`` a run's threads (a tool call still running after
its run ended, a guardrail, the strict-mock check of a mocks module) and collection can parse at
the same moment, so every parse of the plugin goes through this lock."""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse_expression(text: str) -> ast.Expression:
    """``ast.parse(text, mode="eval")`` under the process's parse lock."""
    with _LOCK:
        return ast.parse(text, mode="eval")


def parse_module(source: str | bytes) -> ast.Module:
    """``ast.parse(source)`` under the process's parse lock."""
    with _LOCK:
        return ast.parse(source)
