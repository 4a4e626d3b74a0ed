"""Collection: Connic's discovery rules, node ids, located validation errors."""

from __future__ import annotations

import pytest

from helpers.project import ConnicProject, esc

SIMPLE = """
tests:
  - name: {name}
    payload: '{{"x": 1}}'
"""


def test_collects_node_ids_with_connic_discovery(calc: ConnicProject) -> None:
    calc.suite("echo", SIMPLE.format(name="first"))
    calc.write("tests/nested/deep/echo_more.YAML", "agent: echo\n" + SIMPLE.format(name="upper case suffix"))
    calc.write("tests/.hidden/echo.yaml", SIMPLE.format(name="hidden dir"))
    calc.write("tests/.echo.yaml", "agent: echo\n" + SIMPLE.format(name="hidden file"))
    calc.write("tests/empty.yaml", "# only a comment\n")
    calc.write("tests/null.yaml", "null\n")
    result = calc.run("--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "tests/echo.yaml::first",
            "tests/nested/deep/echo_more.YAML::upper case suffix",
            "*2 tests collected*",
        ]
    )
    result.stdout.no_fnmatch_line("*hidden*")
    assert result.ret == 0


def test_yml_is_not_a_suite_and_connic_refuses_the_upload(calc: ConnicProject) -> None:
    calc.suite("echo", SIMPLE.format(name="real suite"))
    calc.write("tests/old.yml", SIMPLE.format(name="yml is not a suite"))
    result = calc.run("--collect-only", "-q")
    result.stdout.no_fnmatch_line("*yml is not a suite*")
    result.stdout.fnmatch_lines(["*cannot be uploaded to Connic: tests/old.yml: File type '.yml' not allowed*"])


