"""The cost of running user code in worker processes (``--connic-isolation=process``, the
default) against in-process (``--connic-isolation=none``).

    python benchmarks/isolation.py            # both figures (about a minute on two CPUs)

  overhead     1,000 tool-agent cases (one run each, a sync tool): the median time of one case
               item's setup phase (where its runs execute), process minus none: with a fresh worker
               per run, a fork of the project's template (done ahead) and its end. The first
               cases are a warm-up, outside the figure.
  concurrency  one case of 16 runs, each a tool sleeping 0.5 s, at --connic-concurrency 8 (the agent
               sets max_concurrent_runs: 8), on a
               cold session (nothing else in it: the project's template starts while pytest
               collects): pytest's own JUnit time of the case (setup, call and teardown) against
               the ideal 1.0 s, under both isolations; the median of alternating runs.

Each configuration runs in its own pytest subprocess; a conftest hook of the generated project
times each item's setup phase (where its runs execute) (``time.perf_counter``) into a JSON file.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

PY = sys.executable
SRC = Path(__file__).resolve().parents[1] / "src"

CONFTEST = '''
import json
import time

import pytest

TIMES = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    # a case's runs execute in its setup phase (the call phase judges them)
    started = time.perf_counter()
    try:
        return (yield)
    finally:
        TIMES.append([item.nodeid, time.perf_counter() - started])


def pytest_sessionfinish(session):
    with open("times.json", "w") as fh:
        json.dump(TIMES, fh)
'''

TOOLS = '''
import time


def echo(payload: dict) -> dict:
    """Echo the payload."""
    return {"got": payload}


def nap(payload: dict) -> dict:
    """Sleep for the payload's seconds."""
    time.sleep(payload["s"])
    return {"slept": payload["s"]}
'''

WARMUP = 20


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), "utf-8")


def project(root: Path) -> None:
    _write(root, "conftest.py", CONFTEST)
    _write(root, "tools/bench.py", TOOLS)
    _write(root, "agents/echo.yaml", "version: '1.0'\nname: echo\ndescription: echo\ntype: tool\n"
                                     "tool_name: bench.echo\n")
    # eight runs at once: the agent allows them (Connic's default max_concurrent_runs is 1)
    _write(root, "agents/nap.yaml", "version: '1.0'\nname: nap\ndescription: nap\ntype: tool\n"
                                    "tool_name: bench.nap\nmax_concurrent_runs: 8\n")
    cases = "".join(f"  - name: case {i:04}\n    payload: '{{\"i\": {i}}}'\n" for i in range(WARMUP + 1000))
    _write(root, "tests/echo.yaml", "tests:\n" + cases)
    _write(root, "tests/nap.yaml", "tests:\n"
                                   "  - name: sixteen\n    payload: '{\"s\": 0.5}'\n    runs: 16\n")


def times(root: Path, isolation: str, *args: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.run([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:xdist",
                           f"--connic-isolation={isolation}", *args], cwd=root, env=env, capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(proc.stdout[-3000:] + proc.stderr[-3000:])
    return {nodeid: t for nodeid, t in json.loads((root / "times.json").read_text("utf-8"))}


def overhead(root: Path) -> None:
    medians = {}
    for isolation in ("none", "process", "none", "process"):
        measured = times(root, isolation, "tests/echo.yaml")
        per_case = [t for nodeid, t in sorted(measured.items())][WARMUP:]
        medians.setdefault(isolation, []).append(statistics.median(per_case))
    none, process = min(medians["none"]), min(medians["process"])
    print(f"overhead: median setup phase of a tool-agent case: none {none * 1000:.2f} ms, process "
          f"{process * 1000:.2f} ms, isolation costs {(process - none) * 1000:.2f} ms per run (target <= 2 ms)")


def junit_time(root: Path, isolation: str, *args: str) -> float:
    """pytest's own JUnit time of the one case of a cold session."""
    import xml.etree.ElementTree as ET

    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.run([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:xdist",
                           f"--connic-isolation={isolation}", "--junitxml=junit.xml", *args], cwd=root, env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(proc.stdout[-3000:] + proc.stderr[-3000:])
    (case,) = ET.parse(root / "junit.xml").getroot().iter("testcase")
    return float(case.get("time", "nan"))


def concurrency(root: Path, rounds: int = 5) -> None:
    measured: dict[str, list[float]] = {"none": [], "process": []}
    for i in range(rounds):
        for isolation in (("none", "process") if i % 2 == 0 else ("process", "none")):
            measured[isolation].append(junit_time(root, isolation, "tests/nap.yaml", "--connic-concurrency", "8"))
    none, process = statistics.median(measured["none"]), statistics.median(measured["process"])
    print(f"concurrency: 16 runs x 0.5 s at concurrency 8, cold session, JUnit time (median of {rounds}): "
          f"none {none:.3f} s ({none:.2f}x), process {process:.3f} s = {process / 1.0:.2f}x the ideal 1.0 s "
          f"(target <= 1.15x); all process runs: {', '.join(f'{t:.3f}' for t in measured['process'])}")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="connic-bench-isolation-") as tmp:
        root = Path(tmp)
        project(root)
        print(f"Python {sys.version.split()[0]} on {os.cpu_count()} CPUs")
        overhead(root)
        concurrency(root)


if __name__ == "__main__":
    main()
