"""pytest-repeat and pytest-picked cannot act on Connic cases: the session says so at its start
(docs/ci.md "Other pytest plugins"), against the real plugins."""

from __future__ import annotations

import subprocess

import pytest

from helpers.project import ConnicProject

SUITE = "agent: echo\ntests:\n  - name: one\n    payload: '{\"x\": 1}'\n"
REPEAT = ("connic: pytest-repeat's --count 3 repeats Python tests only: each Connic case runs once"
          " (its `runs:` sets how many times the agent runs)")


@pytest.mark.usefixtures("wide_terminal")
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


@pytest.mark.usefixtures("wide_terminal")
def test_picked_is_said_at_the_start(calc: ConnicProject) -> None:
    pytest.importorskip("pytest_picked")
    calc.suite("echo", SUITE)
    subprocess.run(["git", "init", "-q", str(calc.root)], check=True)
    result = calc.run("--picked=first")
    result.stdout.fnmatch_lines([("connic: pytest-picked (--picked=first) picks changed Python test files only:"
                                 " changed Connic suites (tests/*.yaml) are not picked; name them on the"
                                 " command line"), "collected 1 item"], consecutive=True)


def test_github_actions_annotates_a_failing_case_at_its_yaml_line(calc: ConnicProject,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pytest_github_actions_annotate_failures")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    monkeypatch.delenv("PYTEST_RUN_PATH", raising=False)
    calc.suite("echo", SUITE + "  - name: 'wrong :: [x]'\n    payload: '{\"x\": 1}'\n"
               "    expected_result: output.got.x == 2\n"
               "  - name: invalid\n    payload: '{}'\n    expected_result: output ==\n")
    result = calc.run("-q")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    annotations = sorted(line for line in result.stderr.lines if line.startswith("::error "))
    assert len(annotations) == 2, result.stderr.str()
    # at the case's `- name:` line, titled with the case's own name, the reason first
    assert annotations[0].startswith("::error file=tests/echo.yaml,line=5::echo::wrong :: [x]%0A%0A"
                                     "expected_result not satisfied: output.got.x == 2 where output.got.x = 1")
    # an invalid case fails in setup, which that plugin leaves alone: annotated the same way
    assert annotations[1].startswith("::error file=tests/echo.yaml,line=8::echo::invalid%0A%0Atests/echo.yaml:10:")


TESTMON = ("connic: pytest-testmon measures pytest's process only, and user code runs in worker processes: "
           "an edit of a tool reruns no case; run with --connic-isolation=none")
TESTMON_NONE = ("connic: --testmon: user code runs in pytest's process for this session (isolation none), "
                "so pytest-testmon sees the tool code each case runs")


def _testmon_run(project: ConnicProject, *args: str) -> pytest.RunResult:
    # testmon keeps its data beside the project (.testmondata) and needs pytest's cache
    return project.pytester.runpytest("-p", "no:hypothesispytest", "-p", "no:randomly", "-q", *args)


@pytest.mark.usefixtures("wide_terminal")
def test_testmon_under_chosen_process_isolation_is_said_at_the_start(calc: ConnicProject) -> None:
    pytest.importorskip("testmon")
    calc.suite("echo", SUITE)
    result = _testmon_run(calc, "--testmon", "--connic-isolation=process")
    assert TESTMON in result.stdout.lines[:3], result.stdout.str()
    assert TESTMON_NONE not in result.stdout.str()
    result = _testmon_run(calc, "--testmon", "-o", "connic_isolation=process")
    assert TESTMON in result.stdout.lines[:3], result.stdout.str()
    assert TESTMON not in _testmon_run(calc, "--testmon", "--connic-isolation=none").stdout.str()
    assert TESTMON_NONE not in _testmon_run(calc).stdout.str()


TOOL = "def {name}(payload: dict) -> dict:\n    \"\"\"The {name} tool.\"\"\"\n    return {{'v': payload['x'] + {add}}}\n"


@pytest.mark.usefixtures("wide_terminal")
def test_testmon_after_a_tool_edit_reruns_every_case_that_uses_it(project: ConnicProject) -> None:
    """Under the default isolation --testmon runs user code in pytest's process, so an edit of
    tools/first.py reruns the two cases of the agent that calls it, and not the other agent's case."""
    pytest.importorskip("testmon")
    for name in ("first", "second"):
        project.tool(name, TOOL.format(name=name, add=1))
        project.agent(name, type="tool", tool_name=f"{name}.{name}")
    project.suite("first", "agent: first\ntests:\n"
                  "  - name: one\n    payload: '{\"x\": 1}'\n    expected_result: output.v == 2\n"
                  "  - name: two\n    payload: '{\"x\": 2}'\n    expected_result: output.v == 3\n")
    project.suite("second", "agent: second\ntests:\n"
                  "  - name: three\n    payload: '{\"x\": 1}'\n    expected_result: output.v == 2\n")
    result = _testmon_run(project, "--testmon")
    assert result.stdout.lines[0] == TESTMON_NONE, result.stdout.str()
    result.assert_outcomes(passed=3)
    _testmon_run(project, "--testmon").assert_outcomes()  # nothing changed: nothing runs
    project.tool("first", TOOL.format(name="first", add=10))  # a longer file: no stale bytecode
    result = _testmon_run(project, "--testmon", "-rA")
    result.assert_outcomes(failed=2)  # testmon does not even collect the unaffected suite
    result.stdout.fnmatch_lines(["FAILED tests/first.yaml::one*", "FAILED tests/first.yaml::two*"])
    assert "three" not in result.stdout.str()
