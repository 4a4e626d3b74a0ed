"""How many runs of a case execute at once, below pytest: Connic's ``max_concurrent_runs`` defaults
to 1 ("default 1; minimum 1", connic-skill agent-yaml.md), so an agent that sets nothing has its
runs serialised; a higher cap lets that many overlap; ``--connic-concurrency`` caps further.

The cases run through the real runtime (``ProjectRuntime.execute``, user code in this process) over
a project on disk whose tool checks, then inserts, through the local predefined ``db_find`` and
``db_insert``. Overlap is proven by a barrier the runs must all reach (a hang guard bounds it),
never by timing; the pytest wiring is tests/plugin/test_fidelity_concurrency.py.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_connic.execution.case import ProjectRuntime, RuntimeOptions
from pytest_connic.execution.concurrency import case_concurrency, run_cap
from pytest_connic.execution.models import ModelSource
from pytest_connic.execution.outcomes import new_outcome
from pytest_connic.execution.target import CaseTarget, resolve_case
from pytest_connic.project.loaded import LoadedProject
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.runtime import placeholders
from pytest_connic.runtime.ports import NullHost
from pytest_connic.secrets import Masker

#: check-then-insert: a run inserts the order only when ``db_find`` found none. Between the two it
#: yields to the event loop (``yields`` times), so runs that overlap would all find nothing first;
#: with ``barrier: N`` it waits until N runs are between their find and their insert at once (the
#: proof of overlap; the wait is bounded by a hang guard and answers ``overlapped: false`` then)
ORDERS = '''
import asyncio

from connic.tools import db_count, db_find, db_insert

ARRIVED = []
ALL_HERE = {}


async def _barrier(parties: int) -> bool:
    loop = asyncio.get_running_loop()
    event = ALL_HERE.setdefault(id(loop), asyncio.Event())
    ARRIVED.append(id(loop))
    if ARRIVED.count(id(loop)) >= parties:
        event.set()
    try:
        await asyncio.wait_for(event.wait(), 30)  # a hang guard, not a measure
    except asyncio.TimeoutError:
        return False
    return True


async def place(payload: dict) -> dict:
    """Place an order once.

    Args:
        payload: the order
    """
    found = await db_find("orders", filter={"order_id": payload["order_id"]})
    overlapped = await _barrier(payload["barrier"]) if payload.get("barrier") else None
    for _ in range(payload.get("yields", 0)):
        await asyncio.sleep(0)
    if not found["count"]:
        await db_insert("orders", {"order_id": payload["order_id"]})
    rows = await db_count("orders", filter={"order_id": payload["order_id"]})
    return {"found": found["count"], "overlapped": overlapped, "rows": rows["count"]}
'''


def write_project(root: Path, **agent: Any) -> Path:
    fields = {"version": "1.0", "name": "orders", "description": "places orders", "type": "tool",
              "tool_name": "orders.place", **agent}
    (root / "agents").mkdir(parents=True)
    (root / "tools").mkdir()
    (root / "agents" / "orders.yaml").write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in fields.items()))
    (root / "tools" / "orders.py").write_text(textwrap.dedent(ORDERS).lstrip())
    return root


class NoModels:
    """A tool agent's runs need no model: each run's models answer nothing."""

    live = False

    def for_run(self, index: int) -> NoModels:
        return self

    @property
    def notes(self) -> list[str]:
        return []

    def model_for(self, agent_name: str, *, root: bool) -> Any:
        raise AssertionError(f"agent '{agent_name}' asked for a model")

    async def external(self, kind: str, name: str, arguments: object,
                       call: Callable[[], Awaitable[object]]) -> object:
        return await call()

    def calls_live(self) -> bool:
        return True

    def finish(self, *, completed: bool) -> list[str]:
        return []


@pytest.fixture
def runtime_of(tmp_path: Path) -> Iterator[Callable[..., ProjectRuntime]]:
    made: list[ProjectRuntime] = []

    def make(concurrency: int = 8, **agent: Any) -> ProjectRuntime:
        project = LoadedProject(write_project(tmp_path / f"p{len(made)}", **agent))
        masker = Masker()
        models = ModelSource(cassette_dir="cassettes", mode="none", masker=masker, aliases=dict)
        options = RuntimeOptions(concurrency=concurrency, early_stop=False, env=None, models=models,
                                 isolation="none")
        made.append(ProjectRuntime(project, options, masker=masker, host=NullHost()))
        return made[-1]

    yield make
    for runtime in made:
        runtime.close()
    placeholders.uninstall()  # a runtime installed them: put back, as a session's end does


def run_case(runtime: ProjectRuntime, runs: int, **payload: Any) -> CaseOutcome:
    fields = {"name": "place", "payload": json.dumps({"order_id": "A-1", **payload}), "runs": runs}
    resolved, compiled = resolve_case(fields, "orders")
    outcome = new_outcome("tests/orders.yaml::place", "tests/orders.yaml", 1, "orders", "place", runs=runs,
                          success_threshold=100)
    return runtime.execute(CaseTarget("orders", resolved, compiled, NoModels(), outcome))


def rows(runtime: ProjectRuntime) -> int:
    database = runtime.services.local.db
    found = asyncio.run(database.db_find("orders", {"order_id": "A-1"}))
    return int(found["count"])


def outputs(outcome: CaseOutcome) -> list[dict[str, Any]]:
    assert [r.status for r in outcome.records] == ["completed"] * outcome.runs, [r.error for r in outcome.records]
    return [json.loads(r.output_raw) if isinstance(r.output_raw, str) else r.output_raw for r in outcome.records]


def test_without_a_cap_the_runs_are_serialised_and_check_then_insert_leaves_one_row(runtime_of) -> None:
    runtime = runtime_of()
    outcome = run_case(runtime, 3, yields=100)
    assert rows(runtime) == 1
    # each run saw the rows of the runs before it: one after another, in order
    assert [(o["found"], o["rows"]) for o in outputs(outcome)] == [(0, 1), (1, 1), (1, 1)]


def test_with_max_concurrent_runs_3_the_runs_overlap(runtime_of) -> None:
    runtime = runtime_of(max_concurrent_runs=3)
    outcome = run_case(runtime, 3, barrier=3)
    # every run reached the barrier while the other two were between their find and their insert
    assert [o["overlapped"] for o in outputs(outcome)] == [True, True, True]
    assert rows(runtime) == 3  # and the race is Connic's too with such a cap: every run found nothing


def test_connic_concurrency_caps_a_higher_max_concurrent_runs(runtime_of) -> None:
    runtime = runtime_of(concurrency=1, max_concurrent_runs=3)
    outcome = run_case(runtime, 3, yields=100)
    assert rows(runtime) == 1
    assert [o["found"] for o in outputs(outcome)] == [0, 1, 1]


@pytest.mark.parametrize(("agent", "concurrency", "expected"), [
    ({}, 8, 1),  # Connic's default
    ({"max_concurrent_runs": 3}, 8, 3),
    ({"max_concurrent_runs": 3}, 2, 2),  # --connic-concurrency caps further
    ({"max_concurrent_runs": 20}, 8, 8),
    ({"max_concurrent_runs": 3, "session": True}, 8, 1),  # a session's runs run in order
])
def test_case_concurrency(tmp_path: Path, agent: dict[str, Any], concurrency: int, expected: int) -> None:
    project = LoadedProject(write_project(tmp_path, **agent), static=True)
    assert case_concurrency(project.agents, "orders", concurrency) == expected
    assert case_concurrency(project.agents, "unknown", concurrency) == concurrency


def test_run_cap_reads_the_sdk_config() -> None:
    from pytest_connic.project.sdk import AgentConfig

    base = {"version": "1.0", "name": "a", "description": "d", "type": "tool", "tool_name": "t.f"}
    assert run_cap(AgentConfig.model_validate(base)) == 1
    assert run_cap(AgentConfig.model_validate({**base, "max_concurrent_runs": 4})) == 4
    assert run_cap(object()) == 1
