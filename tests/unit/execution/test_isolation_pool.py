"""The worker protocol driven through a real pool, without a pytest session (as pytest-xdist's
``testing/test_remote.py`` drives one worker): one test per call outcome, a cancelled call leaves
no process, a service request answered, the template's death in words, a broken reply path."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_connic.execution.isolation import procs
from pytest_connic.execution.isolation.pool import Lease, WorkerPool
from pytest_connic.runtime import placeholders
from pytest_connic.runtime.signals import ExitCalled, UserCodeEnded

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="workers are forked")

TOOLS = '''
import asyncio
import os
import sys

import connic.tools


def returns(params, context):
    context["seen"] = True
    return {"sum": params["a"] + params["b"], "pair": (1, 2)}


def raises():
    raise KeyError("chat")


def exits():
    sys.exit(3)


def ends():
    os._exit(3)


def oom():
    raise MemoryError()


def interrupts():
    raise KeyboardInterrupt("stop")


def huge():
    return b"x" * (65 * 2**20)


def pid():
    return os.getpid()


def sleeps(path):
    with open(path, "w") as fh:
        fh.write(str(os.getpid()))
    import time
    time.sleep(600)


def kills_template(path):
    child = os.fork()
    if child == 0:
        import time
        time.sleep(600)
        os._exit(0)
    with open(path, "w") as fh:
        fh.write(str(child))
    os.kill(os.getppid(), 9)
    import time
    time.sleep(60)  # the run is in flight when its template dies


def spawns(path):
    import subprocess
    child = subprocess.Popen(["sleep", "600"])  # in the worker's process group
    with open(path, "w") as fh:
        fh.write(f"{os.getpid()} {child.pid}")
    return 1


def breaks_reply():
    from pytest_connic.execution.isolation import wire
    wire.encode = None
    return 1


async def asks():
    return await connic.tools.trigger_agent(agent_name="child", payload={"q": 1})
'''


def ref(name: str) -> tuple[str, ...]:
    return ("module", "tools.t", name)


@pytest.fixture
def pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WorkerPool]:
    (tmp_path / "agents").mkdir()
    (tmp_path / "tools").mkdir()
    (tmp_path / "agents" / "t.yaml").write_text("version: '1.0'\nname: t\ntype: tool\ntool_name: t.returns\n")
    (tmp_path / "tools" / "t.py").write_text(TOOLS)
    monkeypatch.chdir(tmp_path)
    made = WorkerPool(tmp_path, size=2)
    yield made
    made.close()


def run(pool: WorkerPool, *calls: tuple[str, tuple[object, ...]]) -> list[Any]:
    """Each call in one lease (one run), in order; an exception is the call's outcome."""
    async def main() -> list[Any]:
        lease = pool.lease(60)
        out: list[Any] = []
        try:
            for name, args in calls:
                try:
                    out.append(await lease.call(ref(name), name, args, {}))
                except Exception as exc:  # noqa: BLE001
                    out.append(exc)
        finally:
            await lease.release()
        return out

    return asyncio.run(main())


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_returned_a_value_and_copied_the_context_back(pool: WorkerPool) -> None:
    context: dict[str, object] = {"run_id": "r"}
    [value] = run(pool, ("returns", ({"a": 4, "b": 6}, context)))
    assert value == {"sum": 10, "pair": (1, 2)}
    assert context == {"run_id": "r", "seen": True}


def test_raised_an_exception_rebuilt_with_its_type(pool: WorkerPool) -> None:
    [error] = run(pool, ("raises", ()))
    assert type(error) is KeyError and str(error) == "'chat'"


@pytest.mark.parametrize(("name", "kind", "text"), [
    ("exits", ExitCalled, ""),
    ("ends", UserCodeEnded, "ends ended its process with exit code 3"),
    ("oom", UserCodeEnded, "oom went past the memory limit of its worker process (4096 MiB"),
    ("interrupts", UserCodeEnded, "interrupts raised KeyboardInterrupt: stop at tools/t.py:"),
    ("huge", UserCodeEnded, "huge returned a value that cannot leave its worker process (a message of 65 MiB"),
])
def test_every_other_outcome_is_the_calls_error_in_words(pool: WorkerPool, name: str, kind: type,
                                                         text: str) -> None:
    [error] = run(pool, (name, ()))
    assert isinstance(error, kind) and str(error).startswith(text), error


