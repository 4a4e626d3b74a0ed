"""Node ids of cases whose names hold what pytest's node ids give a meaning to (``::``, ``[``,
control characters), spaces and unicode: every id round-trips through the command line,
``--co -q``, ``--lf``, ``--nf``, ``--deselect`` and JUnit (docs/ci.md "Node ids")."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from helpers.project import ConnicProject
from pytest_connic.plugin.items import case_name, item_name

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

#: every kind of name Connic allows (1-120 characters, anything): (case name, its item name)
NAMES = [
    ("plain", "plain"),
    ("with spaces and: one colon", "with spaces and: one colon"),
    ("colons :: in name", "colons %3A%3A in name"),
    ("draft [wip]", "draft %5Bwip%5D"),
    ("draft", "draft"),  # a prefix of the bracketed one: `::draft` must not select `draft [wip]`
    ("x [1] :: y", "x %5B1%5D %3A%3A y"),
    ("::leading", "%3A%3Aleading"),
    ("trailing:", "trailing:"),
    ("50% off, %41 kept", "50% off, %2541 kept"),
    ("tab\there", "tab%09here"),
    ("line\nbreak", "line%0Abreak"),
    ("ünïcödé 名前 🚀", "ünïcödé 名前 🚀"),
]
FAILING = {"colons :: in name", "draft [wip]", "ünïcödé 名前 🚀", "line\nbreak"}


def _suite(names: list[str]) -> str:
    lines = ["tests:"]
    for name in names:
        lines.append(f"  - name: {json.dumps(name, ensure_ascii=False)}")
        lines.append("    payload: '{\"x\": 1}'")
        if name in FAILING:
            lines.append("    expected_result: output.got.x == 2")
    return "\n".join(lines) + "\n"


@pytest.fixture
def names(calc: ConnicProject) -> ConnicProject:
    calc.write("tests/sub/echo.yaml", "agent: echo\n" + _suite([n for n, _ in NAMES]))
    return calc


def _ids(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stdout.lines if line.startswith("tests/")]


def _ran(result: pytest.RunResult) -> list[str]:
    """The node ids of ``-v``'s result lines, in order."""
    out = []
    for line in result.stdout.lines:
        for word in (" PASSED", " FAILED"):
            if line.startswith("tests/") and word in line:
                out.append(line.split(word)[0])
    return out


def test_item_names_escape_only_what_node_ids_give_a_meaning_to() -> None:
    for name, expected in NAMES:
        assert item_name(name) == expected
        assert case_name(expected) == name
    assert item_name("a]") == "a%5D"
    assert item_name("%5B") == "%255B" and case_name("%255B") == "%5B"
    assert len({item_name(n) for n in ["a[b", "a%5Bb", "a%255Bb"]}) == 3


def test_collect_only_ids_rerun_exactly_their_case(names: ConnicProject) -> None:
    result = names.run("--co", "-q")
    ids = _ids(result)
    assert ids == [f"tests/sub/echo.yaml::{expected}" for _, expected in NAMES]
    for nodeid, (name, _) in zip(ids, NAMES):
        run = names.run("-v", "-p", "no:randomly", nodeid)
        outcomes = run.parseoutcomes()
        assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 1, (name, run.stdout.str())
        assert _ran(run) == [nodeid]
        assert ("failed" in outcomes) == (name in FAILING)


def test_deselect_removes_the_case_and_pytest_keeps_its_prefix_rule(names: ConnicProject) -> None:
    for name, expected in NAMES:
        result = names.run("-q", "--deselect", f"tests/sub/echo.yaml::{expected}")
        # pytest's --deselect takes a node id *prefix*: `draft` also deselects `draft %5Bwip%5D`
        gone = [n for n, e in NAMES if e.startswith(expected)]
        assert (len(gone) == 2) == (name == "draft")
        failing = sum(n in FAILING for n in gone)
        result.assert_outcomes(passed=len(NAMES) - len(FAILING) - (len(gone) - failing),
                               failed=len(FAILING) - failing, deselected=len(gone))


def test_lf_and_nf_rerun_exactly_the_failed_and_the_new(names: ConnicProject) -> None:
    def run(*args: str) -> pytest.RunResult:
        return names.pytester.runpytest("-p", "no:hypothesispytest", "-p", "no:randomly", "-v", *args)

    first = run()
    first.assert_outcomes(passed=len(NAMES) - len(FAILING), failed=len(FAILING))
    failed_ids = [f"tests/sub/echo.yaml::{e}" for n, e in NAMES if n in FAILING]
    last_failed = run("--lf")
    assert last_failed.parseoutcomes().get("passed") is None
    assert _ran(last_failed) == failed_ids
    names.write("tests/sub/echo.yaml", "agent: echo\n" + _suite([n for n, _ in NAMES] + ["new [case] :: 1"]))
    new_first = run("--nf")
    assert _ran(new_first)[0] == "tests/sub/echo.yaml::new %5Bcase%5D %3A%3A 1"
    assert sorted(_ran(new_first)[1:]) == sorted(f"tests/sub/echo.yaml::{e}" for _, e in NAMES)
    again = run("--nf")
    assert _ran(again) == [f"tests/sub/echo.yaml::{e}" for _, e in NAMES] + [
        "tests/sub/echo.yaml::new %5Bcase%5D %3A%3A 1"]


def test_junit_keeps_one_classname_and_the_item_name(names: ConnicProject) -> None:
    names.run("--junitxml=out.xml")
    cases = ET.parse(names.root / "out.xml").getroot().iter("testcase")
    got = [(c.get("classname"), c.get("name")) for c in cases]
    # pytest 8.0's junitxml writes characters outside the BMP as `#x1F680` (its own escaping)
    assert [(c, n.replace("#x1F680", "🚀")) for c, n in got] == [("tests.sub.echo.yaml", e) for _, e in NAMES]


def test_reports_and_failures_keep_the_case_name(names: ConnicProject) -> None:
    result = names.run("-q", "--connic-json=out.json", "tests/sub/echo.yaml::colons %3A%3A in name")
    result.stdout.fnmatch_lines(["*echo::colons :: in name*"])
    result = names.run("-q", "tests/sub/echo.yaml::line%0Abreak")
    result.stdout.fnmatch_lines(["*_ echo::line\\x0abreak _*"])
    data = json.loads((names.root / "out.json").read_text("utf-8"))
    (case,) = data["cases"]
    assert case["test_name"] == "colons :: in name"
    assert case["nodeid"] == "tests/sub/echo.yaml::colons %3A%3A in name"
