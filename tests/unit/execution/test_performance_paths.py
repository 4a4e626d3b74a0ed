"""The shortcuts taken for speed (docs/performance.md) must not change what anything means.

- Compiled expressions are shared per (source, allowed names, place): a place must never see an
  expression validated for another place's names, errors are raised afresh every time, and the
  evaluator built lazily from the source behaves like one built at once.
- Sync user code runs on reused daemon threads: every call still starts at once (a blocked call
  holds up no other), errors reach the caller, and idle threads end.
- String scalars are taken as their text, without PyYAML's constructor: the result is still
  exactly ``yaml.safe_load``'s.
- The garbage collector is paused only while a suite file is collected (in `tests/plugin/test_collect.py`).
- An agent's middleware and tool hooks are looked up once (the SDK keeps them): a failed one stays out.
"""

from __future__ import annotations

import ast
import threading
import time
from pathlib import Path

import pytest
import yaml

from pytest_connic.checks.compiled import RESULT_NAMES, TOOL_CALL_NAMES, compile_case
from pytest_connic.execution.case import ReusingDaemonExecutor
from pytest_connic.expressions.expression import compile_expression
from pytest_connic.expressions.values import LITERAL_NAMES, EvaluationError, ExpressionError
from pytest_connic.yamlpos import load_with_positions

# ------------------------------------------------------------------------ expression cache


def test_a_name_allowed_in_one_place_stays_unknown_in_another() -> None:
    source = "params.amount > 10 and context.user == 'a'"
    tool = compile_expression(source, TOOL_CALL_NAMES, where="expected_tool_calls (pay)")
    assert tool.evaluate({"params": {"amount": 11}, "context": {"user": "a"}})
    with pytest.raises(ExpressionError, match=r"unknown name 'params' in expected_result"):
        compile_expression(source, RESULT_NAMES, where="expected_result")
    # and the other way round: a failure in one place does not stick to the source either
    assert compile_expression(source, TOOL_CALL_NAMES, where="expected_tool_calls (pay)") is tool


def test_the_place_is_part_of_the_key() -> None:
    first = compile_expression("output.x == 1", RESULT_NAMES, where="expected_result")
    other = compile_expression("output.x == 1", RESULT_NAMES, where="somewhere else")
    assert first is not other
    assert (first.where, other.where) == ("expected_result", "somewhere else")
    assert compile_expression("output.x == 1", list(reversed(RESULT_NAMES)), where="expected_result") is first


def test_errors_are_raised_afresh_and_never_cached() -> None:
    errors = []
    for _ in range(2):
        with pytest.raises(ExpressionError) as info:
            compile_expression("output.x ==", RESULT_NAMES, where="expected_result")
        errors.append(info.value)
    assert errors[0] is not errors[1]
    errors[0].key_path = ("tests", 0)  # type: ignore[attr-defined]  (what compiled.py does)
    assert not hasattr(errors[1], "key_path")


def test_shared_expressions_keep_no_state_between_evaluations() -> None:
    expr = compile_expression("output.total > 0 and status == 'completed'", RESULT_NAMES, where="expected_result")
    again = compile_expression("output.total > 0 and status == 'completed'", RESULT_NAMES, where="expected_result")
    assert again is expr
    failing = {"output": {"total": 0}, "status": "completed"}
    assert not expr.evaluate(failing)
    assert expr.evaluate({"output": {"total": 3}, "status": "completed"})
    assert again.explain(failing) == "output.total > 0 where output.total = 0"
    with pytest.raises(EvaluationError, match="output.total: no key 'total'"):
        again.evaluate({"output": {}, "status": "completed"}, strict=True)


@pytest.mark.parametrize(
    "source",
    [
        "output.a == 1 and (status in ['x', 'y'] or not error)",
        "context['k'][0:2] == [true, null] and output.items[-1].sku != false",
        "invocations >= 2 and params.x == result.y",
        "{'a': output.b, 'c': [context.d]} == {}",
        "output.a is null or output.b is not true",
    ],
)
def test_names_found_while_compiling_equal_the_root_names_of_the_tree(source: str) -> None:
    allowed = {*RESULT_NAMES, *TOOL_CALL_NAMES}
    expr = compile_expression(source, allowed, where="test")
    tree = ast.parse(source, mode="eval")
    expected = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - set(LITERAL_NAMES)
    assert expr.names == expected
    assert [part.source for part in expr.conjuncts()]  # the tree is rebuilt from the source


def test_cases_with_the_same_expressions_share_them_but_not_their_checks() -> None:
    case = {"expected_result": "output.ok == true", "expected_tool_calls": ["a", {"b": "invocations == 1"}],
            "expected_tool_call_order": ["a", "b"], "approval_decisions": []}
    one, two = compile_case(case), compile_case(dict(case))
    assert one.checks.result is two.checks.result
    assert one.checks is not two.checks
    assert list(one.checks.order) == ["a", "b"] and not one.approvals and not one.checks.no_calls


