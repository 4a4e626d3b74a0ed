"""User code runs in worker processes (docs/architecture.md, "Where user code runs"): whatever a
tool, a middleware or a builder does (loop on the CPU, block its event loop, swallow cancellation,
hang, exit, run out of memory, leave threads behind, raise KeyboardInterrupt or another
BaseException, mutate its arguments), that run fails (or passes) with the cause in words, its
cleanup runs, every other case runs, every report holds every case, and pytest exits.

One project holds a case per fault; it runs once in a subprocess, bounded by a generous timeout (a
hang fails the test instead of hanging the suite); each test below asserts one fault on that run.
What the pool does with each outcome is asserted below the session, through a real pool
(``tests/unit/execution/test_isolation_pool.py``); the run under ``-n 2`` that this module also
made proved nothing more about the pool (an xdist worker's pool is the same code), and how xdist
carries a failed case's reports is ``test_xdist_reports.py``'s (identical reports with and without
xdist, failures and errors included).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers.project import ConnicProject

FAULTS = '''
import asyncio
import concurrent.futures
import os
import threading
import time


class Custom(BaseException):
    """Not an Exception."""


def fine(payload: dict) -> dict:
    """Nothing wrong."""
    return {"ok": True}


async def cpu(payload: dict) -> dict:
    """Loops on the CPU, never awaiting."""
    while True:
        pass


async def sleeps(payload: dict) -> dict:
    """Blocks its event loop."""
    time.sleep(3600)
    return {}


async def swallows(payload: dict) -> dict:
    """Refuses to be cancelled."""
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            pass


def exits(payload: dict) -> dict:
    """Ends its process."""
    os._exit(3)


def hangs(payload: dict) -> dict:
    """A sync tool that never returns."""
    time.sleep(3600)
    return {}


async def parent(payload: dict) -> dict:
    """Triggers a child whose tool hangs, past the child's own timeout."""
    from connic.tools import trigger_agent

    result = await trigger_agent("hangs", {"x": 1}, timeout_seconds=1)
    return {"child": result["status"]}


def killed(payload: dict) -> dict:
    """Its process gets SIGKILL."""
    import signal

    os.kill(os.getpid(), signal.SIGKILL)
    return {}


def allocates(payload: dict) -> dict:
    """Far past the worker's memory limit."""
    blob = bytearray(8 * 1024 * 1024 * 1024)
    return {"size": len(blob)}


async def leaves_threads(payload: dict) -> dict:
    """A non-daemon thread, a hung ThreadPoolExecutor worker and an asyncio.to_thread call left behind."""
    threading.Thread(target=time.sleep, args=(3600,)).start()
    concurrent.futures.ThreadPoolExecutor(1).submit(time.sleep, 3600)
    try:
        await asyncio.wait_for(asyncio.to_thread(time.sleep, 3600), 0.05)
    except asyncio.TimeoutError:
        pass
    return {"left": True}


def interrupts(payload: dict) -> dict:
    """Raises KeyboardInterrupt."""
    raise KeyboardInterrupt("from a tool")


def generator_exit(payload: dict) -> dict:
    """Raises GeneratorExit."""
    raise GeneratorExit


def custom(payload: dict) -> dict:
    """Raises a BaseException subclass of the user's."""
    raise Custom("mine")


def mutates(payload: dict) -> dict:
    """Rewrites what it was given."""
    payload["items"].append("added by the tool")
    payload["who"] = "the tool"
    return {"seen": len(payload["items"])}
'''

MIDDLEWARE = '''
def before(content, context):
    raise KeyboardInterrupt("from middleware")
'''

BUILDER = '''
import time


def build(context, builder_args, test_name, payload, files):
    mode = builder_args.get("mode")
    if mode == "hang_build":
        time.sleep(3600)
    if mode == "interrupt_build":
        raise KeyboardInterrupt("from build")
    return payload


def cleanup(run, context, builder_args):
    with open("cleanups.txt", "a") as fh:
        fh.write(builder_args["case"] + "\\n")
    if builder_args.get("mode") == "hang_cleanup":
        time.sleep(3600)
    return True
