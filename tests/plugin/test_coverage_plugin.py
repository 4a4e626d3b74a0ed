"""``--connic-coverage``, ``--connic-coverage-json`` and ``--connic-coverage-fail-under`` through pytest.
The same report under ``-n 2``, the called tools merged from both workers: the equivalence session
(tests/plugin/test_xdist_reports.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.mixed import answer, tool_turn
from helpers.project import ConnicProject
from pytest_connic.coverage.compute import compute_coverage

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

ADDS = """
tests:
  - name: adds
    payload: add 4 and 6
    expected_tool_calls:
      - add: params.a == 4
    expected_result: output.sum == 10
"""


def write_small(calc: ConnicProject) -> ConnicProject:
    """calc covers add only (50 %), echo has no suite (0 %): overall 25 %."""
    calc.suite("calc", ADDS)
    calc.cassette("calc", "adds", [{"turns": [tool_turn("add", a=4, b=6), answer('{"sum": 10}')]}])
    return calc


def connic_json(root: Path) -> str:
    """``connic test --coverage --json`` for ``root``: the SDK's own function when it has one."""
    import connic.cli

    compute = getattr(connic.cli, "_compute_local_coverage", None) or compute_coverage
    return json.dumps(compute(root), indent=2)


def coverage_section(stdout: str) -> str:
    """The lines under the ``connic coverage`` header, up to the next header."""
    after = stdout.split(" connic coverage ", 1)[1].split("\n", 1)[1]
    return after.split("\n=", 1)[0]


def test_coverage_mode_prints_connics_table_and_runs_no_agent(calc: ConnicProject) -> None:
    write_small(calc)
    result = calc.run("--connic-coverage")
    result.stdout.fnmatch_lines([
        "*= connic coverage =*",
        "    │ Agent │ Type │ Tools covered │ Coverage │",
        "    │ calc  │ llm  │ 1/2           │  50.0%   │",
        "    │ echo  │ tool │ no tests      │   0.0%   │",
        "  → Uncovered tools:",
        "    calc: calc.multiply",
        "  Overall coverage: 25.0%  (2 agents)",
        "*1 deselected*",
    ])
    result.stdout.no_fnmatch_line("*connic results*")
    result.stdout.no_fnmatch_line("*Runtime tool usage*")
    assert result.ret == 0  # low coverage alone does not fail, as with connic test --coverage


def test_coverage_mode_fails_only_when_inputs_cannot_be_parsed(calc: ConnicProject) -> None:
    write_small(calc)
    calc.suite("echo", "tests:\n  - name: bad\n    payload: x\n    runs: abc\n")
    result = calc.run("--connic-coverage")
    result.stdout.fnmatch_lines(["*✗ Test files failed to parse: echo: tests/echo.yaml: *runs*"])
    assert result.ret == 1


def test_coverage_mode_judges_suites_by_connics_schema(calc: ConnicProject) -> None:
    """A typo Connic silently ignores is our collection error, but the coverage report decides."""
    write_small(calc)
    calc.suite("echo", "agentt: echo\ntests:\n  - name: echoes\n    payload: x\n")
    result = calc.run("--connic-coverage")
    result.stdout.fnmatch_lines(["*unknown key 'agentt'*", "*Overall coverage: 75.0%  (2 agents)*"])
    assert result.ret == 0
    assert calc.run().ret == pytest.ExitCode.TESTS_FAILED  # without the flag the suite is an error


def test_coverage_mode_keeps_python_tests_and_their_failures(calc: ConnicProject) -> None:
    write_small(calc)
    calc.write("test_unit.py", "def test_ok():\n    pass\n\ndef test_broken():\n    assert 1 == 2\n")
    result = calc.run("--connic-coverage")
    result.assert_outcomes(passed=1, failed=1, deselected=1)
    assert result.ret == 1


def test_coverage_json_is_connics_report_plus_one_key(calc: ConnicProject) -> None:
    write_small(calc)
    result = calc.run("--connic-coverage", "--connic-coverage-json", "cov/coverage.json")
    assert result.ret == 0
    text = (calc.root / "cov/coverage.json").read_text("utf-8")
    data = json.loads(text)
    assert list(data) == ["agents", "overall", "pytest_connic"]
    runtime = data.pop("pytest_connic")
    assert json.dumps(data, indent=2) == connic_json(calc.root)
    calc_row = next(a for a in runtime["agents"] if a["name"] == "calc")
    assert calc_row["called_tools"] == []  # nothing ran
    assert calc_row["never_called"] == ["calc.add", "calc.multiply"]
    assert calc_row["asserted_tools"] == ["calc.add"]


def test_fail_under_gate(calc: ConnicProject) -> None:
    write_small(calc)
    low = calc.run("--connic-coverage", "--connic-coverage-fail-under", "30")
    low.stdout.fnmatch_lines(["FAIL Required coverage of 30% not reached: overall 25.0%"])
    assert low.ret == 1
    met = calc.run("--connic-coverage", "--connic-coverage-fail-under", "25")
    met.stdout.fnmatch_lines(["Required coverage of 25% reached: overall 25.0%"])
    assert met.ret == 0


def test_fail_under_gates_a_normal_run_too(calc: ConnicProject) -> None:
    write_small(calc)
    result = calc.run("--connic-coverage-fail-under", "90")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["FAIL Required coverage of 90% not reached: overall 25.0%"])
    assert result.ret == 1


@pytest.mark.parametrize("value", ["abc", "150", "-1"])
def test_bad_fail_under_is_a_usage_error(calc: ConnicProject, value: str) -> None:
    write_small(calc)
    result = calc.run("--connic-coverage", "--connic-coverage-fail-under", value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*invalid value '{value}' from --connic-coverage-fail-under*"])


def test_bad_fail_under_in_ini_names_the_ini_key(calc: ConnicProject) -> None:
    write_small(calc)
    calc.pytester.makeini("[pytest]\nconnic_coverage_fail_under = lots\n")
    result = calc.run("--connic-coverage")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*invalid value 'lots' from ini connic_coverage_fail_under*"])


def test_no_connic_project(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("-p", "no:cacheprovider", "--connic-coverage")
    result.stdout.fnmatch_lines(["*No Connic project (a folder with agents/) found.*"])
    assert result.ret == 1


def test_normal_run_adds_the_tools_actually_called(calc: ConnicProject) -> None:
    write_small(calc)
    result = calc.run("--connic-coverage-json", "coverage.json")
    assert result.ret == 0
    data = json.loads((calc.root / "coverage.json").read_text("utf-8"))
    calc_row = next(a for a in data["pytest_connic"]["agents"] if a["name"] == "calc")
    assert calc_row["called_tools"] == ["calc.add"]
    assert calc_row["never_called"] == ["calc.multiply"]
    result.stdout.fnmatch_lines(["*→ Runtime tool usage (pytest-connic):*", "*calc: 1/2 tools called; never called: calc.multiply*"])
