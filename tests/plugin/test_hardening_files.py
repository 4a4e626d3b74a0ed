"""Nothing a suite names can reach outside the project: ``files``, ``builder`` and ``mocks``
references, symbolic links inside ``tests/``, and cassette paths derived from case names.

Connic's packager refuses links (the project fails ``connic lint``: the first suite reports it),
and the runtime refuses them again, so a suite that still runs never reads or imports through one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from helpers.project import ConnicProject
from pytest_connic.models import live
from pytest_connic.models.base import ModelRequest, ModelResponse

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
