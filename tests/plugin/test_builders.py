"""Builders (spec §4.3): ``build`` and ``cleanup`` (sync or async), the arguments they get,
the ``context`` shared with assertions, files merged with the built payload, Connic's cleanup
verdicts, and a fresh builder and mocks module for every run, also when runs are concurrent."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from helpers.project import ConnicProject, esc
from pytest_connic.models import live
from pytest_connic.models.base import ModelRequest, ModelResponse

#: The model calls what the payload lists ({"calls": [...]}), then answers with the tool results
#: it read and the text of the user message (attached files as their mime types).
SCRIPTED_MODEL = '''
import json

from pytest_connic.models.base import ModelResponse, ToolCallRequest


def _load(text):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def pytest_connic_make_model(config, agent, model, case, run_index):
    def answer(request):
        content = request.messages[0]["content"]
        if isinstance(content, list):
            text = " ".join(p["text"] for p in content if p["type"] == "text")
            files = [p["mime_type"] for p in content if p["type"] == "file"]
        else:
            text, files = content, []
        read = [_load(m["content"]) for m in request.messages if m["role"] == "tool"]
        plan = _load(text)
        calls = plan.get("calls", []) if isinstance(plan, dict) else []
        if calls and not read:
            return ModelResponse(tool_calls=[
                ToolCallRequest(id=f"call{i}", name=name, arguments=args) for i, (name, args) in enumerate(calls)
            ])
        return json.dumps({"read": read, "user": text, "files": files})
    return answer
'''

BILLING = '''
def refund(charge_id: str, amount: float) -> dict:
    """Refund a charge."""
    return {"refunded": charge_id, "amount": amount}
'''


def _bill(project: ConnicProject) -> None:
    project.tool("billing", BILLING)
    project.agent("bill", tools=["billing.refund"])
    project.write("conftest.py", SCRIPTED_MODEL)
    project.write("tests/files/note.txt", "a note")


# --------------------------------------------------------------------------- pytester

ARGS_BUILDER = '''
def build(context, builder_args, test_name, payload, files):
    context["seen"] = {"builder_args": builder_args, "test_name": test_name, "payload": payload, "files": files}
    context["charge_id"] = "ch_" + test_name.split()[0]
    amount = builder_args.get("amount", 1)
    return {"calls": [["refund", {"charge_id": context["charge_id"], "amount": amount}]]}


def cleanup(run, context, builder_args):
    context["delivered_files"] = [f["name"] for f in run["input"].get("files", [])]
    context["raw_output"] = run["output"]
    context["run_context_id"] = run["context"]["run_id"]
    return True
'''

ASYNC_BUILDER = '''
import asyncio
import base64


async def build(context, builder_args, test_name, payload, files):
    await asyncio.sleep(0)
    built = {"data": base64.b64encode(b"built").decode(), "mime_type": "image/png", "name": "built.png"}
    if builder_args.get("text"):
        return "plain text"
    return {"calls": [], "files": [built]}


async def cleanup(run, context, builder_args):
    context["delivered_files"] = [f["name"] for f in run["input"].get("files", [])]
    context["delivered_keys"] = sorted(run["input"])
'''


def test_build_arguments_context_and_files(project: ConnicProject) -> None:
    _bill(project)
    project.write("tests/builders/charge.py", ARGS_BUILDER)
    project.write("tests/builders/attach.py", ASYNC_BUILDER)
    project.suite("bill", '''
        tests:
          - name: refunds the built charge
            builder: charge
            builder_args: {amount: 42}
            payload: static text
            files: [note.txt]
            expected_result: >-
              context.seen.builder_args == {"amount": 42} and context.seen.payload == "static text"
              and context.seen.test_name == "refunds the built charge" and context.seen.files == ["note.txt"]
              and context.delivered_files == ["note.txt"] and output.read[0].refunded == context.charge_id
              and '"refunded": "ch_refunds"' in context.raw_output
            expected_tool_calls:
              - billing.refund: params.charge_id == context.charge_id and params.amount == 42
          - name: without builder_args or payload
            builder: charge.py
            expected_result: context.seen.builder_args == {} and context.seen.payload == None
          - name: built files come before the YAML files
            builder: attach
            files: [note.txt]
            expected_result: >-
              context.delivered_files == ["built.png", "note.txt"] and output.files == ["image/png", "text/plain"]
          - name: a built string becomes the message
            builder: attach
            builder_args: {text: true}
            files: [note.txt]
            expected_result: >-
              context.delivered_keys == ["files", "message"] and output.user == "plain text"
              and context.delivered_files == ["note.txt"]
    ''')

    result = project.run("--connic-json", "report.json")

    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    result.assert_outcomes(passed=4)
    (first,) = json.loads((project.root / "report.json").read_text())["cases"][0]["runs_detail"]
    # the run context the builder's cleanup read is the run's own
    assert first["run_context"]["run_id"] == first["run_id"]


VERDICTS = '''
def build(context, builder_args, test_name, payload, files):
    if builder_args.get("build") == "raise":
        raise ValueError("no stock")
    if builder_args.get("build") == "int":
        return 42
    return builder_args.get("payload", "hello")


def cleanup(run, context, builder_args):
    with open("cleanups.log", "a") as fh:
        fh.write(f"{builder_args['verdict']} output={run['output']!r}\\n")
    verdict = builder_args["verdict"]
    if verdict == "raise":
        raise RuntimeError("teardown failed")
    return {"none": None, "true": True, "false": False, "int": 42}[verdict]
'''

FAILING_MIDDLEWARE = '''
def before(content, context):
    if content["parts"][0]["text"] == "fail":
        raise RuntimeError("agent broke")
    return content
'''


def test_cleanup_verdicts_and_cleanup_after_failures(project: ConnicProject) -> None:
    _bill(project)
    project.write("tests/builders/verdict.py", VERDICTS)
    project.write("tests/builders/empty.py", "VALUE = 1\n")
    project.write("middleware/bill.py", FAILING_MIDDLEWARE)
    project.suite("bill", '''
        tests:
          - {name: returns None, builder: verdict, builder_args: {verdict: none}}
          - {name: returns True, builder: verdict, builder_args: {verdict: "true"}}
          - {name: returns False, builder: verdict, builder_args: {verdict: "false"}}
          - {name: returns an int, builder: verdict, builder_args: {verdict: int}}
          - {name: raises, builder: verdict, builder_args: {verdict: raise}}
          - {name: the agent fails, builder: verdict, builder_args: {verdict: "false", payload: fail}}
          - {name: build raises, builder: verdict, builder_args: {verdict: none, build: raise}}
          - {name: build returns an int, builder: verdict, builder_args: {verdict: "true", build: int}}
          - {name: missing builder, builder: nowhere}
          - {name: builder without build, builder: empty}
    ''')

    result = project.run()

    result.assert_outcomes(passed=2, failed=7, errors=1)  # a missing builder is found at collection
    result.stdout.fnmatch_lines_random([esc(line) for line in [
        "*needs 1: builder cleanup returned False",
        "*needs 1: builder cleanup must return bool or None, got int",
        "*needs 1: builder cleanup raised: teardown failed",
        ("*needs 1: agent error: middleware before of agent 'bill' raised "
        "RuntimeError: agent broke"),
        "*needs 1: builder build raised: ValueError: no stock",
        "*needs 1: builder build must return str or dict, got int",
        ("tests/bill.yaml:10:38: tests[8].builder: no builder module tests/builders/nowhere.py (builders: empty, "
         "verdict); Connic fails the case before the agent starts"),
        ("*: builder 'empty': tests/builders/empty.py defines no "
        "build() function"),
    ]])
    # a False verdict adds to the run's other failures
    result.stdout.fnmatch_lines(["*: agent error: middleware before of agent 'bill' raised*",
                                 "*Failed:  builder cleanup returned False"])
    # cleanup ran for every built run: after a failed agent and after a failed build too
    assert sorted((project.root / "cleanups.log").read_text().splitlines()) == sorted([
        "none output='{\"read\": [], \"user\": \"hello\", \"files\": []}'",
        "true output='{\"read\": [], \"user\": \"hello\", \"files\": []}'",
        "false output='{\"read\": [], \"user\": \"hello\", \"files\": []}'",
        "int output='{\"read\": [], \"user\": \"hello\", \"files\": []}'",
        "raise output='{\"read\": [], \"user\": \"hello\", \"files\": []}'",
        "false output=None",
        "none output=None",
        "true output=None",
    ])


COUNTING_BUILDER = '''
import asyncio

COUNT = 0


async def build(context, builder_args, test_name, payload, files):
    global COUNT
    COUNT += 1
    context["count"] = COUNT
    with open("arrivals.log", "a") as fh:
        fh.write("x\\n")
    wanted = builder_args.get("overlap", 0)
    for _ in range(1000):  # wait until every run has started its build (they run concurrently)
        with open("arrivals.log") as fh:
            if len(fh.read().split()) >= wanted:
                break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError("runs did not overlap")
    return {"calls": [["refund", {"charge_id": "ch_1", "amount": 1}], ["refund", {"charge_id": "ch_2", "amount": 2}]]}
'''

COUNTING_MOCKS = '''
import threading

CALLS = 0
LOCK = threading.Lock()


def mock_billing_refund(tool_name, params, context):
    # the two calls of one model turn run concurrently, as on Connic
    global CALLS
    with LOCK:
        CALLS += 1
        return {"calls_seen_by_this_module": CALLS}
'''


@pytest.mark.parametrize("concurrency, overlap", [("8", 3), ("1", 0)])
def test_each_run_gets_fresh_builder_and_mocks_modules(project: ConnicProject, concurrency: str,
                                                       overlap: int) -> None:
    _bill(project)
    project.agent("bill", tools=["billing.refund"], max_concurrent_runs=8)  # the runs may overlap
    project.write("tests/builders/counting.py", COUNTING_BUILDER)
    project.write("tests/mocks/counting.py", COUNTING_MOCKS)
    project.suite("bill", f'''
        tests:
          - name: module state does not leak between runs
            builder: counting
            builder_args: {{overlap: {overlap}}}
            mocks: counting
            runs: 3
            expected_result: >-
              context.count == 1
              and {{output.read[0].calls_seen_by_this_module, output.read[1].calls_seen_by_this_module}} == {{1, 2}}
            expected_tool_calls:
              - billing.refund: params.charge_id == "ch_1" and result.calls_seen_by_this_module in [1, 2]
    ''')

    result = project.run("--connic-concurrency", concurrency)

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*bill::module state does not leak*3/3*"])  # cut to fit 80 columns
    assert len((project.root / "arrivals.log").read_text().split()) == 3


# ========== references stay inside the project (folded from test_hardening_files.py) ========================
# Nothing a suite names can reach outside the project: ``files``, ``builder`` and ``mocks``
# references, symbolic links inside ``tests/``, and cassette paths derived from case names.
#
# Connic's packager refuses links (the project fails ``connic lint``: the first suite reports it),
# and the runtime refuses them again, so a suite that still runs never reads or imports through one.

pytestmark = pytest.mark.timeout(120)

SECRET = "TOP-SECRET-OUTSIDE-THE-PROJECT"
ECHO = 'def echo(payload: dict) -> dict:\n    """Echo."""\n    return {"got": payload}\n'
#: suites sort before "b.yaml": the first one carries the project's load error (the link)
FIRST = "tests:\n  - name: first\n    payload: hi\n"
EVIL = f'''
import pathlib
pathlib.Path({{marker!r}}).write_text("imported")


def build(context, builder_args, test_name, payload, files):
    return "{SECRET}"


def mock(tool_name, params, context):
    return "{SECRET}"
'''


@pytest.fixture
def outside(project: ConnicProject) -> Path:
    """A directory next to the project with a secret file and code that leaves a marker when run."""
    folder = project.root.parent / f"outside-{project.root.name}"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET, "utf-8")
    marker = folder / "imported.txt"
    (folder / "evil.py").write_text(EVIL.format(marker=str(marker)), "utf-8")
    return folder


def run_second_suite(project: ConnicProject, case: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    """Run a project whose first suite carries the load error, and whose ``b.yaml`` has ``case``."""
    project.tool("calc", ECHO)
    project.agent("echo", type="tool", tool_name="calc.echo")
    project.suite("a", "agent: echo\n" + FIRST)
    project.suite("c", "agent: echo\n" + FIRST.replace("first", "sound"))  # a sound case still passes
    project.suite("b", f"agent: echo\ntests:\n{case}")
    result = project.run("-p", "no:timeout", "--continue-on-collection-errors", "--connic-json", "report.json")
    text = result.stdout.str() + result.stderr.str() + (project.root / "report.json").read_text("utf-8")
    assert SECRET not in text
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    report = json.loads((project.root / "report.json").read_text("utf-8"))
    assert [c["passed"] for c in report["cases"] if c["test_name"] == "sound"] == [True]
    return result, report


def the_case(report: dict[str, Any]) -> dict[str, Any]:
    (case,) = [c for c in report["cases"] if c["suite"] == "tests/b.yaml"]
    return case


def test_a_fixture_linked_outside_is_refused(project: ConnicProject, outside: Path) -> None:
    files = project.root / "tests" / "files"
    files.mkdir(parents=True)
    (files / "x.txt").symlink_to(outside / "secret.txt")
    result, report = run_second_suite(project, "  - name: reads\n    payload: hi\n    files: [x.txt]\n")
    result.stdout.fnmatch_lines(["*Symbolic links are not allowed: tests/files/x.txt*"])  # connic lint's verdict
    case = the_case(report)
    assert not case["passed"]
    assert case["setup_error"] == "fixture tests/files/x.txt: tests/files/x.txt is a symbolic link; Connic refuses links"


def test_a_files_folder_linked_outside_is_refused(project: ConnicProject, outside: Path) -> None:
    (project.root / "tests").mkdir()
    (project.root / "tests" / "files").symlink_to(outside, target_is_directory=True)
    _result, report = run_second_suite(project, "  - name: reads\n    payload: hi\n    files: [secret.txt]\n")
    assert the_case(report)["setup_error"] == (
        "fixture tests/files/secret.txt: tests/files is a symbolic link; Connic refuses links")


@pytest.mark.parametrize("folder", ["builders", "mocks"])
@pytest.mark.parametrize("link", ["file", "folder"])
def test_code_linked_outside_is_never_imported(project: ConnicProject, outside: Path, folder: str, link: str) -> None:
    base = project.root / "tests" / folder
    if link == "file":
        base.mkdir(parents=True)
        (base / "evil.py").symlink_to(outside / "evil.py")
        linked = f"tests/{folder}/evil.py"
    else:
        base.parent.mkdir(parents=True)
        base.symlink_to(outside, target_is_directory=True)
        linked = f"tests/{folder}"
    key = "builder" if folder == "builders" else "mocks"
    _result, report = run_second_suite(project, f"  - name: links\n    payload: '{{\"a\": 1, \"b\": 2}}'\n"
                                                f"    {key}: evil\n")
    label = "builder 'evil'" if key == "builder" else "mocks 'evil'"
    assert the_case(report)["setup_error"] == (
        f"{label}: {linked} is a symbolic link; Connic refuses links, so pytest-connic does not load code "
        "through one")
    assert not (outside / "imported.txt").exists()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("files", '["../../outside/secret.txt"]'),
        ("files", '["/etc/passwd"]'),
        ("files", '["..\\\\secret.txt"]'),
        ("builder", '"../evil"'),
        ("builder", '"/tmp/evil"'),
        ("mocks", '"..\\\\evil"'),
        ("mocks", '"sub/evil"'),
    ],
)
def test_references_with_paths_are_refused_before_anything_runs(
    project: ConnicProject, outside: Path, key: str, value: str
) -> None:
    project.agent("echo", type="tool", tool_name="calc.echo")
    project.tool("calc", ECHO)
    project.suite("echo", f"tests:\n  - name: escape\n    payload: hi\n    {key}: {value}\n")
    result = project.run("-p", "no:timeout")
    result.assert_outcomes(errors=1)  # an invalid case fails in setup
    result.stdout.fnmatch_lines(["*tests/echo.yaml:4:*must be a bare filename (no path separators)*"])
    assert SECRET not in result.stdout.str()
    assert not (outside / "imported.txt").exists()


HOSTILE_NAMES = ["../../../../escape", "/abs/olute", "..", ".hidden", "a/../../b", "..\\..\\win", "CON",
                 "nul.txt", "trailing. ", "tab\there", "~/home", "x" * 120]


class Recorder:
    """Stands in for the LiteLLM model while recording: answers every request with ``ok``."""

    def __init__(self, **_: Any) -> None:
        pass

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(content="ok", input_tokens=1, output_tokens=1)


def tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


def test_cassettes_recorded_for_hostile_case_names_stay_in_the_cassette_dir(
    project: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live, "LiteLLMModel", Recorder)
    project.agent("calc")
    cases = "".join(f"  - name: {json.dumps(name)}\n    payload: hi\n" for name in HOSTILE_NAMES)
    project.suite("sub/calc", "agent: calc\ntests:\n" + cases)
    parent = project.root.parent
    before_outside = {p for p in os.listdir(parent)}
    before = tree(project.root)

    result = project.run("-p", "no:timeout", "--connic-record-mode", "once")
    result.assert_outcomes(passed=len(HOSTILE_NAMES))
    written = tree(project.root) - before
    cassettes = {w for w in written if w.endswith(".yaml")}
    assert len(cassettes) == len(HOSTILE_NAMES)  # one each, none overwriting another
    assert all(w.startswith("cassettes/sub/calc/") and w.count("/") == 3 for w in cassettes), cassettes
    assert not any(Path(w).name.startswith(".") for w in cassettes)
    assert set(os.listdir(parent)) == before_outside

    replayed = project.run("-p", "no:timeout")  # and each replays from where it was written
    replayed.assert_outcomes(passed=len(HOSTILE_NAMES))
