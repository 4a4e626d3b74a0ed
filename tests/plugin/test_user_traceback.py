"""The user's traceback (issue 27): an exception raised by user code in a worker process crosses
with its frames and its cause chain, and the failure report shows it as pytest shows a Python
test's (``--tb`` styles, ``-l``, ``--full-trace``); the trace line, the JSON and the HTML hold it."""

from __future__ import annotations

import json
import sys

import pytest

from helpers.project import ConnicProject

TOOLS = '''
from tools.helper import lookup


def schedule(day: str) -> dict:
    """Schedule a follow-up.

    Args:
        day: the day
    """
    slots = {"mon": 1}
    return {"slot": lookup(slots, day)}
'''

HELPER = '''
def lookup(slots, day):
    return _inner(slots, day)


def _inner(slots, day):
    return _deep(slots, day)


def _deep(slots, day):
    key = day.lower()
    return slots[key]
'''

MIDDLEWARE = '''
def before(content, context):
    try:
        return content["missing"]
    except KeyError as exc:
        raise ValueError("no missing key") from exc
'''

SUITE = """
tests:
  - name: follow up
    payload: hi
    expected_tool_calls:
      - schedule: result.slot == 1
"""

QUIET = ("-W", "ignore::pytest_connic.warnings.ConnicWarning")


@pytest.fixture
def deep(project: ConnicProject) -> ConnicProject:
    """A tool whose KeyError is raised three calls deep in the user's own helper."""
    project.tool("t", TOOLS)
    project.tool("helper", HELPER)
    project.agent("planner", tools=["t.schedule"])
    project.suite("planner", SUITE)
    project.replies("planner", "follow up", [("schedule", {"day": "Chat"})], "done")
    return project


@pytest.mark.parametrize("isolation", ["process", "none"])
def test_the_failure_report_shows_the_users_frames(deep: ConnicProject, isolation: str) -> None:
    result = deep.run(*QUIET, f"--connic-isolation={isolation}")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "*✗ schedule(day=\"Chat\")*KeyError: 'chat' at tools/helper.py:11",
        "schedule(...) (tool call #1) raised:",
        ">       return {\"slot\": lookup(slots, day)}",
        "tools/t.py:11: ",
        "tools/helper.py:2: in lookup",
        "    return _inner(slots, day)",
        "tools/helper.py:6: in _inner",
        ">       return slots[key]",
        "E   KeyError: 'chat'",
        "tools/helper.py:11: KeyError",
    ])
    assert "pytest_connic" not in out and "worker.py" not in out  # no frame of the plugin
    assert "slots      = " not in out  # locals only with -l


def test_tb_line_gives_the_users_file_and_line(deep: ConnicProject) -> None:
    result = deep.run(*QUIET, "--tb=line")
    lines = [line for line in result.outlines if line.startswith("tools/helper.py:11: ")]
    assert len(lines) == 1, result.stdout.str()
    assert "expected tool call schedule" in lines[0]


def test_locals_and_short_style(deep: ConnicProject) -> None:
    result = deep.run(*QUIET, "--tb=short", "-l")
    result.stdout.fnmatch_lines([
        "tools/t.py:11: in schedule",
        "*day        = 'Chat'",
        "tools/helper.py:11: in _deep",
        "    return slots[key]",
        "E   KeyError: 'chat'",
        "*key        = 'chat'",
    ])


def test_native_style(deep: ConnicProject) -> None:
    native = deep.run(*QUIET, "--tb=native")
    native.stdout.fnmatch_lines(["Traceback (most recent call last):", '  File "tools/helper.py", line 11, in _deep',
                                 "    return slots[key]", "KeyError: 'chat'"])


def test_full_trace_shows_the_plugins_frames(deep: ConnicProject) -> None:
    full = deep.run(*QUIET, "--full-trace")
    assert "execution/isolation/worker.py" in full.stdout.str()  # the plugin's frames, shown on request


def test_json_and_html_hold_the_traceback(deep: ConnicProject) -> None:
    deep.run(*QUIET, "--connic-json=r.json", "--connic-html=r.html")
    report = json.loads((deep.root / "r.json").read_text("utf-8"))
    call = report["cases"][0]["runs_detail"][0]["tool_calls"][0]
    assert call["error"] == "KeyError: 'chat'"  # the existing key, unchanged
    assert call["traceback"]["where"] == "tools/helper.py:11"
    assert 'File "tools/helper.py", line 11, in _deep\n    return slots[key]\nKeyError' in call["traceback"]["text"]
    html = (deep.root / "r.html").read_text("utf-8")
    assert "in _deep" in html and "return slots[key]" in html
    case = report["cases"][0]["traceback"]  # the one the failure report shows, at the case
    assert case["origin"] == "schedule(...) (tool call #1)" and case["where"] == "tools/helper.py:11"
    assert case["text"].endswith("return slots[key]\nKeyError: 'chat'")


