"""Connic's run concurrency (``max_concurrent_runs``, ``concurrency {key, on_conflict}``): an agent
that sets nothing has Connic's default ``max_concurrent_runs`` of 1, its runs serialised
(docs/running.md "Concurrency of an agent's runs"; the scheduler itself is tested below pytest in
tests/unit/execution/test_run_concurrency.py). Overlap is observed through marker files the tool
leaves in the project (user code runs in worker processes); the waits are bounded hang guards only."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helpers.project import ConnicProject

pytestmark = pytest.mark.timeout(120)

#: each call marks itself active, waits (bounded) until ``wait_for`` calls are active at once,
#: stays active a little longer once it saw them (for the others to see it), and answers the most
#: it saw; every call's peak is appended to ``state/peaks.txt``
WORK = '''
import time
import uuid
from pathlib import Path

STATE = Path(__file__).resolve().parent.parent / "state"


def _active() -> int:
    return len(list(STATE.glob("active-*")))


def run(payload: dict) -> dict:
    """Do the work of one order."""
    customer_id, wait_for = str(payload.get("customer_id", "")), int(payload.get("wait_for", 2))
    polls = int(payload.get("polls", 8))
    STATE.mkdir(exist_ok=True)
    marker = STATE / f"active-{uuid.uuid4().hex}"
    marker.write_text(customer_id)
    peak = _active()
    try:
        for _ in range(polls):  # a bound: at most polls x 50 ms waiting for company
            peak = max(peak, _active())
            if peak >= wait_for:
                break
            time.sleep(0.05)
        peak = max(peak, _active())
        if peak >= wait_for:  # stay active two polls longer, so a call that started before this
            time.sleep(0.1)   # one (and sleeps between its polls) sees it too, not only its bound
    finally:
        marker.unlink()
    with open(STATE / "peaks.txt", "a") as f:
        f.write(f"{customer_id} {peak}\\n")
    return {"peak": peak}
'''


def project_with(project: ConnicProject, *, runs: int = 3, threshold: int = 100, payload: str | None = None,
                 **fields: Any) -> None:
    project.tool("work", WORK)
    project.agent("orders", type="tool", tool_name="work.run", **fields)
    payload = payload or json.dumps({"customer_id": "c1", "wait_for": 2})
    project.suite("orders", f"""
        agent: orders
        tests:
          - name: one at a time
            payload: '{payload}'
            runs: {runs}
            success_threshold: {threshold}
            expected_result: output.peak == 1
    """)


def peaks(project: ConnicProject) -> list[int]:
    path = project.root / "state" / "peaks.txt"
    return [int(line.split()[-1]) for line in path.read_text("utf-8").splitlines()] if path.exists() else []


def report(project: ConnicProject, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    result = project.run("-p", "no:randomly", "--connic-json", "report.json", *args)
    data = json.loads((project.root / "report.json").read_text("utf-8"))
    (case,) = data["cases"]
    return result, case


def test_an_agent_that_sets_nothing_has_its_runs_serialised(project: ConnicProject) -> None:
    project_with(project)  # Connic's default max_concurrent_runs is 1
    result, _ = report(project)
    result.assert_outcomes(passed=1)
    assert peaks(project) == [1, 1, 1]


def test_max_concurrent_runs_from_defaults_yaml_raises_the_cap(project: ConnicProject) -> None:
    project_with(project, payload=json.dumps({"customer_id": "c1", "wait_for": 2, "polls": 200}))
    project.write("agents/_defaults.yaml", "max_concurrent_runs: 3\n")
    result, _ = report(project)
    result.assert_outcomes(failed=1)
    assert max(peaks(project)) >= 2


def test_max_concurrent_runs_above_one_lets_that_many_overlap(project: ConnicProject) -> None:
    payload = json.dumps({"customer_id": "c1", "wait_for": 3})  # never reached: the cap is 2
    project_with(project, runs=4, threshold=25, payload=payload, max_concurrent_runs=2)
    report(project)
    assert max(peaks(project)) == 2


def test_connic_concurrency_stays_an_upper_bound(project: ConnicProject) -> None:
    project_with(project, max_concurrent_runs=5)
    result, _ = report(project, "--connic-concurrency", "1")
    result.assert_outcomes(passed=1)
    assert peaks(project) == [1, 1, 1]


def test_queue_serialises_the_runs_of_one_key(project: ConnicProject) -> None:
    project_with(project, max_concurrent_runs=8, concurrency={"key": "customer_id", "on_conflict": "queue"})
    result, case = report(project)
    result.assert_outcomes(passed=1)
    assert peaks(project) == [1, 1, 1]
    assert [r["status"] for r in case["runs_detail"]] == ["completed"] * 3


def test_a_missing_key_path_skips_per_key_enforcement(project: ConnicProject) -> None:
    project_with(project, payload=json.dumps({"customer_id": "c1", "wait_for": 2, "polls": 200}),
                 max_concurrent_runs=8, concurrency={"key": "data.customer_id"})
    result, _ = report(project)
    result.assert_outcomes(failed=1)
    assert max(peaks(project)) >= 2


def test_drop_cancels_the_runs_that_arrive_while_one_of_their_key_runs(project: ConnicProject) -> None:
    project_with(project, max_concurrent_runs=8, concurrency={"key": "customer_id", "on_conflict": "drop"})
    result, case = report(project)
    result.assert_outcomes(failed=1)
    assert peaks(project) == [1]
    assert [r["status"] for r in case["runs_detail"]] == ["completed", "cancelled", "cancelled"]
    message = ("concurrency: run dropped (on_conflict: drop): run #0 of agent 'orders' "
               "with the same key (customer_id = \"c1\") was still running")
    result.stdout.fnmatch_lines([f"*{message}*"])


def test_a_dropped_run_counts_as_a_run_that_did_not_pass(project: ConnicProject) -> None:
    project_with(project, threshold=33, max_concurrent_runs=8,
                 concurrency={"key": "customer_id", "on_conflict": "drop"})
    result, case = report(project)
    result.assert_outcomes(passed=1)
    assert [r["passed"] for r in case["runs_detail"]] == [True, False, False]


def test_drop_does_not_apply_one_after_another(project: ConnicProject) -> None:
    # no max_concurrent_runs: the runs are serialised, so no run arrives while another runs
    project_with(project, concurrency={"key": "customer_id", "on_conflict": "drop"})
    result, _ = report(project)
    result.assert_outcomes(passed=1)
    assert peaks(project) == [1, 1, 1]


def test_coalesce_keeps_only_the_newest_waiting_run(project: ConnicProject) -> None:
    project_with(project, runs=4, threshold=25, max_concurrent_runs=8,
                 concurrency={"key": "customer_id", "on_conflict": "coalesce"})
    _, case = report(project)
    assert [r["status"] for r in case["runs_detail"]] == ["completed", "cancelled", "cancelled", "completed"]
    assert peaks(project) == [1, 1]
    assert "replaced by the newer run #2" in case["runs_detail"][1]["error"]


def test_concurrency_does_not_apply_to_a_sequential_agent(project: ConnicProject) -> None:
    project.tool("work", WORK)
    project.agent("step", type="tool", tool_name="work.run")
    project.agent("orders", type="sequential", agents=["step"], max_concurrent_runs=8,
                  concurrency={"key": "customer_id", "on_conflict": "drop"})
    payload = json.dumps({"customer_id": "c1", "wait_for": 2})
    project.suite("orders", f"""
        agent: orders
        tests:
          - name: all run
            payload: '{payload}'
            runs: 3
            expected_result: status == "completed"
    """)
    result, case = report(project)
    result.assert_outcomes(passed=1)
    assert [r["status"] for r in case["runs_detail"]] == ["completed"] * 3
