"""pytest-connic benchmarks: each figure beside a baseline measured in the same invocation.

    python benchmarks/bench.py            # all figures (about ten minutes on two CPUs)
    python benchmarks/bench.py collection overhead

Figures (issue "Fast at every scale"):
  collection   1,000 suites x 10 cases (pytest --collect-only -q) vs plain pytest collecting
               10,000 Python tests in 1,000 files, and vs the floor (SDK TestFile, no pytest)
  overhead     1,000 tool-agent cases vs a hand-written pytest module doing the same calls
               (under process isolation, and with ``-o connic_isolation=none``)
  concurrency  one case, runs: 100, a model answering after 50 ms, vs ceil(100/concurrency) x 50 ms
               (the agent sets max_concurrent_runs: 100)
  serialising  Connic's default max_concurrent_runs of 1: a 16-run case of an agent that sets
               nothing vs max_concurrent_runs: 8, with an instant model and a 50 ms one
  scaling      a 200-case model-bound suite with -n 0 vs -n 2 (and the same with a 150 ms model)
  xdist        when -n 2 pays on two CPUs: the bundled example, and N cases whose user code waits
               100 ms (a model, a service) or computes 100 ms, with -n 0 vs -n 2 (docs/performance.md)
  firstcall    a recording (--connic-record-mode all, a provider on 127.0.0.1) of two one-run
               cases: the first case's time vs the second's (LiteLLM's import: before the first case)
  earlystop    model calls with and without --connic-early-stop; verdicts must be equal
  startup      pytest --version and a plain Python project, with and without the plugin
  memory       peak RSS of collecting and of running 10,000 tool-agent cases, and of collecting
               10,000 plain Python tests
  collect      1,000 suites x 10 cases (pytest --collect-only -q) vs the floor: the same YAML
               files (suites and agent files) parsed with PyYAML's C loader in a bare process,
               nothing else; the median of alternating runs (issue "Fast again": at most 3x)
  fork         the fork floor: a bare fork, exit and reap of a process holding what a template
               holds (the SDK, the template's modules, a project read statically, gc.freeze)
  fresh        issue 40's table in one run: overhead under both isolations against hand-written
               tests, the fork floor and the isolation cost per run above it (process minus
               in-process per case, against the floor's wall time: target <= 1.5x), collection,
               start-up, and one case of 16 runs x 0.5 s at concurrency 8 (benchmarks/isolation.py)
  world        1,000 LLM-agent cases replayed from cassettes with a recorded world (``world:``:
               run ids replayed, random seeded in the worker) vs the same cassettes
               without it (target <= 1.05x per run)

Bytecode. Plain pytest's collection time is mostly importing the test modules, which pytest
rewrites (assertions) and compiles unless a cached pyc exists; YAML suites have no such cache.
So the Python baselines are measured twice:
  cold  PYTHONDONTWRITEBYTECODE=1: every test module is rewritten and compiled on every run,
        as in CI on a fresh checkout (and in any environment that sets the variable);
  warm  bytecode written and reused: a developer's second run.
Everything else (the standard library, pytest, plugins, pytest-connic itself) is always read
from a bytecode cache under the benchmark's temporary directory (``PYTHONPYCACHEPREFIX``),
primed first, so no figure depends on what the machine happened to cache before, and nothing
is written outside the temporary directory. pytest's temporary root is there too
(``PYTEST_DEBUG_TEMPROOT``), so xdist runs never prune other users' ``pytest-of-*`` folders.

Timings are the best of several runs, alternating the commands compared, so that a busy machine
slows both sides alike; read the ratios.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

PY = sys.executable
HERE = Path(__file__).resolve().parent
ENVS: dict[str, dict[str, str]] = {}


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False,
                          env={**os.environ, **ENVS.get("warm", {}), **(env or {})})
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1, 5):
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(args)}")
    return elapsed, proc.stdout


def best(*commands: tuple[list[str], Path, dict[str, str] | None], repeat: int = 3) -> list[float]:
    """The best time of each command over ``repeat`` rounds, the commands alternating."""
    times: list[list[float]] = [[] for _ in commands]
    for _ in range(repeat):
        for i, (args, cwd, env) in enumerate(commands):
            times[i].append(run(args, cwd, env)[0])
    return [min(t) for t in times]


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))


TOOLS = '''
def echo(payload: dict) -> dict:
    """Echo the payload back."""
    return {"got": payload, "n": payload.get("n", 0) * 2}
'''


def tool_project(root: Path, suites: int, cases: int, *, distinct: bool = False) -> None:
    """``distinct``: every expression differs (by suite), so no two cases share a compiled one."""
    write(root / "agents/echo.yaml", 'version: "1.0"\nname: echo\ndescription: d\ntype: tool\ntool_name: t.echo\n')
    write(root / "tools/t.py", TOOLS)
    write(root / "pytest.ini", "[pytest]\naddopts = -p no:cacheprovider\n")
    for s in range(suites):
        body = ["agent: echo", "tests:"]
        extra = f" and output.got.k != {s}" if distinct else ""
        for c in range(cases):
            body += [f"  - name: case {c}", f"    payload: '{{\"n\": {c}}}'",
                     f"    expected_result: output.n == {c * 2} and output.got.n == {c}{extra}"]
        write(root / f"tests/s{s:04d}.yaml", "\n".join(body) + "\n")


def python_project(root: Path, files: int, tests: int) -> None:
    write(root / "pytest.ini", "[pytest]\naddopts = -p no:cacheprovider\npythonpath = .\n")
    write(root / "tools_t.py", TOOLS)
    for f in range(files):
        lines = ["from tools_t import echo", ""]
        for t in range(tests):
            lines += [f"def test_case_{t}():", f"    out = echo({{'n': {t}}})",
                      f"    assert out['n'] == {t * 2} and out['got']['n'] == {t}", ""]
        write(root / f"tests/test_s{f:04d}.py", "\n".join(lines))


def figure(name: str, value: float, baseline: float, label: str, target: str) -> None:
    ratio = value / baseline if baseline else float("inf")
    print(f"{name:<12} {value:8.2f}s  vs {label:<46} {baseline:8.2f}s  ratio {ratio:5.2f}  (target {target})",
          flush=True)


def prime(tmp: Path) -> None:
    """Fill the bytecode cache with everything but the projects' own files."""
    # two caches: the cold runs' is never written to after priming, so test modules stay cold;
    # and a temp root of our own: xdist's controller makes a basetemp, and pytest then prunes
    # old ``pytest-of-<user>`` directories, which on a shared machine can take seconds
    (tmp / "temproot").mkdir()
    shared = {"PYTEST_DEBUG_TEMPROOT": str(tmp / "temproot")}
    ENVS["warm"] = {**shared, "PYTHONPYCACHEPREFIX": str(tmp / "pycache-warm"), "PYTHONDONTWRITEBYTECODE": ""}
    ENVS["cold"] = {**shared, "PYTHONPYCACHEPREFIX": str(tmp / "pycache-cold"), "PYTHONDONTWRITEBYTECODE": "1"}
    connic, plain, llm = tmp / "prime-c", tmp / "prime-p", tmp / "prime-l"
    tool_project(connic, 1, 1)
    python_project(plain, 1, 1)
    llm_project(llm, 2, 2)
    for prefix in (ENVS["warm"], {**ENVS["cold"], "PYTHONDONTWRITEBYTECODE": ""}):
        for root in (connic, plain, llm):
            for args in (["-q"], ["-q", "-n", "2"], ["--collect-only", "-q"]):
                run([PY, "-m", "pytest", *args], root, prefix)
        run([PY, "-c", "import connic.test_schema, yaml"], connic, prefix)


