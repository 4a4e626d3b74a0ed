"""Whatever ends a case, the case is in every report with a short, located message: a
``BaseException`` of user code escaping its run (``KeyboardInterrupt`` with no signal,
``GeneratorExit``, a custom subclass, ``SystemExit`` at a builder's import), an exception whose
``__str__`` raises, a value that cannot be printed; and a tool module that fails to import is a
project load error naming its file and line, not "unknown tool". With and without ``-n 2``."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from helpers.project import ConnicProject

TOOLS = '''
class Boom(BaseException):
    pass


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no str for you")


class Weird:
    def __str__(self):
        raise RuntimeError("nope")

    __repr__ = __str__


def echo(payload: dict) -> dict:
    """Raises what the payload names."""
    kind = payload.get("kind")
    if kind == "ki":
        raise KeyboardInterrupt
    if kind == "genexit":
        raise GeneratorExit
    if kind == "boom":
        raise Boom("custom")
    if kind == "unprintable":
        raise Unprintable()
    if kind == "weird":
        return {"value": Weird()}
    return {"got": payload}
'''

CASES = {"ki": "KeyboardInterrupt", "genexit": "GeneratorExit", "boom": "Boom: custom"}


def _escapes(project: ConnicProject) -> None:
    project.tool("t", TOOLS)
    project.agent("echo", type="tool", tool_name="t.echo")
    project.write("tests/builders/exits.py", "import sys\nsys.exit(5)\n\n\ndef build(*args):\n    return 'x'\n")
    project.write("tests/builders/kbi.py", "raise KeyboardInterrupt\n\n\ndef build(*args):\n    return 'x'\n")
    project.suite("echo", "tests:\n" + "".join(
        f"  - name: {k}\n    payload: '{{\"kind\": \"{k}\"}}'\n" for k in [*CASES, "unprintable", "weird"])
        + "  - name: builder exits\n    builder: exits\n  - name: builder kbi\n    builder: kbi\n"
        + "  - name: fine\n    payload: '{\"kind\": \"fine\"}'\n")


@pytest.mark.parametrize("xdist", [False, True], ids=["plain", "n2"])
def test_whatever_escapes_a_case_is_its_located_error_and_every_case_is_reported(
        project: ConnicProject, xdist: bool) -> None:
    _escapes(project)
    args = ["--connic-json", "report.json", "--junitxml", "junit.xml", "--connic-html", "report.html"]
    if xdist:
        pytest.importorskip("xdist")
        result = project.run_subprocess("-p", "no:randomly", "-n", "2", *args)
    else:
        result = project.run_subprocess("-p", "no:xdist", *args)  # what escaped asyncio.run dies with it
    # KeyboardInterrupt raised by a tool did not end the session: every later case ran. A
    # BaseException of user code is the error of the run that raised it (the tool's location in
    # words), so its case fails like any failed run; an unprintable returned value is named
    result.assert_outcomes(passed=2, failed=6)
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    result.stdout.no_fnmatch_line("*bug in pytest-connic*")
    result.stdout.no_fnmatch_line("*!!! Interrupted*")
    for kind, text in CASES.items():
        result.stdout.fnmatch_lines([f"*case '{kind}' (echo) failed", f"*: agent error: the tool `t.echo` raised {text} at tools/t.py:*"])
    for line in (  # each on its own: under xdist the failures come in the order the workers end them
        "*: agent error: Unprintable: <unprintable Unprintable object>",
        "*builder 'exits': tests/builders/exits.py:2: importing exits.py called sys.exit(5)*",
        "*builder 'kbi': tests/builders/kbi.py:1: importing kbi.py raised KeyboardInterrupt*",
    ):
        result.stdout.fnmatch_lines([line])
    names = [*CASES, "unprintable", "weird", "builder exits", "builder kbi", "fine"]
    report = json.loads((project.root / "report.json").read_text("utf-8"))
    statuses = {c["test_name"]: c["status"] for c in report["cases"]}
    assert sorted(statuses) == sorted(names)
    assert statuses["fine"] == statuses["weird"] == "passed"
    assert {statuses[n] for n in names if n not in ("fine", "weird")} == {"failed"}
    [weird] = next(c for c in report["cases"] if c["test_name"] == "weird")["runs_detail"]
    assert "<unrepresentable Weird: RuntimeError>" in json.dumps(weird["output"])
    junit = {c.get("name") for c in ET.parse(project.root / "junit.xml").getroot().iter("testcase")}
    assert junit == set(names)
    html = (project.root / "report.html").read_text("utf-8")
    assert all(n in html for n in names)


IMPORT_FAULTS = {
    "import nosuchmodule": "tools/t.py:1: importing tools/t.py raised ModuleNotFoundError: No module named 'nosuchmodule'",
    "import sys\nsys.exit(3)": "tools/t.py:2: importing tools/t.py raised SystemExit: 3",
    "raise KeyboardInterrupt": "tools/t.py:1: importing tools/t.py raised KeyboardInterrupt",
    "x = 1\nraise ValueError('bad config')": "tools/t.py:2: importing tools/t.py raised ValueError: bad config",
}


@pytest.mark.parametrize("source", list(IMPORT_FAULTS), ids=["missing module", "sys.exit", "KeyboardInterrupt",
                                                              "exception"])
def test_a_tool_module_that_fails_to_import_is_a_located_load_error(project: ConnicProject, source: str) -> None:
    project.tool("t", source + "\n\n\ndef echo(payload: dict) -> dict:\n    return payload\n")
    project.tool("good", "def echo(payload: dict) -> dict:\n    return payload\n")
    project.agent("echo", type="tool", tool_name="t.echo")
    project.agent("other", type="tool", tool_name="good.echo")
    project.suite("echo", "tests:\n  - name: one\n    payload: hi\n  - name: two\n    payload: hi\n")
    project.suite("other", "tests:\n  - name: unaffected\n    payload: hi\n")
    result = project.run("-p", "no:xdist", "--connic-json", "report.json")
    result.assert_outcomes(passed=1, failed=2)  # the session went on; the other agent's case passed
    expected = IMPORT_FAULTS[source]
    result.stdout.fnmatch_lines(["*case 'one' (echo) could not be set up", "    the Connic project failed to load:",
                                 f"    Tool agent 'echo': cannot resolve tool 't.echo': {expected}"])
    result.stdout.no_fnmatch_line("*unknown tool*")
    result.stdout.no_fnmatch_line("*!!! Interrupted*")
    report = json.loads((project.root / "report.json").read_text("utf-8"))
    # the JSON calls a case that could not start an error (as for a missing --connic-env file)
    assert {c["test_name"]: c["status"] for c in report["cases"]} == {"one": "error", "two": "error",
                                                                     "unaffected": "passed"}
