"""pytest's process reads the project without executing it (docs/running.md, "Where user code
runs"): under process isolation a tool module that hangs, exits, crashes or writes a file at
import does so in a worker only, where it is that case's located error, bounded by its
``timeout_s``; every other case passes. Each session runs in a subprocess bounded by a timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.project import ConnicProject

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="worker processes are forked there")

SRC = str(Path(__file__).resolve().parents[2] / "src")

ECHO = '''
def echo(payload: dict) -> dict:
    return payload
'''

AT_IMPORT = {
    "slow": "import time\ntime.sleep(3600)\n",
    "exits": "import os\nos._exit(3)\n",
    "crashes": "import ctypes\nctypes.string_at(0)\n",
    "flags": "import os\nimport pathlib\npathlib.Path(f'imported-by-{os.getpid()}.txt').write_text('x')\n",
}


def _run(root: Path, *args: str) -> subprocess.Popen[str]:
    environment = {**os.environ, "PYTHONPATH": SRC}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:timeout",
               "-p", "no:xdist", "--connic-json", "report.json", *args]
    return subprocess.Popen(command, cwd=root, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def _cases(root: Path) -> dict[str, dict[str, Any]]:
    report = json.loads((root / "report.json").read_text("utf-8"))
    return {c["test_name"]: c for c in report["cases"]}


def test_what_a_tool_module_does_at_import_stays_in_a_worker(project: ConnicProject) -> None:
    project.tool("fine", ECHO)
    project.agent("fine", type="tool", tool_name="fine.echo")
    project.suite("fine", "tests:\n  - name: fine\n    payload: '{\"a\": 1}'\n")
    for name, code in AT_IMPORT.items():
        project.tool(name, code + ECHO)
        project.agent(name, type="tool", tool_name=f"{name}.echo")
        timeout_s = 3 if name == "slow" else 100  # an exit or a crash is reported at once, never as a timeout
        project.suite(name, f"tests:\n  - name: {name}\n    payload: '{{}}'\n    timeout_s: {timeout_s}\n")
    proc = _run(project.root, "-rA")
    try:
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    cases = _cases(project.root)
    assert cases["fine"]["passed"], out[-3000:]
    failed = {name: cases[name]["setup_error"] for name in AT_IMPORT}
    prefix = "the Connic project failed to load: "
    assert failed["slow"] == prefix + "importing tools/slow.py did not finish within 3s (timeout_s)", failed
    assert failed["exits"] == prefix + "importing tools/exits.py ended its process with exit code 3", failed
    assert failed["crashes"] == prefix + "importing tools/crashes.py was killed by signal 11 (SIGSEGV)", failed
    assert cases["flags"]["passed"], failed
    flagged = [int(p.stem.rsplit("-", 1)[1]) for p in project.root.glob("imported-by-*.txt")]
    assert flagged and proc.pid not in flagged, (proc.pid, flagged)
    assert proc.returncode == pytest.ExitCode.TESTS_FAILED, out[-3000:]


TYPED_TOOLS = '''
from typing import Literal

Unit = Literal["c", "f"]


def convert(value: float, unit: Unit, steps: list[int], weights: dict[str, float] | None = None,
            mode: Literal["fast", "exact"] = "fast") -> dict:
    """Convert a temperature.

    Args:
        value: the temperature
        unit: the unit it is in
    """
    return {"value": value}
'''

MIDDLEWARE_BROKEN = '''
import not_installed_anywhere


def before(content, context):
    return content
'''


@pytest.mark.parametrize("what", ["schemas", "import error", "middleware"])
def test_a_case_sees_the_same_agent_under_both_isolations(project: ConnicProject, what: str) -> None:
    """What the SDK's static reading cannot know (annotations it does not resolve, a module failing
    to import, middleware failing to load) comes from a worker's real load: the model is offered
    the same tools, and the verdict and its text are the same, under both isolations."""
    from helpers.models import ECHO_REQUEST_MODEL

    project.write("conftest.py", ECHO_REQUEST_MODEL)
    project.tool("temps", TYPED_TOOLS if what != "import error" else "import not_installed_anywhere\n" + TYPED_TOOLS)
    if what == "middleware":
        project.write("middleware/lab.py", MIDDLEWARE_BROKEN)
    project.agent("lab", tools=["temps.convert"])
    project.suite("lab", "tests:\n  - name: tools\n    payload: hi\n    expected_result: output.tools.convert\n")
    seen = {}
    for isolation in ("process", "none"):
        result = project.run(f"--connic-isolation={isolation}", "--connic-json", f"{isolation}.json", "-W",
                             "default")
        case = json.loads((project.root / f"{isolation}.json").read_text("utf-8"))["cases"][0]
        runs = case["runs_detail"]
        seen[isolation] = (case["status"], case["setup_error"], json.loads(runs[0]["output"])["tools"] if runs else None,
                           [line for line in result.outlines if "ConnicLoadWarning" in line])
    assert seen["process"] == seen["none"], seen
    status, setup_error, output, warnings = seen["none"]
    if what == "import error":
        assert status == "error" and "tools/temps.py:1: importing tools/temps.py raised ModuleNotFoundError" in \
            setup_error, setup_error
        return
    assert status == "passed"
    parameters = output["convert"]["parameters"]["properties"]
    assert parameters["unit"] == {"enum": ["c", "f"], "type": "string", "description": "the unit it is in"}, parameters
    assert parameters["steps"] == {"type": "array", "items": {"type": "integer"}}, parameters
    assert parameters["weights"] == {"type": "object", "additionalProperties": {"type": "number"}}, parameters
    if what == "middleware":
        assert any("the middleware of agent 'lab' failed to load" in w for w in warnings), warnings
