"""A project Connic would refuse to upload is said here too, with Connic's numbers: one load warning
of the project (``project/index.py``), and the cases still run (files other tools write must not stop
the local run). How a session shows a load warning, once and located, is tests/plugin/test_load_warnings.py."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from helpers.harness import CaseProject
from pytest_connic.project.index import index_project
from pytest_connic.project.load import LoadWarning

SUITE = "agent: echo\ntests:\n  - name: a\n    payload: '{}'\n"


def upload_warnings(root: Path) -> list[LoadWarning]:
    """The project's load warnings (what a session shows at collection): here only its upload's."""
    return index_project(root).warnings


def sized(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        f.truncate(size)


@pytest.mark.parametrize(
    ("path", "size", "message"),
    [
        ("tools/blob.txt", 5 * 1024 * 1024 + 1,
         ("Connic would refuse to upload this project: Code/config size exceeds 5,242,880 byte limit."
          " Move large fixtures into tests/files/.*")),
        ("tests/files/huge.bin", 25 * 1024 * 1024 + 1,
         "Connic would refuse to upload this project: Total file size exceeds 26,214,400 byte limit*"),
        ("tests/notes.rst", 10, "Connic would refuse to upload this project: tests/notes.rst: File type '.rst' not allowed*"),
    ],
)
def test_over_the_upload_limits_is_a_warning(calc_cases: CaseProject, path: str, size: int, message: str) -> None:
    calc_cases.suite("echo", SUITE)
    sized(calc_cases.root / path, size)

    (warning,) = upload_warnings(calc_cases.root)

    assert fnmatch.fnmatchcase(warning.message.splitlines()[0], message), warning.message
    assert calc_cases.case("echo", "a").verdict_passed  # a warning: the cases still run


def test_large_fixtures_within_the_limits_are_fine(calc_cases: CaseProject) -> None:
    calc_cases.suite("echo", SUITE)
    sized(calc_cases.root / "tests/files/big.bin", 6 * 1024 * 1024)  # over the code cap, but fixtures have 25 MB

    assert upload_warnings(calc_cases.root) == []
    assert calc_cases.case("echo", "a").verdict_passed


def test_symlinked_project_file_is_a_warning(calc_cases: CaseProject) -> None:
    calc_cases.suite("echo", SUITE)
    (calc_cases.root / "tools" / "link.py").symlink_to(calc_cases.root / "tools" / "calc.py")

    (warning,) = upload_warnings(calc_cases.root)

    assert warning.message.startswith(
        "Connic would refuse to upload this project: Symbolic links are not allowed: tools/link.py")


def test_files_other_tools_write_are_one_warning_naming_each(calc_cases: CaseProject) -> None:
    """syrupy's snapshots and a JUnit file written under tests/ by an earlier session: Connic would
    refuse the upload, the project warns once with both names and runs its cases."""
    calc_cases.suite("echo", SUITE)
    calc_cases.write("tests/__snapshots__/test_x.ambr", "# serializer version: 1\n")
    assert len(upload_warnings(calc_cases.root)) == 1
    calc_cases.write("tests/results.xml", '<?xml version="1.0"?><testsuites/>\n')  # the earlier session's JUnit

    (warning,) = upload_warnings(calc_cases.root)

    lines = warning.message.splitlines()
    assert fnmatch.fnmatchcase(lines[0], "Connic would refuse to upload this project: tests/*: File type '.*' not allowed*")
    assert lines[1] == "  files of a type Connic refuses: tests/__snapshots__/test_x.ambr, tests/results.xml"
    assert warning.message.count("Connic would refuse to upload") == 1
    assert calc_cases.case("echo", "a").verdict_passed