def test_the_cause_chain_of_a_middleware_crosses_the_worker(project: ConnicProject) -> None:
    project.agent("mw")
    project.write("middleware/mw.py", MIDDLEWARE)
    project.suite("mw", "tests:\n  - name: chained\n    payload: hi\n")
    project.replies("mw", "chained", "done")
    result = project.run(*QUIET)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "middleware before raised:",
        ">           return content[\"missing\"]",
        "E   KeyError: 'missing'",
        "middleware/mw.py:3: KeyError",
        "The above exception was the direct cause of the following exception:",
        '>           raise ValueError("no missing key") from exc',
        "E   ValueError: no missing key",
        "middleware/mw.py:5: *",
    ])


@pytest.mark.usefixtures("wide_terminal")
def test_pdb_stops_in_the_tools_frame(deep: ConnicProject) -> None:
    result = deep.pytester.run(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                               *QUIET, "--pdb", stdin=b"p key\np day\nup\np slots\nc\n", timeout=120)
    out = result.stdout.str()
    assert "connic: --pdb: user code runs in pytest's process for this session (isolation none)" in out
    result.stdout.fnmatch_lines(["*>*/tools/helper.py(11)_deep()", "-> return slots[key]",
                                 "(Pdb) 'chat'", "(Pdb) 'Chat'"])
    assert "{'mon': 1}" in out  # `up` reached the caller's frame and its locals


def test_pdb_with_explicit_process_isolation_is_refused(deep: ConnicProject) -> None:
    result = deep.run("--pdb", "--connic-isolation=process")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([("*--connic-isolation=process cannot be used with --pdb: the debugger runs in "
                                 "pytest's process*")])


def test_breakpoint_in_a_worker_says_how_to_debug(project: ConnicProject) -> None:
    project.tool("t", 'def stop(day: str) -> dict:\n    """Stop.\n\n    Args:\n        day: the day\n    """\n'
                      '    breakpoint()\n    return {"slot": 1}\n')
    project.agent("planner", tools=["t.stop"])
    project.suite("planner", "tests:\n  - name: bp\n    payload: hi\n    expected_tool_calls:\n"
                             "      - stop: result.slot == 1\n")
    project.replies("planner", "bp", [("stop", {"day": "mon"})], "done")
    result = project.run(*QUIET)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([("*BreakpointInWorker: breakpoint() in user code running in a worker process: "
                                 "run pytest with --pdb*")])


# ------------------------------------------------------------------ builders, guardrails, hooks, imports

GUARD = """
def _norm(text):
    return text["x"]


def check(content, context):
    return _norm(content)
"""

BUILDER = """
def _make(args):
    return args["needed"]


def build(context, builder_args, test_name, payload, files):
    return {"n": _make(builder_args)}
"""

CLEANUP = """
def build(context, builder_args, test_name, payload, files):
    return "hi"


def cleanup(run, context, builder_args):
    return {}["gone"]
"""

HOOKS = """
def before(tool_name, params, context):
    return _fix(params)


def _fix(params):
    return {"day": params["nope"]}
"""

SLOT_TOOL = ('def schedule(day: str) -> dict:\n    """Schedule.\n\n    Args:\n        day: the day\n    """\n'
             '    return {"slot": 1}\n')

BROKEN_IMPORT = """
def _conf():
    return {}["port"]


PORT = _conf()
"""


@pytest.mark.parametrize("isolation", ["process", "none"])
def test_a_builders_exception_shows_its_traceback(project: ConnicProject, isolation: str) -> None:
    project.write("tests/builders/b.py", BUILDER)
    project.write("tests/builders/c.py", CLEANUP)
    project.agent("bd")
    project.suite("bd", "tests:\n  - name: built\n    builder: b\n  - name: cleaned\n    builder: c\n")
    project.replies("bd", "built", "done")
    project.replies("bd", "cleaned", "done")
    result = project.run(*QUIET, f"--connic-isolation={isolation}", "--connic-json=r.json")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*✗ bd [[]failed[]] (*ms) at tests/builders/b.py:2",
        "builder build() raised:",
        ">       return {\"n\": _make(builder_args)}",
        "tests/builders/b.py:6: ",
        ">       return args[\"needed\"]",
        "E   KeyError: 'needed'",
        "tests/builders/b.py:2: KeyError",
    ])
    result.stdout.fnmatch_lines(["builder cleanup() raised:", ">       return {}[\"gone\"]", "E   KeyError: 'gone'",
                                 "tests/builders/c.py:6: KeyError"])
    assert "pytest_connic" not in result.stdout.str()
    cases = {c["test_name"]: c for c in json.loads((project.root / "r.json").read_text("utf-8"))["cases"]}
    assert cases["built"]["traceback"]["where"] == "tests/builders/b.py:2"
    assert cases["built"]["runs_detail"][0]["error_traceback"]["origin"] == "builder build()"


def test_a_custom_guardrails_exception_shows_its_traceback(project: ConnicProject) -> None:
    project.write("guardrails/g.py", GUARD)
    project.agent("gr", guardrails={"input": [{"type": "custom", "name": "g"}]})
    project.suite("gr", "tests:\n  - name: guarded\n    payload: hi\n")
    project.replies("gr", "guarded", "done")
    result = project.run(*QUIET, "--tb=short")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*✗ input guardrail g: blocked — check raised TypeError: string indices must be integers* at guardrails/g.py:2",
        "input guardrail 'g' raised:",
        "guardrails/g.py:6: in check",
        "    return _norm(content)",
        "guardrails/g.py:2: in _norm",
        "    return text[\"x\"]",
        "E   TypeError: string indices must be integers*",
    ])


