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
