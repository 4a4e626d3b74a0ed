"""pytest-connic's start-up cost on a project without Connic suites.

    python benchmarks/startup.py              # 40 rounds (about a minute on two CPUs)
    python benchmarks/startup.py --rounds 100

A plain project with one Python test and no ``agents/``: ``python -m pytest -q`` (the plugin
loads through its ``pytest11`` entry point) against ``python -m pytest -q -p no:connic``, in
the same invocation. The two commands are interleaved, and their order alternates every round
(with, without; then without, with), so that a busy machine and any drift slow both sides
alike. The figure is the median of the ratios of each round's pair (with the median of each
side beside it); it is a figure, never a check (the issue's aim is at most 1.05x).

As in ``bench.py``, everything is read from a bytecode cache primed in the benchmark's own
temporary directory (``PYTHONPYCACHEPREFIX``), pytest's temporary root is there too
(``PYTEST_DEBUG_TEMPROOT``), and ``PYTEST_ADDOPTS``/``PYTEST_PLUGINS`` from the caller's
environment are dropped, so nothing but the plugin differs between the two sides.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY = sys.executable
WITH = [PY, "-m", "pytest", "-q"]
WITHOUT = [PY, "-m", "pytest", "-q", "-p", "no:connic"]


def project(root: Path) -> None:
    """One Python test, no Connic project."""
    root.mkdir(parents=True)
    (root / "test_one.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")


def environment(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    (tmp / "temproot").mkdir()
    return {**env, "PYTHONPYCACHEPREFIX": str(tmp / "pycache"), "PYTHONDONTWRITEBYTECODE": "",
            "PYTEST_DEBUG_TEMPROOT": str(tmp / "temproot")}


def timed(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(args)}")
    return elapsed


def measure(rounds: int, root: Path, env: dict[str, str]) -> tuple[list[float], list[float]]:
    """``rounds`` timings of each command, interleaved, the order alternating per round."""
    with_plugin: list[float] = []
    without_plugin: list[float] = []
    for i in range(rounds):
        pair = [(WITH, with_plugin), (WITHOUT, without_plugin)]
        for args, times in pair if i % 2 == 0 else reversed(pair):
            times.append(timed(args, root, env))
    return with_plugin, without_plugin


def machine() -> str:
    import pytest

    load = " ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return (f"python {sys.version.split()[0]}, pytest {pytest.__version__}, {platform.system()} "
            f"{platform.release()}, {os.cpu_count()} CPUs, load average {load}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40, help="timings per command (default 40)")
    options = parser.parse_args(argv)
    print(machine(), flush=True)
    with tempfile.TemporaryDirectory(prefix="connic-startup-") as tmp:
        root = Path(tmp) / "plain"
        project(root)
        env = environment(Path(tmp))
        measure(2, root, env)  # prime the bytecode cache and the OS's file cache, not counted
        with_plugin, without_plugin = measure(options.rounds, root, env)
    a, b = statistics.median(with_plugin), statistics.median(without_plugin)
    print(f"rounds {options.rounds}, interleaved; one Python test, no Connic suite")
    print(f"python -m pytest -q                  median {a * 1000:7.1f} ms  "
          f"(min {min(with_plugin) * 1000:.1f})")
    print(f"python -m pytest -q -p no:connic     median {b * 1000:7.1f} ms  "
          f"(min {min(without_plugin) * 1000:.1f})")
    print(f"ratio of the medians                 {a / b:.3f}x")
    pairs = [w / wo for w, wo in zip(with_plugin, without_plugin)]
    print(f"median of the pair ratios            {statistics.median(pairs):.3f}x  (aim <= 1.05x)")


if __name__ == "__main__":
    main(sys.argv[1:])
