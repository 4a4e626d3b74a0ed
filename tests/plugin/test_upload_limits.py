"""A project Connic would refuse to upload is refused here too, with Connic's numbers."""

from __future__ import annotations

import pytest

from helpers.project import ConnicProject

SUITE = "agent: echo\ntests:\n  - name: a\n    payload: '{}'\n"


@pytest.mark.parametrize(
    ("path", "size", "message"),
    [
        ("tools/blob.txt", 5 * 1024 * 1024 + 1,
         ("*cannot be uploaded to Connic: Code/config size exceeds 5,242,880 byte limit."
          " Move large fixtures into tests/files/.*")),
        ("tests/files/huge.bin", 25 * 1024 * 1024 + 1,
         "*cannot be uploaded to Connic: Total file size exceeds 26,214,400 byte limit*"),
        ("tests/notes.rst", 10, "*cannot be uploaded to Connic: tests/notes.rst: File type '.rst' not allowed*"),
    ],
)
def test_over_the_upload_limits_is_refused(calc: ConnicProject, path: str, size: int, message: str) -> None:
    calc.suite("echo", SUITE)
    target = calc.root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("wb") as f:
        f.truncate(size)
    result = calc.run("-q")
    result.stdout.fnmatch_lines([message])
    assert result.ret != 0
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_large_fixtures_within_the_limits_are_fine(calc: ConnicProject) -> None:
    calc.suite("echo", SUITE)
    target = calc.root / "tests/files/big.bin"
    target.parent.mkdir(parents=True)
    with target.open("wb") as f:
        f.truncate(6 * 1024 * 1024)  # over the code cap, but fixtures have the 25 MB budget
    calc.run("-q").assert_outcomes(passed=1)


def test_symlinked_project_file_is_refused(calc: ConnicProject) -> None:
    calc.suite("echo", SUITE)
    (calc.root / "tools" / "link.py").symlink_to(calc.root / "tools" / "calc.py")
    result = calc.run("-q")
    result.stdout.fnmatch_lines(["*cannot be uploaded to Connic: Symbolic links are not allowed: tools/link.py*"])