def test_every_run_gets_a_fresh_worker(pool: WorkerPool) -> None:
    first, again = run(pool, ("pid", ()), ("pid", ()))
    [other] = run(pool, ("pid", ()))
    assert first == again != other


def test_a_cancelled_call_leaves_no_process(pool: WorkerPool, tmp_path: Path) -> None:
    marker = tmp_path / "pid.txt"

    async def main() -> None:
        lease = pool.lease(60)
        call = asyncio.ensure_future(lease.call(ref("sleeps"), "sleeps", (str(marker),), {}))
        while not marker.exists() or not marker.read_text():
            await asyncio.sleep(0.01)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        worker = int(marker.read_text())
        for _ in range(500):  # a hang guard, not a measurement
            if not alive(worker):
                break
            await asyncio.sleep(0.01)
        assert not alive(worker)  # killed by the cancellation itself, before the run ends
        await lease.release()

    asyncio.run(main())


def test_a_finished_runs_worker_and_its_process_group_end_and_the_next_run_gets_another(
        pool: WorkerPool, tmp_path: Path) -> None:
    """At a run's end its worker is killed at once and its process group on the pool's keeper
    thread (with the fork of its successor): nothing of it is left, and the next run has a fresh one."""
    marker = tmp_path / "pids.txt"
    assert run(pool, ("spawns", (str(marker),))) == [1]
    worker, child = (int(p) for p in marker.read_text().split())
    for _ in range(500):  # a hang guard, not a measurement
        if not alive(worker) and not alive(child):
            break
        time.sleep(0.01)
    assert not alive(worker) and not alive(child)
    [other] = run(pool, ("pid", ()))
    assert other != worker


def test_a_service_request_is_answered_in_pytests_process(pool: WorkerPool,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, dict[str, object]]] = []

    async def dispatch(name: str, params: dict[str, object]) -> object:
        asked.append((name, params))
        return {"status": "completed", "output": {"a": (1, 2)}}

    monkeypatch.setattr(placeholders, "dispatch", dispatch)
    [answer] = run(pool, ("asks", ()))
    assert asked and asked[0][0] == "trigger_agent" and asked[0][1]["payload"] == {"q": 1}
    assert answer == {"status": "completed", "output": {"a": (1, 2)}}


@pytest.mark.skipif(not procs.supported(), reason="process trees need /proc")
def test_a_killed_template_is_said_and_replaced_and_what_its_workers_started_ends(pool: WorkerPool,
                                                                                tmp_path: Path) -> None:
    marker = tmp_path / "child.txt"
    [error] = run(pool, ("kills_template", (str(marker),)))
    assert isinstance(error, UserCodeEnded)
    assert "lost its worker process: the project's template process was killed by signal 9 (SIGKILL)" in str(error)
    child = int(marker.read_text())
    for _ in range(500):  # a hang guard: the kill is done when the template's end is read
        if not alive(child):
            break
        asyncio.run(asyncio.sleep(0.01))
    assert not alive(child)
    assert run(pool, ("pid", ()))[0] > 0  # the next run gets a new template


def test_a_broken_reply_path_ends_the_call_at_once_saying_so(pool: WorkerPool) -> None:
    [error] = run(pool, ("breaks_reply", ()))
    assert isinstance(error, UserCodeEnded)
    assert "could not send its outcome: user code broke its worker process's reply path" in str(error)


def test_leases_close_with_the_pool(pool: WorkerPool) -> None:
    lease: Lease = pool.lease(60)

    async def main() -> int:
        worker = await lease.acquire()
        return worker.process.pid

    pid = asyncio.run(main())
    pool.close()
    for _ in range(500):  # a hang guard
        if not alive(pid):
            break
        asyncio.run(asyncio.sleep(0.01))
    assert not alive(pid)
