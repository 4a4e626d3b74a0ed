"""What putting a worker's process state back costs per run (``execution/isolation/reset.py``).

    python benchmarks/reset.py

  clean   ``Baseline.restore()`` plus the end-of-run process check, when the run changed nothing
          (the common case): the median of 2,000 rounds.
  dirty   the same after a run that changed an alarm, the umask, the environment, a resource
          limit, the recursion limit, the working directory and fd 1 (each round changes them
          all again): the median of 2,000 rounds.

Both run in this process with the worker's modules imported (what a worker holds and the reset
fingerprints); the target is under 1 ms each.
"""

from __future__ import annotations

import os
import resource
import signal
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from pytest_connic.execution.isolation import procs, worker  # noqa: F401  (the worker's modules)
from pytest_connic.execution.isolation.reset import Baseline

ROUNDS = 2000


def _dirty(null: int) -> None:
    signal.alarm(30)
    os.umask(0o077)
    os.environ["CONNIC_BENCH_LEAK"] = "1"
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(64, hard), hard))
    sys.setrecursionlimit(500)
    os.chdir("/")
    os.dup2(null, 1)


def _round(base: Baseline) -> float:
    started = time.perf_counter()
    procs.has_children()
    reason = base.restore()
    elapsed = time.perf_counter() - started
    assert reason is None, reason
    return elapsed


def main() -> None:
    base = Baseline.take(Path.cwd())
    clean = [_round(base) for _ in range(ROUNDS)]
    null = os.open(os.devnull, os.O_WRONLY)
    dirty = []
    for _ in range(ROUNDS):
        _dirty(null)
        dirty.append(_round(base))
    assert os.environ.get("CONNIC_BENCH_LEAK") is None and signal.alarm(0) == 0
    print(f"reset per run, clean: {statistics.median(clean) * 1e6:.0f} µs (target < 1000 µs)")
    print(f"reset per run, dirty: {statistics.median(dirty) * 1e6:.0f} µs (target < 1000 µs)")
    print(f"({len(base.guarded)} modules guarded, {len(base.prints)} namespaces; "
          f"{len(sys.modules)} modules loaded)")


if __name__ == "__main__":
    main()
