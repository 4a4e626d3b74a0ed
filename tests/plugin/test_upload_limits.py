"""A project Connic would refuse to upload is said here too, with Connic's numbers: one warning,
and the cases still run (files other tools write must not stop the local run)."""

from __future__ import annotations

import pytest

from helpers.project import ConnicProject

SUITE = "agent: echo\ntests:\n  - name: a\n    payload: '{}'\n"


@pytest.mark.parametrize(
    ("path", "size", "message"),
    [
        ("tools/blob.txt", 5 * 1024 * 1024 + 1,
         ("*Connic would refuse to upload this project: Code/config size exceeds 5,242,880 byte limit."
          " Move large fixtures into tests/files/.*")),
        ("tests/files/huge.bin", 25 * 1024 * 1024 + 1,
         "*Connic would refuse to upload this project: Total file size exceeds 26,214,400 byte limit*"),
        ("tests/notes.rst", 10, "*Connic would refuse to upload this project: tests/notes.rst: File type '.rst' not allowed*"),
    ],
)
def test_over_the_upload_limits_is_a_warning(calc: ConnicProject, path: str, size: int, message: str) -> None:
    calc.suite("echo", SUITE)
    target = calc.root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("wb") as f:
        f.truncate(size)
    result = calc.run("-q")
    result.stdout.fnmatch_lines([message])
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_large_fixtures_within_the_limits_are_fine(calc: ConnicProject) -> None:
    calc.suite("echo", SUITE)
    target = calc.root / "tests/files/big.bin"
    target.parent.mkdir(parents=True)
    with target.open("wb") as f:
        f.truncate(6 * 1024 * 1024)  # over the code cap, but fixtures have the 25 MB budget
    calc.run("-q").assert_outcomes(passed=1)


def test_symlinked_project_file_is_a_warning(calc: ConnicProject) -> None:
    calc.suite("echo", SUITE)
    (calc.root / "tools" / "link.py").symlink_to(calc.root / "tools" / "calc.py")
    result = calc.run("-q")
    result.stdout.fnmatch_lines(["*Connic would refuse to upload this project: Symbolic links are not allowed: tools/link.py*"])


def test_files_other_tools_write_are_one_warning_naming_each(calc: ConnicProject) -> None:
    """syrupy's snapshots and a JUnit file written under tests/ by an earlier session: Connic would
    refuse the upload, the local session warns once with both names and runs its cases."""
    calc.suite("echo", SUITE)
    calc.write("tests/__snapshots__/test_x.ambr", "# serializer version: 1\n")
    result = calc.run("-q", "--junitxml=tests/results.xml")
    result.assert_outcomes(passed=1, warnings=1)
    result = calc.run("-q")  # the next session, with the JUnit file now under tests/
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines([
        "*Connic would refuse to upload this project: tests/*: File type '.*' not allowed*",
        "*files of a type Connic refuses: tests/__snapshots__/test_x.ambr, tests/results.xml",
    ])
    assert result.stdout.str().count("Connic would refuse to upload") == 1
