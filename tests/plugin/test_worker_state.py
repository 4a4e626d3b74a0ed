"""A clean worker for every run, and every process of user code ending with its run
(docs/running.md, "Where user code runs"), tried as a hostile user would: a tool that changes its
worker's process state, patches the plugin's worker code, detaches processes (``setsid``, a
``start_new_session`` daemon), exits after detaching, raises ``KeyboardInterrupt`` or calls
``sys.exit`` from an ``async def``, or hangs at import in the worker. Each session runs in a
subprocess bounded by a generous timeout; "promptly" is proved by the session's own words (an exit
code reported, not a timeout), never by the clock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from helpers.project import ConnicProject

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process trees are kept on Linux")

SRC = str(Path(__file__).resolve().parents[2] / "src")

STATE_TOOLS = '''
import os
import resource
import signal
import sys


def _state() -> dict:
    return {
        "pid": os.getpid(), "umask": os.umask(0o022), "leak": os.environ.get("CONNIC_LEAK"),
        "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0], "cwd": os.getcwd(),
        "recursion": sys.getrecursionlimit(), "alarm": signal.getitimer(signal.ITIMER_REAL)[0],
        "fds": [os.fstat(fd).st_ino for fd in (0, 1, 2)],
    }


def observe(payload: dict) -> dict:
    """What the worker's state is; prints to both streams."""
    state = _state()
    os.umask(state["umask"])
    print("stdout-of-" + payload["who"], flush=True)
    print("stderr-of-" + payload["who"], file=sys.stderr, flush=True)
    return state


def dirty(payload: dict) -> dict:
    """Changes every piece of process state it can."""
    signal.alarm(1)
    os.umask(0o077)
    os.environ["CONNIC_LEAK"] = "1"
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
    sys.setrecursionlimit(77)
    os.chdir("/")
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(2)
    return {"dirty": True}


def waits(payload: dict) -> dict:
    """Outlives the alarm the dirty tool set (it must not kill this run)."""
    import time

    time.sleep(1.5)
    return observe(payload)


def forges(payload: dict) -> dict:
    """Patches the plugin's worker code so that every later call "passes"."""
    from pytest_connic.execution.isolation import worker

    original = worker._Worker._reply

    def forged(self, cid, exc, result, *rest):
        return original(self, cid, None, {"forged": True}, *rest)

    worker._Worker._reply = forged
    return {"patched": True}


def raises(payload: dict) -> dict:
    raise ValueError("a real failure")


def act(payload: dict) -> dict:
    """The tool agent's body: what the payload names."""
    return globals()[payload["do"]](payload)
'''


def _tool_agent(project: ConnicProject, tool: str, module: str = "state") -> None:
    project.agent(tool, type="tool", tool_name=f"{module}.{tool}")


def _run(root: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """pytest in a subprocess, its stdout a pipe (as ``pytest -s | cat``): it must return when
    pytest exits, whatever user code left behind."""
    environment = {**os.environ, "PYTHONPATH": SRC, **(env or {})}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:timeout",
               "-p", "no:xdist", "--connic-json", "report.json", *args]
    return subprocess.run(command, cwd=root, env=environment, capture_output=True, text=True, timeout=timeout,
                          check=False)


def _cases(root: Path) -> dict[str, dict[str, Any]]:
    report = json.loads((root / "report.json").read_text("utf-8"))
    return {c["test_name"]: c for c in report["cases"]}


def _output(case: dict[str, Any]) -> Any:
    (run,) = case["runs_detail"]
    return run["output"]


def test_a_worker_serves_the_next_case_as_a_fresh_worker_would(project: ConnicProject) -> None:
    project.tool("state", STATE_TOOLS)
    _tool_agent(project, "act")
    project.suite("act", "tests:\n" + "".join(
        f"  - name: {name}\n    payload: '{{\"who\": \"{name}\", \"do\": \"{do}\"}}'\n"
        for name, do in [("a before", "observe"), ("b dirty", "dirty"), ("c after", "waits"),
                         ("d forges", "forges"), ("e raises", "raises"), ("f last", "observe")]))
    # one case after another, on one worker at a time
    done = _run(project.root, "-s", "--connic-concurrency", "1")
    cases = _cases(project.root)
    before, after = _output(cases["a before"]), _output(cases["c after"])
    assert cases["c after"]["passed"], done.stdout[-3000:]
    assert after["pid"] != before["pid"]  # every run has a worker of its own
    assert {k: v for k, v in after.items() if k != "pid"} == {k: v for k, v in before.items() if k != "pid"}
    # the verdict of a later case is not forged by the patch
    assert not cases["e raises"]["passed"]
    assert "a real failure" in json.dumps(cases["e raises"]["runs_detail"])
    assert _output(cases["f last"])["pid"] != before["pid"]
    assert {k: v for k, v in _output(cases["f last"]).items() if k != "pid"} == \
        {k: v for k, v in before.items() if k != "pid"}
    # fd 1 and 2 were put back: the later cases' prints reach pytest's streams
    for who in ("c after", "f last"):
        assert f"stdout-of-{who}" in done.stdout
        assert f"stderr-of-{who}" in done.stdout + done.stderr
    assert done.returncode == 1  # "e raises" failed; nothing else


ESCAPES = '''
import os
import subprocess
import sys
import time


