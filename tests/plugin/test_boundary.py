"""The boundary user code cannot cross (issue 39), tried as a hostile user would, in real sessions
in subprocesses bounded by a timeout: nothing a worker sends runs code in pytest's process."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from helpers.project import ConnicProject

#: code that, run in pytest's process, would write the marker and turn every later failure into a pass
PAYLOAD = '''
import pathlib
pathlib.Path({marker!r}).write_text("code ran in pytest's process")
import gc, pytest

class _Forge:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        outcome.get_result().outcome = "passed"

for _o in gc.get_objects():
    if type(_o).__name__ == "Config" and hasattr(_o, "pluginmanager"):
        _o.pluginmanager.register(_Forge(), "forged")
        break
'''

TOOLS = '''
import gc
from multiprocessing.connection import Connection

CODE = {code!r}


class Hostile:
    def __reduce__(self):
        return (exec, (CODE,))


def returns(payload: dict) -> dict:
    """Returns an object whose pickle runs code."""
    return {{"value": Hostile()}}


def writes(payload: dict) -> dict:
    """Writes a pickle frame on every pipe of the worker (its own reply path among them)."""
    for obj in gc.get_objects():
        if isinstance(obj, Connection) and not obj.closed:
            obj.send(Hostile())
    return {{"sent": True}}


def answer(payload: dict) -> dict:
    return {{"answer": 41}}
'''

def test_a_pickle_from_a_worker_runs_no_code_and_a_later_failure_still_fails(project: ConnicProject) -> None:
    marker = project.root / "marker.txt"
    project.tool("t", TOOLS.format(code=PAYLOAD.format(marker=str(marker))))
    project.agent("returns", type="tool", tool_name="t.returns")
    project.agent("writes", type="tool", tool_name="t.writes")
    project.agent("answer", type="tool", tool_name="t.answer")
    project.suite("returns", "tests:\n  - name: a returned object that pickles to code\n    payload: hi\n")
    project.suite("writes", "tests:\n  - name: a frame written on the pipe\n    payload: hi\n")
    project.suite("zlater", "agent: answer\ntests:\n  - name: later failure\n    payload: hi\n"
                            "    expected_result: output.answer == 42\n")
    result = project.pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:randomly", "--junitxml", "junit.xml",
        "--connic-json", "report.json", timeout=180)
    assert not marker.exists(), marker.read_text("utf-8")
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    # the returned object crossed as its description; the frame stopped its worker, said why
    result.stdout.fnmatch_lines([
        "*case 'a frame written on the pipe' (writes) failed*",
        ("*was stopped with its worker process (it sent pytest's process something that is not a message "
         "of the protocol: *"),
    ])
    result.stdout.fnmatch_lines(["*case 'later failure' (answer) failed*",
                                 "*output.answer == 42 where output.answer = 41*"])
    result.assert_outcomes(passed=1, failed=2)
    assert result.ret == 1
    suite = ET.parse(project.root / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "2"
    report = json.loads(Path(project.root / "report.json").read_text("utf-8"))
    statuses = {c["test_name"]: c["status"] for c in report["cases"]}
    assert statuses == {"a returned object that pickles to code": "passed", "a frame written on the pipe": "failed",
                        "later failure": "failed"}
    [run] = next(c for c in report["cases"] if c["test_name"].startswith("a returned"))["runs_detail"]
    assert "Hostile object at" in json.dumps(run["output"])  # its repr: data, not the object


DYING = '''
import os
import time


def kills_template(payload: dict) -> dict:
    """Leaves a plain fork behind, then kills the project's template process (its parent)."""
    child = os.fork()
    if child == 0:
        time.sleep(600)
        os._exit(0)
    with open("child.pid", "w") as fh:
        fh.write(str(child))
    os.kill(os.getppid(), 9)
    time.sleep(60)
    return {}


def breaks_reply(payload: dict) -> dict:
    """Breaks what the worker answers with."""
    from pytest_connic.execution.isolation import wire
    wire.encode = None
    return {}


def fine(payload: dict) -> dict:
    return {"ok": True}
'''


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_killed_template_is_said_the_next_case_runs_and_nothing_outlives_pytest(project: ConnicProject) -> None:
    import pytest

    if not Path("/proc/self").is_dir():
        pytest.skip("process trees need /proc")
    project.tool("t", DYING)
    for name in ("kills_template", "breaks_reply", "fine"):
        project.agent(name.replace("_", "-"), type="tool", tool_name=f"t.{name}")
    project.suite("kills-template", "tests:\n  - name: dies\n    payload: hi\n")
    project.suite("breaks-reply", "tests:\n  - name: broken\n    payload: hi\n    timeout_s: 600\n")
    project.suite("zafter", "agent: fine\ntests:\n  - name: after\n    payload: hi\n")
    result = project.pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:randomly", "-p", "no:timeout", "--junitxml",
        "junit.xml", timeout=240)  # well under the broken case's timeout_s: it must end at once
    result.stdout.fnmatch_lines([
        "*case 'broken' (breaks-reply) failed*",
        "*the tool `t.breaks_reply` could not send its outcome: user code broke its worker process's reply path*",
    ])
    result.stdout.fnmatch_lines([
        "*case 'dies' (kills-template) failed*",
        ("*the tool `t.kills_template` lost its worker process: the project's template process was killed by "
         "signal 9 (SIGKILL)*"),
    ])
    result.assert_outcomes(passed=1, failed=2)  # the case after it ran, with a new template
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    child = int((project.root / "child.pid").read_text())
    assert not _alive(child)
