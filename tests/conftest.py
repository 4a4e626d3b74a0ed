"""Test fixtures: small real Connic projects written into pytester's directory.

The plugin's modules are imported here, once, in the outer test process: pytester restores
``sys.modules`` after each in-process run, so a module first imported inside an inner run is
imported (and assertion-rewritten) again by the next one. Imported up front, every inner run
reuses them. The SDK boundary comes first: it imports the Connic SDK quietly.
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
import types
from collections.abc import Iterator
from pathlib import Path

import hypothesis  # noqa: F401  (imported once here: in-process pytester runs then reuse it)
import pytest

import pytest_connic
from helpers.chromium import find_chromium
from helpers.harness import CaseProject
from helpers.project import CALC_TOOLS, ConnicProject

pytest_plugins = ["pytester"]
#: whole Connic projects copied from Connic's examples, run by the tests that copy them (not suites of ours)
collect_ignore_glob = ["corpus/projects/*"]

importlib.import_module("pytest_connic.project.sdk")  # first: the quiet import of the Connic SDK
# LiteLLM fetches its price map from the internet at import unless told otherwise; test modules
# that ``importorskip("litellm")`` import it before the plugin's own offline import would
for _name, _value in importlib.import_module("pytest_connic.models.live").OFFLINE_ENV.items():
    os.environ.setdefault(_name, _value)
for _module in pkgutil.walk_packages(pytest_connic.__path__, "pytest_connic."):
    importlib.import_module(_module.name)
# multiprocessing's forkserver lives in its module: imported first inside an inner run, the module
# would be dropped with that run's ``sys.modules`` and the next run would start (and preload) a
# forkserver of its own, leaving the old one running, a process per inner session. Imported here,
# every in-process inner session shares one forkserver, as one pytest session does.
for _name in ("connection", "context", "forkserver", "popen_forkserver", "reduction", "resource_tracker", "spawn"):
    importlib.import_module(f"multiprocessing.{_name}")
#: what the plugin and the test helpers import on first use, imported here for the same reason:
#: first imported inside a test or an in-process inner session, each would be dropped with it and
#: imported again by the next (Connic's upload check alone, ``connic.cli``, is 180 modules).
#: An extra that is not installed is skipped. (LiteLLM is imported by the test modules that use it.)
LAZY_IMPORTS = (
    "connic.cli", "httpx", "httpcore", "h11", "html2text", "openapi_spec_validator", "mcp.types",
    "mcp.client.session", "mcp.client.streamable_http", "mcp.shared._httpx_utils", "mcp.server.mcpserver",
    "mcp.server.fastmcp", "uvicorn", "uvicorn.main", "starlette.applications", "numpy", "scipy.stats",
    "scipy.optimize", "time_machine", "coverage", "ruamel.yaml",
)
for _name in LAZY_IMPORTS:
    try:
        importlib.import_module(_name)
    except ImportError:
        pass


#: the ini value inner sessions get when their test is marked ``isolation_none``
IN_PROCESS = "-o connic_isolation=none"
#: plugins of the ``[test]`` environment that an inner session loads only when its test module
#: names them (a trigger below): each is imported by every subprocess session and xdist worker
#: (about 0.5 s of start-up for all of them), and no test needs one it does not name
OPTIONAL_PLUGINS = {
    "pytest-testmon": ("testmon",),
    "pytest_cov": ("--cov", "pytest_cov", "pytest-cov", "COVERAGE_PROCESS_START"),
    "anyio": ("anyio",),
    "rerunfailures": ("--reruns", "rerunfailures"),
    "pytest_github_actions_annotate_failures": ("GITHUB_ACTIONS", "annotate"),
    "pytest-split": ("--splits", "pytest_split", "pytest-split"),
    "picked": ("--picked", "pytest_picked", "pytest-picked"),
    "repeat": ("--count", "pytest_repeat", "pytest-repeat"),
    "time_machine": ("time_machine",),
    "platformdirs": ("platformdirs",),
}


@functools.cache
def _unneeded_plugins(module_file: str) -> tuple[str, ...]:
    """The optional plugins a test module names none of the triggers of."""
    source = Path(module_file).read_text("utf-8")
    return tuple(name for name, triggers in OPTIONAL_PLUGINS.items()
                 if not any(trigger in source for trigger in triggers))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "isolation_none: the test's inner sessions run user code in pytest's process "
        "(connic_isolation=none), for tests whose subject is not isolation (docs/architecture.md, Tests)")
    config.addinivalue_line(
        "markers", "slow: a subprocess, a nested xdist session or a browser; added by this conftest where a "
        "test's code shows one, run last; pytest -m 'not slow' is the fast inner loop (docs/architecture.md, Tests)")


#: what makes a test slow (``pytest -m "not slow"`` leaves it out; it runs last): a call that starts
#: a process of pytest's (``run_subprocess``, pytester's ``runpytest_subprocess``) or another
#: (``subprocess``, ``Popen``, ``sys.executable`` as pytester's ``run`` takes it), a nested xdist
#: session (``"-n"`` among its constants, or a parameter ``xdist`` that is set), a headless browser
#: (the ``chromium`` fixture)
SUBPROCESS_NAMES = frozenset({"run_subprocess", "runpytest_subprocess", "subprocess", "Popen", "check_output",
                              "executable"})
XDIST_CONSTANTS = frozenset({"-n", "--numprocesses"})


def _code_objects(code: types.CodeType, namespace: dict[str, object], seen: set[types.CodeType]) -> Iterator[types.CodeType]:
    """``code``, the code nested in it (lambdas, inner functions) and, transitively, the code of the
    module-level functions of ``namespace`` it names: a test's helpers are usually its module's."""
    if code in seen:
        return
    seen.add(code)
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const, namespace, seen)
    for name in code.co_names:
        target = namespace.get(name)
        if isinstance(target, types.FunctionType):
            yield from _code_objects(target.__code__, namespace, seen)


@functools.cache
def _starts_processes(function: types.FunctionType, fixtures: tuple[str, ...]) -> tuple[bool, bool]:
    """Whether ``function`` or a fixture of its module among ``fixtures`` (through the module's
    helpers) starts a process, and whether it names ``-n``."""
    namespace = function.__globals__
    seen: set[types.CodeType] = set()
    codes = list(_code_objects(function.__code__, namespace, seen))
    for name in fixtures:
        fixture = getattr(namespace.get(name), "__wrapped__", namespace.get(name))  # pytest 9 wraps a fixture
        if isinstance(fixture, types.FunctionType):
            codes += _code_objects(fixture.__code__, namespace, seen)
    subprocess = any(SUBPROCESS_NAMES.intersection(code.co_names) for code in codes)
    xdist = any(isinstance(c, str) and c in XDIST_CONSTANTS for code in codes for c in code.co_consts)
    return subprocess, xdist


def _is_slow(item: pytest.Item) -> bool:
    fixtures = tuple(getattr(item, "fixturenames", ()))
    if item.get_closest_marker("slow") is not None or "chromium" in fixtures:
        return True
    function = getattr(item, "function", None)
    if not isinstance(function, types.FunctionType):
        return False
    subprocess, xdist = _starts_processes(function, fixtures)
    params = getattr(getattr(item, "callspec", None), "params", {})
    if xdist and "xdist" in params:  # a variant with and without xdist: only the set one is slow
        xdist = bool(params["xdist"])
    return subprocess or xdist


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> Iterator[None]:
    """Unit tests first, then the tests of in-process pytest sessions (pytester), then the ``slow``
    ones (a subprocess, a nested xdist session, a browser), each group in file order: a failure
    below the session shows before the sessions that would fail with it, and ``-m "not slow"``
    (the marker added here) is the fast inner loop. As pytest's own testing/conftest.py does; a
    wrapper run first, so that ``--ff``, ``--nf`` and ``-p randomly`` still reorder after it."""
    unit: list[pytest.Item] = []
    in_process: list[pytest.Item] = []
    slow: list[pytest.Item] = []
    for item in items:
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)
            slow.append(item)
        elif "pytester" in getattr(item, "fixturenames", ()):
            in_process.append(item)
        else:
            unit.append(item)
    items[:] = unit + in_process + slow
    return (yield)


@pytest.fixture(autouse=True)
def _inner_sessions(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment of a test's inner sessions (``PYTEST_ADDOPTS``, which their subprocesses and
    xdist workers inherit too).

    - In file order: pytest-randomly (in the ``[test]`` extra for the tests that shuffle on purpose,
      with ``-p randomly``) would reorder every inner session: cases whose output names their order
      (the progress line, -v lines, the first failing case) would then differ from run to run.
    - Without Hypothesis's pytest plugin: no inner session runs a Hypothesis test, and the plugin
      imports all of Hypothesis as a session starts (about 40 % of a small subprocess session's
      CPU time).
    - Without the optional plugins of the test environment its module does not name
      (``OPTIONAL_PLUGINS``): pytest loads every installed plugin in every inner process.
    - With bytecode caching (``PYTHONDONTWRITEBYTECODE`` unset): compiling the plugin's modules,
      which pytest also rewrites as a plugin's, took about 1.6 s of every inner process's start.
    - Under the mark ``isolation_none``, user code in pytest's process (``connic_isolation=none``,
      an ini value, so an explicit ``--connic-isolation`` of the test still wins): starting worker
      processes and loading the project in each is most of a small inner session's time, and only
      the tests about isolation, or about what crosses the process boundary, need it. Unmarked
      tests keep the product's default, process isolation."""
    if "pytester" not in request.fixturenames:
        return
    request.getfixturevalue("pytester")  # pytester clears PYTEST_ADDOPTS as it starts: after it
    # this suite's own CI job runs under GitHub Actions: its inner sessions keep out of its step summary
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    # with bytecode caching, as Python's default: a machine with PYTHONDONTWRITEBYTECODE set would
    # otherwise compile (and assertion-rewrite) every module of the plugin in every inner process
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    addopts = os.environ.get("PYTEST_ADDOPTS", "")
    if "randomly" not in addopts:
        addopts = f"-p no:randomly {addopts}"
    if "hypothesispytest" not in addopts:
        addopts = f"-p no:hypothesispytest {addopts}"
    for name in _unneeded_plugins(str(request.path)):
        if name not in addopts:
            addopts = f"-p no:{name} {addopts}"
    if request.node.get_closest_marker("isolation_none") is not None:
        addopts = f"{addopts} {IN_PROCESS}"
    monkeypatch.setenv("PYTEST_ADDOPTS", addopts.strip())


