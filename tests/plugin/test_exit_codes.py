"""Exit codes as Connic's: 1 for a suite Connic cannot run (an unknown agent, a project that fails
to load, a suite that does not validate), 2 only for infrastructure (a provider down, a worker
process that cannot start). The pytest wiring of each is in tests/plugin/test_collect.py,
test_collection_checks.py (collection errors), test_report_consistency.py and
test_reports_plugin.py (a provider down)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pytest_connic.plugin.reporting import collection_exit_code

OK, FAILED, INTERRUPTED = pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED


@pytest.mark.parametrize(("status", "interrupted", "errors", "suites", "expected"), [
    (INTERRUPTED, False, 1, 1, FAILED),  # an unknown agent: pytest stopped after collection
    (INTERRUPTED, False, 3, 3, FAILED),  # every error a suite (a project that fails to load, invalid suites)
    (INTERRUPTED, False, 2, 1, INTERRUPTED),  # a Python test module failed to collect too: pytest's code
    (INTERRUPTED, True, 1, 1, INTERRUPTED),  # Ctrl-C, SIGTERM, a stop: a real interruption
    (INTERRUPTED, False, 0, 0, INTERRUPTED),  # interrupted with no collection error
    (FAILED, False, 1, 1, FAILED),  # --continue-on-collection-errors, xdist: pytest's 1 already
    (OK, False, 0, 0, OK),
    (pytest.ExitCode.USAGE_ERROR, False, 1, 1, pytest.ExitCode.USAGE_ERROR),
])
def test_collection_errors_of_suites_alone_exit_1(status: pytest.ExitCode, interrupted: bool, errors: int,
                                                  suites: int, expected: pytest.ExitCode) -> None:
    assert collection_exit_code(status, interrupted=interrupted, collection_errors=errors,
                                suite_errors=suites) == expected


class _FailingLease:
    def __init__(self, error: Exception) -> None:
        self.error = error
        self.released = False

    async def acquire(self) -> None:
        raise self.error

    async def release(self) -> None:
        self.released = True


@pytest.mark.parametrize(("kind", "message", "infrastructure"), [
    ("spawn", "a worker process could not start: OSError: [Errno 11] Resource temporarily unavailable", True),
    ("start", "a worker process did not finish importing tools/slow.py within 5s (timeout_s)", False),
    ("start", "a worker process could not load the project: SyntaxError", False),
])
def test_a_worker_that_cannot_start_is_an_infrastructure_error_and_a_project_that_cannot_load_a_failure(
        kind: str, message: str, infrastructure: bool) -> None:
    """A run whose worker process cannot start (no process, a failed fork) cannot run: the
    machine's trouble, an infrastructure error (the case an error, exit 2); a project whose modules
    hang or fail at import is the suite author's (a failed run, exit 1)."""
    from pytest_connic.execution.case import CaseRun
    from pytest_connic.execution.interruption import StopSignal
    from pytest_connic.execution.isolation.pool import WorkerSpawnError, WorkerStartError

    error = (WorkerSpawnError if kind == "spawn" else WorkerStartError)(message)
    lease = _FailingLease(error)
    pool: Any = type("Pool", (), {"lease": lambda self, timeout_s: lease})()
    runtime: Any = type("Runtime", (), {"pool": pool, "stop": StopSignal()})()
    run: Any = CaseRun.__new__(CaseRun)
    run.runtime, run.case, run.agent_name = runtime, {"timeout_s": 5}, "orders"
    record = asyncio.run(run._lease(True, 2))  # a builder's run: its worker taken before the run
    assert lease.released and record.status == "failed" and record.error == message
    if infrastructure:
        assert (record.infrastructure_error, record.failures) == (message, [])
    else:
        assert (record.infrastructure_error, record.failures) == (None, [message])


def test_a_worker_that_cannot_start_for_the_first_run_of_an_agent_is_an_infrastructure_error() -> None:
    """The agent's first case describes it in a worker first (``ProjectRuntime.describe``): no
    process there is the case's infrastructure error too, on every run, not a project that fails
    to load."""
    from pytest_connic.execution.case import CaseRun
    from pytest_connic.execution.isolation.pool import WorkerSpawnError
    from pytest_connic.execution.outcomes import new_outcome

    message = "a worker process could not start: no worker was forked within 30s"

    async def describe(agent_name: str, timeout_s: float) -> None:
        raise WorkerSpawnError(message)

    run: Any = CaseRun.__new__(CaseRun)
    run.runtime = type("Runtime", (), {"describe": staticmethod(describe)})()
    run.agent_name, run.case = "orders", {"timeout_s": 5}
    run.outcome = new_outcome("tests/orders.yaml::a", "tests/orders.yaml", 3, "orders", "a", runs=2,
                              success_threshold=100)
    asyncio.run(run.run())
    assert run.outcome.status == "error" and run.outcome.infrastructure_error == message
    assert [(r.index, r.status, r.infrastructure_error) for r in run.outcome.records] == [
        (0, "failed", message), (1, "failed", message)]
