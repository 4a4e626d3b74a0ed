"""What changed and flaky count every part of a case's configuration (docs/history.md): a user's
break-and-fix edit of a tool is a change, named, not a flaky case; a version-1 history file keeps
working."""

from __future__ import annotations

import sqlite3

import pytest

from helpers.project import ConnicProject
from pytest_connic.history.store import APPLICATION_ID

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

TOOL = '''
def add(a: int, b: int) -> dict:
    """Add two numbers."""
    return {"sum": a + b + OFFSET}


OFFSET = %d
'''


@pytest.fixture
def calc(project: ConnicProject) -> ConnicProject:
    project.tool("calc", TOOL % 0)
    project.agent("calc", tools=["calc.add"])
    project.suite("calc", """
        agent: calc
        tests:
          - name: adds
            payload: "4 + 6?"
            expected_tool_calls:
              - calc.add: result.sum == 10
    """)
    project.replies("calc", "adds", [("add", {"a": 4, "b": 6})], '{"sum": 10}')
    return project


def session(project: ConnicProject) -> pytest.RunResult:
    return project.run("--connic-history", "history.sqlite")


def test_a_break_and_fix_edit_of_a_tool_is_a_named_change_not_a_flaky_case(
    calc: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    session(calc).assert_outcomes(passed=1)

    calc.tool("calc", TOOL % 1)  # the user breaks the tool
    broken = session(calc)
    broken.assert_outcomes(failed=1)
    broken.stdout.fnmatch_lines(["*tests/calc.yaml::adds: newly failing (passed last time); changed: tools/calc.py"])

    calc.tool("calc", TOOL % 0)  # and fixes it
    fixed = session(calc)
    fixed.assert_outcomes(passed=1)
    fixed.stdout.fnmatch_lines(["*tests/calc.yaml::adds: newly passing (failed last time); changed: tools/calc.py"])
    fixed.stdout.no_fnmatch_line("*flips*")  # the count started again with each edit


def test_a_version_1_history_file_is_read_and_extended(calc: ConnicProject, wide_terminal: None) -> None:
    path = calc.root / "history.sqlite"
    calc.run("--connic-history", "probe.sqlite")
    with sqlite3.connect(calc.root / "probe.sqlite") as probe:
        (selection,) = probe.execute("SELECT selection FROM sessions").fetchone()
    probe.close()
    with sqlite3.connect(path) as conn:  # the schema of version 1, one session in it
        conn.executescript(f"""
            PRAGMA application_id = {APPLICATION_ID};
            PRAGMA user_version = 1;
            CREATE TABLE sessions (id INTEGER PRIMARY KEY AUTOINCREMENT, started TEXT NOT NULL, git_commit TEXT,
                command TEXT NOT NULL, selection TEXT NOT NULL, tokens INTEGER NOT NULL DEFAULT 0,
                cost REAL NOT NULL DEFAULT 0);
            CREATE TABLE cases (session_id INTEGER NOT NULL REFERENCES sessions(id), nodeid TEXT NOT NULL,
                verdict TEXT NOT NULL, successes INTEGER NOT NULL, executed INTEGER NOT NULL, runs INTEGER NOT NULL,
                pass_rate REAL, rate_low REAL, rate_high REAL, input_tokens INTEGER NOT NULL,
                output_tokens INTEGER NOT NULL, cost REAL NOT NULL, latency_ms REAL, cassette_digest TEXT,
                config_digest TEXT, PRIMARY KEY (session_id, nodeid));
            INSERT INTO sessions (started, command, selection) VALUES ('2026-01-01T00:00:00+00:00', 'pytest',
                '{selection}');
            INSERT INTO cases VALUES (1, 'tests/calc.yaml::adds', 'failed', 0, 1, 1, 0.0, 0.0, 0.8, 0, 0, 0.0,
                1.0, 'old', 'old');
        """)
    conn.close()

    result = session(calc)

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*history: 1 case(s) changed since session 1 of 2026-01-01*"])
    # an old row has no parts to compare; its cassette digest ('old') is not this one's
    result.stdout.fnmatch_lines(["*tests/calc.yaml::adds: newly passing (failed last time); changed: cassette re-recorded"])
    with sqlite3.connect(path) as conn:
        parts = [r[0] for r in conn.execute("SELECT config_parts FROM cases ORDER BY session_id")]
    conn.close()
    assert parts[0] is None and '"tools/calc.py"' in parts[1]
