"""Comparing sessions (docs/history.md, "Comparing sessions"): the history keeps what each case
did; ``python -m pytest_connic compare A B`` and ``--connic-compare REF`` show what changed. Under
xdist (computed once, by the controller): the equivalence session, tests/plugin/test_xdist_reports.py."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.project import CALC_TOOLS, ConnicProject
from pytest_connic.models.pricing import litellm_map

SUITE = """
agent: calc
tests:
  - name: adds
    payload: "4 + 6?"
    expected_tool_calls:
      - calc.add
  - name: steady
    payload: "1 + 1?"
"""
#: an old history written by pytest-connic before it kept behaviour (schema 2): ``make_old_history``
OLD_HISTORY = Path(__file__).parent / "data" / "history-schema2.sqlite"


def turn(content: str | None = None, calls: list[tuple[str, dict[str, Any]]] | None = None,
         tokens: tuple[int, int] = (100, 10)) -> dict[str, Any]:
    out: dict[str, Any] = {"usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]}}
    if content is not None:
        out["content"] = content
    if calls:
        out["tool_calls"] = [{"name": n, "arguments": a} for n, a in calls]
    return out


def first_version(project: ConnicProject) -> None:
    """The agent, its suite and its cassettes as recorded first."""
    project.tool("calc", CALC_TOOLS)
    project.agent("calc", tools=["calc.add", "calc.multiply"])
    project.suite("calc", SUITE)
    project.cassette("calc", "adds", [{"turns": [turn(calls=[("add", {"a": 4, "b": 6})]),
                                                 turn("The sum of four and six is ten.")]}])
    project.cassette("calc", "steady", [{"turns": [turn("Two.")]}])


def second_version(project: ConnicProject) -> None:
    """The prompt changed, and with it the recorded answer (one more tool call, other words)."""
    project.agent("calc", tools=["calc.add", "calc.multiply"], system_prompt="You are calc. Show your work.")
    project.cassette("calc", "adds", [{"turns": [
        turn(calls=[("add", {"a": 4, "b": 6})]),
        turn(calls=[("multiply", {"a": 10, "b": 1})], tokens=(150, 12)),
        turn("The sum of four and six is 10, checked twice.", tokens=(180, 20))]}])


def test_make_old_history(project: ConnicProject) -> None:  # pragma: no cover - run by hand, on main
    """Writes ``OLD_HISTORY`` when ``CONNIC_MAKE_OLD_HISTORY`` is set (run with main's code on the path)."""
    import os

    if not os.environ.get("CONNIC_MAKE_OLD_HISTORY"):
        pytest.skip("writes the fixture of an old history; run by hand with CONNIC_MAKE_OLD_HISTORY=1")
    first_version(project)
    project.run("--connic-history", "history.sqlite").assert_outcomes(passed=2)
    shutil.copy(project.root / "history.sqlite", OLD_HISTORY)


def stored_cases(path: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(path) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("SELECT * FROM cases ORDER BY session_id, nodeid")]


def test_the_history_keeps_what_each_case_did_bounded(project: ConnicProject) -> None:
    first_version(project)
    project.run("--connic-history", "history.sqlite", "--connic-report-value-limit", "20").assert_outcomes(passed=2)
    adds = json.loads(stored_cases(project.root / "history.sqlite")[0]["behaviour"])
    assert (adds["agent"], adds["name"], adds["suite"], adds["runs_started"]) == ("calc", "adds", "tests/calc.yaml", 1)
    run = adds["runs"][0]
    assert run["output"] == "The sum of four and " + "… [truncated: 31 characters, 11 cut]"
    assert run["tools"] == [{"name": "add", "args": '{"a":4,"b":6}', "result": '{"sum":10}', "error": None,
                             "approval": None, "aborted": False}]
    assert run["tokens"] == {"input": 200, "output": 20} and run["passed"] is True
    assert run["latency_ms"] >= 0 and run["guardrails"] == [] and run["approvals"] == []


def test_an_old_history_file_is_migrated_by_the_next_session(project: ConnicProject) -> None:
    first_version(project)
    shutil.copy(OLD_HISTORY, project.root / "history.sqlite")
    project.run("--connic-history", "history.sqlite").assert_outcomes(passed=2)
    rows = stored_cases(project.root / "history.sqlite")
    assert [(r["session_id"], r["behaviour"] is None) for r in rows] == [(1, True), (1, True), (2, False), (2, False)]
    with sqlite3.connect(project.root / "history.sqlite") as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 3


def compare_cli(project: ConnicProject, *args: str) -> pytest.RunResult:
    return project.pytester.run(sys.executable, "-m", "pytest_connic", "compare", *args)


def two_sessions(project: ConnicProject, *args: str) -> None:
    """Record the first version, change the prompt, its recorded answer and one tool call, run again."""
    first_version(project)
    project.run("--connic-history", "history.sqlite", "--connic-json", "before.json", *args).assert_outcomes(passed=2)
    second_version(project)
    project.run("--connic-history", "history.sqlite", "--connic-json", "after.json", *args).assert_outcomes(passed=2)


#: gpt-4.1-mini is priced from LiteLLM's map when LiteLLM is installed (the [live] extra); without
#: it no price is known, and the comparison says nothing about cost
COST = " · cost $0.000* → $0.000* (+$0.000*)" if litellm_map() else ""
CHANGED_ADDS = [
    "  1 case(s) changed, 1 unchanged, 0 only in the subject, 0 only in the reference",
    f"  in all: tokens 330 → 582 (+252){COST}",
    "  calc::adds  (tests/calc.yaml::adds)",
    "    output: The sum of four and six is [[]-ten-]{+10, checked twice+}.",
    "    tool calls:",
    '      = add({"a":4,"b":6}) → {"sum":10}',
    '      + multiply({"a":10,"b":1}) → {"product":10}',
    f"    tokens 220 → 472 (+252){COST} · latency*",
]


def test_compare_last_with_the_session_before(project: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    two_sessions(project)
    result = compare_cli(project, "last", "-2", "--history", "history.sqlite", "--html", "page.html")
    assert result.ret == 0, result.stderr.str()
    page = (project.root / "page.html").read_text("utf-8")  # the comparison alone: no report to show it in
    assert "<h2>Compared with session 1 of " in page and "Content-Security-Policy" in page
    result.stdout.fnmatch_lines(["compare: session 2 of * compared with session 1 of", "  20*", *CHANGED_ADDS],
                                consecutive=True)
    result.stdout.no_fnmatch_line("*calc::steady*")  # unchanged: counted, not shown
    assert max(len(line) for line in result.stdout.lines) <= 80
    assert "\x1b[" not in result.stdout.str()  # not a terminal: no colour


def test_compare_two_json_reports(project: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    two_sessions(project)
    result = compare_cli(project, "after.json", "before.json", "--json", "comparison.json", "--html", "page.html")
    assert result.ret == 0, result.stderr.str()
    page = (project.root / "page.html").read_text("utf-8")  # the subject's whole report, with the comparison
    assert "<h2>Compared with report before.json</h2>" in page and 'id="connic-report"' in page
    result.stdout.fnmatch_lines(["compare: report after.json compared with report before.json", *CHANGED_ADDS],
                                consecutive=True)
    section = json.loads((project.root / "comparison.json").read_text("utf-8"))["comparison"]
    (adds,) = section["changed"]
    assert adds["tokens"] == [220, 472] and adds["verdict"] is None and section["unchanged"] == 1
    assert ["+", "10, checked twice"] in adds["output"]["words"]
    assert ["+", 'multiply({"a":10,"b":1}) → {"product":10}'] in adds["tools"]
    coloured = compare_cli(project, "after.json", "before.json", "--color", "yes").stdout.str()
    assert "\x1b[31m[-ten-]\x1b[0m\x1b[32m{+10, checked twice+}\x1b[0m" in coloured


def test_connic_compare_shows_the_changes_at_the_session_end(project: ConnicProject,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    first_version(project)
    project.run("--connic-json", "before.json").assert_outcomes(passed=2)
    second_version(project)
    result = project.run("--connic-compare", "before.json", "--connic-json", "after.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*- connic compare -*", "compare: this session compared with report before.json",
                                 *CHANGED_ADDS], consecutive=True)
    shown = result.stdout.str().split("- connic compare -")[1].split("\n=")[0].splitlines()
    assert len(shown) > 8 and max(len(line) for line in shown) <= 80
    section = json.loads((project.root / "after.json").read_text("utf-8"))["comparison"]
    assert [c["nodeid"] for c in section["changed"]] == ["tests/calc.yaml::adds"]
    coloured = project.run("--connic-compare", "before.json", "--color=yes").stdout.str()  # where pytest colours
    assert "\x1b[32m{+10, checked twice+}" in coloured and "\x1b[31m[-ten-]" in coloured


def test_connic_compare_with_a_ref_that_names_nothing_is_a_usage_error(project: ConnicProject) -> None:
    first_version(project)
    result = project.run("--connic-compare", "gone.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*invalid value 'gone.json' from --connic-compare: gone.json: no such report file*"])
    result = project.run("--connic-history", "h.sqlite", "--connic-compare", "-2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*invalid value '-2' from --connic-compare: '-2': the history *h.sqlite does not exist*"])


def test_an_old_history_compares_with_a_new_session(project: ConnicProject, wide_terminal: None) -> None:
    first_version(project)
    shutil.copy(OLD_HISTORY, project.root / "history.sqlite")
    second_version(project)
    result = project.run("--connic-history", "history.sqlite", "--connic-compare", "last")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "compare: this session compared with session 1 of *",
        "  1 case(s) changed, 1 unchanged, 0 only in the subject, 0 only in the reference",
        "  in all: tokens 330 → 582 (+252) · *",
        "  calc::adds  (tests/calc.yaml::adds)",
        "    tokens 220 → 472 (+252) · *",
        "    changed: agents/calc.yaml, cassette re-recorded",
        ("    (outputs and tool calls not compared: the reference comes from a history written before "
        "pytest-connic kept them)"),
    ])


