"""The progress line of long runs (docs/ci.md "Progress"): cases, runs, tokens and cost so far,
between pytest's result lines, not with -q. ``connic_progress_interval = 0`` writes it after
every case but the last, so no test depends on the clock."""

from __future__ import annotations

import pytest

from helpers.project import ConnicProject, esc
from pytest_connic.plugin.progress import progress_line

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

SUITE = """
agent: echo
tests:
  - name: one
    payload: '{"x": 1}'
    runs: 2
  - name: two
    payload: '{"x": 1}'
    runs: 3
    expected_result: output.got.x == 2
  - name: three
    payload: '{"x": 1}'
"""


def test_progress_line_text() -> None:
    assert progress_line(3, 12, 7, 30, 1000, 234, 0.00123) == (
        "connic: 3/12 cases, 7/30 runs, 1,234 tokens (1,000 in / 234 out), $0.0012 so far")
    assert progress_line(3, None, 7, None, 0, 0, 0.0) == "connic: 3 cases, 7 runs, 0 tokens (0 in / 0 out), $0.0000 so far"


def test_progress_line_fits_the_width() -> None:
    """No line of the plugin is wider than the terminal: the token breakdown goes first, then the
    cost, then the tokens; the counts of cases and runs stay."""
    args = (41, 120, 187, 600, 1_100_020, 104_291, 1.2034)
    full = progress_line(*args)
    assert len(full) > 80
    for width in (120, 80, 60, 40, 30):
        line = progress_line(*args, width=width)
        assert len(line) <= width, (width, line)
    assert progress_line(*args, width=120) == full
    assert progress_line(*args, width=80) == "connic: 41/120 cases, 187/600 runs, 1,204,311 tokens, $1.2034 so far"
    assert progress_line(*args, width=45) == "connic: 41/120 cases, 187/600 runs so far"


@pytest.fixture
def suite(calc: ConnicProject) -> ConnicProject:
    calc.suite("echo", SUITE)
    return calc


@pytest.mark.parametrize("verbosity", ["", "-v"])
def test_a_line_after_each_case_with_interval_zero(suite: ConnicProject, verbosity: str) -> None:
    result = suite.run(*[a for a in (verbosity,) if a], "-o", "connic_progress_interval=0")
    lines = [line for line in result.stdout.lines if line.startswith("connic: ")]
    assert lines == ["connic: 1/3 cases, 2/6 runs, 0 tokens (0 in / 0 out), $0.0000 so far",
                     "connic: 2/3 cases, 5/6 runs, 0 tokens (0 in / 0 out), $0.0000 so far"]
    if verbosity:  # each on its own line between pytest's result lines
        result.stdout.fnmatch_lines(["PASSED*", lines[0], "tests/echo.yaml::two *"], consecutive=True)
        result.stdout.fnmatch_lines(["FAILED*", lines[1], "tests/echo.yaml::three PASSED*"], consecutive=True)
    else:  # pytest's dots go on on the next line, as after a live log line
        result.stdout.fnmatch_lines(["tests/echo.yaml .", lines[0], "F", lines[1], esc(".*[100%]")], consecutive=True)


@pytest.mark.parametrize("args", [("-q", "-o", "connic_progress_interval=0"), ("-o", "connic_progress_interval=off")])
def test_no_line_with_q_or_a_negative_interval(suite: ConnicProject, args: tuple[str, ...]) -> None:
    result = suite.run(*args)
    result.stdout.no_fnmatch_line("connic: *so far")
    result.assert_outcomes(passed=2, failed=1)


def test_a_bad_interval_names_its_key(suite: ConnicProject) -> None:
    result = suite.run("-o", "connic_progress_interval=-1")
    result.stderr.fnmatch_lines([("ERROR: invalid value '-1*' from ini connic_progress_interval: expected seconds"
                                 " (0 or more) or off")])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_an_unpriced_cost_is_never_a_bare_zero() -> None:
    """A model without a price (docs/models.md "What a run cost") is not $0.0000 so far."""
    assert progress_line(1, 2, 1, 2, 10, 5, 0.0, cost_known=False).endswith(", cost unknown so far")
    assert progress_line(1, 2, 1, 2, 10, 5, 0.5, cost_known=False).endswith(", $0.5000 + unpriced so far")
