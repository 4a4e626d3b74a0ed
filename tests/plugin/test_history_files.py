"""The files around the history, the comparison, the summary and the merge survive a hostile user
(issues 39, 42, 43): nothing written where it should not be, nothing lost after a crash, no hang.
Each fault is a real pytest session (in a subprocess where it could block), bounded by a timeout."""

from __future__ import annotations

import json
import os
import sqlite3
import sys

import pytest

from helpers.project import ConnicProject
from pytest_connic.history.store import HistoryStore, SessionRow

SUITE = """
agent: echo
tests:
  - name: echoes
    payload: '{"x": 1}'
    expected_result: output.got.x == 1
"""
pytestmark = pytest.mark.usefixtures("wide_terminal")
#: a session never waits longer than this for a subprocess (a hang is the failure it would show)
TIMEOUT = 120


@pytest.fixture
def echo(calc: ConnicProject) -> ConnicProject:
    calc.suite("echo", SUITE)
    return calc


def subprocess_session(project: ConnicProject, *args: str) -> pytest.RunResult:
    return project.pytester.runpytest_subprocess("-p", "no:randomly", *args, timeout=TIMEOUT)


def compare_cli(project: ConnicProject, *args: str) -> pytest.RunResult:
    return project.pytester.run(sys.executable, "-m", "pytest_connic", "compare", *args, timeout=TIMEOUT)


def test_the_default_history_linked_to_conftest_and_a_fifo_step_summary_write_nothing_there(
        echo: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    conftest = echo.root / "conftest.py"
    conftest.write_bytes(b"")
    (echo.root / ".pytest_cache" / "connic").mkdir(parents=True)
    (echo.root / ".pytest_cache" / "connic" / "history.sqlite").symlink_to(conftest)  # as a restored CI cache
    os.mkfifo(echo.root / "step.md")  # no process reads it
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(echo.root / "step.md"))
    result = subprocess_session(echo, "--connic-json", "r.json", "--junitxml", "j.xml", "--connic-summary=/dev/full")
    out = result.stdout.str()
    assert result.ret == 0, out + result.stderr.str()
    assert "Traceback" not in out + result.stderr.str() and "INTERNALERROR" not in out
    assert conftest.read_bytes() == b""
    result.stdout.fnmatch_lines([
        ("*history: not kept this time: history *.pytest_cache/connic/history.sqlite: it names a conftest.py "
         "(pytest imports it) of the project *; a history is never written over the project's inputs*"),
    ])
    result.stdout.fnmatch_lines([
        "connic: /dev/full: cannot write the Markdown summary: [[]Errno 28[]] No space left on device",
        ("connic: *step.md: the step summary is a named pipe (FIFO); only a regular file is written: the summary "
         "was not appended to $GITHUB_STEP_SUMMARY"),
    ])
    assert json.loads((echo.root / "r.json").read_text("utf-8"))["status"] == "passed"
    assert (echo.root / "j.xml").read_text("utf-8").count("<testcase") == 1


def test_a_history_of_a_newer_version_is_left_as_it_is(echo: ConnicProject) -> None:
    store = HistoryStore(echo.root / "h.sqlite")
    store.append(SessionRow("2026-12-02T10:00:00+00:00", None, "pytest", ""), [])
    with sqlite3.connect(store.path) as conn:
        conn.execute("ALTER TABLE cases ADD COLUMN later TEXT")
        conn.execute("PRAGMA user_version = 4")
    conn.close()
    before = store.path.read_bytes()
    result = subprocess_session(echo, "-p", "no:cacheprovider", "--connic-history", "h.sqlite", "--connic-json", "r.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([("*history: not kept this time: history *h.sqlite: written by a newer pytest-connic "
                                 "(schema 4; this version knows schema 3 and older); it was left as it is*")])
    assert store.path.read_bytes() == before
    assert json.loads((echo.root / "r.json").read_text("utf-8"))["status"] == "passed"


DEEP = "[" * 200_000 + "]" * 200_000


@pytest.mark.isolation_none
def test_outputs_that_clash_and_a_deep_reference_are_usage_errors(echo: ConnicProject) -> None:
    (echo.root / "deep.json").write_text(DEEP, "utf-8")
    result = echo.run("--connic-compare", "deep.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines([("ERROR: invalid value 'deep.json' from --connic-compare: *deep.json: not a "
                                 "--connic-json report: nested deeper than 200 levels")])
    for args in (("--connic-json", "out/same", "--connic-html", "out/same"), ("--connic-json=same.xml", "--junitxml=same.xml")):
        clash = echo.run(*args)
        assert clash.ret == pytest.ExitCode.USAGE_ERROR
        clash.stderr.fnmatch_lines([("ERROR: invalid value * from *: * names the same file, *same*; one would "
                                    "overwrite the other: give each output its own path")])
    assert not (echo.root / "out").exists()


