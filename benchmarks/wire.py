"""The wire's cost per call: one call of user code in a worker process, from pytest's process,
through a real pool (``WorkerPool``, a ``Lease``), and the codec alone.

    python benchmarks/wire.py                 # this checkout
    PYTHONPATH=/path/to/other/src python benchmarks/wire.py   # another checkout, same figures

  round trip   the median wall time (and pytest's process's CPU time) of one ``Lease.call`` of a sync tool that takes a params dict and
               the run context, changes the context and returns a small dict: encode, send,
               decode and run in the worker, the answer back, the copy-back into the context;
               median of 7 rounds of 2,000 calls, after 500 calls of warm-up.
  fresh run    one run after another, each one call in its own fresh worker (a lease, the call,
               the release that ends the worker): the wall time and pytest's process's CPU time
               per run (median of 5 rounds of 300 runs, after one of warm-up).
  codec        the CPU time of the same call's messages (its Call and its CallResult), encoded and decoded in
               one process, without the pipe: the part of the round trip the wire itself costs.

The codec figure of the pickle wire (before issue 39) is the same messages pickled and unpickled,
with the copy-back's deep copy of the context, as that wire did.
"""

from __future__ import annotations

import asyncio
import copy
import os
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path

TOOL = '''
def add(params: dict, context: dict) -> dict:
    """Adds."""
    context["calls"] = context.get("calls", 0) + 1
    return {"sum": params["a"] + params["b"], "items": [1, 2, 3], "note": "done"}
'''

PARAMS = {"a": 4, "b": 6, "query": "the weather in Berlin tomorrow", "limit": 10}
CONTEXT = {"run_id": "0f8c2b1e-5d7a-4c5e-9a41-3b7f1d2e6c90", "agent_name": "calc", "payload": {"message": "hi"},
           "timestamp": "2026-12-03T12:00:00+00:00", "user": {"id": 42, "roles": ["admin", "dev"]}}
ROUNDS, CALLS, WARMUP = 7, 2000, 500


def _project(root: Path) -> None:
    (root / "agents").mkdir()
    (root / "tools").mkdir()
    (root / "agents" / "calc.yaml").write_text("version: '1.0'\nname: calc\ntype: tool\ntool_name: calc.add\n")
    (root / "tools" / "calc.py").write_text(TOOL)


async def _round_trips(root: Path) -> tuple[list[float], list[float]]:
    from pytest_connic.execution.isolation.pool import WorkerPool

    pool = WorkerPool(root, size=1)
    lease = pool.lease(60)
    ref = ("module", "tools.calc", "add")
    try:
        context = dict(CONTEXT)
        for _ in range(WARMUP):
            await lease.call(ref, "add", (PARAMS, context), {})
        walls, cpus = [], []
        for _ in range(ROUNDS):
            started, cpu = time.perf_counter(), time.process_time()
            for _ in range(CALLS):
                await lease.call(ref, "add", (PARAMS, context), {})
            walls.append((time.perf_counter() - started) / CALLS)
            cpus.append((time.process_time() - cpu) / CALLS)
        assert context["calls"] == WARMUP + ROUNDS * CALLS, context  # copied back every time
        return walls, cpus
    finally:
        await lease.release()
        pool.close()


async def _runs(root: Path, runs: int = 300) -> tuple[float, float]:
    """``runs`` runs of one call each, one after another, each in a fresh worker (its own lease):
    the median wall and pytest's process's CPU time per run, over 5 rounds."""
    from pytest_connic.execution.isolation.pool import WorkerPool

    pool = WorkerPool(root, size=1)
    ref = ("module", "tools.calc", "add")
    walls, cpus = [], []
    try:
        for round_ in range(6):
            started, cpu = time.perf_counter(), time.process_time()
            for _ in range(runs):
                lease = pool.lease(60)
                await lease.call(ref, "add", (PARAMS, dict(CONTEXT)), {})
                await lease.release()
            if round_:  # the first round is a warm-up (the template's start)
                walls.append((time.perf_counter() - started) / runs)
                cpus.append((time.process_time() - cpu) / runs)
        return statistics.median(walls), statistics.median(cpus)
    finally:
        pool.close()


def _codec() -> float:
    """One call's messages through the codec of this checkout (µs), without the pipe."""
    from pytest_connic.execution.isolation import wire

    result = {"sum": 10, "items": [1, 2, 3], "note": "done"}
    context = dict(CONTEXT, calls=1)
    if hasattr(wire, "FROM_WORKER"):  # the data wire
        from pytest_connic.execution.isolation.copyback import snapshot
        from pytest_connic.execution.isolation.values import to_data

        def one() -> None:
            args = (to_data(PARAMS), to_data(context))
            sent = snapshot((1,), args, {})
            call = wire.decode(wire.TO_WORKER, wire.encode(wire.Call(1, ("module", "tools.calc", "add"), args, {}, (1,))))
            answer = wire.CallResult(1, wire.Returned(to_data(result)), [(1, to_data(context))])
            back = wire.decode(wire.FROM_WORKER, wire.encode(answer))
            assert call and back and sent
    else:  # the pickle wire
        def one() -> None:
            sent = copy.deepcopy(context)
            call = pickle.loads(pickle.dumps(wire.Call(1, ("module", "tools.calc", "add"), (PARAMS, context), {}, (1,))))
            answer = wire.CallResult(1, wire.Returned(pickle.dumps(result)), pickle.dumps({1: context}))
            back = pickle.loads(pickle.dumps(answer))
            assert call and pickle.loads(back.outcome.data) and pickle.loads(back.copies) and sent

    rounds = []
    for _ in range(ROUNDS):
        started = time.process_time()
        for _ in range(20_000):
            one()
        rounds.append((time.process_time() - started) / 20_000 * 1e6)
    return statistics.median(rounds)


def main() -> None:
    import pytest_connic

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _project(root)
        os.chdir(root)
        walls, cpus = asyncio.run(_round_trips(root))
        run_wall, run_cpu = asyncio.run(_runs(root))
    print(f"checkout     {Path(pytest_connic.__file__).parents[1]}")
    print(f"round trip   {statistics.median(walls) * 1e6:8.1f} µs per call, wall (rounds: "
          + ", ".join(f"{t * 1e6:.0f}" for t in walls) + ")")
    print(f"             {statistics.median(cpus) * 1e6:8.1f} µs per call, CPU of pytest's process (its threads)")
    print(f"fresh run    {run_wall * 1e6:8.1f} µs per run of one call in a fresh worker, wall; "
          f"{run_cpu * 1e6:.1f} µs CPU of pytest's process")
    print(f"codec        {_codec():8.1f} µs CPU per call (its Call and CallResult encoded and decoded)")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