def bench_collection(tmp: Path) -> None:
    connic, distinct, plain = tmp / "c", tmp / "cd", tmp / "p"
    tool_project(connic, 1000, 10)
    tool_project(distinct, 1000, 10, distinct=True)
    python_project(plain, 1000, 10)
    collect = [PY, "-m", "pytest", "--collect-only", "-q"]
    floor_script = (
        "import yaml,pathlib;from connic.test_schema import TestFile\n"
        "for f in sorted(pathlib.Path('tests').glob('*.yaml')): TestFile(**yaml.load(f.read_text(), Loader=yaml.CSafeLoader))"
    )
    run(collect, plain)  # writes the test modules' bytecode for the warm baseline
    c, d, cold, warm, floor = best(
        (collect, connic, None), (collect, distinct, None), (collect, plain, ENVS["cold"]),
        (collect, plain, None), ([PY, "-c", floor_script], connic, None),
    )
    figure("collection", c, cold, "plain pytest, 10,000 Python tests (cold)", "<= 0.5x")
    figure("", c, warm, "plain pytest, 10,000 Python tests (warm)", "<= 0.5x")
    figure("", d, warm, "... every expression distinct, vs warm", "report")
    figure("", c, floor, "SDK TestFile parse + validate (floor)", "report")


FLOOR = (
    "import pathlib, yaml\n"
    "for f in sorted([*pathlib.Path('tests').glob('*.yaml'), *pathlib.Path('agents').rglob('*.yaml')]):\n"
    "    yaml.load(f.read_bytes(), Loader=yaml.CSafeLoader)\n"
)


