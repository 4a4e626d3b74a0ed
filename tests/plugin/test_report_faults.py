"""Reports survive every fault (issue 26), tried as a hostile user would: a history whose columns
hold the wrong types, a FIFO where a file is read, a full disk, a folder that is a file, a link
planted in the traces folder, a lone surrogate in a case name, and shards that cannot be merged.
Each is a real pytest session in a subprocess, bounded by a timeout."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from helpers.history import kill_a_writer
from helpers.project import ConnicProject

SUITE = """
agent: echo
tests:
  - name: echoes
    payload: '{"x": 1}'
    expected_result: output.got.x == 1
  - name: also echoes
    payload: '{"x": 2}'
    expected_result: output.got.x == 2
"""
#: the tests match whole lines the plugin would fold at 80 columns
pytestmark = pytest.mark.usefixtures("wide_terminal")
#: a session never waits longer than this for a subprocess (a hang is the failure it would show)
TIMEOUT = 120


@pytest.fixture
def echo(calc: ConnicProject) -> ConnicProject:
    calc.suite("echo", SUITE)
    return calc


def run(project: ConnicProject, *args: str) -> pytest.RunResult:
    return project.pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", *args,
                                                 timeout=TIMEOUT)


def junit_names(path: Path) -> dict[str, str]:
    """``{testcase name: its result}`` of a JUnit XML file."""
    root = ET.parse(path).getroot()
    return {case.get("name", ""): next((c.tag for c in case if c.tag != "properties"), "passed")
            for case in root.iter("testcase")}


def test_a_damaged_history_left_mid_transaction_keeps_the_session_and_every_report(echo: ConnicProject) -> None:
    """A history whose rows hold the wrong types, JSON nested 100,000 deep or of the wrong shape,
    and that a killed writer left mid-transaction: the journal is rolled back, the damaged rows are
    one warning, the session is stored, and every report is written."""
    first = run(echo, "--connic-history", "h.sqlite")
    assert first.ret == 0, first.stdout.str()
    with sqlite3.connect(echo.root / "h.sqlite") as conn:
        conn.execute("UPDATE cases SET latency_ms='x', pass_rate='high' WHERE nodeid LIKE '%::echoes'")
        conn.execute("UPDATE cases SET behaviour=?, config_parts='{\"tools/x.py\": 1}' WHERE nodeid LIKE '%::also%'",
                     ("[" * 100_000 + "]" * 100_000,))
    conn.close()
    kill_a_writer(echo.root / "h.sqlite")
    result = run(echo, "--connic-history", "h.sqlite", "--connic-json", "r.json", "--connic-html", "r.html",
                 "--junitxml", "j.xml")
    out = result.stdout.str()
    assert result.ret == 0, out
    assert "Traceback" not in out + result.stderr.str() and "INTERNALERROR" not in out
    result.stdout.fnmatch_lines(["*connic results*", "*2/2 cases passed.*",
                                 ("*history: history *h.sqlite: 2 damaged row(s) skipped (session 1: case "
                                  "'tests/echo.yaml::*': column *, and 1 more); they were left as they are")])
    assert out.count("damaged row(s) skipped") == 2  # the line, and its ConnicHistoryWarning
    with sqlite3.connect(echo.root / "h.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 2  # stored; the killed one rolled back
    conn.close()
    report = json.loads((echo.root / "r.json").read_text("utf-8"))
    html = (echo.root / "r.html").read_text("utf-8")
    junit = junit_names(echo.root / "j.xml")
    # the three reports agree: the same cases, the same verdicts
    assert report["status"] == "passed" and report["history"]["compared_with"].startswith("session 1 of ")
    assert {c["test_name"]: c["status"] for c in report["cases"]} == {"echoes": "passed", "also echoes": "passed"}
    assert sorted(junit.values()) == ["passed", "passed"] and len(junit) == 2
    assert all(name in html for name in ("echoes", "also echoes"))


def test_a_fifo_is_refused_where_a_file_is_read(echo: ConnicProject) -> None:
    os.mkfifo(echo.root / "h.sqlite")
    os.mkfifo(echo.root / ".env.staging")
    result = run(echo, "--connic-history", "h.sqlite", "--connic-json", "r.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([("*history: not kept this time: history *h.sqlite: the history is a named pipe (FIFO); "
                                 "only a regular file is read*")])
    assert json.loads((echo.root / "r.json").read_text("utf-8"))["status"] == "passed"
    env = run(echo, "--connic-env", "staging")
    assert env.ret != 0
    env.stdout.fnmatch_lines(["*.env.staging: the env file is a named pipe (FIFO); only a regular file is read*"])
    os.mkfifo(echo.root / "agents" / "pipe.yaml")
    agents = run(echo)
    agents.stdout.fnmatch_lines(["*Failed to load agent: agents/pipe.yaml:1:1: the agent file is a named pipe (FIFO)*"])


def test_a_report_that_cannot_be_written_never_stops_the_others(echo: ConnicProject) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full (a device that is always full) on this system")
    (echo.root / "blocker").write_text("a file where a folder is asked for")
    # ``=``: pytest takes a lone absolute path for an argument when it looks for its root dir
    result = run(echo, "--connic-json=/dev/full", "--connic-html", "blocker/r.html", "--connic-traces",
                 "blocker/traces", "--junitxml", "j.xml", "--connic-coverage-json", "blocker/c.json")
    out = result.stdout.str()
    assert result.ret == 0, out
    assert "Traceback" not in out + result.stderr.str() and "INTERNALERROR" not in out
    result.stdout.fnmatch_lines([
        "*connic results*", "*2/2 cases passed.*",
        "connic: /dev/full: cannot write the JSON report (--connic-json): [[]Errno 28[]] No space left on device",
        "connic: *blocker: cannot write the HTML report (--connic-html): [[]Errno 17[]] File exists",
        "connic: *blocker/traces: cannot write the traces (--connic-traces): [[]Errno 20[]] Not a directory",
    ])
    result.stdout.fnmatch_lines(["connic: *blocker: cannot write the coverage report (--connic-coverage-json): *"])
    assert len(junit_names(echo.root / "j.xml")) == 2  # pytest's JUnit XML, on the healthy disk


def test_a_link_planted_in_the_traces_folder_is_replaced_not_followed(echo: ConnicProject) -> None:
    outside = echo.root.parent / f"{echo.root.name}-outside.txt"
    outside.write_text("precious")
    traces = echo.root / "traces"
    traces.mkdir()
    (traces / "tests.echo__echoes__run0.json").symlink_to(outside)
    result = run(echo, "--connic-traces", "traces")
    assert result.ret == 0, result.stdout.str()
    assert outside.read_text() == "precious"
    written = traces / "tests.echo__echoes__run0.json"
    assert stat.S_ISREG(os.lstat(written).st_mode)
    assert json.loads(written.read_text("utf-8"))["test_name"] == "echoes"


def test_a_lone_surrogate_in_a_node_id_is_written_in_every_report(echo: ConnicProject,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONIOENCODING", "utf-8:backslashreplace")  # pytester reads the terminal as UTF-8
    # a suite file whose name is not UTF-8: Python holds the byte as a lone surrogate (\udcff)
    odd = os.fsencode(str(echo.root / "tests" / "odd\udcff.yaml"))
    Path(os.fsdecode(odd)).write_text(SUITE, "utf-8")
    result = run(echo, "--connic-json", "r.json", "--connic-html", "r.html", "--connic-traces", "traces",
                 "--connic-history", "h.sqlite")
    out = result.stdout.str()
    assert "Traceback" not in out + result.stderr.str(), out
    assert result.ret == 0, out
    report = json.loads((echo.root / "r.json").read_text("utf-8"))
    # the JSON report shows the byte as its escape (the masker's text of a report value)
    assert "tests/odd\\udcff.yaml::echoes" in {c["nodeid"] for c in report["cases"]}
    assert "odd\\udcff.yaml" in (echo.root / "r.html").read_text("utf-8")
    assert {p.name for p in (echo.root / "traces").iterdir()} >= {"tests.odd__echoes__run0.json"}
    with sqlite3.connect(echo.root / "h.sqlite") as conn:
        assert ("tests/odd\\udcff.yaml::echoes",) in conn.execute("SELECT nodeid FROM cases").fetchall()


def test_recorded_files_and_reports_get_the_umask_mode(echo: ConnicProject) -> None:
    from pytest_connic.files import write_text_file
    from pytest_connic.models.cassette_write import write_text_atomic

    old = os.umask(0o027)
    try:
        write_text_atomic(echo.root / "cassettes" / "c.yaml", "version: 1\n")
        write_text_file(echo.root / "r.json", "{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(echo.root / "cassettes" / "c.yaml").st_mode) == 0o640
    assert stat.S_IMODE(os.stat(echo.root / "r.json").st_mode) == 0o640


#: shard faults a session must survive (a deep file would crash it, a FIFO would block it); the
#: others are read below pytest (tests/unit/reports/test_merge_shards.py)
SHARDS = {
    "nested": lambda text: text.replace('"cases": [', '"deep": ' + "[" * 100_000 + "]" * 100_000 + ', "cases": [', 1),
}


#: the JSON report of a good session of ``echo``, made once per process: every fault below starts
#: from it (the merge reads shards, it runs no case, so whose directory it came from is no matter)
_GOOD_SHARD: list[str] = []


def _good_shard(echo: ConnicProject) -> str:
    if not _GOOD_SHARD:
        assert run(echo, "--connic-json", "good.json").ret == 0
        _GOOD_SHARD.append((echo.root / "good.json").read_text("utf-8"))
    return _GOOD_SHARD[0]


@pytest.mark.parametrize("fault", [*SHARDS, "fifo"])
def test_a_shard_that_cannot_be_merged_writes_no_report(echo: ConnicProject, fault: str) -> None:
    (echo.root / "good.json").write_text(_good_shard(echo), "utf-8")
    shard = echo.root / "bad.json"
    if fault == "fifo":
        os.mkfifo(shard)
    else:
        shard.write_text(SHARDS[fault]((echo.root / "good.json").read_text("utf-8")), "utf-8")
    (echo.root / "all.json").write_text("the earlier merge")
    result = run(echo, "--connic-merge", "bad.json", "--connic-json", "all.json", "--connic-html", "all.html",
                 "--junitxml", "all.xml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines(["ERROR: *bad.json*: *; nothing was merged and no report written"])
    assert (echo.root / "all.json").read_text() == "the earlier merge"
    assert not (echo.root / "all.html").exists() and not (echo.root / "all.xml").exists()


@pytest.mark.parametrize(("option", "value", "what"), [
    ("--connic-json", "tests/echo.yaml", "a suite file under tests/*"),
    ("--connic-html", "agents/echo.yaml", "a path in its agents/ folder"),
    ("--connic-traces", "tools", "a path in its tools/ folder"),
    ("--connic-history", "cassettes/h.sqlite", "a path in its cassette folder"),
    ("--connic-coverage-json", "linked.json", "a path in its agents/ folder"),  # through a link
])
def test_an_output_never_names_an_input_of_the_project(echo: ConnicProject, option: str, value: str,
                                                        what: str) -> None:
    (echo.root / "linked.json").symlink_to(echo.root / "agents" / "echo.yaml")
    before = {p: p.read_bytes() for p in echo.root.rglob("*") if p.is_file()}
    result = echo.run(option, value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: invalid value {value!r} from {option}: it names {what} of the project *"])
    assert {p: p.read_bytes() for p in echo.root.rglob("*") if p.is_file()} == before


def test_the_cassette_folder_must_be_inside_the_project(echo: ConnicProject) -> None:
    result = echo.run("-o", "connic_cassette_dir=../x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([("ERROR: invalid value '../x' from ini connic_cassette_dir: the cassette folder "
                                 "must be inside the project *")])


def test_a_builder_with_a_syntax_error_is_located_at_its_file(echo: ConnicProject) -> None:
    echo.write("tests/builders/broken.py", "def build(:\n    return {}\n")
    echo.suite("built", "agent: echo\ntests:\n  - name: built\n    builder: broken\n    payload: '{}'\n"
                        "    expected_result: output.got != None\n")
    result = run(echo, "tests/built.yaml")
    assert result.ret == 1
    out = result.stdout.str()
    assert "tests/builders/broken.py:1: importing broken.py raised SyntaxError" in out, out
    assert "<frozen importlib" not in out