def escape(payload: dict) -> dict:
    """A start_new_session daemon and a setsid grandchild, left running; then maybe os._exit."""
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True,
                     stdout=sys.stdout.fileno(), stderr=sys.stderr.fileno())
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(300)
        os._exit(0)
    os.waitpid(pid, 0)
    if payload.get("exit"):
        os._exit(3)
    return {"left": "behind"}


async def act(payload: dict) -> dict:
    if payload.get("fine"):
        return {"fine": True}
    return escape(payload)
'''


def _marked(marker: str) -> list[str]:
    """The processes whose environment carries ``marker`` (its pid and session id each)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if marker.encode() in environ and ") Z " not in stat:
            found.append(f"{entry} (session {stat.rsplit(')', 1)[1].split()[4]})")
    return found


def _none_left(marker: str) -> list[str]:
    """The marked processes still there after a grace for the kernel to reap the killed ones."""
    import time

    for _ in range(100):  # a hang guard, not a measurement: up to 10 s
        left = _marked(marker)
        if not left:
            return []
        time.sleep(0.1)
    return left


def test_no_process_of_the_session_outlives_it_and_an_exit_is_reported_at_once(project: ConnicProject) -> None:
    project.tool("esc", ESCAPES)
    _tool_agent(project, "act", "esc")
    project.suite("act", """
        tests:
          - name: leaves processes
            payload: '{}'
          - name: exits after detaching
            payload: '{"exit": true}'
            timeout_s: 60
          - name: next
            payload: '{"fine": true}'
        """)
    marker = f"CONNIC_TEST_MARK_{uuid.uuid4().hex}"
    # stdout is a pipe: subprocess.run returns only once no process holds it (``pytest -s | cat``)
    done = _run(project.root, "-s", "--connic-concurrency", "1", env={marker: "1"}, timeout=170)
    cases = _cases(project.root)
    assert cases["leaves processes"]["passed"], done.stdout[-3000:]
    error = cases["exits after detaching"]["runs_detail"][0]["error"]
    assert "the tool `esc.act` ended its process with exit code 3" in error
    assert "timed out" not in error
    assert cases["next"]["passed"]
    assert _none_left(marker) == []


BASE_EXCEPTIONS = '''
import sys


async def interrupts(payload: dict) -> dict:
    raise KeyboardInterrupt("from an async tool")


async def exits(payload: dict) -> dict:
    sys.exit(3)


async def act(payload: dict) -> dict:
    if payload["do"] == "interrupt":
        raise KeyboardInterrupt("from an async tool")
    if payload["do"] == "exit":
        sys.exit(3)
    return {"fine": True}
'''


def test_an_async_tools_base_exception_ends_its_run_at_once(project: ConnicProject) -> None:
    project.tool("base", BASE_EXCEPTIONS)
    _tool_agent(project, "act", "base")
    project.suite("act", """
        tests:
          - name: interrupt
            payload: '{"do": "interrupt"}'
            timeout_s: 60
          - name: exit
            payload: '{"do": "exit"}'
            timeout_s: 60
          - name: fine
            payload: '{"do": "fine"}'
        """)
    done = _run(project.root, "--connic-concurrency", "1")
    cases = _cases(project.root)
    interrupt = cases["interrupt"]["runs_detail"][0]["error"]
    assert "the tool `base.act` raised KeyboardInterrupt: from an async tool at tools/base.py:" in interrupt
    assert "sys.exit(3) was called" in cases["exit"]["runs_detail"][0]["error"]
    assert cases["fine"]["passed"]
    output = done.stdout + done.stderr
    assert "timed out" not in output
    assert "connic-worker-loop" not in output and "Exception in thread" not in output


HANGS_IN_WORKER = '''
import multiprocessing
import time

