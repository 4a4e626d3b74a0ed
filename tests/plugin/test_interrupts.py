"""A real SIGINT or SIGTERM sent to pytest in the middle of a slow case: no run starts after it,
the run in flight is cancelled and its ``cleanup()`` finishes, every report (terminal, JSON,
JUnit, HTML, traces) holds every case (the finished ones with their verdicts, the rest
interrupted) and pytest exits with its interrupted exit code; with and without ``-n 2``.

The signal is sent by the test once user code has written a file saying it is running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from helpers.project import ConnicProject

SLOW_TOOLS = '''
import pathlib
import time


def echo(payload: dict) -> dict:
    """Echo; with {"wait": true} it says it is running (ready.txt), then takes its time."""
    if payload.get("wait"):
        pathlib.Path("ready.txt").write_text("running")
        time.sleep(60)
    return {"got": payload}
'''

#: cleanup() signals readiness itself when the builder argument asks it (a signal *during* cleanup)
BUILDER = '''
import pathlib
import time


def build(context, builder_args, test_name, payload, files):
    return {"wait": builder_args.get("wait_in_tool", False)}


def cleanup(run, context, builder_args):
    if builder_args.get("wait_in_cleanup"):
        pathlib.Path("ready.txt").write_text("cleaning up")
        time.sleep(2)
    pathlib.Path("cleanup-done.txt").write_text(str(run["output"]))
'''

OUTPUTS = ["--connic-json", "report.json", "--junitxml", "junit.xml", "--connic-html", "report.html",
           "--connic-traces", "traces"]


def _project(project: ConnicProject, slow: str) -> None:
    project.tool("t", SLOW_TOOLS)
    project.agent("echo", type="tool", tool_name="t.echo")
    project.write("tests/builders/slow.py", BUILDER)
    project.suite("echo", f'''
        tests:
          - name: a first
            payload: '{{"quick": 1}}'
          - name: b slow
            builder: slow
            builder_args: {{{slow}: true}}
          - name: c never
            payload: '{{"quick": 3}}'
        ''')


def _run_and_signal(root: Path, signum: int, *args: str) -> tuple[int, str]:
    """pytest in a subprocess of its own, sent ``signum`` once ``ready.txt`` appears."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:timeout",
               "-v", *OUTPUTS, *args]
    with subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, start_new_session=True) as proc:
        try:
            for _ in range(1200):  # a hang guard, not a measurement: up to 60 s for the file
                if (root / "ready.txt").exists() or proc.poll() is not None:
                    break
                time.sleep(0.05)
            assert (root / "ready.txt").exists(), proc.communicate(timeout=30)[0]
            proc.send_signal(signum)
            out, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return proc.returncode, out


def _junit(root: Path) -> dict[str, tuple[str, str]]:
    cases = {}
    for case in ET.parse(root / "junit.xml").getroot().iter("testcase"):
        results = [(r.tag, r.get("message", "")) for r in case if r.tag in ("failure", "error", "skipped")]
        cases[case.get("name", "")] = results[0] if results else ("passed", "")
    return cases


@pytest.mark.timeout(180)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("during", ["tool", "cleanup"])
def test_a_signal_stops_the_session_with_every_case_in_every_report(project: ConnicProject, signum: int,
                                                                     during: str) -> None:
    _project(project, f"wait_in_{during}")
    name = signal.Signals(signum).name
    code, out = _run_and_signal(project.root, signum)
    assert code == pytest.ExitCode.INTERRUPTED, out
    assert f"Interrupted: interrupted by {name}" in out
    assert "INTERNALERROR" not in out and "Traceback" not in out
    # the in-flight cleanup finished (a SIGINT during a slow cleanup no longer abandons it)
    assert (project.root / "cleanup-done.txt").read_text() == ("None" if during == "tool" else '{"got": {"wait": false}}')
    # b's run was cancelled in the tool (interrupted), or had finished before its cleanup (passed)
    b = "passed" if during == "cleanup" else "interrupted"
    report = json.loads((project.root / "report.json").read_text("utf-8"))
    statuses = {c["test_name"]: c["status"] for c in report["cases"]}
    assert statuses == {"a first": "passed", "b slow": b, "c never": "interrupted"}
    assert report["status"] == "interrupted"  # the session's status, as docs/reports.md says
    reasons = {c["test_name"]: c["interrupted"] for c in report["cases"]}
    assert reasons["c never"] == f"interrupted by {name}"
    junit = _junit(project.root)
    assert junit["a first"] == ("passed", "")
    assert junit["c never"] == ("skipped", f"interrupted by {name}")
    assert junit["b slow"] == (("passed", "") if b == "passed" else ("skipped", f"interrupted by {name}"))
    html = (project.root / "report.html").read_text("utf-8")
    assert all(n in html for n in ("a first", "b slow", "c never"))
    assert any((project.root / "traces").iterdir())
    assert "INTR" in out and "c never" in out  # the terminal's results table


@pytest.mark.timeout(240)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_under_xdist_the_controller_writes_every_case(project: ConnicProject, signum: int) -> None:
    pytest.importorskip("xdist")
    _project(project, "wait_in_tool")
    # more cases than the workers take at once, so some are still pending when the signal comes
    project.write("tests/more.yaml", "agent: echo\ntests:\n" + "".join(
        f"  - name: m{i}\n    payload: '{{\"quick\": {i}}}'\n" for i in range(6)))
    name = signal.Signals(signum).name
    code, out = _run_and_signal(project.root, signum, "-n", "2")
    assert code == pytest.ExitCode.INTERRUPTED, out
    assert "INTERNALERROR" not in out
    report = json.loads((project.root / "report.json").read_text("utf-8"))
    statuses = {c["test_name"]: c["status"] for c in report["cases"]}
    assert sorted(statuses) == sorted(["a first", "b slow", "c never", *(f"m{i}" for i in range(6))])
    assert statuses["b slow"] == "interrupted"  # in flight on a worker when the controller stopped
    assert set(statuses.values()) <= {"passed", "interrupted"}
    junit = _junit(project.root)
    assert sorted(junit) == sorted(statuses)
    assert junit["b slow"] == ("skipped", f"interrupted by {name}")
    # each case where its suite has it, also those the controller knows only by their node ids
    lines = {c["test_name"]: (c["suite"], c["line"]) for c in report["cases"]}
    assert lines == {n: (suite, _line(project.root / suite, n)) for n, (suite, _) in lines.items()}


def _line(path: Path, name: str) -> int:
    """The 1-based line of the case ``name`` (its ``- name:`` line) in the suite at ``path``."""
    return next(i for i, line in enumerate(path.read_text("utf-8").splitlines(), 1)
                if line.strip() == f"- name: {name}")