def test_yaml_outside_a_connic_project_is_never_collected(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", **{"tests/x": SIMPLE.format(name="nope")})
    pytester.makepyfile(test_plain="def test_ok():\n    assert True\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["test_plain.py::test_ok", "*1 test collected*"])
    result.stdout.no_fnmatch_line("*nope*")


def test_python_tests_in_the_project_keep_working(calc: ConnicProject) -> None:
    calc.suite("echo", SIMPLE.format(name="case"))
    calc.write("test_unit.py", "def test_unit():\n    assert 1 + 1 == 2\n")
    result = calc.run("-q")
    result.assert_outcomes(passed=2)


def test_items_carry_marker_and_k_selects_by_case_name(calc: ConnicProject) -> None:
    calc.suite("echo", SIMPLE.format(name="login works") + "  - name: logout works\n    payload: '{}'\n")
    result = calc.run("-q", "-m", "connic", "-k", "login")
    result.assert_outcomes(passed=1, deselected=1)


def test_unknown_agent_is_a_collection_error_with_suggestions(calc: ConnicProject) -> None:
    calc.suite("calcc", SIMPLE.format(name="x"))
    result = calc.run("-q")
    result.stdout.fnmatch_lines(
        [
            (
                "*tests/calcc.yaml: unknown agent 'calcc' (from the file name; set `agent:` to target another"
                " agent). Did you mean 'calc'?*"
            )
        ]
    )
    assert result.ret != 0
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_unknown_key_names_location_and_closest_key(calc: ConnicProject) -> None:
    calc.suite(
        "echo",
        """
        tests:
          - name: typo
            payload: '{}'
            expected_tool_call:
              - calc.echo
          - name: fine
            payload: '{}'
        """,
    )
    result = calc.run("-q")
    result.stdout.fnmatch_lines(
        [
            esc("*tests/echo.yaml:4:5: tests[0].expected_tool_call: unknown key 'expected_tool_call';"
                " did you mean 'expected_tool_calls'?*")
        ]
    )
    # the invalid case fails alone in setup; its sibling runs
    result.assert_outcomes(passed=1, errors=1)


def test_x_keys_are_allowed_everywhere(calc: ConnicProject) -> None:
    calc.suite(
        "echo",
        """
        x-owner: team-a
        defaults:
          x-note: fine
        tests:
          - name: extended
            x-jira: ABC-1
            payload: '{}'
        """,
    )
    calc.run("-q").assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("tests:\n  - name: a\n    payload: p\n    runs: 101\n",
         "*tests/echo.yaml:4:11: tests[0].runs: Input should be less than or equal to 100 (found 101)*"),
        ("tests:\n  - name: a\n",
         "*tests/echo.yaml:2:5: tests[0]: test 'a': must specify either `payload` or `builder`.*"),
        ("tests:\n  - name: a\n    payload: p\n    files: [../secret.pdf]\n",
         "*tests[0].files[0]: files entry '../secret.pdf' must be a bare filename (no path separators)*"),
        ("tests:\n  - name: a\n    payload: p\n    expected_result: len(output) > 0\n",
         "*tests/echo.yaml:4:22: tests[0].expected_result: *call*"),
        ("tests:\n  - name: a\n    payload: p\n    expected_result: outptu.x == 1\n",
         "*unknown name 'outptu'*output*"),
        ("tests:\n  - name: a\n    payload: p\n    approval_decisions:\n      - tool: x\n        decision: approved\n",
         "*tests[0].approval_decisions[0].decision: Input should be 'approve', 'reject' or 'timeout'*"),
    ],
)
def test_invalid_case_fails_in_setup_with_location(calc: ConnicProject, body: str, expected: str) -> None:
    calc.suite("echo", body)
    result = calc.run("-q")
    result.stdout.fnmatch_lines([esc(expected)])
    result.assert_outcomes(errors=1)
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    result.stdout.no_fnmatch_line("*Traceback*")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("tests: []\n", "*tests/echo.yaml:1:8: tests: List should have at least 1 item*"),
        ("- just a list\n", "*tests/echo.yaml:1:1: a suite must be a mapping*found list*"),
        ("tests:\n  - name: a\n    payload: p\n  - name: a\n    payload: q\n",
         "*tests/echo.yaml:4:11: tests[1].name: Duplicate test name 'a' in file (first at line 2).*"),
        ("tests:\n  - name: a\n    payload: 'unterminated\n", "*tests/echo.yaml:*invalid YAML*"),
        ("version: 1.0\ntests:\n  - name: a\n    payload: p\n",
         "*tests/echo.yaml:1:10: version: Input should be a valid string (found 1.0)*"),
        ("defaults:\n  runs: 0\ntests:\n  - name: a\n    payload: p\n",
         "*tests/echo.yaml:2:9: defaults.runs: Input should be greater than or equal to 1*"),
        ("tets:\n  - name: a\n", "*unknown key 'tets'; did you mean 'tests'?*"),
    ],
)
def test_invalid_file_is_one_collection_error(calc: ConnicProject, body: str, expected: str) -> None:
    calc.suite("echo", body)
    calc.suite("other", "agent: echo\ntests:\n  - name: other suite runs\n    payload: p\n")
    result = calc.run("-q", "--continue-on-collection-errors")
    result.stdout.fnmatch_lines([esc(expected)])
    result.assert_outcomes(errors=1, passed=1)
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_yaml_fixture_under_tests_files_gets_a_hint(calc: ConnicProject) -> None:
    calc.write("tests/files/data.yaml", "customers:\n  - ada\n")
    result = calc.run("-q")
    result.stdout.fnmatch_lines(["*unknown key 'customers'*", "*Connic parses every tests/**/*.yaml file as a suite*"])


def test_project_load_errors_are_reported(project: ConnicProject) -> None:
    project.agent("base-test-x")  # a variant whose base agent does not exist
    project.suite("base-test-x", SIMPLE.format(name="a"))
    result = project.run("-q")
    result.stdout.fnmatch_lines(["*the Connic project failed to load*", "*looks like a test variant*"])
    assert result.ret != 0


def test_reportinfo_points_at_the_case_line(calc: ConnicProject) -> None:
    calc.suite("echo", "tests:\n  - name: a\n    payload: '{}'\n  - name: b\n    payload: '{}'\n")
    items, _ = calc.pytester.inline_genitems()
    assert [i.nodeid for i in items] == ["tests/echo.yaml::a", "tests/echo.yaml::b"]
    assert [i.reportinfo()[1] for i in items] == [1, 3]
    assert items[1].reportinfo()[2] == "echo::b"