@pytest.fixture
def case_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CaseProject:
    """An empty Connic project whose cases run below pytest (``helpers/harness.py``), user code in
    this process; the working directory is the project's, as in a session run from it."""
    root = tmp_path / "project"
    project = CaseProject(root)
    monkeypatch.chdir(root)
    return project


@pytest.fixture
def calc_cases(case_project: CaseProject) -> CaseProject:
    """``calc`` below pytest: the LLM agent ``calc`` (calc.add, calc.multiply) and the tool agent ``echo``."""
    case_project.tool("calc", CALC_TOOLS)
    case_project.agent("calc", tools=["calc.add", "calc.multiply"])
    case_project.agent("echo", type="tool", tool_name="calc.echo")
    return case_project


@pytest.fixture
def project(pytester: pytest.Pytester) -> ConnicProject:
    """An empty Connic project (only ``agents/``)."""
    return ConnicProject(pytester)


@pytest.fixture
def calc(project: ConnicProject) -> ConnicProject:
    """A project with an LLM agent ``calc`` (tools calc.add, calc.multiply) and a tool agent ``echo``."""
    project.tool("calc", CALC_TOOLS)
    project.agent("calc", tools=["calc.add", "calc.multiply"])
    project.agent("echo", type="tool", tool_name="calc.echo")
    return project


@pytest.fixture
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner sessions on a terminal 500 columns wide: the plugin folds its lines at the width
    (``reports.table.wrap``), and a test matching a whole long line wants it on one line."""
    monkeypatch.setenv("COLUMNS", "500")


@pytest.fixture(scope="module")
def chromium() -> str:
    """The headless Chromium binary (``/usr/bin/chromium``); without it a skip (a failure under CI)."""
    return find_chromium()
