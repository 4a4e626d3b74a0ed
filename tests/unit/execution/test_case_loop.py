"""``CaseLoop`` (execution/loop.py): one event loop kept from case to case, and after each case
what ``asyncio.run`` ending its loop ended: pending tasks cancelled, async generators closed,
callbacks and timers dropped, the exception handler and task factory reset; a loop whose case
raised is discarded; from a thread whose own loop runs, a helper thread's loop. And the
executor's ``submit_async`` that a sync call of user code awaits (``RunScope.call``)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from pytest_connic.execution.executors import ReusingDaemonExecutor
from pytest_connic.execution.loop import CaseLoop


@pytest.fixture
def case_loop() -> Iterator[CaseLoop]:
    loop = CaseLoop()
    try:
        yield loop
    finally:
        loop.close()


async def _running() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


async def _forever(ended: list[str]) -> None:
    """A task a case leaves behind: it says when it ends."""
    try:
        await asyncio.sleep(3600)
    finally:
        ended.append("finally")


def _loop_of(case_loop: CaseLoop) -> asyncio.AbstractEventLoop:
    seen: list[asyncio.AbstractEventLoop] = []

    async def case() -> None:
        seen.append(await _running())

    case_loop.run(case())
    return seen[0]


def test_cases_share_one_loop_and_no_loop_is_left_set(case_loop: CaseLoop) -> None:
    first, second = _loop_of(case_loop), _loop_of(case_loop)
    assert first is second and not first.is_closed()
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()


def test_a_task_a_case_leaves_is_cancelled_and_runs_its_finally(case_loop: CaseLoop) -> None:
    ended: list[str] = []
    tasks: list[asyncio.Task[None]] = []


    async def case() -> None:
        tasks.append(asyncio.ensure_future(_forever(ended)))
        await asyncio.sleep(0)

    case_loop.run(case())
    assert ended == ["finally"] and tasks[0].cancelled()

    async def next_case() -> int:
        return len(asyncio.all_tasks())

    counts: list[int] = []

    async def counting() -> None:
        counts.append(await next_case())

    case_loop.run(counting())
    assert counts == [1]  # only the case's own task


def test_an_async_generator_a_case_leaves_is_closed(case_loop: CaseLoop) -> None:
    closed: list[str] = []
    kept: list[AsyncIterator[int]] = []

    async def numbers() -> AsyncIterator[int]:
        try:
            yield 1
            yield 2
        finally:
            closed.append("closed")

    async def case() -> None:
        gen = numbers()
        kept.append(gen)  # still referenced: only the loop's end closes it
        assert await gen.__anext__() == 1

    case_loop.run(case())
    assert closed == ["closed"]

    async def again() -> None:  # the loop still serves async generators afterwards
        gen = numbers()
        kept.append(gen)
        await gen.__anext__()

    case_loop.run(again())
    assert closed == ["closed", "closed"]


def test_timers_and_repeating_callbacks_a_case_leaves_are_dropped(case_loop: CaseLoop) -> None:
    fired: list[str] = []

    def again() -> None:
        fired.append("soon")
        asyncio.get_running_loop().call_soon(again)

    async def case() -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, fired.append, "later")
        loop.call_soon(again)
        await asyncio.sleep(0)

    case_loop.run(case())
    before = len(fired)

    async def waits() -> None:
        await asyncio.sleep(0.05)

    case_loop.run(waits())
    assert "later" not in fired and len(fired) == before


def test_the_exception_handler_and_task_factory_a_case_sets_are_reset(case_loop: CaseLoop) -> None:
    async def case() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda loop, context: None)
        loop.set_task_factory(lambda loop, coro: asyncio.Task(coro, loop=loop))
        loop.set_debug(not loop.get_debug())

    seen: list[object] = []

    async def next_case() -> None:
        loop = asyncio.get_running_loop()
        seen.extend([loop.get_exception_handler(), loop.get_task_factory(), loop.get_debug()])

    debug = _loop_of(case_loop).get_debug()
    case_loop.run(case())
    case_loop.run(next_case())
    assert seen == [None, None, debug]


def test_a_case_that_raises_discards_its_loop_after_ending_what_it_left(case_loop: CaseLoop) -> None:
    ended: list[str] = []


    async def case() -> None:
        asyncio.ensure_future(_forever(ended))
        await asyncio.sleep(0)
        raise ValueError("a bug")

    first = _loop_of(case_loop)
    with pytest.raises(ValueError, match="a bug"):
        case_loop.run(case())
    assert ended == ["finally"] and first.is_closed()
    second = _loop_of(case_loop)
    assert second is not first and not second.is_closed()


def test_from_a_running_loop_the_case_runs_on_a_helper_threads_kept_loop(case_loop: CaseLoop) -> None:
    """The ``connic`` fixture in an ``async def`` test: the test's loop runs (blocked meanwhile)."""
    ended: list[str] = []


    seen: list[tuple[asyncio.AbstractEventLoop, threading.Thread]] = []

    async def case() -> None:
        seen.append((asyncio.get_running_loop(), threading.current_thread()))
        asyncio.ensure_future(_forever(ended))
        await asyncio.sleep(0)

    async def failing() -> None:
        raise KeyError("from the helper")

    async def test() -> asyncio.AbstractEventLoop:
        case_loop.run(case())
        case_loop.run(case())
        with pytest.raises(KeyError, match="from the helper"):
            case_loop.run(failing())
        return asyncio.get_running_loop()

    outer = asyncio.run(test())
    (first, thread), (second, _) = seen
    assert first is second and first is not outer and thread is not threading.main_thread()
    assert ended == ["finally", "finally"]


