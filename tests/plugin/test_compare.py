"""Comparing sessions (docs/history.md, "Comparing sessions"): the history keeps what each case
did; ``python -m pytest_connic compare A B`` and ``--connic-compare REF`` show what changed."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from helpers.project import CALC_TOOLS, ConnicProject

SUITE = """
agent: calc
tests:
  - name: adds
    payload: "4 + 6?"
    expected_tool_calls:
      - calc.add
  - name: steady
    payload: "1 + 1?"
"""
#: an old history written by pytest-connic before it kept behaviour (schema 2): ``make_old_history``
OLD_HISTORY = Path(__file__).parent / "data" / "history-schema2.sqlite"


def turn(content: str | None = None, calls: list[tuple[str, dict[str, Any]]] | None = None,
         tokens: tuple[int, int] = (100, 10)) -> dict[str, Any]:
    out: dict[str, Any] = {"usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]}}
    if content is not None:
        out["content"] = content
    if calls:
        out["tool_calls"] = [{"name": n, "arguments": a} for n, a in calls]
    return out


def first_version(project: ConnicProject) -> None:
    """The agent, its suite and its cassettes as recorded first."""
    project.tool("calc", CALC_TOOLS)
    project.agent("calc", tools=["calc.add", "calc.multiply"])
    project.suite("calc", SUITE)
    project.cassette("calc", "adds", [{"turns": [turn(calls=[("add", {"a": 4, "b": 6})]),
                                                 turn("The sum of four and six is ten.")]}])
    project.cassette("calc", "steady", [{"turns": [turn("Two.")]}])


def second_version(project: ConnicProject) -> None:
    """The prompt changed, and with it the recorded answer (one more tool call, other words)."""
    project.agent("calc", tools=["calc.add", "calc.multiply"], system_prompt="You are calc. Show your work.")
    project.cassette("calc", "adds", [{"turns": [
        turn(calls=[("add", {"a": 4, "b": 6})]),
        turn(calls=[("multiply", {"a": 10, "b": 1})], tokens=(150, 12)),
        turn("The sum of four and six is 10, checked twice.", tokens=(180, 20))]}])


def test_make_old_history(project: ConnicProject) -> None:  # pragma: no cover - run by hand, on main
    """Writes ``OLD_HISTORY`` when ``CONNIC_MAKE_OLD_HISTORY`` is set (run with main's code on the path)."""
    import os

    if not os.environ.get("CONNIC_MAKE_OLD_HISTORY"):
        pytest.skip("writes the fixture of an old history; run by hand with CONNIC_MAKE_OLD_HISTORY=1")
    first_version(project)
    project.run("--connic-history", "history.sqlite").assert_outcomes(passed=2)
    shutil.copy(project.root / "history.sqlite", OLD_HISTORY)


def stored_cases(path: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(path) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("SELECT * FROM cases ORDER BY session_id, nodeid")]


def test_the_history_keeps_what_each_case_did_bounded(project: ConnicProject) -> None:
    first_version(project)
    project.run("--connic-history", "history.sqlite", "--connic-report-value-limit", "20").assert_outcomes(passed=2)
    adds = json.loads(stored_cases(project.root / "history.sqlite")[0]["behaviour"])
    assert (adds["agent"], adds["name"], adds["suite"], adds["runs_started"]) == ("calc", "adds", "tests/calc.yaml", 1)
    run = adds["runs"][0]
    assert run["output"] == "The sum of four and " + "… [truncated: 31 characters, 11 cut]"
    assert run["tools"] == [{"name": "add", "args": '{"a":4,"b":6}', "result": '{"sum":10}', "error": None,
                             "approval": None, "aborted": False}]
    assert run["tokens"] == {"input": 200, "output": 20} and run["passed"] is True
    assert run["latency_ms"] >= 0 and run["guardrails"] == [] and run["approvals"] == []


def test_an_old_history_file_is_migrated_by_the_next_session(project: ConnicProject) -> None:
    first_version(project)
    shutil.copy(OLD_HISTORY, project.root / "history.sqlite")
    project.run("--connic-history", "history.sqlite").assert_outcomes(passed=2)
    rows = stored_cases(project.root / "history.sqlite")
    assert [(r["session_id"], r["behaviour"] is None) for r in rows] == [(1, True), (1, True), (2, False), (2, False)]
    with sqlite3.connect(project.root / "history.sqlite") as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 3
