"""No case's time includes the plugin's start: what running a case imports is imported before the
first case, as the project's template is loaded then (docs/performance.md, "Worker processes").
Checked in a real session (a subprocess: in this process the plugin is imported already)."""

from __future__ import annotations

import pytest

from helpers.project import ConnicProject

RECORDING = '''
import sys

SEEN = []


def pytest_runtest_logstart(nodeid, location):
    if not SEEN:
        SEEN.append(sorted(name for name in sys.modules if name.startswith("pytest_connic.")))
        with open("litellm.txt", "w", encoding="utf-8") as out:
            out.write(str("litellm" in sys.modules))


def pytest_runtest_logfinish(nodeid, location):
    if len(SEEN) == 1:
        SEEN.append(sorted(name for name in sys.modules if name.startswith("pytest_connic.")))
        with open("modules.txt", "w", encoding="utf-8") as out:
            out.write(" ".join(set(SEEN[1]) - set(SEEN[0])))
'''


@pytest.mark.parametrize(("isolation", "record"), [("process", "none"), ("none", "once")])
def test_the_first_case_imports_none_of_the_plugin(project: ConnicProject, isolation: str, record: str) -> None:
    """Nor, in a session that may call providers (recording), LiteLLM: its import (seconds of CPU)
    was the first model call's; it is made while the session waits for its worker templates."""
    project.write("conftest.py", RECORDING)
    project.tool("calc", "def echo(payload: dict) -> dict:\n    return {'got': payload}\n")
    project.agent("echo", type="tool", tool_name="calc.echo")
    project.suite("echo", "tests:\n  - name: echoes\n    payload: '{\"a\": 1}'\n    expected_result: output.got.a == 1\n")
    result = project.run_subprocess("-p", "no:randomly", "-p", "no:xdist", f"--connic-isolation={isolation}",
                                    f"--connic-record-mode={record}")
    result.assert_outcomes(passed=1)
    imported = (project.root / "modules.txt").read_text("utf-8").split()
    assert imported == [], imported
    assert (project.root / "litellm.txt").read_text("utf-8") == str(record != "none")


def test_collect_only_imports_nothing_that_runs_a_case(project: ConnicProject) -> None:
    project.write("conftest.py", '''
import sys


def pytest_unconfigure(config):
    with open("modules.txt", "w", encoding="utf-8") as out:
        out.write(" ".join(name for name in sys.modules if name.startswith("pytest_connic.execution.case")))
''')
    project.tool("calc", "def echo(payload: dict) -> dict:\n    return {'got': payload}\n")
    project.agent("echo", type="tool", tool_name="calc.echo")
    project.suite("echo", "tests:\n  - name: echoes\n    payload: '{}'\n")
    result = project.run_subprocess("-p", "no:randomly", "-p", "no:xdist", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["tests/echo.yaml::echoes"])
    assert (project.root / "modules.txt").read_text("utf-8").split() == []
