"""pytest-connic benchmarks: each figure beside a baseline measured in the same invocation.

    python benchmarks/bench.py            # all figures
    python benchmarks/bench.py collection overhead

Figures (issue "Fast at every scale"):
  collection   1,000 suites x 10 cases (pytest --collect-only -q) vs plain pytest collecting
               10,000 Python tests in 1,000 files, and vs the floor (SDK TestFile, no pytest)
  overhead     1,000 tool-agent cases vs a hand-written pytest module doing the same calls
  concurrency  one case, runs: 100, a model answering after 50 ms, vs ceil(100/concurrency) x 50 ms
  scaling      a 200-case model-bound suite with -n 0 vs -n 2
  earlystop    model calls with and without --connic-early-stop; verdicts must be equal
  startup      pytest --version and a plain Python project, with and without the plugin
  memory       peak RSS of collecting 10,000 cases
"""

from __future__ import annotations

import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import yaml

PY = sys.executable
HERE = Path(__file__).resolve().parent


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1, 5):
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(args)}")
    return elapsed, proc.stdout


def best(args: list[str], cwd: Path, repeat: int = 3, env: dict[str, str] | None = None) -> float:
    return min(run(args, cwd, env)[0] for _ in range(repeat))


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))


TOOLS = '''
def echo(payload: dict) -> dict:
    """Echo the payload back."""
    return {"got": payload, "n": payload.get("n", 0) * 2}
'''


def tool_project(root: Path, suites: int, cases: int) -> None:
    write(root / "agents/echo.yaml", 'version: "1.0"\nname: echo\ndescription: d\ntype: tool\ntool_name: t.echo\n')
    write(root / "tools/t.py", TOOLS)
    write(root / "pytest.ini", "[pytest]\naddopts = -p no:cacheprovider\n")
    for s in range(suites):
        body = ["agent: echo", "tests:"]
        for c in range(cases):
            body += [f"  - name: case {c}", f"    payload: '{{\"n\": {c}}}'",
                     f"    expected_result: output.n == {c * 2} and output.got.n == {c}"]
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
    print(f"{name:<12} {value:8.2f}s  vs {label:<44} {baseline:8.2f}s  ratio {ratio:5.2f}  (target {target})")


def bench_collection(tmp: Path) -> None:
    connic, plain = tmp / "c", tmp / "p"
    tool_project(connic, 1000, 10)
    python_project(plain, 1000, 10)
    c = best([PY, "-m", "pytest", "--collect-only", "-q"], connic)
    p = best([PY, "-m", "pytest", "--collect-only", "-q"], plain)
    floor_script = (
        "import yaml,pathlib;from connic.test_schema import TestFile\n"
        "for f in sorted(pathlib.Path('tests').glob('*.yaml')): TestFile(**yaml.load(f.read_text(), Loader=yaml.CSafeLoader))"
    )
    floor = best([PY, "-c", floor_script], connic)
    figure("collection", c, p, "plain pytest, 10,000 Python tests", "<= 0.5x")
    figure("", c, floor, "SDK TestFile parse + validate (floor)", "report")


def bench_overhead(tmp: Path) -> None:
    connic, plain = tmp / "oc", tmp / "op"
    tool_project(connic, 100, 10)
    python_project(plain, 100, 10)
    c = best([PY, "-m", "pytest", "-q", "-p", "no:randomly"], connic, repeat=2)
    p = best([PY, "-m", "pytest", "-q", "-p", "no:randomly"], plain, repeat=2)
    figure("overhead", c, p, "hand-written pytest, same 1,000 calls", "<= 1.5x")


SLOW_MODEL = '''
import asyncio
from pytest_connic.models.base import ModelResponse

CALLS = []

class Slow:
    async def complete(self, request):
        CALLS.append(1)
        await asyncio.sleep(0.05)
        return ModelResponse(content='{"ok": true}')

def pytest_connic_make_model(config, agent, model, case, run_index):
    return Slow()
'''


def llm_project(root: Path, cases: int, runs: int, conftest: str = SLOW_MODEL) -> None:
    write(root / "agents/bot.yaml", 'version: "1.0"\nname: bot\ndescription: d\nmodel: openai/x\nsystem_prompt: s\n')
    write(root / "conftest.py", conftest)
    write(root / "pytest.ini", "[pytest]\naddopts = -p no:cacheprovider\n")
    body = ["agent: bot", "tests:"]
    for c in range(cases):
        body += [f"  - name: case {c}", "    payload: hi", f"    runs: {runs}", "    expected_result: output.ok == true"]
    write(root / "tests/bot.yaml", "\n".join(body) + "\n")


