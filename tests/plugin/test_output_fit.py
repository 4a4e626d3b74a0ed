"""Output that fits and says each thing once, through real pytest runs: the results table at the
terminal's width, ``-qq``, the reason in pytest's short summary, ``--tb=line`` and JUnit (over
xdist: the equivalence session, tests/plugin/test_xdist_reports.py), and warnings located at the
suite file and line of their case."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from helpers.mixed import write_mixed
from helpers.project import ConnicProject
from pytest_connic.reports.terminal import display_width

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "order-desk"
REASON = "expected_result not satisfied: output.sum == 11 where output.sum = 10"


@pytest.fixture
def narrow(monkeypatch: pytest.MonkeyPatch) -> None:
    """An 80-column terminal, outside CI (where pytest, and the table, do not cut lines)."""
    monkeypatch.setenv("COLUMNS", "80")
    for name in ("CI", "BUILD_NUMBER"):
        monkeypatch.delenv(name, raising=False)


def table_lines(text: str) -> list[str]:
    section = text.split("= connic results =")[1]
    return [line for line in section.splitlines() if line.lstrip()[:1] in ("┌", "│", "├", "└", "(")]


def test_the_bundled_example_fits_80_columns(pytester: pytest.Pytester, narrow: None) -> None:
    shutil.copytree(EXAMPLE, pytester.path, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"))
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == 0
    lines = table_lines(result.stdout.str())
    assert len(lines) >= 11 + 5
    too_long = [line for line in lines if display_width(line) > 80]
    assert not too_long, "\n".join(too_long)
    assert "    │ Result │ Test " in lines[1] and lines[1].endswith("│ Runs │ Threshold │")
    assert any("…" in line for line in lines)  # long names cut, not wrapped
    assert lines[-1] == "    (Median latency, Tokens and Cost hidden to fit 80 columns)"


def test_the_history_lines_fold_at_80_columns_and_say_everything(pytester: pytest.Pytester, narrow: None) -> None:
    """The lines after the table (here the history's, with a long path) are folded at spaces,
    not cut: every line of the session fits, and the folded text is the whole line."""
    shutil.copytree(EXAMPLE, pytester.path, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"))
    store = "a-history-store-whose-name-is-long-enough-to-need-a-second-line.sqlite"
    assert pytester.runpytest("-p", "no:cacheprovider", "--connic-history", store).ret == 0
    result = pytester.runpytest("-p", "no:cacheprovider", "--connic-history", store)
    assert result.ret == 0
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "history: 0 case(s) changed since session 1 of " in line)
    assert lines[start].startswith("  history: ") and lines[start + 1].startswith("    ")
    assert " ".join(line.strip() for line in lines[start:start + 2]).endswith(f"({store})")
    too_long = [line for line in lines if display_width(line) > 80 and not line.startswith(("plugins:", "rootdir:"))]
    assert not too_long, "\n".join(too_long)


def test_a_wide_terminal_shows_every_column(calc: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "160")
    monkeypatch.delenv("CI", raising=False)
    write_mixed(calc)
    lines = table_lines(calc.run("-p", "no:randomly").stdout.str())
    assert "Median latency" in lines[1] and "Tokens" in lines[1]
    assert not lines[-1].lstrip().startswith("(")
    assert max(display_width(line) for line in lines) <= 160


def test_qq_drops_the_table_but_keeps_the_verdict(calc: ConnicProject, narrow: None) -> None:
    write_mixed(calc)
    result = calc.run("-qq")
    text = result.stdout.str()
    assert "┌" not in text and "│ Result │" not in text
    result.stdout.fnmatch_lines(["3/6 cases passed."])


#: 48 characters: ``tests/long.yaml:3: case '<name>' (calc) could not be set up`` is wider than 80
LONG_48 = "high_priority_customer_escalates_balance_updates"


def test_the_reason_is_in_the_short_summary_tb_line_and_junit(calc: ConnicProject, narrow: None) -> None:
    write_mixed(calc)
    calc.suite("long", f"agent: calc\ntests:\n  - name: {LONG_48}\n    payload: x\n    files: [nope.txt]\n")
    result = calc.run("-rA", "--junitxml", "junit.xml")
    result.stdout.fnmatch_lines([
        "FAILED tests/calc.yaml::wrong sum - expected_result not satisfied*",
        "FAILED tests/calc.yaml::missing fixture - missing fixture: tests/files/nope*",
    ])
    # the failure report's first line folds at 80 columns; the name is whole, to be copied into -k
    lines = result.stdout.lines
    head = next(i for i, line in enumerate(lines) if line.startswith("tests/long.yaml:3: case"))
    said = " ".join(line.strip() for line in lines[head:head + 2])
    assert said == f"tests/long.yaml:3: case '{LONG_48}' (calc) could not be set up", lines[head:head + 3]
    assert all(display_width(line) <= 80 for line in lines[head:head + 3])
    root = ET.parse(calc.root / "junit.xml").getroot()
    failure = next(c for c in root.iter("testcase") if c.get("name") == "wrong sum").find("failure")
    assert failure is not None and failure.get("message") == REASON
    assert (failure.text or "").count("output.sum == 11") == 1

    line = calc.run("--tb=line", "-q")
    line.stdout.fnmatch_lines([f"tests/calc.yaml:9: {REASON}"])
    failures = line.stdout.str().split("= FAILURES =")[1].split("= connic results =")[0]
    assert "      Run " not in failures  # one line per failure, as pytest's own --tb=line


def test_a_runtime_warning_points_at_its_case(project: ConnicProject) -> None:
    project.agent("smart", guardrails={"input": [{"type": "prompt_injection"}]})
    project.suite("smart", '''
        tests:
          - name: first
            payload: my invoice
          - name: harmless
            payload: my invoice
    ''')
    project.replies("smart", "first", "hello")
    project.replies("smart", "harmless", "hello")
    result = project.run("-p", "no:randomly", "--connic-unjudged-guardrails=pass")
    result.assert_outcomes(passed=2)
    text = result.stdout.str()
    summary = text.split("warnings summary")[1]
    # once per session, at the suite file and line of the case that met it first
    assert summary.count("GuardrailNotEvaluatedWarning") == 1, summary
    result.stdout.fnmatch_lines(["tests/smart.yaml::first", "  tests/smart.yaml:2: GuardrailNotEvaluatedWarning: *"])
    assert "guardrails.py" not in summary and "session.py" not in summary


LONG = "answers a question about the refund policy"  # the three names share these 42 characters
LONG_NAMES = [f"{LONG} for premium members", f"{LONG} for basic members", f"{LONG} for guests"]
ANSWER = {"turns": [{"tool_calls": [{"name": "add", "arguments": {"a": 4, "b": 6}}]},
                    {"content": '{"sum": 10}', "usage": {"input_tokens": 100, "output_tokens": 10}}]}


def _rows(lines: list[str]) -> list[str]:
    """The text of each body row (the header and the rules left out)."""
    return [line for line in lines[3:] if line.lstrip().startswith(("│", "|"))]


def test_long_names_that_share_a_prefix_stay_distinct_at_80_columns(calc: ConnicProject, narrow: None) -> None:
    calc.agent("calc-test-fast", tools=["calc.add", "calc.multiply"], system_prompt="You are calc, but fast.")
    calc.suite("calc", "tests:\n" + "".join(f"  - name: {name}\n    payload: '4 + 6?'\n"
                                           "    expected_result: output.sum == 10\n" for name in LONG_NAMES))
    for name in LONG_NAMES:
        calc.cassette("calc", name, [ANSWER])
        calc.cassette("calc", f"{name}@calc-test-fast", [ANSWER])
    result = calc.run("-p", "no:randomly", "--connic-ab", "fast")
    assert result.ret == 0
    text = result.stdout.str()
    results = table_lines(text.split("= connic A/B")[0])
    ab = [line for line in text.split("= connic A/B")[1].splitlines() if line.lstrip()[:1] in "┌│├└"]
    for lines in (results, ab):
        too_long = [line for line in lines if display_width(line) > 80]
        assert not too_long, "\n".join(too_long)
    shown = [row.split("│")[2].strip() for row in _rows(results)]
    assert len(set(shown)) == 3, shown  # cut, yet each row its own
    assert all("…" in cell for cell in shown)
    assert any(cell.endswith("premium members") for cell in shown)
    cases = [row.split("│")[1].strip() for row in _rows(ab) if row.split("│")[1].strip()]
    assert len(set(cases)) == len(cases) == 4 and cases[-1] == "overall", cases


def test_a_console_without_box_characters_gets_an_ascii_table(calc: ConnicProject, narrow: None,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    write_mixed(calc)
    monkeypatch.setenv("PYTHONIOENCODING", "cp1252")
    result = calc.run_subprocess("-p", "no:randomly")
    text = result.stdout.str()
    section = text.split("= connic results =")[1]
    assert "\\u2502" not in text and "│" not in section
    assert "    +---------+-" in section
    result.stdout.fnmatch_lines(["*|  PASS   | calc::adds *|", "*|  ERROR  | calc::invalid *|"])
    # every other line of the plugin's: its symbols in ASCII (✓ + , ✗ x, → ->), never escaped
    assert not re.search(r"\\u[0-9a-fA-F]{4}|\\x[0-9a-fA-F]{2}", text), text
    result.stdout.fnmatch_lines(["*x calc::wrong sum (tests/calc.yaml:*)"])
    result.stdout.fnmatch_lines(["*Trace:", "*+ calc (*ms)", "*+ add(a=4, b=6)*"])
    assert "  -> Failure details" in text