if multiprocessing.parent_process() is not None:  # a worker process, not pytest's
    time.sleep(3600)


def echo(payload: dict) -> dict:
    return payload
'''


def test_a_hanging_import_in_the_worker_is_bounded_by_the_cases_timeout(project: ConnicProject) -> None:
    project.tool("slow", HANGS_IN_WORKER)
    _tool_agent(project, "echo", "slow")
    project.suite("echo", "tests:\n  - name: one\n    payload: '{}'\n    timeout_s: 2\n"
                          "  - name: two\n    payload: '{}'\n    timeout_s: 2\n")
    _run(project.root)
    cases = _cases(project.root)
    for name in ("one", "two"):
        assert not cases[name]["passed"]
        error = cases[name]["setup_error"]
        assert error == ("the Connic project failed to load: importing tools/slow.py did not finish within 2s "
                         "(timeout_s)"), error


CPU = '''
import os
import pathlib


async def spins(payload: dict) -> dict:
    """Blocks its worker's event loop for good."""
    pathlib.Path("spun.pid").write_text(str(os.getpid()))
    while True:
        pass


async def act(payload: dict) -> dict:
    if payload.get("spin"):
        return await spins(payload)
    return await checks(payload)


async def checks(payload: dict) -> dict:
    """Runs normally on the pool; the worker that timed out is gone."""
    import asyncio

    pid = int(pathlib.Path("spun.pid").read_text())
    for _ in range(100):  # its kill is asynchronous: up to 10 s
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return {"gone": True, "me": os.getpid() != pid}
        await asyncio.sleep(0.1)
    return {"gone": False}
'''


CLEANUP_AFTER_SPIN = '''
import json
import os
import pathlib


def build(context, builder_args, test_name, payload, files):
    return payload


def _alive(pid):
    try:  # a zombie (killed, not reaped yet) is gone too
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def cleanup(run, context, builder_args):
    """Runs right after the timeout, before the run's lease ends: on a worker of its own. SIGKILL
    is sent at once, but a process spinning on another CPU takes a moment to die: a bounded wait
    (the run's lease, which would kill it otherwise, only ends after this cleanup)."""
    import asyncio

    pid = int(pathlib.Path("spun.pid").read_text())
    for _ in range(30):
        alive = _alive(pid)
        if not alive:
            break
        await asyncio.sleep(0.1)
    pathlib.Path("cleanup.json").write_text(json.dumps({"spinner_alive": alive, "me": os.getpid() != pid}))
'''


def test_after_a_timeout_its_worker_is_gone_and_the_next_async_tool_runs(project: ConnicProject) -> None:
    """Issue 30: ``Lease.call`` kills the worker of a run that timed out, at once: the builder's
    ``cleanup()`` that follows (an ``async def``, which a spinning event loop would never run)
    runs on a fresh worker and finds the spinning one gone; the next case's async tool runs."""
    project.tool("cpu", CPU)
    _tool_agent(project, "act", "cpu")
    project.write("tests/builders/spin.py", CLEANUP_AFTER_SPIN)
    project.suite("act", """
        tests:
          - name: times out
            payload: '{"spin": true}'
            builder: spin
            timeout_s: 1
          - name: next
            payload: '{}'
            timeout_s: 60
        """)
    _run(project.root, "--connic-concurrency", "1")
    cases = _cases(project.root)
    assert "run timed out after 1s (timeout_s)" in cases["times out"]["runs_detail"][0]["error"]
    assert json.loads((project.root / "cleanup.json").read_text()) == {"spinner_alive": False, "me": True}
    assert _output(cases["next"]) == {"gone": True, "me": True}


def _signalled(root: Path, signum: int, *args: str) -> tuple[int, str]:
    """pytest in a subprocess, sent ``signum`` once ``ready.txt`` appears (user code writes it)."""
    import signal
    import time

    env = {**os.environ, "PYTHONPATH": SRC, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:timeout",
               "-p", "no:xdist", "--connic-json", "report.json", *args]
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


SLOW_IMPORT = '''
import multiprocessing
import pathlib
import time

if {where}:
    pathlib.Path("ready.txt").write_text("importing")
    time.sleep(3600)


def echo(payload: dict) -> dict:
    return payload
