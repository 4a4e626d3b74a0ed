"""The HTML report as a person sees it: rendered by headless Chromium after its script ran.

Needs the Debian package ``chromium`` (``/usr/bin/chromium``). Without it the test skips, except
under CI (env ``CI`` set), where a missing browser is a broken setup and the test fails.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from helpers.chromium import Visible, run_chromium
from pytest_connic.records.events import DivergenceNoteEvent
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord, ToolCallRecord
from pytest_connic.reports.html import render_html
from pytest_connic.reports.json_report import build_json_report
from pytest_connic.secrets import Masker

XSS = "<img src=x onerror=alert(1)>"


def outcomes() -> list[CaseOutcome]:
    good = CaseOutcome(
        nodeid="tests/greeter.yaml::greets politely", suite_path="tests/greeter.yaml", line=3,
        agent_name="greeter", case_name="greets politely", runs=2, success_threshold=100,
        records=[RunRecord(run_id=f"run-good-{i}", agent_name="greeter", index=i, output_raw="Hello!",
                           duration_ms=50.0) for i in range(2)],
    )
    call = ToolCallRecord(seq=0, name="lookup_invoice", ref="billing.lookup_invoice", params={"invoice": "INV-7"},
                          has_result=True, result={"amount": 12}, mocked=True, mock_function="mock_lookup")
    bad = CaseOutcome(
        nodeid="tests/billing.yaml::refunds invoice", suite_path="tests/billing.yaml", line=9,
        agent_name="billing", case_name="refunds invoice", runs=1, success_threshold=100,
        records=[RunRecord(run_id="run-bad-0", agent_name="billing", status="failed", tool_calls=[call],
                           error="refund service refused the request", input={"invoice": "INV-7"},
                           failures=["agent error: refund service refused the request"], duration_ms=80.0)],
    )
    hostile = CaseOutcome(nodeid=f"tests/x.yaml::{XSS}", suite_path="tests/x.yaml", line=1, agent_name="billing",
                          case_name=XSS, runs=1, success_threshold=100, setup_error="no builder 'nope'")
    return [good, bad, hostile]


@pytest.fixture
def page(tmp_path: Path) -> Path:
    path = tmp_path / "report.html"
    report = build_json_report(outcomes(), masker=Masker(), environment_id="local")
    path.write_text(render_html(report), encoding="utf-8")
    return path


def test_rendered_page_shows_cases_badges_errors_and_tools(chromium: str, page: Path, tmp_path: Path) -> None:
    dom = run_chromium(chromium, tmp_path, page.as_uri(), "--dump-dom")
    assert 'data-ready="true"' in dom, "the report script did not finish"
    parsed = Visible()
    parsed.feed(dom)
    text = parsed.visible_text()
    assert "greeter::greets politely" in text
    assert "billing::refunds invoice" in text
    assert f"billing::{XSS}" in text  # shown as text, not turned into an element
    assert {"PASS", "FAIL", "ERROR"} <= set(parsed.badges)
    assert "refund service refused the request" in text
    assert "lookup_invoice" in text and "mocked by mock_lookup" in text
    assert "3 of 3 cases shown" in dom


def test_failing_filter_from_the_url_hides_passing_cases(chromium: str, page: Path, tmp_path: Path) -> None:
    dom = run_chromium(chromium, tmp_path, page.as_uri() + "#failing", "--dump-dom")
    parsed = Visible()
    parsed.feed(dom)
    hidden = {"".join(parts).split("\n")[0] for is_hidden, parts in parsed.sections if is_hidden}
    assert any("greets politely" in h for h in hidden)
    assert "greets politely" not in parsed.visible_text()
    assert "billing::refunds invoice" in parsed.visible_text()
    assert "2 of 3 cases shown" in dom

    searched = Visible()
    searched.feed(run_chromium(chromium, tmp_path, page.as_uri() + "#q=lookup_invoice", "--dump-dom"))
    assert "billing::refunds invoice" in searched.visible_text()
    assert "greets politely" not in searched.visible_text() and XSS not in searched.visible_text()


def test_screenshot(chromium: str, page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    run_chromium(chromium, tmp_path, page.as_uri(), f"--screenshot={shot}", "--window-size=1280,900")
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 20_000  # a blank 1280x900 page compresses to a few kilobytes
    if os.environ.get("CONNIC_KEEP_SCREENSHOT"):
        shutil.copy(shot, os.environ["CONNIC_KEEP_SCREENSHOT"])


CONTEXT = {
    "project": "desk (/work/desk)", "command": "pytest -k 'refund' --connic-html report.html",
    "time": "2026-12-01T12:00:00+00:00", "commit": "abc1234",
    "versions": {"Python": "3.11.7", "pytest": "9.2.0", "pytest-connic": "0.1.0", "Connic SDK": "0.1.57"},
    "pytest": "1 failed, 1 passed, 1 error (exit code 1)", "pytest_status": "failed",
}


def _summary_rows(dom: str) -> list[str]:
    """The case column of the summary table, top to bottom (without the ``<wbr>`` break hints)."""
    body = dom.split('id="summary-table"')[1].split("</tbody>")[0].replace("<wbr>", "")
    return re.findall(r'class="case-link"[^>]*>([^<]*)</a>', body)


@pytest.fixture
def context_page(tmp_path: Path) -> Path:
    path = tmp_path / "context.html"
    report = build_json_report(outcomes(), masker=Masker(), environment_id="local")
    path.write_text(render_html(report, CONTEXT), encoding="utf-8")
    return path


def test_header_has_the_run_context_and_failures_come_first(chromium: str, context_page: Path, tmp_path: Path) -> None:
    dom = run_chromium(chromium, tmp_path, context_page.as_uri(), "--dump-dom")
    assert 'data-ready="true"' in dom
    header = dom.split("<header>")[1].split("</header>")[0]
    for text in ("desk (/work/desk)", "pytest -k 'refund' --connic-html report.html", "2026-12-01T12:00:00+00:00",
                 "abc1234", "Python 3.11.7, pytest 9.2.0, pytest-connic 0.1.0, Connic SDK 0.1.57",
                 "1 failed, 1 passed, 1 error (exit code 1)"):
        assert html.escape(text, quote=False) in header, text
    # the failing and erroring cases first, in the table and in the case list; the passing one last
    rows = _summary_rows(dom)
    assert rows == ["billing::refunds invoice", html.escape(f"billing::{XSS}", quote=False), "greeter::greets politely"]
    parsed = Visible()
    parsed.feed(dom)
    assert [s[1][0] for s in parsed.sections][-1] == "PASS"
    # one file: no external resource (the CSP forbids them, and none is referenced)
    assert not re.search(r'(src|href)="(https?:|//)', dom)


def test_the_summary_table_sorts_and_filters(chromium: str, context_page: Path, tmp_path: Path) -> None:
    clicks = context_page.with_name("clicked.html")
    script = ('<script>const th = document.querySelector("th[data-key=name]"); th.click();'
              'document.body.dataset.sorted = th.getAttribute("aria-sort");</script>')
    clicks.write_text(context_page.read_text("utf-8").replace("</body>", script + "</body>"), "utf-8")
    dom = run_chromium(chromium, tmp_path, clicks.as_uri(), "--dump-dom")
    assert 'data-sorted="ascending"' in dom
    names = [html.unescape(n) for n in _summary_rows(dom)]
    assert names == sorted(names, key=str.lower)

    filtered = run_chromium(chromium, tmp_path, context_page.as_uri() + "#failing", "--dump-dom")
    body = filtered.split('id="summary-table"')[1].split("</tbody>")[0]
    hidden_rows = re.findall(r"<tr[^>]*hidden[^>]*>.*?</tr>", body)
    assert len(hidden_rows) == 1 and "greets politely" in hidden_rows[0]


def test_a_failing_case_says_its_reason_once(chromium: str, context_page: Path, tmp_path: Path) -> None:
    dom = run_chromium(chromium, tmp_path, context_page.as_uri(), "--dump-dom")
    parsed = Visible()
    parsed.feed(dom)
    billing = next("".join(parts) for _, parts in parsed.sections if "billing::refunds invoice" in "".join(parts))
    assert billing.count("refund service refused the request") == 1, billing


def test_screenshot_with_the_header_and_the_summary_table(chromium: str, context_page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "context.png"
    run_chromium(chromium, tmp_path, context_page.as_uri(), f"--screenshot={shot}", "--window-size=1280,1200")
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    if os.environ.get("CONNIC_KEEP_SCREENSHOT"):
        shutil.copy(shot, os.environ["CONNIC_KEEP_SCREENSHOT"].replace(".png", "-header.png"))


NOTE = ("runs[0].turns[1]: the request differs from the recording: the system prompt changed "
        "(recorded 3f2a…, now 9b1c…)")
WARNING = "tests/desk.yaml:3: ConnicWarning: the cassette's turns carry no request digests"
FAILING_NOTE = "runs[0].turns[1]: message 2 (tool) differs: the tool result is now an error (KeyError: 'chat')"
#: what the case's run warns at the end (pytest's warning text): the divergence note once more
REPEATED = (f"tests/desk.yaml:3: CassetteDivergenceWarning: {NOTE}; the replayed answers were recorded for "
            "another request: re-record the cassette with --connic-record-mode=all")
TRACEBACK = ('Traceback (most recent call last):\n  File "tools/helpers.py", line 42, in lookup\n'
             '    return table[key]\nKeyError: \'chat\'')
LONG_CASE = "answers a question about the refund policy for premium members of the loyalty programme"


def card_outcomes() -> list[CaseOutcome]:
    """A passing case with a divergence note and a warning (its card collapsed), a failing one
    whose run carries a traceback, both with long names; and a history section."""
    noted = RunRecord(run_id="run-noted", agent_name="knowledge-copilot", output_raw="ok", duration_ms=40.0,
                      events=[DivergenceNoteEvent(name=f"note: {NOTE}", text=NOTE)])
    passing = CaseOutcome(nodeid=f"tests/desk.yaml::{LONG_CASE}", suite_path="tests/desk.yaml", line=3,
                          agent_name="knowledge-copilot", case_name=LONG_CASE, runs=1, success_threshold=100,
                          records=[noted])
    broken = RunRecord(run_id="run-broken", agent_name="knowledge-copilot", status="failed",
                       error="KeyError: 'chat'", failures=["agent error: KeyError: 'chat'"], duration_ms=30.0,
                       error_traceback={"chain": [], "text": TRACEBACK, "where": "tools/helpers.py:42",
                                        "origin": "middleware before"},
                       events=[DivergenceNoteEvent(name=f"note: {FAILING_NOTE}", text=FAILING_NOTE)])
    failing = CaseOutcome(nodeid="tests/desk.yaml::colons %3A%3A in name", suite_path="tests/desk.yaml", line=9,
                          agent_name="knowledge-copilot", case_name="colons :: in name", runs=1,
                          success_threshold=100, records=[broken])
    return [passing, failing]


def _arm(rate: float) -> dict[str, object]:
    return {"runs": 20, "pass_rate": rate, "wilson": [rate - 0.2, min(1.0, rate + 0.1)], "mean_latency_ms": 1234.0,
            "p50_latency_ms": 1100.0, "p95_latency_ms": 2300.0, "mean_tokens": 1530.0, "mean_cost": 0.0123}


def _ab_case(name: str) -> dict[str, object]:
    difference = {"pass_rate": -0.2, "pass_rate_interval_95": [-0.45, 0.05], "mean_latency_ms": 120.0,
                  "p50_latency_ms": -30.0, "p95_latency_ms": 400.0, "mean_tokens": -30.0, "mean_cost": 0.0004}
    return {"test_name": name, "error": None, "control": _arm(0.9), "variant": _arm(0.7), "difference": difference,
            "looks": [], "paused": False, "insufficient_runs": False, "notes": []}


#: an A/B section of two cases with long names, nine columns each (``reports/ab_report.py``)
AB_SECTION = {"variant": "fast", "mode": "exploratory", "plan": None, "latencies": "local", "comparisons": [
    {"base": "knowledge-copilot", "variant": "knowledge-copilot-test-fast",
     "cases": [_ab_case(LONG_CASE), _ab_case("high_priority_customer_escalates_balance_updates")],
     "overall": {**_ab_case("overall"), "paused": False, "recommendation": None}}]}


@pytest.fixture
def card_page(tmp_path: Path) -> Path:
    from pytest_connic.reports.json_report import add_warnings

    outcomes = card_outcomes()
    report = build_json_report(outcomes, masker=Masker(), environment_id="local")
    add_warnings(report, {outcomes[0].nodeid: [WARNING, REPEATED]}, masker=Masker())
    for case in report["cases"]:  # type: ignore[union-attr]  # the widest cells the results table shows
        case.update(tokens={"input": 123456, "output": 7890}, cost=0.012345, cost_known=True,  # type: ignore[union-attr]
                    suite="tests/regressions/knowledge-copilot.yaml")
    report["ab"] = AB_SECTION
    trend = [{"pass_rate": 1.0, "latency_ms": 40.0}, {"pass_rate": 0.0, "latency_ms": 30.0}]
    report["history"] = {"path": "/work/a/very/long/path/to/the/project/.pytest_cache/connic/history.sqlite",
                         "compared_with": "session 4 of 2026-12-01T12:00:00+00:00 at commit abc123456789",
                         "note": None,
                         "cases": {o.nodeid: {"change": {"kind": "newly-failing", "text": "newly failing"},
                                              "flaky": None, "trend": trend} for o in outcomes}}
    path = tmp_path / "cards.html"
    path.write_text(render_html(report), encoding="utf-8")
    return path


#: reads the page in an iframe ``width`` CSS pixels wide (headless Chromium's window is at least
#: 500 wide): whether it scrolls sideways, what else but a code block does (an element whose
#: content is wider than it, that scrolls or hides the rest), each table cell that is cut (past the
#: edge of the box that scrolls or clips it, or of the window) or whose text overflows it, and
#: whether the divergence note is laid out (visible)
PROBE = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="page" width="{width}" height="1600" style="border:0" srcdoc="{page}"></iframe>
<script>
document.getElementById("page").addEventListener("load", (event) => {{
  const doc = event.target.contentDocument, win = event.target.contentWindow, root = doc.documentElement;
  document.body.dataset.scroll = root.scrollWidth + "/" + root.clientWidth;
  const problems = [];
  for (const node of doc.body.querySelectorAll("*")) {{
    const overflow = win.getComputedStyle(node).overflowX;
    if (node.tagName !== "PRE" && overflow !== "visible" && node.scrollWidth > node.clientWidth + 1)
      problems.push("scrolls sideways: " + node.tagName + "." + node.className + " " + node.scrollWidth + " > " + node.clientWidth);
  }}
  for (const cell of doc.querySelectorAll("td, th")) {{
    if (!cell.getClientRects().length) continue;  // a column hidden to fit
    const box = cell.getBoundingClientRect();
    let edge = root.clientWidth;
    for (let up = cell.parentElement; up && up !== doc.body; up = up.parentElement)
      if (win.getComputedStyle(up).overflowX !== "visible") {{ edge = Math.min(edge, up.getBoundingClientRect().right); break; }}
    if (box.right > edge + 0.5 || box.left < -0.5 || cell.scrollWidth > cell.clientWidth + 1)
      problems.push("cut: " + cell.tagName + " " + JSON.stringify(cell.textContent.slice(0, 40)) + " " + box.left + "-" + box.right + " of " + edge);
  }}
  document.body.dataset.problems = JSON.stringify(problems);
  const note = doc.querySelector(".card-note.divergence");
  document.body.dataset.note = note && note.getClientRects().length ? "visible" : "hidden";
  document.body.dataset.ready = doc.body.dataset.ready;
  document.body.dataset.text = doc.body.innerText;
}});
</script></body></html>"""


