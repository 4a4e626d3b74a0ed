"""pytest-repeat and pytest-picked cannot act on Connic cases: the session says so at its start
(docs/ci.md "Other pytest plugins"), against the real plugins."""

from __future__ import annotations

import subprocess

import pytest

from helpers.project import ConnicProject

SUITE = "agent: echo\ntests:\n  - name: one\n    payload: '{\"x\": 1}'\n"
REPEAT = ("connic: pytest-repeat's --count 3 repeats Python tests only: each Connic case runs once"
          " (its `runs:` sets how many times the agent runs)")


def test_repeat_count_is_said_at_the_start(calc: ConnicProject) -> None:
    pytest.importorskip("pytest_repeat")
    calc.suite("echo", SUITE)
    calc.write("test_plain.py", "def test_plain():\n    pass\n")
    result = calc.run("-q", "--count", "3")
    assert result.stdout.lines[0] == REPEAT
    result.assert_outcomes(passed=4)  # the Python test three times, the case once
    assert REPEAT not in calc.run("-q", "--count", "1").stdout.str()


def test_repeat_line_only_in_a_connic_project(pytester: pytest.Pytester) -> None:
    pytest.importorskip("pytest_repeat")
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-q", "--count", "2")
    result.stdout.no_fnmatch_line("connic:*")
    result.assert_outcomes(passed=2)


def test_picked_is_said_at_the_start(calc: ConnicProject) -> None:
    pytest.importorskip("pytest_picked")
    calc.suite("echo", SUITE)
    subprocess.run(["git", "init", "-q", str(calc.root)], check=True)
    result = calc.run("--picked=first")
    result.stdout.fnmatch_lines([("connic: pytest-picked (--picked=first) picks changed Python test files only:"
                                 " changed Connic suites (tests/*.yaml) are not picked; name them on the"
                                 " command line"), "collected 1 item"], consecutive=True)
