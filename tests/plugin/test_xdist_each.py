"""``--dist each``: every worker runs every case, and each worker's result is a row of its own in
the terminal table, JSON, HTML and JUnit, so the summary line counts what pytest counts
(docs/reports.md "pytest-xdist")."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from helpers.project import ConnicProject

WHO = '''
import os


def who(payload: dict) -> dict:
    """Which xdist worker runs this."""
    return {"worker": os.environ.get("PYTEST_XDIST_WORKER", "")}
'''
SUITE = """agent: who
tests:
  - name: on gw0
    payload: '{}'
    expected_result: output.worker == "gw0"
  - name: anywhere
    payload: '{}'
"""


def test_each_worker_has_its_own_row_and_the_counts_are_pytests(project: ConnicProject) -> None:
    pytest.importorskip("xdist")
    project.tool("who", WHO)
    project.agent("who", type="tool", tool_name="who.who")
    project.suite("who", SUITE)
    result = project.run("-p", "no:randomly", "-n", "2", "--dist", "each", "--connic-json=r.json",
                                    "--connic-html=r.html", "--junitxml=j.xml")
    result.assert_outcomes(passed=3, failed=1)  # pytest's count: each worker ran both cases
    result.stdout.fnmatch_lines(["*PASS*who::on gw0 [[]gw0[]]*1/1*", "*FAIL*who::on gw0 [[]gw1[]]*0/1*",
                                 "*PASS*who::anywhere [[]gw0[]]*", "*PASS*who::anywhere [[]gw1[]]*"],
                                consecutive=True)
    result.stdout.fnmatch_lines(["*✗ who::on gw0 [[]gw1[]] (tests/who.yaml:3)", "3/4 cases passed."])
    report = json.loads((project.root / "r.json").read_text("utf-8"))
    assert report["summary"] == {"cases": 4, "passed": 3, "failed": 1, "errors": 0}
    assert [(c["nodeid"], c["status"]) for c in report["cases"]] == [
        ("tests/who.yaml::on gw0 [gw0]", "passed"), ("tests/who.yaml::on gw0 [gw1]", "failed"),
        ("tests/who.yaml::anywhere [gw0]", "passed"), ("tests/who.yaml::anywhere [gw1]", "passed")]
    html = (project.root / "r.html").read_text("utf-8")
    assert "on gw0 [gw1]" in html and "anywhere [gw0]" in html
    suite = ET.parse(project.root / "j.xml").getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures")) == ("4", "1")
    cases = [(c.get("name"), c.find("failure") is not None) for c in suite.iter("testcase")]
    assert sorted(cases) == [("anywhere", False), ("anywhere", False), ("on gw0", False), ("on gw0", True)]


CRASH = '''
import os


def who(payload: dict) -> dict:
    """Ends its xdist worker on gw1 when asked (user code runs in that worker's process)."""
    if payload.get("crash") and os.environ.get("PYTEST_XDIST_WORKER") == "gw1":
        os._exit(1)
    return {"worker": os.environ.get("PYTEST_XDIST_WORKER", "")}
'''


def test_a_worker_that_crashes_on_a_case_is_that_workers_row(project: ConnicProject) -> None:
    pytest.importorskip("xdist")
    project.tool("who", CRASH)
    project.agent("who", type="tool", tool_name="who.who")
    project.suite("who", "agent: who\n# the case's line: 5\ntests:\n\n  - name: crashes on gw1\n"
                         "    payload: '{\"crash\": true}'\n")
    result = project.run("-p", "no:randomly", "-p", "no:timeout", "-n", "2", "--dist", "each",
                                    "--connic-isolation=none", "--connic-json=r.json")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["1/2 cases passed."])
    report = json.loads((project.root / "r.json").read_text("utf-8"))
    assert sorted((c["nodeid"], c["status"]) for c in report["cases"]) == [
        ("tests/who.yaml::crashes on gw1 [gw0]", "passed"), ("tests/who.yaml::crashes on gw1 [gw1]", "error")]
    # the crashed row is where its case is, though the controller knows it only by its node id
    assert [c["line"] for c in report["cases"]] == [5, 5]
    result.stdout.fnmatch_lines(["*✗ who::crashes on gw1 [[]gw1[]] (tests/who.yaml:5)"])
