"""The run clock: retry delays skipped in replay, still counted against timeouts."""

from __future__ import annotations

import asyncio

import pytest

from pytest_connic.runtime.clock import RunClock


def test_a_virtual_sleep_moves_the_clock_instead_of_waiting() -> None:
    clock = RunClock()

    async def main() -> float:
        before = clock.now()
        await clock.sleep(300)  # a real wait would trip the hang guard of the suite
        return clock.now() - before

    assert asyncio.run(main()) >= 300
    assert clock.skipped_s == 300


def test_a_sleep_that_crosses_the_deadline_times_the_wait_out() -> None:
    clock = RunClock()
    reached: list[str] = []

    async def body() -> str:
        await clock.sleep(10)
        reached.append("first retry")
        await clock.sleep(20)
        reached.append("second retry")
        return "done"

    async def main() -> None:
        await clock.wait_for(body(), 25)

    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(main())
    assert reached == ["first retry"]


def test_a_sleep_within_the_deadline_completes() -> None:
    clock = RunClock()

    async def body() -> str:
        await clock.sleep(10)
        await clock.sleep(10)
        return "done"

    assert asyncio.run(clock.wait_for(body(), 25)) == "done"


def test_the_outer_deadline_ends_an_inner_wait_too() -> None:
    clock = RunClock()
    seen: list[str] = []

    async def child() -> str:
        try:
            await clock.sleep(50)
        except asyncio.CancelledError:
            seen.append("child cancelled")
            raise
        return "child done"

    async def parent() -> str:
        return await clock.wait_for(child(), 100)  # the child's own limit is later

    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(clock.wait_for(parent(), 30))
    assert seen == ["child cancelled"]


def test_an_inner_deadline_ends_only_the_inner_wait() -> None:
    clock = RunClock()

    async def child() -> str:
        await clock.sleep(50)
        return "child done"

    async def parent() -> str:
        try:
            await clock.wait_for(child(), 20)
        except asyncio.TimeoutError:
            return "child timed out, parent goes on"
        return "child finished"

    assert asyncio.run(clock.wait_for(parent(), 100)) == "child timed out, parent goes on"


def test_cancelling_the_waiter_cancels_the_body() -> None:
    clock = RunClock()
    seen: list[str] = []

    async def body() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("body cancelled")
            raise

    async def main() -> None:
        task = asyncio.ensure_future(clock.wait_for(body(), 1000))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert seen == ["body cancelled"]


def test_a_real_clock_skips_nothing() -> None:
    clock = RunClock(virtual=False)
    asyncio.run(clock.sleep(0.01))
    assert clock.skipped_s == 0


def test_a_real_clock_times_out_like_asyncio() -> None:
    clock = RunClock(virtual=False)
    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(clock.wait_for(asyncio.Event().wait(), 0.01))