def test_a_tool_hooks_exception_shows_its_traceback(project: ConnicProject) -> None:
    project.tool("t", SLOT_TOOL)
    project.write("hooks/hk.py", HOOKS)
    project.agent("hk", tools=["t.schedule"])
    project.suite("hk", "tests:\n  - name: hooked\n    payload: hi\n    expected_tool_calls:\n"
                        "      - schedule: result.slot == 1\n")
    project.replies("hk", "hooked", [("schedule", {"day": "x"})], "done")
    result = project.run(*QUIET, "--tb=short")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*✗ schedule(day=\"x\") (*ms) — before hook failed: KeyError: 'nope' at hooks/hk.py:6",
        "the before hook of schedule(...) (tool call #1) raised:",
        "hooks/hk.py:2: in before",
        "hooks/hk.py:6: in _fix",
        "E   KeyError: 'nope'",
    ])


def test_the_guardrail_hooks_exception_shows_its_traceback(project: ConnicProject) -> None:
    project.agent("smart", guardrails={"input": [{"type": "moderation"}]})
    project.write("conftest.py", "def _classify():\n    raise ValueError('no classifier')\n\n\n"
                                 "def pytest_connic_guardrail(config, rule, direction, content, context):\n"
                                 "    return _classify()\n")
    project.suite("smart", "tests:\n  - name: hook raises\n    payload: hi\n")
    result = project.run(*QUIET, "--tb=short")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["the hook pytest_connic_guardrail raised:", "conftest.py:6: in pytest_connic_guardrail",
                                 "conftest.py:2: in _classify", "E   ValueError: no classifier"])


@pytest.mark.parametrize("isolation", ["process", "none"])
def test_an_import_error_shows_its_traceback(project: ConnicProject, isolation: str) -> None:
    project.tool("t", BROKEN_IMPORT + SLOT_TOOL)
    project.write("guardrails/g.py", BROKEN_IMPORT + GUARD)
    project.agent("hk", tools=["t.schedule"])
    project.agent("gr", guardrails={"input": [{"type": "custom", "name": "g"}]})
    project.suite("hk", "tests:\n  - name: tooled\n    payload: hi\n")
    project.suite("gr", "tests:\n  - name: guarded\n    payload: hi\n")
    project.replies("gr", "guarded", "done")
    result = project.run(*QUIET, "--tb=short", f"--connic-isolation={isolation}", "--connic-json=r.json")
    result.assert_outcomes(failed=2)
    for module in ("tools/t.py", "guardrails/g.py"):
        result.stdout.fnmatch_lines([f"importing {module} raised:", f"{module}:5: in <module>", "    PORT = _conf()",
                                     f"{module}:2: in _conf", "E   KeyError: 'port'"])
    out = result.stdout.str()
    assert "frozen" not in out and "importlib" not in out and "pytest_connic" not in out
    cases = {c["test_name"]: c for c in json.loads((project.root / "r.json").read_text("utf-8"))["cases"]}
    assert cases["tooled"]["traceback"]["where"] == "tools/t.py:2"
    assert cases["guarded"]["traceback"]["where"] == "guardrails/g.py:2"
    # the same first lines under both isolations: the guardrail that cannot load aborts the run
    result.stdout.fnmatch_lines([("*0/1 runs passed, threshold 100% needs 1: custom guardrail 'g' could not be loaded from "
                                 "guardrails/g.py*(input guardrail of agent 'gr')")])
    assert cases["guarded"]["runs_detail"][0]["status"] == "failed"


def test_a_syntax_error_at_import_shows_its_line(project: ConnicProject) -> None:
    project.tool("t", "from tools.helper import SLOTS\n\n" + SLOT_TOOL)  # collection parses t.py, not its helper
    project.tool("helper", "SLOTS = {\n    'mon': 1,\n    'tue' 2,\n}\n")
    project.agent("hk", tools=["t.schedule"])
    project.suite("hk", "tests:\n  - name: tooled\n    payload: hi\n")
    result = project.run(*QUIET)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["importing tools/t.py raised:", ">   from tools.helper import SLOTS",
                                 "tools/t.py:1: ", "*", ">   *'tue' 2,", "E   SyntaxError: *",
                                 "tools/helper.py:3: SyntaxError"])


def test_a_builder_that_raises_at_import_shows_its_traceback(project: ConnicProject) -> None:
    project.write("tests/builders/b.py", BROKEN_IMPORT + BUILDER)
    project.agent("bd")
    project.suite("bd", "tests:\n  - name: built\n    builder: b\n")
    result = project.run(*QUIET, "--tb=short")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*builder 'b': tests/builders/b.py:2: importing b.py raised KeyError: 'port'",
                                 "importing tests/builders/b.py raised:", "tests/builders/b.py:5: in <module>",
                                 "tests/builders/b.py:2: in _conf", "E   KeyError: 'port'"])
