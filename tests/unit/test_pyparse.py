"""CPython's shared AST recursion counter (python/cpython#106905): a parse interrupted by the
garbage collector while another thread parses fails with ``SystemError``; the plugin's guard
makes ``ast.parse`` try it again."""

from __future__ import annotations

import ast
import gc
import threading
from collections.abc import Iterator

import pytest

from pytest_connic import pyparse

BIG = "\n".join(f"def f{i}(a, b):\n    return [a + b * {i} for _ in range(3)]" for i in range(2000))


@pytest.fixture
def interleaved() -> Iterator[threading.Event]:
    """Once armed (the event set), the next garbage collection of the main thread waits while
    another thread, deeper in its stack, parses: the race of two threads in ``ast.parse``, made
    deterministic."""
    armed, fired, go, done = threading.Event(), threading.Event(), threading.Event(), threading.Event()

    def deep(n: int) -> None:
        if n:
            return deep(n - 1)
        ast.parse("x = 1")
        return None

    def other() -> None:
        go.wait()
        deep(40)
        done.set()

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and armed.is_set() and threading.current_thread() is threading.main_thread() \
                and not fired.is_set():
            fired.set()
            go.set()
            done.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    gc.callbacks.append(callback)
    try:
        yield armed
    finally:
        gc.callbacks.remove(callback)
        go.set()
        thread.join()
    assert fired.is_set() and done.is_set()


@pytest.mark.skipif(not pyparse.AFFECTED, reason="this CPython keeps the counter per parse")
def test_the_race_fails_an_unguarded_parse(interleaved: threading.Event, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ast, "parse", getattr(ast.parse, "__wrapped__", ast.parse))  # unguarded
    gc.collect()
    interleaved.set()
    with pytest.raises(SystemError, match="AST constructor recursion depth mismatch"):
        ast.parse(BIG)


def test_the_guarded_parse_survives_the_race(interleaved: threading.Event, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ast, "parse", getattr(ast.parse, "__wrapped__", ast.parse))
    pyparse.guard_ast_parse()
    gc.collect()
    interleaved.set()
    tree = ast.parse(BIG)
    assert len(tree.body) == 2000


def test_the_plugins_own_parse_survives_the_race(interleaved: threading.Event) -> None:
    gc.collect()
    interleaved.set()
    assert len(pyparse.parse_module(BIG).body) == 2000


def test_only_the_counters_error_is_retried() -> None:
    calls: list[str] = []

    def parse(source: str) -> str:
        calls.append(source)
        if source == "other":
            raise SystemError("something else")
        if len(calls) < 3:
            raise SystemError("AST constructor recursion depth mismatch (before=1, after=9)")
        return "tree"

    guarded = pyparse.retrying(parse)
    assert guarded("x") == "tree" and len(calls) == 3
    assert pyparse.retrying(guarded) is guarded  # guarding twice wraps once
    calls.clear()
    with pytest.raises(SystemError, match="something else"):
        guarded("other")
    assert calls == ["other"]


def test_a_parse_that_keeps_failing_fails() -> None:
    calls = 0

    def parse(source: str) -> str:
        nonlocal calls
        calls += 1
        raise SystemError("AST constructor recursion depth mismatch (before=1, after=9)")

    with pytest.raises(SystemError):
        pyparse.retrying(parse)("x")
    assert calls == 5
