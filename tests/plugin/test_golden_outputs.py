"""The report files stay byte for byte what they were: ``--connic-json``, ``--connic-traces``,
``--junitxml`` and ``--connic-html`` of four offline projects, compared with the files stored under
``tests/plugin/data/golden/<project>/``.

The projects:

- ``order-desk``: the bundled example (``examples/order-desk``): tools, hooks, middleware (a
  ``StopProcessing``), mocks, a builder, files, a sequential pipeline (stages), output schemas;
- ``customer-support`` (``tests/corpus/projects``): hosted guardrails with hand-written
  judgements (passed, redacted, blocked), a pipeline, middleware, mocks;
- ``compliance-auditor`` (``tests/corpus/projects``): MCP tools (a discoverable server, the tool
  catalogue, a recorded MCP call), strict mocks; its cassettes and the scanner suite of
  ``tests/plugin/test_mcp.py`` were recorded once against that test's stand-ins and are stored
  under ``tests/plugin/data/golden/inputs/compliance-auditor/``;
- ``tour`` (written here; ``tests/corpus/projects`` holds only the two above): child agents
  (``trigger_agent``, nested, approvals and mocks inside a child), a session (``session:``), a
  tool agent's retries (``retry_options``) and divergence notes of a cassette whose recorded
  requests differ.

Only what genuinely changes from run to run is normalised, by the explicit rules of ``normalise``:
the tmp directory and its name, timestamps, measured durations and latencies, JUnit's host and
times, memory addresses in reprs, the versions in the HTML's context, fresh UUIDs (run and session
ids of runs that replay no recorded world; numbered by first appearance, so references stay
checked) and the plugin's own hidden frames in recorded tracebacks (their lines and locals follow
the plugin's code). Everything else must be identical. A difference fails with a unified diff.
The sessions run in a subprocess with a random hash seed: no output may follow it.

To regenerate the stored files after an intended change of the output, run::

    CONNIC_GOLDEN_UPDATE=1 pytest tests/plugin/test_golden_outputs.py

and review the change of ``tests/plugin/data/golden/`` in the diff like any other.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

import pytest_connic
from helpers.mixed import answer, tool_turn
from helpers.project import CALC_TOOLS, ConnicProject

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "data" / "golden"
UPDATE = os.environ.get("CONNIC_GOLDEN_UPDATE") == "1"
OUTPUTS = ("--connic-json", "report.json", "--connic-html", "report.html", "--junitxml", "junit.xml",
           "--connic-traces", "traces",
           # every model priced explicitly: the price beats LiteLLM's map, which an environment
           # without LiteLLM (the floors) does not have, so the costs are the same everywhere
           *(arg for model in ("openai/gpt-4o-mini", "openai/gpt-5.6-sol", "gemini/gemini-3.5-flash",
                               "anthropic/claude-opus-4-8")
             for arg in ("--connic-model-price", f"{model}=0.15/0.6")))
ALIASES = ("--connic-model-alias", "gemini/gemini-3.5-flash=openai/gpt-4o-mini",
           "--connic-model-alias", "anthropic/claude-opus-4-8=openai/gpt-4o-mini")

#: what varies between two runs of the same project: (pattern, replacement), applied in order
VARIES: list[tuple[re.Pattern[str], str]] = [
    # JUnit's root element: pytest 8.3 and later name it
    (re.compile(r'<testsuites name="pytest tests">'), "<testsuites>"),
    # pytest's numbered base temp directory (the HTML's command line)
    (re.compile(r"pytest-of-[^/\\]+[/\\]pytest-\d+"), "pytest-of-<user>/pytest-<n>"),
    # ISO timestamps: a run's start (JSON, traces, HTML), JUnit's and the HTML's session time
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?"), "<timestamp>"),
    # JUnit: the host and pytest's own durations
    (re.compile(r'\bhostname="[^"]*"'), 'hostname="<host>"'),
    (re.compile(r'\btime="[\d.]+"'), 'time="<s>"'),
    # measured durations and latencies: JSON keys (also inside the traces' escaped metadata_json),
    # the JUnit property, a duration in a trace line of JUnit's system-out: "(81ms)"
    (re.compile(r'(\\?"(?:duration_ms|median_latency_ms)\\?": ?)\d+(?:\.\d+)?(?:e-?\d+)?'), r"\1<ms>"),
    (re.compile(r'(<property name="median_latency_ms" value=")[\d.]+"'), r'\1<ms>"'),
    (re.compile(r"\((?:\d+(?:\.\d+)?)(ms|s)\)"), r"(<\1>)"),
    # the memory address in the repr of a function or an object
    (re.compile(r"\bat 0x[0-9a-f]+"), "at 0x<addr>"),
    # versions of Python, pytest, the plugin and the SDK (the HTML's context)
    (re.compile(r'(<dd class="ctx-versions">)[^<]*'), r"\1<versions>"),
]
#: the plugin's own frames in a recorded traceback (hidden in reports, kept in the JSON): their
#: file, lines, source and locals change with the plugin's code, not with the run's behaviour
PLUGIN_FRAME = re.compile(
    r'(\\*"file\\*": ?\\*")' + re.escape(str(Path(pytest_connic.__file__).parent)) + r'[^"\\]*\\*".*?'
    r'(\\*"hidden\\*": ?true)', re.DOTALL)
#: a UUID: a run id (runs that replay no recorded world get a fresh one), a session id
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def normalise(text: str, root: Path) -> str:
    """``text`` with the tmp directory (and its name), every rule of ``VARIES`` and the UUIDs replaced; each
    UUID becomes ``<uuid-N>`` numbered by first appearance, so the same id stays the same."""
    for form in sorted({str(root), root.as_posix(), str(root.resolve())}, key=len, reverse=True):
        text = text.replace(form, "<root>")
    text = text.replace(root.name, "<project>")  # pytester's directory, named after the test
    text = PLUGIN_FRAME.sub(r"\1<pytest_connic frame>, \2", text)
    for pattern, replacement in VARIES:
        text = pattern.sub(replacement, text)
    numbers: dict[str, int] = {}
    return UUID.sub(lambda m: f"<uuid-{numbers.setdefault(m.group(), len(numbers) + 1)}>", text)


def outputs(root: Path) -> dict[str, str]:
    """Every report file the run wrote, by path relative to the project, normalised."""
    files = [root / "report.json", root / "report.html", root / "junit.xml",
             *sorted((root / "traces").rglob("*.json"))]
    return {p.relative_to(root).as_posix(): normalise(p.read_text("utf-8"), root) for p in files}


def copy(source: Path, root: Path) -> None:
    shutil.copytree(source, root, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"))


# ----------------------------------------------------------------------------------------- projects


def order_desk(project: ConnicProject) -> tuple[str, ...]:
    copy(ROOT / "examples" / "order-desk", project.root)
    return ()


def customer_support(project: ConnicProject) -> tuple[str, ...]:
    copy(ROOT / "tests" / "corpus" / "projects" / "customer-support", project.root)
    return ()


def compliance_auditor(project: ConnicProject) -> tuple[str, ...]:
    copy(ROOT / "tests" / "corpus" / "projects" / "compliance-auditor", project.root)
    stored = GOLDEN / "inputs" / "compliance-auditor"
    copy(stored / "cassettes", project.root / "cassettes")
    shutil.copy(stored / "compliance-scanner.yaml", project.root / "tests" / "compliance-scanner.yaml")
    return ALIASES


TOUR_TOOLS = '''
from connic.tools import trigger_agent


def step(x: int) -> dict:
    """Add one.

    Args:
        x: a number
    """
    return {"x": x + 1}


def lookup(key: str) -> dict:
    """Look a key up (mocked in the tests).

    Args:
        key: the key
    """
    return {"real": key}


def body_c(payload: dict) -> dict:
    """The body of the tool agent c."""
    return {"c_got": payload}


def flaky(payload: dict, context: dict) -> dict:
    """Fails its first attempt, passes its retry."""
    if context.get("retry_attempt", 0) < 1:
        raise RuntimeError("the first attempt fails")
    return {"ok": True, "attempt": context["retry_attempt"]}
'''
TOUR_MOCKS = '''
def mock_work_lookup(tool_name, params, context):
    return {"mocked": params["key"], "agent": context["agent_name"]}
'''
TOUR_CONFTEST = '''
import json


def pytest_connic_make_model(config, agent, model, case, run_index):
    if agent.config.name != "chat":
        return None

    def answer(request):
        return json.dumps({"seen": [m["content"] for m in request.messages if m["role"] == "user"],
                           "messages": len(request.messages)})
    return answer
'''
TOUR_A = """
version: "1.0"
tests:
  - name: a child approved and mocked
    payload: go
    mocks: tour_mocks
    strict_approval_decisions: true
    approval_decisions:
      - {tool: work.step, decision: approve}
    expected_tool_calls:
      - trigger_agent: result.status == "completed"
    expected_child_agents:
      b:
        expected_tool_calls:
          - work.lookup: result.mocked == "k1"
          - work.step: result.x == 2
  - name: an unanswered approval in the child
    payload: go
    mocks: tour_mocks
    expected_child_agents:
      b: {expected_result: status == "awaiting_approval"}
