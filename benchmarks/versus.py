"""Two source trees of pytest-connic side by side: collection of 1,000 suites x 10 cases and a run
of 1,000 tool-agent cases, the trees alternating through ``PYTHONPATH`` for ``rounds`` rounds.

    python benchmarks/versus.py BEFORE_SRC AFTER_SRC [ROUNDS]

e.g. ``git worktree add /tmp/base <commit>`` then ``python benchmarks/versus.py /tmp/base/src src``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench

COLLECT = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly"]
RUN = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly"]


def timed(args: list[str], cwd: Path, src: str) -> float:
    started = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, env={**os.environ, "PYTHONPATH": src}, capture_output=True,
                          text=True, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(proc.stdout[-2000:] + proc.stderr[-2000:])
    return elapsed


def main(before: str, after: str, rounds: int = 5) -> None:
    root = Path(tempfile.mkdtemp(prefix="connic-versus-"))
    bench.tool_project(root / "collect", 1000, 10)
    bench.tool_project(root / "run", 100, 10)
    trees = {"before": str(Path(before).resolve()), "after": str(Path(after).resolve())}
    times: dict[str, dict[str, list[float]]] = {name: {"collect": [], "run": []} for name in trees}
    for src in trees.values():  # warm: each tree's bytecode
        timed(COLLECT, root / "collect", src)
        timed(RUN, root / "run", src)
    for _ in range(rounds):
        for name, src in trees.items():
            times[name]["collect"].append(timed(COLLECT, root / "collect", src))
            times[name]["run"].append(timed(RUN, root / "run", src))
    print(bench._machine())
    for name in trees:
        for figure, label in (("collect", "collect 10,000 cases"), ("run", "run 1,000 tool cases")):
            values = times[name][figure]
            print(f"{name:7} {label:22} best {min(values):6.2f}s  median {statistics.median(values):6.2f}s  "
                  f"({', '.join(f'{v:.2f}' for v in values)})")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 5)
