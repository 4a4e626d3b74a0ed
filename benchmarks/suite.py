"""Where the project's own test suite spends its time, and the least it can take as it is.

    python benchmarks/suite.py floors     # what one inner session costs, by kind (about 2 minutes)
    python benchmarks/suite.py profile    # the README's test command, profiled (about 7 minutes),
                                          # then the floors, then the suite's least CPU time

``floors``: the cost of one inner pytest session as the test suite starts it (``tests/conftest.py``:
optional plugins its module does not name blocked, bytecode cached, Hypothesis's plugin off):

- in-process, as pytester's ``runpytest`` (pytest, the plugin and the SDK already imported), the
  median wall time of 15 sessions: one Python test with ``-p no:connic``; the same with the
  plugin; one tool-agent case with ``connic_isolation=none``; the same case under process
  isolation;
- in a subprocess (``python -m pytest``), the median wall and CPU time of 5 runs: the Python test
  without and with the plugin, the tool-agent case under both isolations. The CPU is the
  process's and what it reaped; a fork server the session leaves for init to reap is measured
  apart: the import it preloads (``pytest_connic.execution.isolation.template_process``).

``profile``: ``CI=true python -m pytest -n 2 tests -p suiteprofile`` (``benchmarks/suiteprofile.py``
records each test's wall and CPU time and its inner sessions by kind), a table by kind, then the
floors, then the least CPU the suite's inner sessions need at those floors against what 150 s on
two cores gives (300 CPU-seconds). Figures, never checks.
"""

from __future__ import annotations

import ast
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path

import bench
import startup

PY = sys.executable
REPO = Path(__file__).resolve().parent.parent

PYTHON_TEST = "def test_one():\n    assert 1 + 1 == 2\n"
TOOL = '''
def echo(payload: dict) -> dict:
    """Echo the payload back."""
    return {"got": payload}
'''
AGENT = "version: '1.0'\nname: echo\ndescription: echoes\ntype: tool\ntool_name: calc.echo\n"
SUITE = "tests:\n  - name: one\n    payload: '{\"a\": 1}'\n    expected_result: output.got.a == 1\n"

#: in-process sessions of one kind, timed in a fresh process that imported what tests/conftest.py does
DRIVER = textwrap.dedent('''
    import importlib, json, os, pkgutil, statistics, sys, time
    import pytest, pytest_connic
    importlib.import_module("pytest_connic.project.sdk")
    for module in pkgutil.walk_packages(pytest_connic.__path__, "pytest_connic."):
        importlib.import_module(module.name)
    for name in ("connection", "context", "forkserver", "popen_forkserver", "reduction", "resource_tracker", "spawn"):
        importlib.import_module("multiprocessing." + name)
    class AsPytester:  # as pytester's in-process runs: no gc.collect() at the session's end
        def pytest_configure(self, config):
            try:
                from _pytest.unraisableexception import gc_collect_iterations_key
            except ImportError:
                return
            config.stash[gc_collect_iterations_key] = 0
    os.chdir(sys.argv[1])
    args, times = ["-q", *sys.argv[3:]], []
    for _ in range(int(sys.argv[2]) + 1):
        started = time.perf_counter()
        code = pytest.main(args, plugins=[AsPytester()])
        times.append(time.perf_counter() - started)
        if code != 0:
            raise SystemExit(f"inner session failed ({code})")
    print("RESULT", json.dumps(statistics.median(times[1:])))
''')


def inner_addopts() -> str:
    """What ``tests/conftest.py`` gives an inner session of a module naming no optional plugin."""
    tree = ast.parse((REPO / "tests" / "conftest.py").read_text("utf-8"))
    optional = next(node.value for node in ast.walk(tree) if isinstance(node, ast.AnnAssign | ast.Assign)
                    and "OPTIONAL_PLUGINS" in ast.unparse(node.targets[0] if isinstance(node, ast.Assign)
                                                          else node.target))
    names = ast.literal_eval(optional).keys()
    return " ".join(["-p no:randomly", "-p no:hypothesispytest", "-p no:cacheprovider",
                     *(f"-p no:{name}" for name in names)])


def projects(tmp: Path) -> tuple[Path, Path]:
    plain, connic = tmp / "plain", tmp / "connic"
    plain.mkdir(parents=True)
    (plain / "test_one.py").write_text(PYTHON_TEST)
    for rel, text in (("agents/echo.yaml", AGENT), ("tools/calc.py", TOOL), ("tests/echo.yaml", SUITE)):
        (connic / rel).parent.mkdir(parents=True, exist_ok=True)
        (connic / rel).write_text(text)
    return plain, connic


def environment(tmp: Path) -> dict[str, str]:
    """``startup.py``'s (bytecode cached under ``tmp``, pytest's temporary root there, the caller's
    ``PYTEST_ADDOPTS``/``PYTEST_PLUGINS`` dropped), with an inner session's ``PYTEST_ADDOPTS``."""
    return {**startup.environment(tmp), "PYTEST_ADDOPTS": inner_addopts()}