def bench_collect(tmp: Path, rounds: int = 5) -> None:
    """Collection against the parse floor, as the median of ``rounds`` alternating pairs."""
    import statistics

    root = tmp / "collect"
    tool_project(root, 1000, 10)
    collect = [PY, "-m", "pytest", "--collect-only", "-q"]
    floor = [PY, "-c", FLOOR]
    run(collect, root)  # warm: the plugin's and pytest's bytecode
    pairs = []
    for _ in range(rounds):
        c = run(collect, root)[0]
        f = run(floor, root)[0]
        pairs.append((c, f))
    ratios = [c / f for c, f in pairs]
    c, f = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
    print(f"{'collect':<12} {c:8.2f}s  vs {'C-loader parse of the same YAML (floor)':<46} {f:8.2f}s  "
          f"ratio {statistics.median(ratios):5.2f}  (median of {rounds} pair ratios {', '.join(f'{r:.2f}' for r in ratios)}; "
          "target <= 3x)", flush=True)


def bench_overhead(tmp: Path) -> tuple[float, float]:
    """The figures; returns the 1,000 cases' times under process isolation and in-process."""
    connic, plain = tmp / "oc", tmp / "op"
    tool_project(connic, 100, 10)
    python_project(plain, 100, 10)
    args = [PY, "-m", "pytest", "-q"]
    run(args, plain)
    inproc = [*args, "-o", "connic_isolation=none"]
    c, n, cold, warm = best((args, connic, None), (inproc, connic, None), (args, plain, ENVS["cold"]),
                            (args, plain, None))
    figure("overhead", c, cold, "hand-written pytest, same 1,000 calls (cold)", "<= 1.3x")
    figure("", c, warm, "hand-written pytest, same 1,000 calls (warm)", "<= 1.3x")
    # user code in pytest's process: the harness without issue 26's fresh worker per run
    figure("  in-process", n, cold, "hand-written pytest, same 1,000 calls (cold)", "<= 1.3x")
    return c, n


FORK_FLOOR = '''
import os, sys, time
from pathlib import Path
import pytest_connic.execution.isolation.template_process as tp
project = tp.load_project(Path(sys.argv[1]), lambda name, module: None)  # what a template holds
import gc
gc.collect()
gc.freeze()
N = int(sys.argv[2])
best = None
for _ in range(5):
    wall, cpu, kids = time.perf_counter(), time.process_time(), os.times()
    for _ in range(N):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    after = os.times()
    round_ = ((time.perf_counter() - wall) / N, (time.process_time() - cpu) / N,
              (after.children_user + after.children_system - kids.children_user - kids.children_system) / N)
    best = round_ if best is None or round_[0] < best[0] else best
rss = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
print(f"{best[0]} {best[1]} {best[2]} {rss}")
'''


