"""``--connic-filter TEXT``, as ``connic test --filter``: the cases whose name contains TEXT
(case-sensitive, the case's name only, one value, spaces allowed), deselected through pytest so its
counts say so (under xdist too: the equivalence session, tests/plugin/test_xdist_reports.py);
nothing left to run is a notice and exit code 0. pytest's ``-k``
is another thing (file names too, any case, no spaces): docs/running.md "Selecting cases"."""

from __future__ import annotations

import json
import sqlite3

import pytest

from helpers.project import ConnicProject
from pytest_connic.plugin.selection import selected

pytestmark = pytest.mark.isolation_none


@pytest.mark.parametrize(("name", "text", "expected"), [
    ("refund an order", "refund", True),
    ("refund an order", "refund an order", True),  # a name with spaces, whole
    ("refund an order", "an ord", True),  # any substring
    ("Refund policy", "refund", False),  # case-sensitive
    ("refund an order", "Refund", False),
    ("lookup", "refund", False),
    ("lookup", "", True),  # empty: everything (Connic sends no filter)
])
def test_a_case_is_selected_when_its_name_contains_the_text(name: str, text: str, expected: bool) -> None:
    assert selected(name, text) is expected


@pytest.fixture
def desk(calc: ConnicProject) -> ConnicProject:
    """Cases whose names differ by case and spaces, in a suite whose file name holds the text."""
    calc.suite("refund", """
        agent: echo
        tests:
          - name: refund an order
            payload: '{"x": 1}'
          - name: Refund policy
            payload: '{"x": 2}'
          - name: lookup
            payload: '{"x": 3}'
    """)
    calc.suite("echo", "tests:\n  - name: refund later\n    payload: '{}'\n")
    calc.write("tests/test_plain.py", "def test_plain_python():\n    pass\n")
    return calc


def ran(project: ConnicProject) -> list[str]:
    report = json.loads((project.root / "report.json").read_text("utf-8"))
    return sorted(case["test_name"] for case in report["cases"])


def test_the_filter_selects_by_case_name_and_pytest_counts_the_rest_deselected(desk: ConnicProject) -> None:
    result = desk.run("--connic-filter", "refund an", "--connic-json", "report.json", "--connic-history", "h.sqlite")
    # the file tests/refund.yaml holds "refund" but its other cases are not selected; Python tests stay
    result.assert_outcomes(passed=2, deselected=3)
    assert ran(desk) == ["refund an order"]
    with sqlite3.connect(desk.root / "h.sqlite") as history:  # compared only with sessions of this filter
        assert history.execute("SELECT selection FROM sessions").fetchone()[0].endswith("--connic-filter refund an")


def test_a_filter_that_matches_nothing_passes_with_a_notice(calc: ConnicProject) -> None:
    calc.suite("echo", "tests:\n  - name: echoes\n    payload: '{}'\n")
    result = calc.run("--connic-filter", "Echoes")  # case-sensitive: no case
    assert result.ret == pytest.ExitCode.OK  # pytest's own would be 5, "no tests ran"
    result.stdout.fnmatch_lines([
        ("*--connic-filter 'Echoes': no case's name contains it, nothing ran (as `connic test --filter` "
         "matching nothing, the session passes)*"),
    ])