def subprocess_session(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU time (the process and what it reaped) of one ``python -m pytest``."""
    started = time.perf_counter()
    proc = subprocess.Popen([PY, "-m", "pytest", "-q", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"session failed ({proc.returncode}):\n{out.decode()[-3000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def measure_floors(tmp: Path) -> dict[str, float]:
    plain, connic = projects(tmp)
    env = environment(tmp)
    none, process = ["-o", "connic_isolation=none"], ["-o", "connic_isolation=process"]
    kinds = {"python test, -p no:connic": (plain, ["-p", "no:connic"]), "python test, plugin": (plain, []),
             "tool case, isolation none": (connic, none), "tool case, isolation process": (connic, process)}
    for args in ([], ["-p", "no:connic"]):  # bytecode cache
        subprocess_session(args, plain, env)
    subprocess_session(process, connic, env)
    floors: dict[str, float] = {}
    print(bench._machine(), flush=True)
    for name, (root, args) in kinds.items():
        proc = subprocess.run([PY, "-c", DRIVER, str(root), "15", *args], env=env, capture_output=True,
                              text=True, check=False)
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            raise SystemExit(f"in-process sessions failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        floors[f"in-process: {name}"] = json.loads(line.split(" ", 1)[1])
        print(f"in-process  {name:<30} {floors[f'in-process: {name}']:6.3f} s wall (median of 15)", flush=True)
    for name, (root, args) in kinds.items():
        runs = [subprocess_session(args, root, env) for _ in range(5)]
        wall, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        floors[f"subprocess: {name}"] = cpu
        print(f"subprocess  {name:<30} {wall:6.3f} s wall {cpu:6.3f} s CPU (median of 5)", flush=True)
    preload = []
    for _ in range(5):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([PY, "-c", "import pytest_connic.execution.isolation.template_process"], env=env, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        preload.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    floors["fork server preload"] = statistics.median(preload)
    print(f"fork server's preload (the worker module's import) {floors['fork server preload']:6.3f} s CPU", flush=True)
    return floors


def profile(tmp: Path) -> None:
    out = tmp / "profile"
    env = {**os.environ, "CI": "true", "SUITEPROFILE_OUT": str(out),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "benchmarks"), os.environ.get("PYTHONPATH")]))}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([PY, "-m", "pytest", "-n", "2", "tests", "-q", "-p", "suiteprofile"], cwd=REPO, env=env,
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-2000:]
    print(f"the suite: {summary}; {wall:.0f} s wall, {cpu:.0f} s CPU", flush=True)
    records: dict[str, dict[str, object]] = {}
    for path in sorted(out.glob("*.json")):
        records.update(json.loads(path.read_text("utf-8")))
    tests, walls, cpus, sessions = Counter[str](), Counter[str](), Counter[str](), Counter[str]()
    for record in records.values():
        kinds = record.get("sessions") or {}
        assert isinstance(kinds, dict)
        kind = " + ".join(sorted(kinds)) or "no inner session"
        tests[kind] += 1
        walls[kind] += float(record.get("wall", 0.0))  # type: ignore[arg-type]
        cpus[kind] += float(record.get("cpu", 0.0))  # type: ignore[arg-type]
        sessions.update(kinds)
    print(f"\n{'inner sessions of the test':<42} {'tests':>6} {'wall':>8} {'CPU':>8}")
    for kind, _ in walls.most_common():
        print(f"{kind:<42} {tests[kind]:6} {walls[kind]:7.0f}s {cpus[kind]:7.0f}s")
    print(f"{'all (summed over both xdist workers)':<42} {sum(tests.values()):6} {sum(walls.values()):7.0f}s "
          f"{sum(cpus.values()):7.0f}s")
    print("inner sessions: " + ", ".join(f"{n} {kind}" for kind, n in sessions.most_common()) + "\n", flush=True)
    floors = measure_floors(tmp / "floors")
    bounds = {"a session of one Python test with the plugin": "python test, plugin",
              "a session of one tool case under isolation none": "tool case, isolation none"}
    unit = cpus["no inner session"]
    print(f"tests without inner sessions: {unit:.0f} s of CPU; 150 s on two cores is 300 s of CPU")
    for words, kind in bounds.items():
        process = floors[f"subprocess: {kind}"]
        per_session = {"in-process": floors[f"in-process: {kind}"], "subprocess": process,
                       "in-process -n": floors[f"in-process: {kind}"] + 2 * process,  # two xdist workers
                       "subprocess -n": 3 * process}
        least = sum(n * per_session.get(kind, 0.0) for kind, n in sessions.items())
        print(f"least CPU of the inner sessions, each at the cost of {words} (in-process "
              f"{per_session['in-process']:.2f} s, a process {process:.2f} s): {least:.0f} s; "
              f"with the tests without inner sessions {least + unit:.0f} s", flush=True)

def main(argv: list[str]) -> None:
    what = argv[0] if argv else "floors"
    if what not in ("floors", "profile"):
        raise SystemExit(__doc__)
    with tempfile.TemporaryDirectory(prefix="connic-suite-") as tmp:
        if what == "floors":
            measure_floors(Path(tmp))
        else:
            profile(Path(tmp))


if __name__ == "__main__":
    main(sys.argv[1:])
