"""Under process isolation a run takes its worker at its first call of user code (issue 40): a
run that calls none (an LLM agent with predefined tools only, replayed) starts no worker, and a
run that calls a tool still gets a fresh one. Counted on a real pool, below pytest."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from helpers.harness import CaseProject
from pytest_connic.execution.isolation.pool import Lease, WorkerPool, WorkerSpawnError, WorkerStartError
from pytest_connic.execution.isolation.template import Template
from pytest_connic.runtime.signals import InfrastructureFailure, RunFailed

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="workers are forked")

TOOLS = '''
import os


def pid(payload: dict, context: dict) -> dict:
    return {"pid": os.getpid()}
'''

SUITE = '''
tests:
  - name: a
    payload: orders of Ann?
    expected_result: status == "completed"
  - name: b
    payload: orders of Ann?
    expected_result: status == "completed"
  - name: c
    payload: orders of Ann?
    expected_result: status == "completed"
'''


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many workers were taken from the pool (``WorkerPool.acquire``) and forked (``Template.fork``)."""
    counts = {"acquired": 0, "forked": 0}
    acquire, fork = WorkerPool.acquire, Template.fork

    async def acquiring(self: WorkerPool, timeout_s: float | None = None) -> Any:
        counts["acquired"] += 1
        return await acquire(self, timeout_s)

    def forking(self: Template, *args: Any, **kwargs: Any) -> None:
        counts["forked"] += 1
        fork(self, *args, **kwargs)

    monkeypatch.setattr(WorkerPool, "acquire", acquiring)
    monkeypatch.setattr(Template, "fork", forking)
    return counts


def test_a_run_that_calls_no_user_code_takes_no_worker(case_project: CaseProject, counted: dict[str, int]) -> None:
    """The project has user code (a tool of another agent), so a template runs; the LLM agent's
    runs call only the predefined ``db_find`` and the model (replayed): only describing the agent
    at its first case took a worker, however many runs follow."""
    case_project.tool("ids", TOOLS)
    case_project.agent("ids", type="tool", tool_name="ids.pid")
    case_project.agent("shop", tools=["db_find"])
    case_project.suite("shop", SUITE)
    for name in "abc":
        case_project.replies("shop", name, [("db_find", {"collection": "orders", "filter": {"name": "Ann"}})],
                             "Ann has no orders.")
    outcomes = case_project.cases("shop", "a", "b", "c", isolation="process")
    assert all(o.verdict_passed for o in outcomes.values()), [r.failures for o in outcomes.values() for r in o.records]
    assert all(r.tool_calls and r.tool_calls[0].name == "db_find" for o in outcomes.values() for r in o.records)
    assert counted["acquired"] == 1  # the agent's description, once: no run took one
    assert counted["forked"] <= 2  # that worker and the one forked ahead of the next run


def test_a_run_that_calls_a_tool_still_gets_a_fresh_worker(case_project: CaseProject,
                                                            counted: dict[str, int]) -> None:
    case_project.tool("ids", TOOLS)
    case_project.agent("ids", type="tool", tool_name="ids.pid")
    case_project.suite("ids", SUITE)
    outcomes = case_project.cases("ids", "a", "b", "c", isolation="process")
    records = [r for o in outcomes.values() for r in o.records]
    assert all(r.status == "completed" for r in records), [r.failures for r in records]
    pids = {r.output["pid"] for r in records}  # type: ignore[index]
    assert len(pids) == 3 and os.getpid() not in pids
    assert counted["acquired"] == 1 + 3  # the description, then one fresh worker per run


class _Refusing:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def reference(self, func: object) -> None:
        return None

    async def acquire(self, timeout_s: float | None = None) -> Any:
        raise self.error


@pytest.mark.parametrize(("error", "signal"), [
    (WorkerSpawnError("a worker process could not start: OSError: [Errno 11] Resource temporarily unavailable"),
     InfrastructureFailure),
    (WorkerStartError("a worker process could not load the project: SyntaxError"), RunFailed),
])
def test_a_worker_that_cannot_start_at_the_first_call_ends_the_run(error: Exception, signal: type) -> None:
    """Taken at the run's first call: no process is the run's infrastructure error (exit 2), a
    project that does not load its failure, not an exception of the tool the model would read."""
    lease = Lease(_Refusing(error))  # type: ignore[arg-type]
    with pytest.raises(signal, match=str(error).replace("[", r"\[").replace("]", r"\]")) as raised:
        asyncio.run(lease.call(("module", "tools.ids", "pid"), "the tool `ids.pid`", (), {}))
    assert type(raised.value) is signal


def test_a_turns_first_calls_share_the_one_worker_they_take(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                           counted: dict[str, int]) -> None:
    """Two calls of one model turn that both find no worker yet (the run's first calls, at once)
    take one worker between them: they run in the same process."""
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "ids.yaml").write_text("version: '1.0'\nname: ids\ntype: tool\ntool_name: ids.pid\n")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "ids.py").write_text(TOOLS)
    monkeypatch.chdir(tmp_path)
    pool = WorkerPool(tmp_path, size=2)

    async def main() -> list[Any]:
        lease = pool.lease(60)
        try:
            return list(await asyncio.gather(*(lease.call(("module", "tools.ids", "pid"), "pid", ({}, {}), {})
                                               for _ in range(3))))
        finally:
            await lease.release()

    try:
        results = asyncio.run(main())
    finally:
        pool.close()
    assert len({r["pid"] for r in results}) == 1 and counted["acquired"] == 1