def test_closing_closes_every_loop(case_loop: CaseLoop) -> None:
    loop = _loop_of(case_loop)
    case_loop.close()
    assert loop.is_closed()


# -- submit_async ---------------------------------------------------------------------------


def test_submit_async_gives_the_result_or_the_exception_on_the_awaiting_loop() -> None:
    executor = ReusingDaemonExecutor("test-submit")

    def stops() -> None:
        raise StopIteration("done")

    async def main() -> tuple[object, BaseException, BaseException]:
        value = await executor.submit_async(lambda: threading.current_thread().name)
        with pytest.raises(KeyError) as raised:
            await executor.submit_async(lambda: {}["x"])
        # a future refuses StopIteration: as a coroutine turns it, a RuntimeError (before: a hang)
        with pytest.raises(RuntimeError, match="StopIteration") as stopped:
            await asyncio.wait_for(executor.submit_async(stops), 10)
        return value, raised.value, stopped.value

    try:
        name, error, stopped = asyncio.run(main())
    finally:
        executor.shutdown()
    assert str(name).startswith("test-submit") and isinstance(error, KeyError)
    assert isinstance(stopped.__cause__, StopIteration)


def test_submit_async_leaves_a_cancelled_future_and_a_closed_loop_alone() -> None:
    executor = ReusingDaemonExecutor("test-submit")
    gate = threading.Event()
    done = threading.Event()

    def slow() -> int:
        gate.wait(10)
        return 1

    async def main() -> None:
        future = executor.submit_async(slow)
        future.cancel()
        with pytest.raises(asyncio.CancelledError):
            await future

    errors: list[dict[str, object]] = []
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(lambda loop, context: errors.append(context))
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()  # the call ends after its loop closed: nothing is raised anywhere
    executor.submit(done.set)
    gate.set()
    assert done.wait(10)
    executor.shutdown()
    assert errors == []


# -- through a project's runtime ------------------------------------------------------------

LEAVES_A_TASK = '''
import asyncio
import pathlib

SEEN = []


async def leave(payload: dict, context: dict) -> dict:
    """Start a task that outlives the call, and say which loop and tasks this case sees."""
    async def forever():
        try:
            await asyncio.sleep(3600)
        finally:
            pathlib.Path("ended-" + payload["key"]).write_text("ended")

    loop = asyncio.get_running_loop()
    others = [t for t in asyncio.all_tasks() if t.get_coro().__qualname__.endswith("forever")]
    SEEN.append(id(loop))
    asyncio.ensure_future(forever())
    return {"leftover": len(others), "loops": len(set(SEEN))}
'''


def test_a_case_never_sees_the_task_an_earlier_case_left_on_the_shared_loop(case_project: Any) -> None:
    """In pytest's process (``connic_isolation=none``): an ``async def`` tool leaves a task; when
    its case ends the task is cancelled (its ``finally`` runs), and the next case, on the same
    loop, does not see it."""
    case_project.tool("leaves", LEAVES_A_TASK)
    case_project.agent("leaver", type="tool", tool_name="leaves.leave")
    case_project.suite("leaver", '''
        tests:
          - name: first
            payload: '{"key": "first"}'
            expected_result: output.leftover == 0 and output.loops == 1
          - name: second
            payload: '{"key": "second"}'
            expected_result: output.leftover == 0 and output.loops == 1
    ''')
    outcomes = case_project.cases("leaver")
    assert [o.verdict_passed for o in outcomes.values()] == [True, True], [
        r.failures for o in outcomes.values() for r in o.records]
    assert (case_project.root / "ended-first").read_text() == "ended"
    assert (case_project.root / "ended-second").read_text() == "ended"
