"""Where a case is when only its node id is known (the xdist controller collects nothing): its
line is read from its suite file, as collection would give it."""

from __future__ import annotations

from pathlib import Path

from pytest_connic.plugin.xdist import suite_line
from pytest_connic.suite.loader import case_lines

SUITE = """agent: echo
# a comment
tests:

  - name: first
    payload: x
  - payload: a case without a name
  - name: "colons :: [and brackets]"
    payload: y
"""


def test_each_case_is_at_its_line_by_the_name_its_item_has(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    path = tmp_path / "tests" / "t.yaml"
    path.write_text(SUITE, "utf-8")
    assert case_lines(path) == {"first": 5, "tests[1]": 7, "colons :: [and brackets]": 8}
    # node ids as the controller gets them: escaped item names, an xdist group's suffix
    assert suite_line(tmp_path, "tests/t.yaml::first") == 5
    assert suite_line(tmp_path, "tests/t.yaml::first@echo") == 5
    assert suite_line(tmp_path, "tests/t.yaml::colons %3A%3A %5Band brackets%5D") == 8
    assert suite_line(tmp_path, "tests/t.yaml::gone") == 0  # the file no longer has it
    assert suite_line(tmp_path, "tests/missing.yaml::first") == 0
    path.write_text("tests: [unclosed\n", "utf-8")
    assert suite_line(tmp_path, "tests/t.yaml::first") == 0