# ------------------------------------------------------------------------ reused daemon threads


def test_a_blocked_call_holds_up_no_other_and_errors_reach_the_caller() -> None:
    executor = ReusingDaemonExecutor(idle_s=0.2)
    release = threading.Event()
    blocked = executor.submit(release.wait, 5)
    assert executor.submit(lambda: 42).result(timeout=5) == 42
    assert not blocked.done()  # the other call finished while this one still waits
    failing = executor.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing.result(timeout=5)
    release.set()
    assert blocked.result(timeout=5) is True
    executor.shutdown()


def test_threads_are_daemons_reused_and_end_when_idle() -> None:
    executor = ReusingDaemonExecutor(name="perf-test", idle_s=0.3)
    seen = {executor.submit(lambda: (threading.current_thread().ident, threading.current_thread().daemon))
            .result(timeout=5) for _ in range(20)}
    assert len(seen) == 1 and all(daemon for _, daemon in seen)  # one after another: one thread
    deadline = time.time() + 5
    while time.time() < deadline and any(t.name.startswith("perf-test-") for t in threading.enumerate()):
        time.sleep(0.05)
    assert not any(t.name.startswith("perf-test-") for t in threading.enumerate())


def test_shutdown_ends_idle_threads_and_later_calls_still_run() -> None:
    executor = ReusingDaemonExecutor(name="perf-shutdown", idle_s=30)
    assert executor.submit(lambda: 1).result(timeout=5) == 1
    executor.shutdown()
    deadline = time.time() + 5
    while time.time() < deadline and any(t.name.startswith("perf-shutdown-") for t in threading.enumerate()):
        time.sleep(0.05)
    assert not any(t.name.startswith("perf-shutdown-") for t in threading.enumerate())
    assert executor.submit(lambda: 2).result(timeout=5) == 2  # a late call (a timed-out run's cleanup)


# ------------------------------------------------------------------------ string scalars


@pytest.mark.parametrize(
    "text",
    [
        "a: b\nc: 'd'\ne: \"f\\tg\"\n",
        "k: !!str 12\n!!str 3: x\nn: 12\nb: yes\nnull_: ~\nf: 1.5\n",
        "a: &x text\nb: *x\nc: [*x, *x]\n",
        "base: &b {k: v, n: 1}\nd:\n  <<: *b\n  k: w\n",
        "lit: |\n  one\n  two\nfold: >-\n  three\n  four\n",
        "t: ! 12\nu: !!binary aGk=\nw: 2001-12-14\n",
        "? complex key\n: value\n'': empty\n",
    ],
)
def test_string_scalars_load_exactly_as_safe_load(text: str) -> None:
    data, _ = load_with_positions(text)
    expected = yaml.safe_load(text)
    assert data == expected
    assert {k: type(v) for k, v in data.items()} == {k: type(v) for k, v in expected.items()}


def test_a_registered_string_constructor_is_honoured() -> None:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("tag:yaml.org,2002:str", lambda loader, node: node.value.upper())
    from pytest_connic.yamlpos import _Builder

    loader = Loader("a: b\n")
    try:
        assert _Builder(loader).build(loader.get_single_node(), (), 0) == {"A": "B"}
    finally:
        loader.dispose()


# ------------------------------------------------------------- middleware and hooks lookups


def test_middleware_and_hooks_are_looked_up_once_per_agent_and_a_failed_one_stays_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Asked per invocation and per tool call, answered from the first lookup (the SDK keeps
    what it loaded too); a kind later marked as failed to load (``adopt``) is None from then on."""
    from pytest_connic.project.loaded import LoadedProject

    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "a.yaml").write_text("version: '1.0'\nname: a\ntype: tool\ntool_name: t.f\n")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "t.py").write_text("def f(payload: dict) -> dict:\n    return payload\n")
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks" / "a.py").write_text("def before(tool_name, params, context):\n    return params\n")
    project = LoadedProject(tmp_path, static=False)
    asked: list[str] = []
    for name in ("load_middleware", "load_tool_hooks"):
        original = getattr(project.loader, name)
        monkeypatch.setattr(project.loader, name, lambda agent, original=original, name=name: (
            asked.append(name), original(agent))[1])
    hooks = [project.hooks("a") for _ in range(3)]
    middleware = [project.middleware("a") for _ in range(3)]
    assert hooks[0] is not None and all(h is hooks[0] for h in hooks) and middleware == [None] * 3
    assert asked == ["load_tool_hooks", "load_middleware"]
    project._failed.add(("hooks", "a"))
    assert project.hooks("a") is None