'''


@pytest.mark.parametrize("where", ["pytest", "worker"])
def test_sigterm_during_a_hanging_project_import_stops_the_session(project: ConnicProject, where: str) -> None:
    """In pytest's process (``--connic-isolation=none``: it imports the project itself) or in a
    worker: the session stops on the signal, interrupted, with the case in the report (a hang would
    time out here)."""
    condition = "multiprocessing.parent_process() " + ("is None" if where == "pytest" else "is not None")
    project.tool("slow", SLOW_IMPORT.format(where=condition))
    _tool_agent(project, "echo", "slow")
    project.suite("echo", "tests:\n  - name: one\n    payload: '{}'\n    timeout_s: 100\n")
    isolation = ["--connic-isolation=none"] if where == "pytest" else []
    code, out = _signalled(project.root, __import__("signal").SIGTERM, *isolation)
    assert code == pytest.ExitCode.INTERRUPTED, out[-3000:]
    assert "interrupted by SIGTERM" in out
    assert "INTERNALERROR" not in out
    assert {c["test_name"]: c["status"] for c in _cases(project.root).values()} == {"one": "interrupted"}


GLOBALS = '''
import connic
from tools import shared

COUNT = 0
CACHE: dict = {}


def mutate(payload: dict) -> dict:
    """What it sees, then changes every kind of module-level state: a counter, a cache, another
    project module's global and function, and the SDK module itself."""
    global COUNT
    seen = {"count": COUNT, "cache": dict(CACHE), "shared": shared.VALUE, "greet": shared.greet(),
            "connic": getattr(connic, "FORGED", None)}
    COUNT += 1
    CACHE[payload.get("who", "?")] = True
    shared.VALUE = "changed"
    shared.greet = lambda: "patched"
    connic.FORGED = "yes"
    return seen
'''

SHARED = '''
VALUE = "pristine"


def greet() -> str:
    return "hello"
'''

PRISTINE = {"count": 0, "cache": {}, "shared": "pristine", "greet": "hello", "connic": None}


@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_module_globals_a_run_changes_are_pristine_in_every_later_run(project: ConnicProject,
                                                                     concurrency: str) -> None:
    """A tool mutating module globals (its own, another project module's, ``connic``'s): every run
    of every case starts from the project as loaded, with one worker at a time and with several."""
    project.tool("shared", SHARED)
    project.tool("glob", GLOBALS)
    project.agent("mutate", type="tool", tool_name="glob.mutate", max_concurrent_runs=4)  # several at once
    project.suite("mutate", """
        tests:
          - name: first
            payload: '{"who": "first"}'
            runs: 3
          - name: second
            payload: '{"who": "second"}'
            runs: 3
        """)
    done = _run(project.root, "--connic-concurrency", concurrency)
    cases = _cases(project.root)
    for name in ("first", "second"):
        assert cases[name]["passed"], done.stdout[-3000:]
        outputs = [run["output"] for run in cases[name]["runs_detail"]]
        assert outputs == [PRISTINE] * 3


SPEAKS = '''
import sys
import warnings


def speak(payload: dict) -> dict:
    """Print, write to stderr and warn, then fail the case's check."""
    print("out-" + payload["who"])
    print("err-" + payload["who"], file=sys.stderr)
    warnings.warn("warn-" + payload["who"])
    return {"ok": False}
'''


def test_a_workers_output_is_captured_with_its_case(project: ConnicProject) -> None:
    """Workers are forked from a template started while pytest collects (when pytest's capture is
    suspended): each still writes where pytest's process writes when its run starts, so a tool's
    stdout, stderr and warnings are its case's captured sections, never loose on the terminal;
    under ``-s`` they reach the terminal."""
    project.tool("speak", SPEAKS)
    _tool_agent(project, "speak", "speak")
    project.suite("speak", """
        tests:
          - name: first
            payload: '{"who": "first"}'
            expected_result: output.ok == true
          - name: second
            payload: '{"who": "second"}'
            expected_result: output.ok == true
        """)
    done = _run(project.root, "-rA")
    lines = done.stdout.splitlines()
    for who in ("first", "second"):
        head = next(i for i, line in enumerate(lines) if line.startswith("_") and f"speak::{who}" in line)
        section = lines[head:head + 40]
        assert "Captured stdout call" in "\n".join(section), done.stdout[-3000:]
        assert f"out-{who}" in section and f"err-{who}" in section, done.stdout[-3000:]
        assert any(f"UserWarning: warn-{who}" in line for line in section)
    progress = next(line for line in lines if line.startswith("tests/speak.yaml"))
    assert progress.startswith("tests/speak.yaml FF"), progress  # nothing printed into the progress line
    loose = _run(project.root, "-s")
    assert "out-first" in loose.stdout and "err-first" in loose.stderr + loose.stdout