@pytest.mark.parametrize("width", [1280, 390])
def test_the_card_shows_notes_warnings_and_traceback_and_nothing_scrolls_sideways(
        chromium: str, card_page: Path, tmp_path: Path, width: int) -> None:
    probe = tmp_path / f"probe-{width}.html"
    probe.write_text(PROBE.format(width=width, page=html.escape(card_page.read_text("utf-8"))), "utf-8")
    dom = run_chromium(chromium, tmp_path, probe.as_uri(), "--dump-dom", f"--window-size={max(width, 500) + 20},1700")
    assert 'data-ready="true"' in dom, "the report script did not finish"
    scroll, client = (int(n) for n in re.search(r'data-scroll="(\d+)/(\d+)"', dom).groups())  # type: ignore[union-attr]
    assert client <= width and scroll <= client, f"the page scrolls sideways: {scroll} > {client}"
    # no column is cut and nothing but a code block scrolls sideways: the results table, the A/B
    # table and the History table fit (narrow windows hide optional columns and say which)
    problems = json.loads(html.unescape(re.search(r'data-problems="([^"]*)"', dom).group(1)))  # type: ignore[union-attr]
    assert problems == [], "\n".join(problems)
    text_all = html.unescape(re.search(r'data-text="([^"]*)"', dom).group(1))  # type: ignore[union-attr]
    assert "Cost (USD)" in text_all if width == 1280 else "Cost are hidden to fit the window" in text_all
    assert "Pass rate [95% CI]" in text_all and "-20.0 pp [-45.0, +5.0]" in text_all  # the A/B pass rate in view
    if width == 390:
        assert "Tokens/run and Cost/run are hidden to fit the window" in text_all
    assert 'data-note="visible"' in dom  # in the collapsed card's summary, without expanding it
    text = html.unescape(re.search(r'data-text="([^"]*)"', dom).group(1))  # type: ignore[union-attr]
    assert f"Divergence: {NOTE}" in text and f"Warning: {WARNING}" in text
    assert text.count(NOTE) == 1  # the case's CassetteDivergenceWarning repeats the note: shown once
    assert f"Divergence: {FAILING_NOTE}" in text  # the failing case's card: its note and its traceback
    assert "KeyError: 'chat'" in text and 'File "tools/helpers.py", line 42' in text
    assert "middleware before raised at tools/helpers.py:42" in text
    page = card_page.read_text("utf-8")
    history = page.split('id="history"')[1].split("</section>")[0]
    names = re.findall(r'<td class="history-name">([^<]*)</td>', history)
    assert sorted(names) == sorted(["knowledge-copilot::colons :: in name", f"knowledge-copilot::{LONG_CASE}"])
    shot = tmp_path / f"cards-{width}.png"
    run_chromium(chromium, tmp_path, probe.as_uri(), f"--screenshot={shot}", f"--window-size={max(width, 500) + 20},1700")
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    if os.environ.get("CONNIC_KEEP_SCREENSHOT"):
        shutil.copy(shot, os.environ["CONNIC_KEEP_SCREENSHOT"].replace(".png", f"-cards-{width}.png"))
