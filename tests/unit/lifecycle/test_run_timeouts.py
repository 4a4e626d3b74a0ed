"""A run past ``timeout_s`` below the session, under process isolation: the run's timeout kills
its worker (``execution/isolation/pool.Lease.call``), its builder's cleanup gets a fresh worker,
and the next case's async tool answers on a worker of its own (issue 30; docs/lifecycle.md)."""

from __future__ import annotations

import json

from helpers.harness import CaseProject, run_case

PIDS = '''
import os
import time


def gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (and been reaped), waiting up to 10 s for it."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


async def blocks(payload: dict) -> dict:
    """Writes its process's pid, then blocks its worker's event loop past the run's timeout."""
    with open("blocked.pid", "w") as fh:
        fh.write(str(os.getpid()))
    time.sleep(3600)
    return {}


async def answers(payload: dict) -> dict:
    """The next case's async tool: answers at once, and says whether the blocked worker is gone."""
    with open("blocked.pid") as fh:
        blocked = int(fh.read())
    return {"pid": os.getpid(), "blocked": blocked, "blocked_gone": gone(blocked)}
'''

PIDS_BUILDER = '''
import json
import os


def build(context, builder_args, test_name, payload, files):
    return payload


def cleanup(run, context, builder_args):
    from tools.pids import gone

    with open("blocked.pid") as fh:
        blocked = int(fh.read())
    seen = {"pid": os.getpid(), "blocked": blocked, "blocked_gone": gone(blocked)}
    with open("cleanup.json", "w") as fh:
        json.dump(seen, fh)
    return True
'''


def test_a_timed_out_runs_worker_is_gone_and_the_next_cases_async_tool_runs_normally(
        case_project: CaseProject) -> None:
    case_project.tool("pids", PIDS)
    case_project.agent("blocker", type="tool", tool_name="pids.blocks")
    case_project.agent("answerer", type="tool", tool_name="pids.answers")
    case_project.write("tests/builders/watch.py", PIDS_BUILDER)
    case_project.suite("first", "agent: blocker\ntests:\n  - name: blocks\n    payload: x\n    timeout_s: 1\n"
                                "    builder: watch\n")
    case_project.suite("second", "agent: answerer\ntests:\n  - name: answers\n    payload: y\n    timeout_s: 20\n")

    with case_project.runtime(isolation="process") as runtime:
        timed_out = run_case(runtime, "first", "blocks")
        answered = run_case(runtime, "second", "answers")

    assert not timed_out.verdict_passed
    (blocked_run,) = timed_out.records
    assert blocked_run.status == "failed" and blocked_run.error is not None
    assert blocked_run.error.startswith("run timed out after 1s (timeout_s)"), blocked_run.error
    blocked = int((case_project.root / "blocked.pid").read_text())
    # in the blocked worker, the cleanup would wait for its own process to end, and time out
    assert (case_project.root / "cleanup.json").exists(), "the run's cleanup did not finish"
    cleanup = json.loads((case_project.root / "cleanup.json").read_text())
    assert cleanup == {"pid": cleanup["pid"], "blocked": blocked, "blocked_gone": True}
    assert cleanup["pid"] != blocked  # the run's cleanup ran in a fresh worker
    assert answered.verdict_passed, answered.failure_reason
    (run,) = answered.records
    assert isinstance(run.output, dict)
    assert run.output["blocked"] == blocked and run.output["blocked_gone"] is True
    assert run.output["pid"] not in (blocked, cleanup["pid"])