"""
TOUR_CHAT = """
agent: chat
tests:
  - name: ann introduces herself
    payload: '{"user": "ann", "message": "my name is Ann"}'
    expected_result: output.messages == 1
  - name: ann is remembered
    payload: '{"user": "ann", "message": "what is my name?"}'
    expected_result: '"my name is Ann" in output.seen[0]'
"""
TOUR_CALC = """
tests:
  - name: adds with a diverged recording
    payload: add 4 and 6
    expected_tool_calls:
      - add: params.a == 4
    expected_result: output.sum == 10
  - name: adds
    runs: 2
    payload: add 4 and 6
    expected_result: output.sum == 11
"""
TOUR_FLAKY = """
tests:
  - name: settles on its retry
    payload: '{}'
    expected_result: output.ok == true
"""


def _call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def tour(project: ConnicProject) -> tuple[str, ...]:
    project.tool("work", TOUR_TOOLS)
    project.tool("calc", CALC_TOOLS)
    project.write("tests/mocks/tour_mocks.py", TOUR_MOCKS)
    project.write("conftest.py", TOUR_CONFTEST)
    project.agent("a", tools=["trigger_agent"])
    project.agent("b", tools=["trigger_agent", "work.step", "work.lookup"], approval={"tools": ["work.step"]})
    project.agent("c", type="tool", tool_name="work.body_c")
    project.agent("chat", session={"key": "input.user"})
    project.agent("calc", tools=["calc.add", "calc.multiply"])
    project.agent("flaky", type="tool", tool_name="work.flaky", retry_options={"attempts": 2})
    project.suite("a", TOUR_A)
    project.suite("chat", TOUR_CHAT)
    project.suite("calc", TOUR_CALC)
    project.suite("flaky", TOUR_FLAKY)
    child = {"turns": [{"tool_calls": [_call("lookup", key="k1"), _call("step", x=1)]}, {"content": '{"done": true}'}]}
    run = {"turns": [{"tool_calls": [_call("trigger_agent", agent_name="b", payload={"n": 1})]}, {"content": "ok"}],
           "children": {"b": [child]}}
    project.cassette("a", "a child approved and mocked", [run])
    # one call per turn: two calls of one turn race an approval that ends the run (the other call
    # is cancelled or not, by timing)
    one_by_one = {"turns": [{"tool_calls": [_call("lookup", key="k1")]}, {"tool_calls": [_call("step", x=1)]},
                            {"content": '{"done": true}'}]}
    project.cassette("a", "an unanswered approval in the child",
                     [{**run, "children": {"b": [one_by_one]}}])
    diverged = {"turns": [{**tool_turn("add", a=4, b=6), "request": {"system": "000000000000"}},
                          {**answer('{"sum": 10}'), "request": {"system": "000000000000"}}]}
    project.cassette("calc", "adds with a diverged recording", [diverged])
    plain = {"turns": [tool_turn("add", a=4, b=6), answer('{"sum": 10}')]}
    project.cassette("calc", "adds", [plain, plain])
    return ()


PROJECTS: dict[str, Callable[[ConnicProject], tuple[str, ...]]] = {
    "order-desk": order_desk,
    "customer-support": customer_support,
    "compliance-auditor": compliance_auditor,
    "tour": tour,
}


# ---------------------------------------------------------------------------------------------- test


@pytest.mark.parametrize("name", list(PROJECTS))
def test_report_files_are_the_stored_ones(name: str, project: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    args = PROJECTS[name](project)
    # in a subprocess with a random hash seed: the keys a worker adds to a run's ``context`` are
    # merged back in the worker's order (``execution/isolation/copyback._merge``), never in set order
    monkeypatch.setenv("PYTHONHASHSEED", "random")
    result = project.run_subprocess("-p", "no:randomly", *args, *OUTPUTS)
    assert result.ret in (0, 1), result.stdout.str()  # cases may fail; the session may not break
    produced = outputs(project.root)
    stored_dir = GOLDEN / name
    if UPDATE:
        shutil.rmtree(stored_dir, ignore_errors=True)
        for rel, text in produced.items():
            (stored_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (stored_dir / rel).write_bytes(text.encode("utf-8"))
        return
    stored = {p.relative_to(stored_dir).as_posix(): p.read_bytes().decode("utf-8")
              for p in sorted(stored_dir.rglob("*")) if p.is_file()}
    assert sorted(produced) == sorted(stored), "the report files written differ from the stored ones"
    diffs = []
    for rel, text in produced.items():
        if text != stored[rel]:
            diffs.append("".join(difflib.unified_diff(
                stored[rel].splitlines(keepends=True), text.splitlines(keepends=True),
                fromfile=f"stored/{name}/{rel}", tofile=f"produced/{name}/{rel}", n=2)))
    assert not diffs, "\n".join(diffs) + "\n(CONNIC_GOLDEN_UPDATE=1 regenerates the stored files)"