def test_a_pass_rate_change_says_whether_it_is_within_noise() -> None:
    from pytest_connic.compare.cases import rate_change
    from pytest_connic.compare.sides import CaseSide

    def side(successes: int, executed: int, interval: tuple[float, float]) -> CaseSide:
        return CaseSide("t.yaml::c", "a::c", "passed", successes, executed, successes / executed, interval,
                        0, 0, 0.0, None, None)

    noise = rate_change(side(8, 10, (0.49, 0.94)), side(6, 10, (0.31, 0.83)))
    assert noise is not None and noise["noise"] is True
    assert noise["text"] == "pass rate 80% → 60% (within noise: inside the reference's 95% interval 49%–94%)"
    moved = rate_change(side(19, 20, (0.76, 0.99)), side(8, 20, (0.22, 0.61)))
    assert moved is not None and moved["noise"] is False
    assert moved["text"] == "pass rate 95% → 40% (outside the reference's 95% interval 76%–99%)"
    assert rate_change(side(1, 1, (0.2, 1.0)), side(0, 1, (0.0, 0.8))) is None  # one run: the verdict says it


def test_the_markdown_summary_under_github_actions(project: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    first_version(project)
    project.run("--connic-json", "before.json").assert_outcomes(passed=2)
    second_version(project)
    step = project.root / "step-summary.md"
    step.write_text("earlier step\n", "utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    monkeypatch.setenv("GITHUB_ACTIONS", "false")  # not under GitHub Actions: left alone
    project.run("--connic-compare", "before.json").assert_outcomes(passed=2)
    assert step.read_text("utf-8") == "earlier step\n"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    project.run("--connic-compare", "before.json", "--connic-summary", "summary.md").assert_outcomes(passed=2)
    text = step.read_text("utf-8")
    assert text.startswith("earlier step\n### Connic: 2/2 cases passed\n")  # appended, as GitHub asks
    assert text.removeprefix("earlier step\n").rstrip("\n") == (project.root / "summary.md").read_text("utf-8").rstrip("\n")
    assert "this session compared with report before.json" in text
    assert "| calc::adds | unchanged | 220 → 472 (+252) |" in text
    assert "- output: The sum of four and six is <del>ten</del><ins>10, checked twice</ins>." in text
    assert '  - \\+ <ins>multiply({"a":10,"b":1}) → {"product":10}</ins>' in text


#: reads the page in an iframe ``width`` CSS pixels wide (headless Chromium's window is at least
#: 500 wide): whether it scrolls sideways, which cards carry a diff, which cards are shown
PROBE = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="page" width="{width}" height="1600" style="border:0" src="{url}"></iframe>
<script>
document.getElementById("page").addEventListener("load", (event) => {{
  const doc = event.target.contentDocument, root = doc.documentElement;
  document.body.dataset.scroll = root.scrollWidth + "/" + root.clientWidth;
  const cards = [...doc.querySelectorAll("section.case")];
  document.body.dataset.diffs = cards.filter((c) => c.querySelector(".cmp-case")).map((c) => c.dataset.nodeid).join(",");
  document.body.dataset.shown = cards.filter((c) => c.getClientRects().length).map((c) => c.dataset.nodeid).join(",");
  document.body.dataset.ready = doc.body.dataset.ready;
}});
</script></body></html>"""


def probe(chromium: str, tmp_path: Path, page: Path, width: int, fragment: str = "") -> dict[str, str]:
    import html
    import re

    from helpers.chromium import run_chromium

    shutil.copy(page, tmp_path / page.name)  # beside the probe: the iframe may read it (same origin)
    probe = tmp_path / f"probe-{width}{fragment.strip('#')}.html"
    probe.write_text(PROBE.format(width=width, url=html.escape(page.name + fragment)), "utf-8")
    window = f"--window-size={max(width, 500) + 20},1700"
    dom = run_chromium(chromium, tmp_path, probe.as_uri(), "--dump-dom", "--allow-file-access-from-files", window)
    shot = tmp_path / f"compare-{width}{fragment.strip('#')}.png"
    run_chromium(chromium, tmp_path, probe.as_uri(), f"--screenshot={shot}", "--allow-file-access-from-files", window)
    if os.environ.get("CONNIC_KEEP_SCREENSHOT"):
        shutil.copy(shot, os.environ["CONNIC_KEEP_SCREENSHOT"].replace(".png", f"-compare-{width}{fragment.strip('#')}.png"))
    return {k: html.unescape(v) for k, v in re.findall(r'data-(\w+)="([^"]*)"', dom)}


@pytest.mark.parametrize("width", [1280, 390])
def test_the_html_report_shows_the_comparison_side_by_side(project: ConnicProject, chromium: str, tmp_path: Path,
                                                           width: int) -> None:
    first_version(project)
    project.run("--connic-json", "before.json").assert_outcomes(passed=2)
    second_version(project)
    project.run("--connic-compare", "before.json", "--connic-html", "report.html").assert_outcomes(passed=2)
    page = project.root / "report.html"
    text = page.read_text("utf-8")
    section = text.split('<section id="comparison"')[1].split("</section>")[0]
    assert "<h2>Compared with report before.json</h2>" in section
    assert "The sum of four and six is <del>ten</del>." in section  # before, left
    assert "The sum of four and six is <ins>10, checked twice</ins>." in section  # now, right
    assert '<li class="cmp-ins"><ins>multiply({&quot;a&quot;:10,&quot;b&quot;:1}) → {&quot;product&quot;:10}</ins></li>' in section
    seen = probe(chromium, tmp_path, page, width)
    assert seen["ready"] == "true", "the report script did not finish"
    scroll, client = (int(n) for n in seen["scroll"].split("/"))
    assert client <= width and scroll <= client, f"the page scrolls sideways: {scroll} > {client}"
    assert seen["diffs"] == "tests/calc.yaml::adds"  # the diff on the changed case's card
    assert set(seen["shown"].split(",")) == {"tests/calc.yaml::adds", "tests/calc.yaml::steady"}
    assert probe(chromium, tmp_path, page, width, "#changed")["shown"] == "tests/calc.yaml::adds"  # Changed only
