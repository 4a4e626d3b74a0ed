"""A run past ``timeout_s`` fails with a timeout error, and its builder cleanup and
middleware cleanup still run (design: Runs; spec §4.3, §9.5)."""

from __future__ import annotations

import json

from helpers.project import ConnicProject

MIDDLEWARE = '''
import asyncio
import json


async def before(content, context):
    if content["parts"][0]["text"] == "hang in before":
        await asyncio.sleep(60)
    return content


async def cleanup(run, context):
    with open("cleanups.jsonl", "a") as fh:
        fh.write(json.dumps({"by": "middleware", "status": run["status"], "error": run["error"]}) + "\\n")
'''

BUILDER = '''
import json


def build(context, builder_args, test_name, payload, files):
    context["built_for"] = test_name
    return payload


def cleanup(run, context, builder_args):
    with open("cleanups.jsonl", "a") as fh:
        fh.write(json.dumps({"by": "builder", "case": context["built_for"], "output": run["output"]}) + "\\n")
    return True
'''

TOOLS = '''
import time


def snooze() -> dict:
    """Sleep in a worker thread, longer than the run may take."""
    time.sleep(4)
    return {"slept": True}
'''


def test_a_timed_out_run_still_runs_builder_and_middleware_cleanup(project: ConnicProject) -> None:
    project.tool("sleepy", TOOLS)
    project.agent("slow", tools=["sleepy.snooze"])
    project.write("middleware/slow.py", MIDDLEWARE)
    project.write("tests/builders/fixture.py", BUILDER)
    project.suite("slow", '''
        defaults:
          timeout_s: 1
        tests:
          - name: hangs in before middleware
            payload: hang in before
            builder: fixture
            expected_result: status == "failed" and "timed out" in error
          - name: hangs in a sync tool
            payload: call snooze
            builder: fixture
            expected_result: status == "failed" and "timed out" in error
          - name: a timeout is an agent error
            payload: hang in before
            builder: fixture
    ''')
    project.replies("slow", "hangs in a sync tool", [("snooze", {})], "never reached")

    result = project.run()

    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*case 'a timeout is an agent error' (slow) failed*agent error: run timed out after 1s (timeout_s)*",
    ])
    entries = [json.loads(line) for line in (project.root / "cleanups.jsonl").read_text().splitlines()]
    middleware = [e for e in entries if e["by"] == "middleware"]
    builder = [e for e in entries if e["by"] == "builder"]
    assert len(middleware) == 3
    assert all(e["status"] == "failed" and "timed out" in e["error"] for e in middleware)
    assert sorted(e["case"] for e in builder) == [
        "a timeout is an agent error", "hangs in a sync tool", "hangs in before middleware",
    ]
    assert all(e["output"] is None for e in builder)
    # middleware cleanup runs inside the run, the builder's cleanup after it
    assert [e["by"] for e in entries[:2]] == ["middleware", "builder"]
