"""pytest-timeout: each case gets a timeout derived from its runs; an explicit timeout wins."""

from __future__ import annotations

import pytest

from helpers.project import ConnicProject
from pytest_connic.plugin.timeouts import case_timeout

pytest.importorskip("pytest_timeout")

SUITE = """
defaults:
  timeout_s: 5
tests:
  - name: four runs
    runs: 4
    payload: '{"x": 1}'
  - name: one run
    payload: '{"x": 1}'
    timeout_s: 7
"""
#: pytest-timeout's own hook tells which timeout it applies to each item
RECORD_TIMER = """
import pathlib


def pytest_timeout_set_timer(item, settings):
    with pathlib.Path("timers.txt").open("a") as out:
        out.write(f"{item.name}={settings.timeout}\\n")
"""


def timers(project: ConnicProject) -> dict[str, str]:
    lines = (project.root / "timers.txt").read_text("utf-8").splitlines()
    return dict(line.split("=", 1) for line in lines)


@pytest.fixture
def echo(calc: ConnicProject) -> ConnicProject:
    calc.suite("echo", SUITE)
    calc.write("conftest.py", RECORD_TIMER)
    return calc


def test_case_timeout_formula() -> None:
    assert case_timeout(runs=4, timeout_s=5, concurrency=2) == 2 * 5 + 30
    assert case_timeout(runs=4, timeout_s=5, concurrency=8) == 5 + 30
    assert case_timeout(runs=20, timeout_s=60, concurrency=1) == 20 * 60 + 30
    # build(), the run and cleanup() are each bounded by timeout_s: the backstop leaves room for all three
    assert case_timeout(runs=4, timeout_s=5, concurrency=2, builder=True) == 2 * 5 * 3 + 30


def test_each_case_gets_a_timeout_from_its_runs(echo: ConnicProject) -> None:
    # the agent sets no max_concurrent_runs: Connic's default 1 runs the four runs one after another
    result = echo.run("--connic-concurrency", "2")
    result.assert_outcomes(passed=2)
    assert timers(echo) == {"four runs": "50.0", "one run": "37.0"}


def test_the_timeouts_also_when_pytest_timeout_is_loaded_by_its_module_name(echo: ConnicProject) -> None:
    # `-p pytest_timeout` registers the plugin under its module name, not its entry point's; the
    # agents allow 8 runs at once, --connic-concurrency 2 of them: two waves
    echo.write("agents/_defaults.yaml", "max_concurrent_runs: 8\n")
    result = echo.run("-p", "no:timeout", "-p", "pytest_timeout", "--connic-concurrency", "2")
    result.assert_outcomes(passed=2)
    assert timers(echo) == {"four runs": "40.0", "one run": "37.0"}


@pytest.mark.parametrize(
    ("args", "ini", "expected"),
    [
        (["--timeout", "123"], "", "123.0"),
        (["--timeout", "0"], "", None),  # 0 means "no timeout": the user's choice too
        ([], "timeout = 77\n", "77.0"),
    ],
)
def test_an_explicit_timeout_wins(echo: ConnicProject, args: list[str], ini: str, expected: str | None) -> None:
    if ini:
        echo.pytester.makeini("[pytest]\n" + ini)
    result = echo.run(*args)
    result.assert_outcomes(passed=2)
    if expected is None:  # pytest-timeout sets no timer at all
        assert not (echo.root / "timers.txt").exists()
    else:
        assert timers(echo) == {"four runs": expected, "one run": expected}


def test_pytest_timeout_environment_variable_wins(echo: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_TIMEOUT", "55")
    echo.run().assert_outcomes(passed=2)
    assert timers(echo) == {"four runs": "55.0", "one run": "55.0"}


def test_without_pytest_timeout_nothing_breaks(echo: ConnicProject) -> None:
    echo.write("conftest.py", "")
    result = echo.run("-p", "no:timeout")
    result.assert_outcomes(passed=2)


SLOW_TOOL = '''
import time


def slow(payload: dict) -> dict:
    """Sleep longer than the explicit timeout."""
    time.sleep(3)
    return payload
'''


def test_explicit_timeout_interrupts_a_slow_case(project: ConnicProject) -> None:
    project.tool("sleepy", SLOW_TOOL)
    project.agent("sleeper", type="tool", tool_name="sleepy.slow")
    project.suite("sleeper", "tests:\n  - name: naps\n    payload: '{\"x\": 1}'\n")
    result = project.run("--timeout", "1")
    outcomes = result.parseoutcomes()  # the runs happen in setup: an error there, else a failure
    assert outcomes.get("failed", 0) + outcomes.get("errors", outcomes.get("error", 0)) == 1
    assert "passed" not in outcomes
    result.stdout.fnmatch_lines(["*Timeout (>1.0s) from pytest-timeout*"])


HANGING_TOOL = '''
import time


def slow(payload: dict) -> dict:
    """Hangs far beyond the timeout."""
    time.sleep(600)
    return payload
'''


@pytest.fixture
def hanging(project: ConnicProject) -> ConnicProject:
    project.tool("sleepy", HANGING_TOOL)
    project.agent("sleeper", type="tool", tool_name="sleepy.slow")
    project.suite("sleeper", "tests:\n  - name: naps\n    payload: '{\"x\": 1}'\n")
    return project


@pytest.mark.parametrize("method", ["signal", "thread"])
def test_a_timeout_shows_the_cases_line_not_the_plugins_threads(hanging: ConnicProject, method: str) -> None:
    """Under process isolation pytest's process only waits for the worker: the report is the case's
    located line, without pytest-timeout's dump of the plugin's threads."""
    result = hanging.run_subprocess("-p", "no:xdist", "--timeout=3", f"--timeout-method={method}")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*tests/sleeper.yaml:2: case 'naps' (sleeper): *Timeout (>3.0s) from pytest-timeout."])
    out = result.stdout.str()
    assert "Stack of" not in out and "pytest_connic" not in out and "site-packages" not in out, out
    if method == "thread":  # pytest-timeout's thread method ends the session
        assert "+++ Timeout +++" in out and "connic results" not in out


@pytest.mark.parametrize("method", ["signal", "thread"])
def test_a_timeout_shows_the_users_stack_under_isolation_none(hanging: ConnicProject, method: str) -> None:
    """With user code in pytest's process, the stack of the thread running the tool is shown from
    the first user frame on, and no other thread's."""
    result = hanging.run_subprocess("-p", "no:xdist", "--timeout=3", f"--timeout-method={method}",
                                    "--connic-isolation=none")
    result.stdout.fnmatch_lines(["*tests/sleeper.yaml:2: case 'naps' (sleeper): *Timeout (>3.0s) from pytest-timeout.",
                                 "*Stack of user code (*)*", '  File "*/tools/sleepy.py", line 6, in slow',
                                 "    time.sleep(600)"])
    out = result.stdout.str()
    # Counted as separator lines: on CI pytest does not shorten the short summary, which then
    # repeats the whole message on its FAILED line.
    stacks = [line for line in result.stdout.lines if line.startswith("~") and "Stack of" in line]
    assert len(stacks) == 1 and "pytest_connic" not in out, out
