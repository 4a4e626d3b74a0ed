"""``load_suite`` below pytest: what a suite's validation says, located (``file:line:column`` and
the key path), for a case that fails alone in setup (``CaseSpec.error``) and for a file that is one
collection error (``SuiteError``). How a session shows each (a setup error whose siblings run, one
collection error): tests/plugin/test_collect.py."""

from __future__ import annotations

import fnmatch

import pytest

from helpers.harness import CaseProject
from helpers.project import esc
from pytest_connic.suite.loader import SuiteError, load_suite


def case_errors(project: CaseProject, body: str, name: str = "echo") -> dict[str, str | None]:
    loaded = load_suite(project.suite(name, body), project.root)
    assert loaded is not None
    return {case.name: case.error for case in loaded.cases}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("tests:\n  - name: a\n    payload: p\n    runs: 101\n",
         "tests/echo.yaml:4:11: tests[0].runs: Input should be less than or equal to 100 (found 101)"),
        ("tests:\n  - name: a\n",
         "tests/echo.yaml:2:5: tests[0]: test 'a': must specify either `payload` or `builder`.*"),
        ("tests:\n  - name: a\n    payload: p\n    files: [../secret.pdf]\n",
         "*tests[0].files[0]: files entry '../secret.pdf' must be a bare filename (no path separators)*"),
        ("tests:\n  - name: a\n    payload: p\n    expected_result: len(output) > 0\n",
         "tests/echo.yaml:4:22: tests[0].expected_result: *call*"),
        ("tests:\n  - name: a\n    payload: p\n    expected_result: outptu.x == 1\n",
         "*unknown name 'outptu'*output*"),
        ("tests:\n  - name: a\n    payload: p\n    approval_decisions:\n      - tool: x\n        decision: approved\n",
         "*tests[0].approval_decisions[0].decision: Input should be 'approve', 'reject' or 'timeout'*"),
        ("tests:\n  - name: a\n    payload: '{}'\n    expected_tool_call:\n      - calc.echo\n",
         ("tests/echo.yaml:4:5: tests[0].expected_tool_call: unknown key 'expected_tool_call'; did you mean "
         "'expected_tool_calls'?*")),
    ],
    ids=["runs", "payload", "files", "call", "name", "decision", "unknown-key"],
)
def test_an_invalid_case_has_its_located_error(calc_cases: CaseProject, body: str, expected: str) -> None:
    errors = case_errors(calc_cases, body + "  - name: fine\n    payload: p\n")
    assert errors["fine"] is None  # its sibling is left alone: it runs
    assert errors["a"] is not None and fnmatch.fnmatchcase(errors["a"], esc(expected)), errors["a"]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("tests: []\n", "tests/echo.yaml:1:8: tests: List should have at least 1 item*"),
        ("- just a list\n", "tests/echo.yaml:1:1: a suite must be a mapping*found list*"),
        ("tests:\n  - name: a\n    payload: p\n  - name: a\n    payload: q\n",
         "tests/echo.yaml:4:11: tests[1].name: Duplicate test name 'a' in file (first at line 2).*"),
        ("tests:\n  - name: a\n    payload: 'unterminated\n", "tests/echo.yaml:*invalid YAML*"),
        ("version: 1.0\ntests:\n  - name: a\n    payload: p\n",
         "tests/echo.yaml:1:10: version: Input should be a valid string (found 1.0)*"),
        ("defaults:\n  runs: 0\ntests:\n  - name: a\n    payload: p\n",
         "tests/echo.yaml:2:9: defaults.runs: Input should be greater than or equal to 1*"),
        ("tets:\n  - name: a\n", "*unknown key 'tets'; did you mean 'tests'?*"),
    ],
    ids=["empty", "list", "duplicate", "yaml", "version", "defaults", "unknown-key"],
)
def test_an_invalid_file_is_one_located_error(calc_cases: CaseProject, body: str, expected: str) -> None:
    with pytest.raises(SuiteError) as raised:
        load_suite(calc_cases.suite("echo", body), calc_cases.root)
    assert fnmatch.fnmatchcase(str(raised.value), esc(expected)), str(raised.value)


def test_x_keys_are_allowed_everywhere(calc_cases: CaseProject) -> None:
    body = "x-owner: team-a\ndefaults:\n  x-note: fine\ntests:\n  - name: extended\n    x-jira: ABC-1\n    payload: '{}'\n"
    assert case_errors(calc_cases, body) == {"extended": None}


def test_a_yaml_fixture_under_tests_files_gets_a_hint(calc_cases: CaseProject) -> None:
    path = calc_cases.write("tests/files/data.yaml", "customers:\n  - ada\n")
    with pytest.raises(SuiteError) as raised:
        load_suite(path, calc_cases.root)
    assert fnmatch.fnmatchcase(str(raised.value), "*unknown key 'customers'*"), str(raised.value)
    assert "Connic parses every tests/**/*.yaml file as a suite" in str(raised.value)