def bench_concurrency(tmp: Path) -> None:
    root = tmp / "cc"
    llm_project(root, 1, 100)
    for concurrency in (8, 32):
        elapsed, out = run([PY, "-m", "pytest", "-q", f"--connic-concurrency={concurrency}",
                            "--connic-json=r.json"], root)
        report = json.loads((root / "r.json").read_text())
        case = report["cases"][0]
        # the case's own wall time: sum of nothing else in the session; use the pytest duration
        durations = [r["duration_ms"] for r in case.get("runs_detail", [])]
        wall = _case_wall(root, concurrency)
        ideal = math.ceil(100 / concurrency) * 0.05
        figure(f"conc. {concurrency}", wall, ideal, f"ideal ceil(100/{concurrency}) x 50 ms", "<= 1.25x")
        del durations, elapsed, out


def _case_wall(root: Path, concurrency: int) -> float:
    _, out = run([PY, "-m", "pytest", "-q", "--durations=1", "--durations-min=0",
                  f"--connic-concurrency={concurrency}"], root)
    match = re.search(r"([0-9.]+)s call", out)
    return float(match.group(1)) if match else float("nan")


def bench_scaling(tmp: Path) -> None:
    root = tmp / "sc"
    llm_project(root, 200, 1)
    one = best([PY, "-m", "pytest", "-q", "-n", "0"], root, repeat=1)
    two = best([PY, "-m", "pytest", "-q", "-n", "2"], root, repeat=1)
    print(f"{'scaling':<12} -n 0 {one:6.2f}s   -n 2 {two:6.2f}s   speed-up {one / two:4.2f}x  (target >= 1.7x)")


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
        results[flag] = (len(calls.read_text()), [c["passed"] for c in report["cases"]])
    full, early = results[""], results["--connic-early-stop"]
    same = full[1] == early[1]
    print(f"{'earlystop':<12} model calls {early[0]} with --connic-early-stop vs {full[0]} without "
          f"({early[0] / full[0]:.2f}x); verdicts identical: {same}")


def bench_startup(tmp: Path) -> None:
    root = tmp / "su"
    python_project(root, 10, 5)
    env_without = {"PYTEST_ADDOPTS": "-p no:connic"}
    with_v = best([PY, "-m", "pytest", "--version"], root, repeat=5)
    without_v = best([PY, "-m", "pytest", "--version"], root, repeat=5, env=env_without)
    figure("startup", with_v, without_v, "pytest --version without the plugin", "<= 1.05x")
    with_c = best([PY, "-m", "pytest", "--collect-only", "-q"], root, repeat=5)
    without_c = best([PY, "-m", "pytest", "--collect-only", "-q"], root, repeat=5, env=env_without)
    figure("", with_c, without_c, "collecting a plain project without plugin", "<= 1.05x")


def bench_memory(tmp: Path) -> None:
    root = tmp / "mem"
    tool_project(root, 1000, 10)
    script = (
        "import resource, sys, pytest\n"
        "pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider'])\n"
        "print('RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    _, out = run([PY, "-c", script], root)
    rss_kb = int(re.search(r"RSS (\d+)", out).group(1))  # type: ignore[union-attr]
    base_script = "import resource, pytest\nprint('RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    _, base = run([PY, "-c", base_script], root)
    base_kb = int(re.search(r"RSS (\d+)", base).group(1))  # type: ignore[union-attr]
    print(f"{'memory':<12} peak RSS collecting 10,000 cases {rss_kb / 1024:.0f} MB "
          f"(Python + pytest alone {base_kb / 1024:.0f} MB; target < 200 MB)")
    del resource


FIGURES = {
    "collection": bench_collection,
    "overhead": bench_overhead,
    "concurrency": bench_concurrency,
    "scaling": bench_scaling,
    "earlystop": bench_earlystop,
    "startup": bench_startup,
    "memory": bench_memory,
}


def main(argv: list[str]) -> None:
    wanted = argv or list(FIGURES)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {sys.platform}")
    with tempfile.TemporaryDirectory(prefix="connic-bench-") as tmp:
        for name in wanted:
            FIGURES[name](Path(tmp))


if __name__ == "__main__":
    main(sys.argv[1:])
