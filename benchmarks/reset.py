"""What a fresh world per run costs: a worker forked from the project's template
(``execution/isolation/pool.py``, ``worker.py``), in place of the former reset of a reused worker.

    python benchmarks/reset.py

  fork     from the pool's request to the worker's pipe in pytest's process (the template forks,
           the worker binds its pipe): the median of 300 workers, each killed before the next
           (what a run waits for when no worker was forked ahead, which the pool does for the
           next run while the current one runs);
  call     one call of a sync tool on a fresh worker, the first call of its run: the median of
           the same workers (what a run's first call costs on it);
  end      killing a worker until the template reported its end: the median of the same.

The project is a tool module and an agent in a temporary folder; the template loads it once.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from pytest_connic.execution.isolation.pool import WorkerPool

ROUNDS = 300


async def measure(root: Path) -> None:
    pool = WorkerPool(root, size=1)
    lease = pool.lease(60)
    await lease.acquire()  # the template loads the project: outside the figures
    await lease.release()
    await asyncio.sleep(0.5)  # the worker the pool forked ahead
    forks, calls, ends = [], [], []
    ref = ("module", "tools.bench", "echo")
    for _ in range(ROUNDS):
        with pool._lock:  # no worker forked ahead: the fork itself is measured
            idle = list(pool._idle)
        for worker in idle:
            pool.discard(worker, "benchmark")
        started = time.perf_counter()
        lease = pool.lease(60)
        worker = await lease.acquire()
        forked = time.perf_counter()
        await lease.call(ref, "bench", ({"x": 1},), {})
        called = time.perf_counter()
        await lease.release()
        worker.process.join(10)
        ended = time.perf_counter()
        forks.append(forked - started)
        calls.append(called - forked)
        ends.append(ended - called)
    pool.close()
    print(f"fresh worker per run, median of {ROUNDS}: fork {statistics.median(forks) * 1000:.2f} ms, "
          f"first call {statistics.median(calls) * 1000:.2f} ms, end {statistics.median(ends) * 1000:.2f} ms")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="connic-bench-fork-") as tmp:
        root = Path(tmp)
        (root / "tools").mkdir()
        (root / "tools" / "bench.py").write_text('def echo(payload: dict) -> dict:\n    """Echo."""\n'
                                                 '    return payload\n', "utf-8")
        (root / "agents").mkdir()
        (root / "agents" / "echo.yaml").write_text("version: '1.0'\nname: echo\ndescription: echo\ntype: tool\n"
                                                   "tool_name: bench.echo\n", "utf-8")
        print(f"Python {sys.version.split()[0]}")
        asyncio.run(measure(root))


if __name__ == "__main__":
    main()