def report(output: str) -> dict[str, object]:
    """A --connic-json report of one case whose run answered ``output``."""
    run = {"status": "completed", "passed": True, "output": output, "tool_calls": [], "tokens": {"input": 1, "output": 1}}
    return {"cases": [{"nodeid": "tests/t.yaml::c", "agent_name": "a", "test_name": "c", "status": "passed",
                       "successes": 1, "agent_run_ids": ["r"], "tokens": {"input": 1, "output": 1}, "cost": 0.0,
                       "runs_detail": [run]}]}


def test_the_compare_command_refuses_what_it_cannot_read_or_write(project: ConnicProject,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    root = project.root
    (root / "deep.json").write_text(DEEP, "utf-8")
    for name, word in (("a.json", "a" * 60_000), ("b.json", "b" * 60_000)):  # below the report limit
        (root / name).write_text(json.dumps(report(f"the answer: {word}.")), "utf-8")
    store = HistoryStore(root / "h.sqlite")
    store.append(SessionRow("2026-12-02T10:00:00+00:00", None, "pytest", ""), [])
    monkeypatch.setenv("COLUMNS", "80")

    long_words = compare_cli(project, "a.json", "b.json", "--summary", "s.md")  # minutes before the fix
    assert long_words.ret == 0, long_words.stderr.str()
    assert max(len(line) for line in long_words.stdout.lines) <= 80 and "<del>" in (root / "s.md").read_text("utf-8")
    for args, message in [
        (("deep.json", "b.json"), "*deep.json: not a --connic-json report: nested deeper than 200 levels"),
        (("last", "-99999999999999999999", "--history", "h.sqlite"),
         "'-99999999999999999999': no such session: the history h.sqlite holds 1 session(s)"),
        (("a.json", "b.json", "--json", "x.out", "--summary", "x.out"), "*x.out: --summary and --json name the same file*"),
        (("a.json", "b.json", "--summary", "agents/x.md"), "*agents/x.md: --summary names a path in its agents/ folder*"),
    ]:
        refused = compare_cli(project, *args)
        assert refused.ret == 2, refused.stderr.str()
        refused.stderr.fnmatch_lines([f"python -m pytest_connic compare: error: {message}"])
        assert "Traceback" not in refused.stderr.str()
    assert not (root / "agents" / "x.md").exists() and not (root / "x.out").exists()
    os.mkfifo(root / "step.md")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(root / "step.md"))
    piped = compare_cli(project, "a.json", "b.json")
    assert piped.ret == 1
    piped.stderr.fnmatch_lines([("*step.md: the step summary is a named pipe (FIFO); only a regular file is written: "
                                "the summary was not appended to $GITHUB_STEP_SUMMARY")])


@pytest.mark.isolation_none
def test_a_shard_of_another_checkout_is_named(echo: ConnicProject) -> None:
    echo.run("-p", "no:cacheprovider", "--connic-json", "shard.json").assert_outcomes(passed=1)
    shard = json.loads((echo.root / "shard.json").read_text("utf-8"))
    for case in shard["cases"]:  # as a shard of another project has them
        case["nodeid"] = case["nodeid"].replace("tests/echo.yaml", "tests/elsewhere.yaml")
        case["suite"] = "tests/elsewhere.yaml"
    (echo.root / "shard.json").write_text(json.dumps(shard), "utf-8")
    merged = echo.run("-p", "no:cacheprovider", "--connic-merge", "shard.json", "--connic-json", "all.json")
    assert merged.ret == 0
    merged.stdout.fnmatch_lines([("*ConnicMergeWarning: *shard.json: 1 case(s) whose suite file is not in this "
                                 "checkout (*), the first tests/elsewhere.yaml::echoes; merged as this project's cases*")])
    refused = echo.run("-p", "no:cacheprovider", "--connic-merge", "shard.json", "--connic-merge-foreign=error",
                       "--connic-json", "none.json")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([("ERROR: *shard.json: 1 case(s) whose suite file is not in this checkout *: a shard "
                                  "of another project or checkout (--connic-merge-foreign=error); nothing was merged*")])
    assert not (echo.root / "none.json").exists()
