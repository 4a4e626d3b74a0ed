"""The reports never contradict pytest: whatever decides a case's outcome (``-W error``, a rerun,
pytest-timeout, a crashed xdist worker, the coverage gate), the results table, ``--connic-json``,
``--connic-html``, JUnit and the exit code agree with pytest, and each case appears once."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from helpers.mixed import PROVIDER_DOWN, answer, tool_turn
from helpers.project import ConnicProject
from pytest_connic.errors import ConnicError
from pytest_connic.plugin.items import CaseFailed

#: JUnit with the family whose testcases carry properties: each case has one set of them
OUTPUTS = ("--connic-json", "report.json", "--connic-html", "report.html", "--junitxml", "junit.xml",
           "-o", "junit_family=xunit1")
WORD = {"passed": "PASS", "failed": "FAIL", "error": "ERROR"}


def reports(project: ConnicProject, stdout: str) -> dict[str, Any]:
    """What each report says of each case: the table's word, JSON and HTML statuses, JUnit."""
    table = {}
    for line in stdout.split("= connic results =")[1].splitlines():
        if line.startswith("    │") and "Result" not in line:
            cells = [c.strip() for c in line.strip().strip("│").split("│")]
            table[cells[1].split("::", 1)[1]] = cells[0]
    data = json.loads((project.root / "report.json").read_text("utf-8"))
    page = (project.root / "report.html").read_text("utf-8")
    embedded = json.loads(page.split('id="connic-report">')[1].split("</script>")[0])
    junit = {}
    for case in ET.parse(project.root / "junit.xml").getroot().iter("testcase"):
        tags = [r.tag for r in case if r.tag in ("failure", "error", "skipped")]
        props = [p.get("name") for p in case.iter("property")]
        junit[case.get("name")] = (tags[0] if tags else "passed", props.count("runs"))
    return {
        "table": table,
        "last": [line for line in stdout.splitlines() if "cases passed." in line][-1],
        "json": {c["test_name"]: c["status"] for c in data["cases"]},
        "json_passed": {c["test_name"]: c["passed"] for c in data["cases"]},
        "status": data["status"],
        "summary": data["summary"],
        "html": {c["test_name"]: c["status"] for c in embedded["cases"]},
        "badge": page.split('<span class="badge ')[1].split('"')[0],
        "junit": junit,
        "cases": data["cases"],
    }


def assert_agree(project: ConnicProject, result: pytest.RunResult, expected: dict[str, str]) -> dict[str, Any]:
    """Every report says ``expected`` (case name -> passed | failed | error), once per case."""
    seen = reports(project, result.stdout.str())
    assert seen["json"] == expected
    assert seen["html"] == expected
    assert seen["table"] == {name: WORD[status] for name, status in expected.items()}
    junit_tag = {"passed": "passed", "failed": "failure", "error": "error"}
    assert {n: tag for n, (tag, _) in seen["junit"].items()} == {n: junit_tag[s] for n, s in expected.items()}
    assert all(count == 1 for _, count in seen["junit"].values())  # one set of properties per case
    passed = sum(1 for s in expected.values() if s == "passed")
    assert seen["last"] == f"{passed}/{len(expected)} cases passed."
    assert seen["json_passed"] == {n: s == "passed" for n, s in expected.items()}
    counts = {"passed": passed, "failed": list(expected.values()).count("failed"),
              "errors": list(expected.values()).count("error")}
    outcomes = result.parseoutcomes()
    assert {k: outcomes.get(k, outcomes.get(k.rstrip("s"), 0)) for k in counts} == counts
    assert seen["summary"] == {"cases": len(expected), **counts}
    status = "error" if counts["errors"] and result.ret == 2 else "failed" if passed < len(expected) else "passed"
    assert seen["status"] == status
    assert seen["badge"] == status
    assert result.ret == {"passed": 0, "failed": 1, "error": 2}[status] or (status == "failed" and result.ret == 1)
    return seen


def test_a_case_failed_is_an_assertion_error_and_a_connic_error() -> None:
    assert issubclass(CaseFailed, AssertionError)
    assert issubclass(CaseFailed, ConnicError)


DIVERGED = {"turns": [{**tool_turn("add", a=4, b=6), "request": {"system": "000000000000"}},
                      {**answer('{"sum": 10}'), "request": {"system": "000000000000"}}]}
ADDS = """
tests:
  - name: adds
    payload: add 4 and 6
    expected_result: output.sum == 10
  - name: adds again
    payload: add 4 and 6
    expected_result: output.sum == 10
"""


