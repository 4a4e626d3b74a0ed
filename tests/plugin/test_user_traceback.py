"""The user's traceback (issue 27): an exception raised by user code in a worker process crosses
with its frames and its cause chain, and the failure report shows it as pytest shows a Python
test's (``--tb`` styles, ``-l``, ``--full-trace``); the trace line, the JSON and the HTML hold it."""

from __future__ import annotations

import json
import sys

import pytest

from helpers.project import ConnicProject

TOOLS = '''
from tools.helper import lookup


def schedule(day: str) -> dict:
    """Schedule a follow-up.

    Args:
        day: the day
    """
    slots = {"mon": 1}
    return {"slot": lookup(slots, day)}
'''

HELPER = '''
def lookup(slots, day):
    return _inner(slots, day)


def _inner(slots, day):
    return _deep(slots, day)


def _deep(slots, day):
    key = day.lower()
    return slots[key]
'''

MIDDLEWARE = '''
def before(content, context):
    try:
        return content["missing"]
    except KeyError as exc:
        raise ValueError("no missing key") from exc
'''

SUITE = """
tests:
  - name: follow up
    payload: hi
    expected_tool_calls:
      - schedule: result.slot == 1
"""

QUIET = ("-W", "ignore::pytest_connic.warnings.ConnicWarning")


@pytest.fixture
def deep(project: ConnicProject) -> ConnicProject:
    """A tool whose KeyError is raised three calls deep in the user's own helper."""
    project.tool("t", TOOLS)
    project.tool("helper", HELPER)
    project.agent("planner", tools=["t.schedule"])
    project.suite("planner", SUITE)
    project.replies("planner", "follow up", [("schedule", {"day": "Chat"})], "done")
    return project


@pytest.mark.parametrize("isolation", ["process", "none"])
def test_the_failure_report_shows_the_users_frames(deep: ConnicProject, isolation: str) -> None:
    result = deep.run(*QUIET, f"--connic-isolation={isolation}")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "*✗ schedule(day=\"Chat\")*KeyError: 'chat' at tools/helper.py:11",
        "schedule(...) (tool call #1) raised:",
        ">       return {\"slot\": lookup(slots, day)}",
        "tools/t.py:11: ",
        "tools/helper.py:2: in lookup",
        "    return _inner(slots, day)",
        "tools/helper.py:6: in _inner",
        ">       return slots[key]",
        "E   KeyError: 'chat'",
        "tools/helper.py:11: KeyError",
    ])
    assert "pytest_connic" not in out and "worker.py" not in out  # no frame of the plugin
    assert "slots      = " not in out  # locals only with -l


def test_tb_line_gives_the_users_file_and_line(deep: ConnicProject) -> None:
    result = deep.run(*QUIET, "--tb=line")
    lines = [line for line in result.outlines if line.startswith("tools/helper.py:11: ")]
    assert len(lines) == 1, result.stdout.str()
    assert "expected tool call schedule" in lines[0]


def test_locals_and_short_style(deep: ConnicProject) -> None:
    result = deep.run(*QUIET, "--tb=short", "-l")
    result.stdout.fnmatch_lines([
        "tools/t.py:11: in schedule",
        "*day        = 'Chat'",
        "tools/helper.py:11: in _deep",
        "    return slots[key]",
        "E   KeyError: 'chat'",
        "*key        = 'chat'",
    ])


def test_native_style(deep: ConnicProject) -> None:
    native = deep.run(*QUIET, "--tb=native")
    native.stdout.fnmatch_lines(["Traceback (most recent call last):", '  File "tools/helper.py", line 11, in _deep',
                                 "    return slots[key]", "KeyError: 'chat'"])


def test_full_trace_shows_the_plugins_frames(deep: ConnicProject) -> None:
    full = deep.run(*QUIET, "--full-trace")
    assert "execution/isolation/worker.py" in full.stdout.str()  # the plugin's frames, shown on request


def test_json_and_html_hold_the_traceback(deep: ConnicProject) -> None:
    deep.run(*QUIET, "--connic-json=r.json", "--connic-html=r.html")
    report = json.loads((deep.root / "r.json").read_text("utf-8"))
    call = report["cases"][0]["runs_detail"][0]["tool_calls"][0]
    assert call["error"] == "KeyError: 'chat'"  # the existing key, unchanged
    assert call["traceback"]["where"] == "tools/helper.py:11"
    assert 'File "tools/helper.py", line 11, in _deep\n    return slots[key]\nKeyError' in call["traceback"]["text"]
    html = (deep.root / "r.html").read_text("utf-8")
    assert "in _deep" in html and "return slots[key]" in html


def test_the_cause_chain_of_a_middleware_crosses_the_worker(project: ConnicProject) -> None:
    project.agent("mw")
    project.write("middleware/mw.py", MIDDLEWARE)
    project.suite("mw", "tests:\n  - name: chained\n    payload: hi\n")
    project.replies("mw", "chained", "done")
    result = project.run(*QUIET)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "the run's error raised:",
        ">           return content[\"missing\"]",
        "E   KeyError: 'missing'",
        "middleware/mw.py:3: KeyError",
        "The above exception was the direct cause of the following exception:",
        '>           raise ValueError("no missing key") from exc',
        "E   ValueError: no missing key",
        "middleware/mw.py:5: *",
    ])


def test_pdb_stops_in_the_tools_frame(deep: ConnicProject) -> None:
    result = deep.pytester.run(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                               *QUIET, "--pdb", stdin=b"p key\np day\nup\np slots\nc\n", timeout=120)
    out = result.stdout.str()
    assert "connic: --pdb: user code runs in pytest's process for this session (isolation none)" in out
    result.stdout.fnmatch_lines(["*>*/tools/helper.py(11)_deep()", "-> return slots[key]",
                                 "(Pdb) 'chat'", "(Pdb) 'Chat'"])
    assert "{'mon': 1}" in out  # `up` reached the caller's frame and its locals


def test_pdb_with_explicit_process_isolation_is_refused(deep: ConnicProject) -> None:
    result = deep.run("--pdb", "--connic-isolation=process")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([("*--connic-isolation=process cannot be used with --pdb: the debugger runs in "
                                 "pytest's process*")])


def test_breakpoint_in_a_worker_says_how_to_debug(project: ConnicProject) -> None:
    project.tool("t", 'def stop(day: str) -> dict:\n    """Stop.\n\n    Args:\n        day: the day\n    """\n'
                      '    breakpoint()\n    return {"slot": 1}\n')
    project.agent("planner", tools=["t.stop"])
    project.suite("planner", "tests:\n  - name: bp\n    payload: hi\n    expected_tool_calls:\n"
                             "      - stop: result.slot == 1\n")
    project.replies("planner", "bp", [("stop", {"day": "mon"})], "done")
    result = project.run(*QUIET)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([("*BreakpointInWorker: breakpoint() in user code running in a worker process: "
                                 "run pytest with --pdb*")])
