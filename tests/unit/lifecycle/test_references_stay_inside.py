"""References stay inside the project, below pytest. Nothing a suite names can reach outside the
project: ``files``, ``builder`` and ``mocks`` references, symbolic links inside ``tests/``, and
cassette paths derived from case names.

Connic's packager refuses links (the project would not upload: the project index warns), and
the runtime refuses them again, so a suite that still runs never reads or imports through one.
The secret outside is in none of what a session shows: the outcomes, their failure reports, the
JSON report, the warnings."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from helpers.harness import CaseProject
from pytest_connic.execution.assembly import CaseNotFound
from pytest_connic.models.base import ModelRequest, ModelResponse
from pytest_connic.project.index import index_project
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.reports.failure import failure_text
from pytest_connic.reports.json_report import build_json_report
from pytest_connic.suite.loader import load_suite

SECRET = "TOP-SECRET-OUTSIDE-THE-PROJECT"
ECHO = 'def echo(payload: dict) -> dict:\n    """Echo."""\n    return {"got": payload}\n'
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
def outside(case_project: CaseProject) -> Path:
    """A directory next to the project with a secret file and code that leaves a marker when run."""
    folder = case_project.root.parent / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET, "utf-8")
    marker = folder / "imported.txt"
    (folder / "evil.py").write_text(EVIL.format(marker=str(marker)), "utf-8")
    return folder


def run_second_suite(project: CaseProject, case: str) -> tuple[CaseOutcome, list[str]]:
    """Run a project whose suites ``a`` and ``c`` are sound and whose ``b.yaml`` has ``case``: the
    outcome of that case, and the project index's warnings (what collection shows)."""
    project.tool("calc", ECHO)
    project.agent("echo", type="tool", tool_name="calc.echo")
    project.suite("a", "agent: echo\n" + FIRST)
    project.suite("c", "agent: echo\n" + FIRST.replace("first", "sound"))  # a sound case still passes
    project.suite("b", f"agent: echo\ntests:\n{case}")
    outcomes = [*project.cases("a").values(), *project.cases("b").values(), *project.cases("c").values()]
    warnings = [w.message for w in index_project(project.root).warnings]
    shown = [json.dumps(build_json_report(outcomes, masker=project.masker)), *warnings, *project.warnings,
             *(failure_text(o, project.masker) for o in outcomes)]
    assert not any(SECRET in text for text in shown)
    assert [o.verdict_passed for o in outcomes if o.suite_path != "tests/b.yaml"] == [True, True]
    (the_case,) = [o for o in outcomes if o.suite_path == "tests/b.yaml"]
    return the_case, warnings


def test_a_fixture_linked_outside_is_refused(case_project: CaseProject, outside: Path) -> None:
    files = case_project.root / "tests" / "files"
    files.mkdir(parents=True)
    (files / "x.txt").symlink_to(outside / "secret.txt")
    case, warnings = run_second_suite(case_project, "  - name: reads\n    payload: hi\n    files: [x.txt]\n")
    # connic lint's verdict
    assert any("Symbolic links are not allowed: tests/files/x.txt" in w for w in warnings), warnings
    assert (case.status, case.records) == ("error", [])
    assert case.setup_error == "fixture tests/files/x.txt: tests/files/x.txt is a symbolic link; Connic refuses links"


def test_a_files_folder_linked_outside_is_refused(case_project: CaseProject, outside: Path) -> None:
    (case_project.root / "tests").mkdir()
    (case_project.root / "tests" / "files").symlink_to(outside, target_is_directory=True)
    case, _ = run_second_suite(case_project, "  - name: reads\n    payload: hi\n    files: [secret.txt]\n")
    assert case.setup_error == "fixture tests/files/secret.txt: tests/files is a symbolic link; Connic refuses links"


@pytest.mark.parametrize("folder", ["builders", "mocks"])
@pytest.mark.parametrize("link", ["file", "folder"])
def test_code_linked_outside_is_never_imported(case_project: CaseProject, outside: Path, folder: str, link: str) -> None:
    base = case_project.root / "tests" / folder
    if link == "file":
        base.mkdir(parents=True)
        (base / "evil.py").symlink_to(outside / "evil.py")
        linked = f"tests/{folder}/evil.py"
    else:
        base.parent.mkdir(parents=True)
        base.symlink_to(outside, target_is_directory=True)
        linked = f"tests/{folder}"
    key = "builder" if folder == "builders" else "mocks"
    case, _ = run_second_suite(case_project, f"  - name: links\n    payload: '{{\"a\": 1, \"b\": 2}}'\n    {key}: evil\n")
    label = "builder 'evil'" if key == "builder" else "mocks 'evil'"
    assert case.setup_error == (
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
    case_project: CaseProject, outside: Path, key: str, value: str
) -> None:
    case_project.agent("echo", type="tool", tool_name="calc.echo")
    case_project.tool("calc", ECHO)
    case_project.suite("echo", f"tests:\n  - name: escape\n    payload: hi\n    {key}: {value}\n")
    # an invalid case: loading the suite gives its located error, and it fails in setup
    suite = load_suite(case_project.root / "tests/echo.yaml", case_project.root)
    assert suite is not None
    (error,) = [c.error for c in suite.cases]
    assert error is not None and error.startswith("tests/echo.yaml:4:")
    assert error.endswith("must be a bare filename (no path separators)") and SECRET not in error
    with pytest.raises(CaseNotFound, match="must be a bare filename"):  # nothing of it runs
        case_project.case("echo", "escape")
    assert not (outside / "imported.txt").exists()


HOSTILE_NAMES = ["../../../../escape", "/abs/olute", "..", ".hidden", "a/../../b", "..\\..\\win", "CON",
                 "nul.txt", "trailing. ", "tab\there", "~/home", "x" * 120]


class Recorder:
    """Stands in for the live model while recording: answers every request with ``ok``."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(content="ok", input_tokens=1, output_tokens=1)


def tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


def test_cassettes_recorded_for_hostile_case_names_stay_in_the_cassette_dir(case_project: CaseProject) -> None:
    case_project.agent("calc")
    cases = "".join(f"  - name: {json.dumps(name)}\n    payload: hi\n" for name in HOSTILE_NAMES)
    case_project.suite("sub/calc", "agent: calc\ntests:\n" + cases)
    parent = case_project.root.parent
    before_outside = set(os.listdir(parent))
    before = tree(case_project.root)

    def live(agent_name: str) -> Any:
        return Recorder()

    recorded = case_project.cases("sub/calc", mode="once", live=live)
    assert [o.verdict_passed for o in recorded.values()] == [True] * len(HOSTILE_NAMES)
    written = tree(case_project.root) - before
    cassettes = {w for w in written if w.endswith(".yaml")}
    assert len(cassettes) == len(HOSTILE_NAMES)  # one each, none overwriting another
    assert all(w.startswith("cassettes/sub/calc/") and w.count("/") == 3 for w in cassettes), cassettes
    assert not any(Path(w).name.startswith(".") for w in cassettes)
    assert set(os.listdir(parent)) == before_outside

    replayed = case_project.cases("sub/calc")  # and each replays from where it was written
    assert [(o.verdict_passed, o.recorded_runs) for o in replayed.values()] == [(True, 1)] * len(HOSTILE_NAMES)
