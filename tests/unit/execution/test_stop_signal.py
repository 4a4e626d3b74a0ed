"""The session's stop request (``execution/interruption.py``): the first reason stays, an
awaitable raced against it finishes or is cancelled (and given a grace to end), and a case whose
runtime is stopped mid-run ends interrupted: the run in flight cancelled after its cleanup, the runs
never started recorded as cancelled (the session's Ctrl-C is tests/plugin/test_interrupts.py's)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from helpers.harness import CaseProject, project_runtime, run_case
from pytest_connic.execution import interruption
from pytest_connic.execution.interruption import StopSignal


def test_the_first_reason_stays() -> None:
    stop = StopSignal()
    assert (stop.is_set(), stop.reason) == (False, None)
    stop.set("interrupted by SIGINT")
    stop.set("interrupted by SIGTERM")
    assert (stop.is_set(), stop.reason) == (True, "interrupted by SIGINT")


def test_an_awaitable_that_finishes_first_gives_its_result() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert asyncio.run(StopSignal().race(answer())) == (True, 42)


def test_a_stop_set_from_another_thread_cancels_the_awaitable_and_lets_it_clean_up() -> None:
    stop = StopSignal()
    events: list[str] = []

    async def forever() -> None:
        events.append("started")
        try:
            await asyncio.sleep(3600)
        finally:
            events.append("cleaned up")

    async def main() -> tuple[bool, object]:
        racing = asyncio.ensure_future(stop.race(forever()))
        while not events:
            await asyncio.sleep(0)
        threading.Thread(target=stop.set, args=("interrupted by SIGTERM",)).start()
        return await racing

    assert asyncio.run(asyncio.wait_for(main(), 60)) == (False, None)
    assert events == ["started", "cleaned up"]


def test_code_that_swallows_the_cancellation_is_abandoned_after_the_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interruption, "CANCEL_GRACE_S", 0.05)
    stop = StopSignal()
    stop.set("interrupted by SIGINT")
    release = asyncio.Event()

    async def stubborn() -> str:
        while True:
            try:
                await release.wait()
                return "released"
            except asyncio.CancelledError:
                continue  # user code that will not end

    async def main() -> tuple[tuple[bool, object], bool]:
        task = asyncio.ensure_future(stubborn())
        await asyncio.sleep(0)  # it runs up to its wait: the cancellation lands in its try
        raced = await stop.race(task)
        still_running = not task.done()
        release.set()
        await task
        return raced, still_running

    assert asyncio.run(asyncio.wait_for(main(), 60)) == ((False, None), True)


def test_cancelling_the_race_cancels_the_awaitable() -> None:
    cancelled: list[bool] = []

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def main() -> None:
        racing = asyncio.ensure_future(StopSignal().race(forever()))
        await asyncio.sleep(0.01)
        racing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await racing
        await asyncio.sleep(0)

    asyncio.run(asyncio.wait_for(main(), 60))
    assert cancelled == [True]


HANG = '''
import asyncio
import pathlib


async def hang(payload: dict) -> dict:
    """Wait until cancelled; say so on disk."""
    pathlib.Path("started").write_text("yes")
    try:
        await asyncio.sleep(3600)
    finally:
        pathlib.Path("cleaned-up").write_text("yes")
    return {}
'''


def _set_when_started(stop: StopSignal, started: Path, done: threading.Event) -> None:
    deadline = time.monotonic() + 120  # a bound for a loaded machine, not a timing assertion
    while not started.exists() and not done.is_set() and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set("interrupted by SIGINT")


def test_a_stopped_case_ends_interrupted_with_its_runs_cancelled(case_project: CaseProject) -> None:
    case_project.tool("slow", HANG)
    case_project.agent("slow", type="tool", tool_name="slow.hang")
    case_project.suite("slow", """
        tests:
          - name: three runs
            payload: hi
            runs: 3
    """)
    stop, done = StopSignal(), threading.Event()
    watcher = threading.Thread(target=_set_when_started, args=(stop, case_project.root / "started", done))
    watcher.start()
    try:
        with project_runtime(case_project.root, concurrency=1, stop=stop) as runtime:
            outcome = run_case(runtime, "slow", "three runs")
    finally:
        done.set()
        watcher.join()
    assert outcome.interrupted == "interrupted by SIGINT"
    assert [(r.status, r.error, r.skipped) for r in outcome.records] == [
        ("cancelled", "interrupted by SIGINT", False),
        ("cancelled", "interrupted by SIGINT", True), ("cancelled", "interrupted by SIGINT", True)]
    assert (case_project.root / "cleaned-up").exists()
