"""Across sessions (docs/history.md): several pytest sessions over one project and one history
file: what changed, flaky cases, trends in the HTML, a corrupt history. Under xdist (one session
row, written by the controller; its cases as a serial session's): the equivalence session,
tests/plugin/test_xdist_reports.py."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from helpers.project import ConnicProject

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

OFFSET_TOOLS = '''
import os


def add(a: int, b: int) -> dict:
    """Add two numbers (off by $OFFSET: the test flips a case without touching its cassette)."""
    return {"sum": a + b + int(os.environ.get("OFFSET", "0"))}
'''

SUITE = """
agent: calc
tests:
  - name: adds
    payload: "4 + 6?"
    expected_tool_calls:
      - calc.add: result.sum == 10
  - name: steady
    payload: "1 + 1?"
    expected_tool_calls:
      - calc.add: result.sum >= 2
"""


@pytest.fixture
def offset(project: ConnicProject) -> ConnicProject:
    project.tool("calc", OFFSET_TOOLS)
    project.agent("calc", tools=["calc.add"])
    project.suite("calc", SUITE)
    project.replies("calc", "adds", [("add", {"a": 4, "b": 6})], '{"sum": 10}')
    project.replies("calc", "steady", [("add", {"a": 1, "b": 1})], '{"sum": 2}')
    return project


def session(project: ConnicProject, monkeypatch: pytest.MonkeyPatch, offset: int, *args: str) -> pytest.RunResult:
    monkeypatch.setenv("OFFSET", str(offset))
    return project.run("--connic-history", "history.sqlite", *args)


def stored(path: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(path) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute(
            "SELECT s.id, s.selection, c.* FROM cases c JOIN sessions s ON s.id = c.session_id ORDER BY s.id, c.nodeid")]


def test_changes_and_flaky_cases_over_several_sessions(offset: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")  # the whole History cell (at 80 columns it is cut with an ellipsis)
    first = session(offset, monkeypatch, 0)
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines(["*history: no earlier session of this selection in *history.sqlite*"])

    second = session(offset, monkeypatch, 1)
    second.assert_outcomes(passed=1, failed=1)
    second.stdout.fnmatch_lines(["*History*", "* FAIL *calc::adds*newly failing*",
                                 "*history: 1 case(s) changed since session 1 of *"])
    second.stdout.no_fnmatch_line("*calc::steady*newly*")

    third = session(offset, monkeypatch, 0, "--connic-flaky=fail")
    third.assert_outcomes(passed=2)
    third.stdout.fnmatch_lines(["* PASS *calc::adds*newly passing, flaky (2 flips)*",
                                "*tests/calc.yaml::adds: flaky: 2 flips in the last 3 sessions*",
                                "*flaky cases fail the session (--connic-flaky=fail)*"])
    assert third.ret == 1  # every case passed, but a flaky one fails the session

    fourth = session(offset, monkeypatch, 1, "--connic-flaky=skip")
    fourth.assert_outcomes(passed=1, failed=1)
    assert fourth.ret == 0  # the only failure is a flaky case's
    fourth.stdout.fnmatch_lines(["*calc::adds*newly failing, flaky (3 flips)*"])

    # a new cassette (here: usage recorded) starts the count afresh: a change, not a flaky case
    offset.cassette("calc", "adds", [{"turns": [
        {"tool_calls": [{"name": "add", "arguments": {"a": 4, "b": 6}}]},
        {"content": '{"sum": 10}', "usage": {"input_tokens": 7, "output_tokens": 3}}]}])
    session(offset, monkeypatch, 0).stdout.fnmatch_lines(["* PASS *calc::adds*newly passing │"])
    fifth = session(offset, monkeypatch, 1)
    fifth.stdout.fnmatch_lines(["* FAIL *calc::adds*newly failing │"])
    fifth.stdout.no_fnmatch_line("*flips*")
    assert fifth.ret == 1

    rows = stored(offset.root / "history.sqlite")
    assert [r["verdict"] for r in rows if r["nodeid"].endswith("::adds")] == [
        "passed", "failed", "passed", "failed", "passed", "failed"]
    adds = [r for r in rows if r["nodeid"].endswith("::adds")]
    assert len({r["cassette_digest"] for r in adds[:4]}) == 1 and adds[4]["cassette_digest"] != adds[0]["cassette_digest"]
    assert {r["config_digest"] for r in adds} == {adds[0]["config_digest"]} != {None}


def test_a_selection_compares_only_with_its_own_sessions(offset: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    session(offset, monkeypatch, 1, "-k", "adds").assert_outcomes(failed=1)
    everything = session(offset, monkeypatch, 0)
    everything.stdout.fnmatch_lines(["*no earlier session of this selection*"])
    everything.stdout.no_fnmatch_line("*newly passing*")


@pytest.mark.usefixtures("wide_terminal")
def test_a_corrupt_history_is_left_intact_with_a_warning(offset: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    path = offset.root / "history.sqlite"
    garbage = b"this is not a database\x00" * 50
    path.write_bytes(garbage)
    result = session(offset, monkeypatch, 0)
    result.assert_outcomes(passed=2)
    assert result.ret == 0
    result.stdout.fnmatch_lines([("*history: not kept this time: history *history.sqlite: not a pytest-connic "
                                  "history (not a SQLite database); it was left as it is"),
                                 "*warnings summary*", "*history.sqlite:0",
                                 ("*ConnicHistoryWarning: history *history.sqlite: not a pytest-connic history (not "
                                  "a SQLite database); it was left as it is*")])
    assert path.read_bytes() == garbage


@pytest.mark.usefixtures("wide_terminal")
def test_a_locked_history_is_a_warning_even_under_w_error(offset: ConnicProject,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    session(offset, monkeypatch, 0).assert_outcomes(passed=2)
    path = offset.root / "history.sqlite"
    before = path.read_bytes()
    other = sqlite3.connect(path, isolation_level=None)  # another session holds the write lock
    other.execute("BEGIN IMMEDIATE")
    try:
        result = session(offset, monkeypatch, 1, "-W", "error::pytest_connic.warnings.ConnicWarning")
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert path.read_bytes() == before
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == 1  # the case's failure, not the history's
    result.stdout.fnmatch_lines(["*calc::adds*newly failing*",
                                 "*history: not kept this time: history *cannot be written: database is locked*"])
    assert len(stored(path)) == 2


def test_trends_in_the_html_report(offset: ConnicProject, monkeypatch: pytest.MonkeyPatch, chromium: str,
                                   tmp_path: Path) -> None:
    from helpers.chromium import run_chromium

    for value in (0, 1, 0):
        session(offset, monkeypatch, value)
    session(offset, monkeypatch, 1, "--connic-html", "report.html", "--connic-json", "report.json")
    report = json.loads((offset.root / "report.json").read_text("utf-8"))
    adds = report["history"]["cases"]["tests/calc.yaml::adds"]
    assert [t["pass_rate"] for t in adds["trend"]] == [1.0, 0.0, 1.0, 0.0]
    assert adds["flaky"] == {"flips": 3, "sessions": 4}
    page = (offset.root / "report.html").read_text("utf-8")
    assert "http" not in page.split('id="history"')[1].split("</section>")[0].replace(
        "http://www.w3.org/2000/svg", "")  # no external asset
    dom = run_chromium(chromium, tmp_path, (offset.root / "report.html").as_uri(), "--dump-dom")
    section = dom.split('id="history"')[1].split("</section>")[0]
    assert section.count("<svg") == 4  # pass rate and latency, per case
    assert "pass rate over the last sessions: 100%, 0%, 100%, 0%" in section
    assert "flaky: 3 flips in the last 4 sessions" in section
    assert "newly failing (passed last time)" in section


@pytest.mark.usefixtures("wide_terminal")
def test_since_compares_with_the_last_session_at_a_commit(offset: ConnicProject,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("git is not installed")

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=offset.root, check=True, capture_output=True,
                              text=True).stdout.strip()

    git("init", "-q")
    git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "one")
    first = git("rev-parse", "HEAD")
    session(offset, monkeypatch, 0).assert_outcomes(passed=2)
    git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "two")
    session(offset, monkeypatch, 1).assert_outcomes(passed=1, failed=1)
    # against the previous session, still failing is no change; against the first commit it is
    session(offset, monkeypatch, 1).stdout.no_fnmatch_line("*newly failing*")
    since = session(offset, monkeypatch, 1, "--connic-since", first[:8])
    since.stdout.fnmatch_lines(["*calc::adds*newly failing*", f"*changed since session 1 of * at commit {first[:12]}*"])
    bad = session(offset, monkeypatch, 1, "--connic-since", "no-such-ref")
    bad.stderr.fnmatch_lines(["*invalid value 'no-such-ref' from --connic-since: git cannot resolve it*"])
    assert bad.ret == pytest.ExitCode.USAGE_ERROR


def test_the_default_history_lives_in_pytests_cache(offset: ConnicProject) -> None:
    result = offset.pytester.runpytest("-p", "no:hypothesispytest")
    result.assert_outcomes(passed=2)
    path = offset.root / ".pytest_cache" / "connic" / "history.sqlite"
    assert len(stored(path)) == 2
    offset.pytester.makeini("[pytest]\nconnic_history = none\n")
    offset.pytester.runpytest("-p", "no:hypothesispytest").assert_outcomes(passed=2)
    assert len(stored(path)) == 2  # no history kept this time