def test_warning_made_an_error_fails_the_case_in_every_report(calc: ConnicProject) -> None:
    calc.suite("calc", ADDS)
    calc.cassette("calc", "adds", [DIVERGED])
    calc.cassette("calc", "adds again", [{"turns": [tool_turn("add", a=4, b=6), answer('{"sum": 10}')]}])
    # lenient replay: the divergence is a warning, which -W error makes the case's failure
    result = calc.run("-o", "connic_replay=lenient", "-W", "error::pytest_connic.warnings.CassetteDivergenceWarning",
                      *OUTPUTS)
    result.assert_outcomes(passed=1, failed=1)
    seen = assert_agree(calc, result, {"adds": "failed", "adds again": "passed"})
    case = next(c for c in seen["cases"] if c["test_name"] == "adds")
    assert case["pytest_outcome"] == "failed"
    assert "CassetteDivergenceWarning: " in case["failure_reason"]
    assert case["successes"] == 1  # the runs' own verdict stays visible


FLAKY_TOOL = '''
import pathlib


def flaky(payload: dict) -> dict:
    """Fails its first two calls (a counter file), passes the third."""
    counter = pathlib.Path("attempts.txt")
    n = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(n))
    return {"ok": n >= 3, "attempt": n}
'''


def test_a_rerun_case_is_one_case_decided_by_its_last_attempt(project: ConnicProject) -> None:
    pytest.importorskip("pytest_rerunfailures")
    project.tool("f", FLAKY_TOOL)
    project.agent("flaky", type="tool", tool_name="f.flaky")
    project.suite("flaky", "tests:\n  - name: settles\n    payload: '{}'\n    expected_result: output.ok == true\n")
    result = project.run("-p", "rerunfailures", "--reruns", "2", *OUTPUTS)
    assert {k: v for k, v in result.parseoutcomes().items() if k != "seconds"} == {"passed": 1, "rerun": 2}
    seen = assert_agree(project, result, {"settles": "passed"})
    case = seen["cases"][0]
    assert len(case["runs_detail"]) == 1 and case["runs_detail"][0]["output"] == {"ok": True, "attempt": 3}
    assert [a["status"] for a in case["attempts"]] == ["failed", "failed"]
    assert all("output.ok == true" in a["failure_reason"] for a in case["attempts"])
    # JUnit as pytest writes a Python test with the same reruns (tests="1"): a testcase per attempt
    # with the pytest-rerunfailures of today, one in all with older releases (16.1, the floor
    # environment's with pytest 8.0); each with its attempt's own properties
    suite = ET.parse(project.root / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "1"
    attempts = [{p.get("name"): p.get("value") for p in c.iter("property")} for c in suite.iter("testcase")]
    assert len(attempts) == _python_test_testcases(project, reruns=2)
    assert attempts[-1]["successes"] == "1"  # the last attempt's, the one that decides
    if len(attempts) > 1:
        assert [a["successes"] for a in attempts] == ["0", "0", "1"]
        assert len({a["run_ids"] for a in attempts}) == 3


PY_FLAKY = """
import pathlib


def test_flaky():
    count = pathlib.Path("py-attempts.txt")
    n = int(count.read_text()) if count.exists() else 0
    count.write_text(str(n + 1))
    assert n >= 2
"""


def _python_test_testcases(project: ConnicProject, reruns: int) -> int:
    """How many ``<testcase>`` elements pytest writes for a Python test that passes on its last rerun."""
    project.write("test_py_flaky.py", PY_FLAKY)
    result = project.run("-p", "rerunfailures", "--reruns", str(reruns), "--junitxml=py.xml", "test_py_flaky.py")
    assert {k: v for k, v in result.parseoutcomes().items() if k != "seconds"} == {"passed": 1, "rerun": reruns}
    return len(list(ET.parse(project.root / "py.xml").getroot().iter("testcase")))


def test_a_case_failing_every_attempt_fails_once(project: ConnicProject) -> None:
    pytest.importorskip("pytest_rerunfailures")
    project.tool("f", FLAKY_TOOL)
    project.agent("flaky", type="tool", tool_name="f.flaky")
    project.suite("flaky", "tests:\n  - name: never\n    payload: '{}'\n    expected_result: output.attempt == 0\n")
    result = project.run("-p", "rerunfailures", "--reruns", "1", *OUTPUTS)
    assert {k: v for k, v in result.parseoutcomes().items() if k != "seconds"} == {"failed": 1, "rerun": 1}
    seen = assert_agree(project, result, {"never": "failed"})
    assert len(seen["cases"][0]["attempts"]) == 1


SLOW_TOOL = '''
import time


def slow(payload: dict) -> dict:
    """Sleeps longer than the timeout when asked."""
    if payload.get("slow"):
        time.sleep(120)
    return payload
'''


def test_pytest_timeout_ends_the_case_in_one_located_line_and_the_case_is_reported(project: ConnicProject) -> None:
    pytest.importorskip("pytest_timeout")
    project.tool("s", SLOW_TOOL)
    project.agent("sleeper", type="tool", tool_name="s.slow")
    project.suite("sleeper", "tests:\n  - name: quick\n    payload: '{}'\n"
                             "  - name: naps\n    payload: '{\"slow\": true}'\n")
    # 5 s: the quick case's timer also covers the start of its worker, slower on a loaded machine
    result = project.run("--timeout", "5", "--timeout-method", "signal", *OUTPUTS)
    result.assert_outcomes(passed=1, failed=1)
    seen = assert_agree(project, result, {"quick": "passed", "naps": "failed"})
    out = result.stdout.str()
    result.stdout.fnmatch_lines(["tests/sleeper.yaml:4: case 'naps' (sleeper): Failed: Timeout (>5.0s) from pytest-timeout.*"])
    assert "Traceback" not in out and "asyncio" not in out
    failures = out.split("= FAILURES =")[1].split("= connic results =")[0]
    assert len(failures.splitlines()) < 15
    naps = next(c for c in seen["cases"] if c["test_name"] == "naps")
    assert "Timeout (>5.0s) from pytest-timeout" in naps["failure_reason"]


CRASH_TOOL = '''
import os


def crash(payload: dict) -> dict:
    """Ends its worker process when asked."""
    if payload.get("crash"):
        os._exit(1)
    return payload
'''


def test_a_crashed_xdist_worker_is_an_error_everywhere(project: ConnicProject) -> None:
    pytest.importorskip("xdist")
    project.tool("c", CRASH_TOOL)
    project.agent("crasher", type="tool", tool_name="c.crash")
    project.suite("crasher", "tests:\n  - name: fine\n    payload: '{}'\n"
                             "  - name: dies\n    payload: '{\"crash\": true}'\n")
    result = project.run("-n", "1", "--connic-isolation", "none", *OUTPUTS)
    assert result.ret == 1
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", outcomes.get("error")) == 1 and "failed" not in outcomes
    seen = reports(project, result.stdout.str())
    assert seen["json"] == seen["html"] == {"fine": "passed", "dies": "error"}
    assert seen["junit"]["dies"][0] == "error"
    assert seen["status"] == "failed" and seen["last"] == "1/2 cases passed."


def test_an_infrastructure_error_is_an_error_with_exit_code_2(calc: ConnicProject) -> None:
    calc.suite("calc", ADDS)
    calc.cassette("calc", "adds again", [{"turns": [tool_turn("add", a=4, b=6), answer('{"sum": 10}')]}])
    calc.write("conftest.py", PROVIDER_DOWN)
    result = calc.run(*OUTPUTS)
    result.assert_outcomes(passed=1, errors=1)
    assert result.ret == 2
    assert_agree(calc, result, {"adds": "error", "adds again": "passed"})


PHASES = '''
import pathlib

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    yield
    with pathlib.Path("phases.txt").open("a") as out:
        out.write("setup done\\n")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with pathlib.Path("phases.txt").open("a") as out:
        out.write("call starts\\n")
    return (yield)
'''
PHASE_TOOL = '''
import pathlib


def mark(payload: dict) -> dict:
    """Says when it runs."""
    with pathlib.Path("phases.txt").open("a") as out:
        out.write("tool runs\\n")
    return payload
'''


def test_the_runs_happen_in_pytests_call_phase(project: ConnicProject) -> None:
    project.tool("p", PHASE_TOOL)
    project.agent("marker", type="tool", tool_name="p.mark")
    project.suite("marker", "tests:\n  - name: marks\n    payload: '{}'\n    expected_result: output.x == 1\n")
    project.write("conftest.py", PHASES)
    result = project.run("--junitxml", "junit.xml")
    result.assert_outcomes(failed=1)  # a failure of the call, not an error of the setup
    assert (project.root / "phases.txt").read_text().splitlines() == ["setup done", "call starts", "tool runs"]
    failure = ET.parse(project.root / "junit.xml").getroot().find(".//testcase/failure")
    assert failure is not None
    assert (failure.get("message") or "").startswith("expected_result not satisfied: output.x == 1")  # the reason


def test_a_failed_coverage_gate_is_in_pytests_last_line(calc: ConnicProject) -> None:
    calc.suite("echo", "tests:\n  - name: echoes\n    payload: '{\"x\": 1}'\n")
    result = calc.run("--connic-coverage-fail-under", "90")
    assert result.ret == 1
    last = result.stdout.lines[-1]
    assert "1 passed" in last and "1 coverage gate failed" in last