'''

#: case name -> (agent's tool, extra case fields)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "fine": ("fine", {}),
    "cpu loop": ("cpu", {"timeout_s": 1}),
    "time.sleep": ("sleeps", {"timeout_s": 1}),
    "swallowed cancel": ("swallows", {"timeout_s": 1}),
    "build hangs": ("fine", {"timeout_s": 1, "mode": "hang_build"}),
    "cleanup hangs": ("fine", {"timeout_s": 1, "mode": "hang_cleanup"}),
    "os._exit": ("exits", {}),
    "memory": ("allocates", {}),
    "sigkill": ("killed", {}),
    "child times out": ("parent", {}),
    "threads left": ("leaves_threads", {}),
    "tool interrupt": ("interrupts", {}),
    "middleware interrupt": ("fine", {"agent": "mw"}),
    "build interrupt": ("fine", {"mode": "interrupt_build"}),
    "generator exit": ("generator_exit", {}),
    "custom base exception": ("custom", {}),
    "mutated params": ("mutates", {"payload": {"items": ["a"], "who": "the case"}}),
    "fine after": ("fine", {}),
}


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), "utf-8")


def _project(root: Path) -> None:
    _write(root, "tools/faults.py", FAULTS)
    _write(root, "middleware/mw.py", MIDDLEWARE)
    _write(root, "tests/builders/faulty.py", BUILDER)
    _write(root, "pytest.ini", "[pytest]\nconnic_worker_memory_mb = 1024\n")
    agents = {tool for tool, _ in CASES.values()}
    for tool in agents:
        _write(root, f"agents/{tool.replace('_', '-')}.yaml", yaml.safe_dump(
            {"version": "1.0", "name": tool.replace("_", "-"), "description": "a fault", "type": "tool",
             "tool_name": f"faults.{tool}"}, sort_keys=False))
    _write(root, "agents/hangs.yaml", yaml.safe_dump(
        {"version": "1.0", "name": "hangs", "description": "hangs", "type": "tool",
         "tool_name": "faults.hangs"}, sort_keys=False))
    _write(root, "agents/mw.yaml", yaml.safe_dump(
        {"version": "1.0", "name": "mw", "description": "middleware", "type": "tool",
         "tool_name": "faults.fine"}, sort_keys=False))
    suites: dict[str, list[dict[str, Any]]] = {}
    for name, (tool, extra) in CASES.items():
        agent = extra.get("agent", tool.replace("_", "-"))
        case: dict[str, Any] = {"name": name, "payload": json.dumps(extra.get("payload", {"case": name})),
                                "builder": "faulty", "builder_args": {"case": name, "mode": extra.get("mode")}}
        if "timeout_s" in extra:
            case["timeout_s"] = extra["timeout_s"]
        suites.setdefault(agent, []).append(case)
    for agent, cases in suites.items():
        _write(root, f"tests/{agent}.yaml", yaml.safe_dump({"agent": agent, "tests": cases}, sort_keys=False))


@dataclass
class Outcome:
    returncode: int
    output: str
    cases: dict[str, dict[str, Any]]
    junit: dict[str, ET.Element]
    cleanups: list[str]


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    root = tmp_path_factory.mktemp("isolation")
    _project(root)
    mode = ["-p", "no:xdist"]
    src = Path(__file__).resolve().parents[2] / "src"
    env = {**os.environ, "PYTHONPATH": str(src)}
    # a hang of pytest (at exit too) fails here instead of hanging the suite
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:timeout", *mode,
         "--connic-json", "report.json", "--junitxml", "junit.xml", "--connic-html", "report.html"],
        check=False, cwd=root, env=env, capture_output=True, text=True, timeout=240,
    )
    output = done.stdout + done.stderr
    report = json.loads((root / "report.json").read_text("utf-8"))
    cases = {c["test_name"]: c for c in report["cases"]}
    junit = {c.get("name", ""): c for c in ET.parse(root / "junit.xml").getroot().iter("testcase")}
    assert (root / "report.html").read_text("utf-8").startswith("<!DOCTYPE html>")
    cleanups = (root / "cleanups.txt").read_text("utf-8").splitlines() if (root / "cleanups.txt").exists() else []
    return Outcome(done.returncode, output, cases, junit, cleanups)


def _failed(session: Outcome, name: str, *fragments: str) -> None:
    """The case failed with ``fragments`` in its run's error; the other cases ran; its cleanup ran;
    every report holds every case; pytest exited with 1 (failed cases), no internal error."""
    assert session.returncode == 1, session.output[-4000:]
    assert "INTERNALERROR" not in session.output and "bug in pytest-connic" not in session.output
    assert sorted(session.cases) == sorted(CASES), session.output[-4000:]
    assert sorted(session.junit) == sorted(CASES)
    case = session.cases[name]
    assert not case["passed"]
    (run,) = case["runs_detail"]
    text = json.dumps(run)
    for fragment in fragments:
        assert fragment in text, text
    assert name in session.cleanups
    assert session.cases["fine"]["passed"] and session.cases["fine after"]["passed"]
    (problem,) = [e for e in session.junit[name] if e.tag in ("failure", "error")]
    assert fragments[0] in (problem.get("message") or "") + (problem.text or "")


def test_an_async_tool_looping_on_the_cpu_times_out(session: Outcome) -> None:
    _failed(session, "cpu loop", "run timed out after 1s (timeout_s)")


def test_an_async_tool_calling_time_sleep_times_out(session: Outcome) -> None:
    _failed(session, "time.sleep", "run timed out after 1s (timeout_s)")


def test_an_async_tool_swallowing_cancellation_times_out(session: Outcome) -> None:
    _failed(session, "swallowed cancel", "run timed out after 1s (timeout_s)")


def test_a_hanging_build_times_out_and_cleanup_runs(session: Outcome) -> None:
    _failed(session, "build hangs", "builder build timed out after 1s (timeout_s)")


def test_a_hanging_cleanup_times_out(session: Outcome) -> None:
    _failed(session, "cleanup hangs", "builder cleanup timed out after 1s (timeout_s)")


def test_os_exit_in_a_tool_is_that_runs_failure(session: Outcome) -> None:
    _failed(session, "os._exit", "the tool `faults.exits` ended its process with exit code 3")


def test_a_signal_ending_the_worker_is_that_runs_failure(session: Outcome) -> None:
    _failed(session, "sigkill", "the tool `faults.killed` was killed by signal 9 (SIGKILL)")


def test_memory_past_the_limit_is_that_runs_failure(session: Outcome) -> None:
    _failed(session, "memory", "the tool `faults.allocates` went past the memory limit of its worker process "
                               "(1024 MiB, ini connic_worker_memory_mb)")


def test_threads_left_behind_neither_fail_the_run_nor_hang_pytest(session: Outcome) -> None:
    assert session.cases["threads left"]["passed"]
    assert "threads left" in session.cleanups
    assert session.returncode == 1  # the session ended (the subprocess did not time out)


def test_keyboard_interrupt_from_a_tool_is_that_runs_error_located(session: Outcome) -> None:
    _failed(session, "tool interrupt", "the tool `faults.interrupts` raised KeyboardInterrupt: from a tool at "
                                       "tools/faults.py:")


def test_keyboard_interrupt_from_middleware_is_that_runs_error_located(session: Outcome) -> None:
    _failed(session, "middleware interrupt", "middleware before of agent 'mw' raised KeyboardInterrupt: "
                                             "from middleware at middleware/mw.py:2")


def test_keyboard_interrupt_from_build_is_that_runs_error_and_cleanup_runs(session: Outcome) -> None:
    _failed(session, "build interrupt", "builder 'faulty' build() raised KeyboardInterrupt: from build at "
                                        "tests/builders/faulty.py:")


def test_generator_exit_from_a_tool_is_that_runs_error(session: Outcome) -> None:
    _failed(session, "generator exit", "the tool `faults.generator_exit` raised GeneratorExit at tools/faults.py:")


def test_a_custom_base_exception_from_a_tool_is_that_runs_error(session: Outcome) -> None:
    _failed(session, "custom base exception", "the tool `faults.custom` raised Custom: mine at tools/faults.py:")


def test_a_childs_own_timeout_leaves_the_parents_call_in_the_same_worker_alone(session: Outcome) -> None:
    case = session.cases["child times out"]
    assert case["passed"], json.dumps(case)[:3000]
    (run,) = case["runs_detail"]
    assert run["output"] == {"child": "timeout"}


def test_a_tool_mutating_its_params_cannot_rewrite_the_record(session: Outcome) -> None:
    case = session.cases["mutated params"]
    assert case["passed"], json.dumps(case)[:3000]
    (run,) = case["runs_detail"]
    assert run["output"] == {"seen": 2}
    assert run["input"] == {"items": ["a"], "who": "the case"}
    (call,) = run["tool_calls"]
    assert call["params"] == {"payload": {"items": ["a"], "who": "the case"}}


# ------------------------------------------------------------------ --connic-isolation=none


def test_base_exceptions_are_that_runs_error_in_process_too(project: ConnicProject) -> None:
    """In-process (for pdb), a KeyboardInterrupt, a GeneratorExit or a custom BaseException of user
    code is still that run's error, located; later cases run."""
    project.tool("faults", FAULTS)
    for tool in ("interrupts", "generator_exit", "custom", "fine"):
        project.agent(tool.replace("_", "-"), type="tool", tool_name=f"faults.{tool}")
        project.suite(tool.replace("_", "-"), "tests:\n  - name: it\n    payload: '{}'\n")
    project.write("tests/builders/faulty.py", BUILDER)
    project.suite("fine", "tests:\n  - name: it\n    payload: '{}'\n"
                          "  - name: build interrupt\n    payload: '{}'\n    builder: faulty\n"
                          "    builder_args: {case: build interrupt, mode: interrupt_build}\n")
    result = project.run("-p", "no:timeout", "--connic-isolation=none", "--connic-json", "report.json")
    result.assert_outcomes(passed=1, failed=4)
    result.stdout.fnmatch_lines_random([
        "*the tool `faults.interrupts` raised KeyboardInterrupt: from a tool at tools/faults.py:*",
        "*the tool `faults.generator_exit` raised GeneratorExit at tools/faults.py:*",
        "*the tool `faults.custom` raised Custom: mine at tools/faults.py:*",
        "*builder 'faulty' build() raised KeyboardInterrupt: from build at tests/builders/faulty.py:*",
    ])
    report = json.loads((project.root / "report.json").read_text("utf-8"))
    assert len(report["cases"]) == 5
    assert (project.root / "cleanups.txt").read_text("utf-8").split("\n")[0] == "build interrupt"


def test_an_unknown_isolation_is_a_usage_error(project: ConnicProject) -> None:
    project.tool("faults", FAULTS)
    project.agent("fine", type="tool", tool_name="faults.fine")
    project.suite("fine", "tests:\n  - name: it\n    payload: '{}'\n")
    result = project.run("--connic-isolation=thread")
    result.stderr.fnmatch_lines(["*invalid value 'thread' from --connic-isolation: expected one of process, none*"])


def test_a_script_calling_pytest_main_without_a_guard_is_not_rerun_in_the_workers(project: ConnicProject) -> None:
    """multiprocessing re-runs the parent's main script in a spawned child: not in our workers."""
    project.tool("faults", FAULTS)
    project.agent("fine", type="tool", tool_name="faults.fine")
    project.suite("fine", "tests:\n  - name: it\n    payload: '{}'\n    runs: 2\n")
    project.write("run.py", """
import sys

import pytest

with open("started.txt", "a") as fh:
    fh.write("pytest\\n")
code = pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:randomly"])
sys.exit(int(code))
""")
    result = project.pytester.run(sys.executable, "run.py", timeout=120)
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert (project.root / "started.txt").read_text("utf-8") == "pytest\n"


@pytest.mark.parametrize("suite", [
    pytest.param("tests:\n  - name: it\n    payload: '{}'\n", id="a-run"),
    pytest.param("tests:\n  - name: it\n    payload: '{}'\n    files: [/etc/passwd]\n", id="no-run"),
])
def test_the_template_ends_on_its_own_when_the_session_ends(project: ConnicProject, suite: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The session's end closes the template's pipe while a reader thread polls it; the template
    reads the end and exits (code 0). Only closed, the polled socket stayed open and the template
    was killed (-9) after a 2 s wait, at the end of every session whose template ran no case."""
    from pytest_connic.execution.isolation import template as pool

    ended: list[int | None] = []
    close = pool.Template.close

    def recorded(template: pool.Template) -> None:
        close(template)
        ended.append(template.process.exitcode if template.process is not None else None)

    monkeypatch.setattr(pool.Template, "close", recorded)
    project.tool("faults", FAULTS)
    project.agent("fine", type="tool", tool_name="faults.fine")
    project.suite("fine", suite)
    project.run()
    assert ended == [0]