def fork_floor(root: Path, forks: int = 200) -> tuple[float, float, float, float]:
    """A bare fork, exit and reap of a process holding what a template holds (the SDK, the
    template's modules, the project read statically, ``gc.freeze``d): wall, parent CPU and child
    CPU per fork (best of 5 rounds), and its resident size in MiB."""
    env = {**os.environ, "PYTHONPATH": str(HERE.parent / "src")}
    out = subprocess.run([PY, "-c", FORK_FLOOR, str(root), str(forks)], cwd=root, env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    wall, parent, child, rss = (float(x) for x in out)
    return wall, parent, child, rss


def bench_fork(tmp: Path) -> None:
    root = tmp / "fork"
    tool_project(root, 1, 1)
    wall, parent, child, rss = fork_floor(root)
    print(f"fork floor   {wall * 1000:8.2f}ms wall per fork-exit-reap of a template-sized process ({rss:.0f} MiB): "
          f"parent CPU {parent * 1000:.2f}ms, child CPU {child * 1000:.2f}ms", flush=True)


def bench_fresh(tmp: Path) -> None:
    """Issue 40's table in one run: the overhead against hand-written tests under both isolations,
    the fork floor and the isolation cost per run above it, collection, concurrency, start-up."""
    c, n = bench_overhead(tmp)
    root = tmp / "oc"
    wall, parent, child, rss = fork_floor(root)
    cost = (c - n) / 1000
    print(f"fork floor   {wall * 1000:8.2f}ms wall per fork-exit-reap of a template-sized process ({rss:.0f} MiB): "
          f"parent CPU {parent * 1000:.2f}ms, child CPU {child * 1000:.2f}ms", flush=True)
    print(f"isolation    {cost * 1000:8.2f}ms per run (process minus in-process, 1,000 runs): "
          f"{cost / wall:.2f}x the fork floor (target <= 1.5x)", flush=True)
    bench_collection(tmp)
    bench_startup(tmp)
    import importlib.util

    spec = importlib.util.spec_from_file_location("isolation_bench", HERE / "isolation.py")
    assert spec is not None and spec.loader is not None
    isolation = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(isolation)
    nap = tmp / "nap"
    isolation.project(nap)
    isolation.concurrency(nap, rounds=3)


SLOW_MODEL = '''
import asyncio, os, time
from pytest_connic.models.base import ModelResponse

DELAY = float(os.environ.get("MODEL_DELAY", "0.05"))
SPAN = []

class Slow:
    async def complete(self, request):
        await asyncio.sleep(DELAY)
        return ModelResponse(content='{"ok": true}')

def pytest_connic_make_model(config, agent, model, case, run_index):
    return Slow()

# where the cases ran: from the first setup to the last teardown, per process (xdist workers too)
def pytest_runtest_setup(item):
    SPAN.append(time.time())

def pytest_runtest_teardown(item, nextitem):
    SPAN.append(time.time())

def pytest_sessionfinish(session):
    if SPAN and os.environ.get("SPAN_DIR"):
        with open(os.path.join(os.environ["SPAN_DIR"], f"{os.getpid()}.txt"), "w") as f:
            f.write(f"{min(SPAN)} {max(SPAN)}")
'''


def llm_project(root: Path, cases: int, runs: int, conftest: str = SLOW_MODEL, max_runs: int | None = None) -> None:
    """``max_runs``: the agent's ``max_concurrent_runs`` (None: unset, Connic's default 1 serialises
    the runs of a case)."""
    cap = f"max_concurrent_runs: {max_runs}\n" if max_runs is not None else ""
    write(root / "agents/bot.yaml", 'version: "1.0"\nname: bot\ndescription: d\nmodel: openai/x\nsystem_prompt: s\n'
          + cap)
    write(root / "conftest.py", conftest)
    write(root / "pytest.ini", "[pytest]\naddopts = -p no:cacheprovider\n")
    body = ["agent: bot", "tests:"]
    for c in range(cases):
        body += [f"  - name: case {c}", "    payload: hi", f"    runs: {runs}", "    expected_result: output.ok == true"]
    write(root / "tests/bot.yaml", "\n".join(body) + "\n")


def bench_concurrency(tmp: Path) -> None:
    root = tmp / "cc"
    llm_project(root, 1, 100, max_runs=100)  # the agent allows them: Connic's default would serialise
    # a one-run case first: the session loads the project's runtime (real modules, local
    # services) for the first case it runs, a once-per-session cost that is not the case's own
    suite = root / "tests/bot.yaml"
    suite.write_text(suite.read_text().replace(
        "tests:\n", "tests:\n  - name: warm up\n    payload: hi\n    expected_result: output.ok == true\n", 1))
    for concurrency in (8, 32):
        wall = min(_case_wall(root, concurrency) for _ in range(3))
        ideal = math.ceil(100 / concurrency) * 0.05
        figure(f"conc. {concurrency}", wall, ideal, f"ideal ceil(100/{concurrency}) x 50 ms", "<= 1.25x")


def bench_serialising(tmp: Path) -> None:
    """What Connic's default ``max_concurrent_runs`` of 1 costs: one case of 16 runs whose agent
    sets nothing (its runs one after another) against the same agent with ``max_concurrent_runs:
    8``, at ``--connic-concurrency 8``; with a model answering at once (a cassette replay) and one
    answering after 50 ms (a live provider's latency, much shorter than a real one); and a tool
    agent, whose every run calls user code in a worker process of its own."""
    for kind in ("0", "0.05", "tool"):
        delay = "0" if kind == "tool" else kind
        roots = []
        for cap in (None, 8):
            root = tmp / f"ser-{kind}-{cap}"
            if kind == "tool":
                _serial_tool_project(root, cap)
            else:
                llm_project(root, 1, 16, max_runs=cap)
                suite = root / "tests/bot.yaml"  # a one-run case first loads the project (see above)
                suite.write_text(suite.read_text().replace(
                    "tests:\n", "tests:\n  - name: warm up\n    payload: hi\n    expected_result: output.ok == true\n", 1))
            roots.append(root)
        walls: list[list[float]] = [[], []]
        for _ in range(5):  # alternating, so that a busy machine slows both alike
            for i, root in enumerate(roots):
                walls[i].append(_case_wall(root, 8, {"MODEL_DELAY": delay}))
        serial, concurrent = min(walls[0]), min(walls[1])
        what = {"0": "instant model (replay)", "0.05": "model answering in 50 ms",
                "tool": "tool agent, a worker per run"}[kind]
        figure("serialising", serial, concurrent, f"max_concurrent_runs: 8, {what}", "a figure")
        print(f"{'':<12} 16 runs serialised cost {(serial - concurrent) * 1000:+.0f} ms over 8 at once, "
              f"{(serial - concurrent) / 16 * 1000:+.2f} ms per run", flush=True)


def _serial_tool_project(root: Path, max_runs: int | None) -> None:
    """A tool agent (user code in a worker process per run): a warm-up case, then ``case 0`` with 16 runs."""
    cap = f"max_concurrent_runs: {max_runs}\n" if max_runs is not None else ""
    write(root / "agents/echo.yaml", 'version: "1.0"\nname: echo\ndescription: d\ntype: tool\ntool_name: t.echo\n' + cap)
    write(root / "tools/t.py", TOOLS)
    write(root / "pytest.ini", "[pytest]\naddopts = -p no:cacheprovider\n")
    write(root / "tests/echo.yaml", "tests:\n  - name: warm up\n    payload: '{\"n\": 1}'\n"
                                    "  - name: case 0\n    payload: '{\"n\": 1}'\n    runs: 16\n"
                                    "    expected_result: output.n == 2\n")


def _case_wall(root: Path, concurrency: int, env: dict[str, str] | None = None) -> float:
    """The case's own time, all phases (its runs happen in setup, its verdict in call): JUnit's
    ``time``, which pytest measures around setup, call and teardown."""
    run([PY, "-m", "pytest", "-q", f"--connic-concurrency={concurrency}", "--junitxml=j.xml"], root, env)
    (case,) = [c for c in ET.parse(root / "j.xml").getroot().iter("testcase") if c.get("name") == "case 0"]
    return float(case.get("time", "nan"))


def _scaling_run(root: Path, workers: int, delay: float) -> tuple[float, float]:
    """Wall time of the session, and the span in which its cases ran (first setup to last
    teardown over all processes: the session without pytest's and xdist's start and end)."""
    spans = root / f"spans-{workers}"
    spans.mkdir(exist_ok=True)
    for old in spans.iterdir():
        old.unlink()
    wall, _ = run([PY, "-m", "pytest", "-q", "-n", str(workers)], root,
                  {"SPAN_DIR": str(spans), "MODEL_DELAY": str(delay)})
    marks = [tuple(map(float, p.read_text().split())) for p in spans.iterdir()]
    return wall, max(end for _, end in marks) - min(start for start, _ in marks)


def bench_scaling(tmp: Path) -> None:
    root = tmp / "sc"
    llm_project(root, 200, 1)
    for delay in (0.05, 0.15):
        (one, one_span), (two, two_span) = (
            min(_scaling_run(root, n, delay) for _ in range(2)) for n in (0, 2)
        )
        label = f"scaling {delay * 1000:.0f}ms"
        print(f"{label:<16} -n 0 {one:6.2f}s  -n 2 {two:6.2f}s  speed-up {one / two:4.2f}x (target >= 1.7x); "
              f"cases alone {one_span:5.2f}s vs {two_span:5.2f}s: {one_span / two_span:4.2f}x", flush=True)


WAITING_TOOLS = '''
import time


def wait(payload: dict) -> dict:
    """User code that waits (a model, a service): the CPU is free meanwhile."""
    time.sleep(0.1)
    return {"ok": True}


def compute(payload: dict) -> dict:
    """User code that computes for 100 ms of CPU."""
    end = time.process_time() + 0.1
    n = 0
    while time.process_time() < end:
        n += 1
    return {"ok": n > 0}
'''


def _kind_project(root: Path, cases: int, kind: str) -> None:
    """``cases`` tool-agent cases whose tool ``wait``s or ``compute``s for 100 ms."""
    write(root / "agents/echo.yaml", f'version: "1.0"\nname: echo\ndescription: d\ntype: tool\ntool_name: t.{kind}\n')
    write(root / "tools/t.py", WAITING_TOOLS)
    write(root / "pytest.ini", "[pytest]\naddopts = -p no:cacheprovider -p no:randomly\n")
    body = ["agent: echo", "tests:"] + [f"  - name: case {c}\n    payload: '{{}}'\n    expected_result: output.ok == true"
                                       for c in range(cases)]
    write(root / "tests/t.yaml", "\n".join(body) + "\n")


def bench_xdist(tmp: Path) -> None:
    """When ``-n 2`` pays on this machine: medians of alternating rounds, -n 0 against -n 2."""
    import shutil

    example = tmp / "xd-example"
    shutil.copytree(HERE.parent / "examples" / "order-desk", example,
                    ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    projects = [("example (11 cases)", example)]
    for kind in ("wait", "compute"):
        for cases in (10, 40, 160):
            root = tmp / f"xd-{kind}-{cases}"
            _kind_project(root, cases, kind)
            projects.append((f"{cases} x {kind} 100 ms", root))
    for label, root in projects:
        serial, parallel = (median_of(root, args) for args in (["-n", "0"], ["-n", "2"]))
        print(f"{'xdist':<12} {label:<22} -n 0 {serial:6.2f}s  -n 2 {parallel:6.2f}s  "
              f"speed-up {serial / parallel:4.2f}x", flush=True)


def median_of(root: Path, args: list[str], rounds: int = 3) -> float:
    times = sorted(run([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], root)[0] for _ in range(rounds))
    return times[len(times) // 2]


def bench_firstcall(tmp: Path) -> None:
    """A recording's first case against its second: LiteLLM's import (seconds of CPU) used to be
    in the first case's first model call; it now happens before the first case."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from helpers.fake_provider import FakeProvider

    root = tmp / "fc"
    write(root / "agents/bot.yaml", 'version: "1.0"\nname: bot\ndescription: d\nmodel: openai/gpt-4o-mini\n'
                                    'system_prompt: s\n')
    write(root / "pytest.ini", "[pytest]\naddopts = -p no:cacheprovider -p no:randomly\n")
    write(root / "tests/bot.yaml", "agent: bot\ntests:\n  - name: first\n    payload: hi\n"
                                   "  - name: second\n    payload: hi\n")
    firsts, seconds, walls = [], [], []
    with FakeProvider(lambda body: "ok") as fp:
        env = {"OPENAI_API_KEY": "sk-bench", "OPENAI_API_BASE": fp.base_url}
        for _ in range(3):
            wall, _ = run([PY, "-m", "pytest", "-q", "--connic-record-mode=all", "--junitxml=j.xml"], root, env)
            times = {c.get("name"): float(c.get("time", "nan"))
                     for c in ET.parse(root / "j.xml").getroot().iter("testcase")}
            firsts.append(times["first"])
            seconds.append(times["second"])
            walls.append(wall)
    print(f"{'firstcall':<12} first case {min(firsts):5.2f}s  second case {min(seconds):5.2f}s  "
          f"session {min(walls):5.2f}s", flush=True)


COUNTING_MODEL = '''
import os
from pytest_connic.models.base import ModelResponse

class Counting:
    def __init__(self, answer):
        self.answer = answer
    async def complete(self, request):
        with open(os.environ["CALLS_FILE"], "a") as f:
            f.write("x")
        return ModelResponse(content=self.answer)

def pytest_connic_make_model(config, agent, model, case, run_index):
    # case i passes on runs where (run_index + i) % 3 != 0
    i = int(case["name"].split()[-1])
    ok = (run_index + i) % 3 != 0
    return Counting('{"ok": true}' if ok else '{"ok": false}')
'''


def bench_earlystop(tmp: Path) -> None:
    root = tmp / "es"
    llm_project(root, 20, 20, COUNTING_MODEL)
    text = (root / "tests/bot.yaml").read_text().replace("    runs: 20\n", "    runs: 20\n    success_threshold: 50\n")
    (root / "tests/bot.yaml").write_text(text)
    results = {}
    for flag in ("", "--connic-early-stop"):
        calls = root / f"calls{flag}.txt"
        calls.write_text("")
        args = [PY, "-m", "pytest", "-q", "--connic-concurrency=1", f"--connic-json=r{flag}.json"] + ([flag] if flag else [])
        run(args, root, env={"CALLS_FILE": str(calls)})
        report = json.loads((root / f"r{flag}.json").read_text())
        cases = report["cases"]
        results[flag] = (len(calls.read_text()), [(c["nodeid"], c["passed"]) for c in cases],
                         sum(c["skipped_runs"] for c in cases))
    full, early = results[""], results["--connic-early-stop"]
    same = full[1] == early[1]
    print(f"{'earlystop':<12} model calls {early[0]} with --connic-early-stop vs {full[0]} without "
          f"({early[0] / full[0]:.2f}x), {early[2]} runs skipped; verdicts of all {len(full[1])} cases "
          f"identical: {same}", flush=True)


def bench_startup(tmp: Path) -> None:
    root = tmp / "su"
    python_project(root, 10, 5)
    without = {"PYTEST_ADDOPTS": "-p no:connic"}
    version = [PY, "-m", "pytest", "--version"]
    with_v, without_v = best((version, root, None), (version, root, without), repeat=7)
    figure("startup", with_v, without_v, "pytest --version without the plugin", "<= 1.05x")
    collect = [PY, "-m", "pytest", "--collect-only", "-q"]
    with_c, without_c = best((collect, root, None), (collect, root, without), repeat=7)
    figure("", with_c, without_c, "collecting a plain project without plugin", "<= 1.05x")


MEASURED = (
    "import resource, sys, pytest\n"
    "pytest.main(sys.argv[1:])\n"
    "print('RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, flush=True)\n"
)


def _pss_kb(pid: int) -> int:
    """A process's proportional set size (its share of pages it shares with others, e.g. a worker
    forked from the forkserver), 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _tree(root: int) -> list[int]:
    """``root`` and every process below it (workers, the forkserver, their keepers)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += parents.get(pid, [])
    return found


def peak_rss(args: list[str], cwd: Path) -> tuple[float, float, int]:
    """pytest's own peak RSS (``ru_maxrss`` at its end), the peak of its whole process tree's PSS
    sampled every 50 ms (pytest, the forkserver and the workers), both in MB, and the most
    processes of the tree seen at once."""
    with tempfile.TemporaryFile("w+") as output:  # a pipe would fill with 10,000 lines and block
        proc = subprocess.Popen([PY, "-c", MEASURED, *args], cwd=cwd, stdout=output, stderr=subprocess.STDOUT,
                                text=True, env={**os.environ, **ENVS.get("warm", {})})
        tree_kb, most = 0, 0
        while proc.poll() is None:
            pids = _tree(proc.pid)
            tree_kb, most = max(tree_kb, sum(_pss_kb(pid) for pid in pids)), max(most, len(pids))
            time.sleep(0.05)
        output.seek(0)
        out = output.read()
    found = re.search(r"RSS (\d+)", out)
    if proc.returncode not in (0, 1) or found is None:
        raise SystemExit(f"command failed ({proc.returncode}): pytest {' '.join(args)}\n{out[-3000:]}")
    return int(found.group(1)) / 1024, tree_kb / 1024, most


def bench_memory(tmp: Path) -> None:
    """Peak memory at scale: collecting and running 10,000 tool-agent cases (1,000 suites x 10,
    one tool agent, user code in worker processes), collecting 10,000 plain Python tests."""
    collect = ["--collect-only", "-q", "-p", "no:cacheprovider"]
    base_script = "import resource, pytest\nprint('RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    _, base = run([PY, "-c", base_script], tmp)
    base_mb = int(re.search(r"RSS (\d+)", base).group(1)) / 1024  # type: ignore[union-attr]
    print(f"{'memory':<12} Python + pytest alone: {base_mb:.0f} MB", flush=True)
    for name, distinct in (("mem", False), ("memd", True)):
        root = tmp / name
        tool_project(root, 1000, 10, distinct=distinct)
        own, _, _ = peak_rss(collect, root)
        what = "every expression distinct" if distinct else "10,000 cases"
        print(f"{'memory':<12} peak RSS collecting {what}: {own:.0f} MB (target < 200 MB)", flush=True)
    own, tree, most = peak_rss(["-q", "-p", "no:cacheprovider"], tmp / "mem")
    print(f"{'memory':<12} peak RSS running 10,000 cases: pytest's process {own:.0f} MB; its process tree "
          f"(workers, forkserver; PSS) {tree:.0f} MB, at most {most} processes", flush=True)
    plain = tmp / "memp"
    python_project(plain, 1000, 10)
    own, _, _ = peak_rss(collect, plain)
    print(f"{'memory':<12} peak RSS collecting 10,000 plain Python tests (no plugin in use): {own:.0f} MB",
          flush=True)


FIGURES = {
    "collection": bench_collection,
    "overhead": bench_overhead,
    "concurrency": bench_concurrency,
    "serialising": bench_serialising,
    "scaling": bench_scaling,
    "xdist": bench_xdist,
    "firstcall": bench_firstcall,
    "earlystop": bench_earlystop,
    "startup": bench_startup,
    "memory": bench_memory,
}


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = " ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    import pytest

    return (f"python {sys.version.split()[0]}, pytest {pytest.__version__}, {platform.system()} "
            f"{platform.release()}, {os.cpu_count()} CPUs ({cpu}), load average {load}")


WORLD_MIDDLEWARE = '''
from datetime import datetime


def before(content, context):
    content["parts"].append({"text": datetime.now().isoformat(timespec="seconds")})
    return content
'''


def world_project(root: Path, suites: int, cases: int, *, world: bool) -> None:
    """An LLM agent with a before middleware and a tool (user code in the workers each run), each
    case replayed from its cassette; ``world``: each cassette run carries a ``world:`` section."""
    write(root / "agents/bot.yaml", 'version: "1.0"\nname: bot\ndescription: d\nmodel: openai/x\n'
                                    'system_prompt: s\ntools: [t.echo]\n')
    write(root / "tools/t.py", TOOLS)
    write(root / "middleware/bot.py", WORLD_MIDDLEWARE)
    write(root / "pytest.ini", "[pytest]\naddopts = -p no:cacheprovider -p no:randomly\n")
    section = ('    world: {started_at: "2026-12-01T10:00:00+00:00", run_ids: [r-1], '
               'elapsed: [0.001, 0.002], seed: 7}\n') if world else ""
    for s in range(suites):
        body = ["agent: bot", "tests:"]
        for c in range(cases):
            body += [f"  - name: case {c}", "    payload: hi", "    expected_result: output.ok == true"]
            write(root / f"cassettes/s{s:03d}/case {c}.yaml",
                  "version: 1\nruns:\n  - turns:\n      - tool_calls: [{name: echo, arguments: {payload: {n: 1}}}]\n"
                  "      - content: '{\"ok\": true}'\n" + section)
        write(root / f"tests/s{s:03d}.yaml", "\n".join(body) + "\n")


def bench_world(tmp: Path) -> None:
    on, off = tmp / "won", tmp / "woff"
    world_project(on, 10, 100, world=True)
    world_project(off, 10, 100, world=False)
    args = [PY, "-m", "pytest", "-q"]
    with_world, without = best((args, on, None), (args, off, None))
    figure("world", with_world, without, "the same replay without world: (1,000 runs)", "<= 1.05x")
    print(f"{'':<12} {(with_world - without) / 1000 * 1000:+.3f} ms per run", flush=True)


FIGURES["world"] = bench_world
FIGURES["collect"] = bench_collect
FIGURES["fork"] = bench_fork
FIGURES["fresh"] = bench_fresh  # not in the default list: it repeats overhead, collection, startup


def main(argv: list[str]) -> None:
    wanted = argv or [name for name in FIGURES if name != "fresh"]
    print(_machine(), flush=True)
    with tempfile.TemporaryDirectory(prefix="connic-bench-") as tmp:
        prime(Path(tmp))
        for name in wanted:
            FIGURES[name](Path(tmp))


if __name__ == "__main__":
    main(sys.argv[1:])
