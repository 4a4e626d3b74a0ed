"""The results table fits the terminal; a failure report says each thing once; an abandoned call
is marked failed in the trace."""

from __future__ import annotations

import pytest

from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord, ToolCallRecord, build_spans, build_trace
from pytest_connic.reports.failure import failure_text
from pytest_connic.reports.terminal import (
    RESULT_COLUMNS,
    ResultColumn,
    cut,
    display_width,
    failure_lines,
    failure_reason_line,
    render_trace_tree,
    results_table,
)
from pytest_connic.secrets import Masker

NAMES = [
    "escalates a refund above the auto-refund limit",
    "日本語のテストケース名前がとても長い場合はどうなるでしょうか",
    "short",
    "\x1b[31mred\x1b[0m \u202eevil",
]


def outcome(name: str, line: int = 1) -> CaseOutcome:
    record = RunRecord(run_id=f"r-{line}", agent_name="order-assistant", index=0, duration_ms=12.0)
    return CaseOutcome(nodeid=f"tests/a.yaml::{name}", suite_path="tests/a.yaml", line=line,
                       agent_name="order-assistant", case_name=name, runs=1, success_threshold=100,
                       records=[record])


def outcomes() -> list[CaseOutcome]:
    return [outcome(name, i) for i, name in enumerate(NAMES, 1)]


@pytest.mark.parametrize("width", [120, 100, 80, 60, 48])
def test_every_line_fits_the_width(width: int) -> None:
    lines = results_table(outcomes(), width=width)
    assert max(display_width(line) for line in lines) <= width
    boxes = [line for line in lines if line.lstrip()[:1] in "┌│├└"]
    assert len({display_width(line) for line in boxes}) == 1  # wide characters measured: a straight box


def test_without_a_width_nothing_is_cut() -> None:
    text = "\n".join(results_table(outcomes()))
    assert NAMES[0] in text and NAMES[1] in text and "…" not in text
    assert "Median latency" in text and "Tokens" in text


def test_narrow_terminal_hides_the_extra_columns_first_and_says_so() -> None:
    lines = results_table(outcomes(), width=80)
    header = [c.strip() for c in lines[1].strip().strip("│").split("│")]
    assert header == ["Result", "Test", "Runs", "Threshold"]  # Connic's own columns stay
    assert lines[-1] == "    (Median latency, Tokens and Cost hidden to fit 80 columns)"
    assert "order-assistant::escalates a refund above t… │" in lines[3]
    wide = results_table(outcomes(), width=140)
    assert "Tokens" in wide[1] and not wide[-1].lstrip().startswith("(")


def test_names_are_neutralised() -> None:
    text = "\n".join(results_table(outcomes()))
    assert "\x1b" not in text and "\u202e" not in text
    assert "\\x1b[31mred\\x1b[0m \\u202eevil" in text


def test_cut_measures_wide_characters() -> None:
    assert cut("日本語テキスト", 7) == "日本語…"
    assert display_width(cut("日本語テキスト", 7)) == 7
    assert cut("short", 10) == "short"


def test_an_extra_column_is_one_more_entry() -> None:
    columns = [*RESULT_COLUMNS, ResultColumn("Trend", drop=3, cell=lambda o: "▁▃▅")]
    assert "Trend" in results_table(outcomes(), columns=columns)[1]
    assert "Trend" not in results_table(outcomes(), columns=columns, width=100)[1]


# --- said once --------------------------------------------------------------------------------

NO_CASSETTE = ("no cassette for this case: expected cassettes/a/x.yaml; record one with "
               "--connic-record-mode=once (needs provider credentials) or write it by hand (docs/models.md)")


def no_cassette_case(runs: int = 1) -> CaseOutcome:
    payload = {"message": "refund please", "customer_id": "C-100"}
    records = [
        RunRecord(run_id=f"run-{i}", agent_name="desk", index=i, status="failed", error=NO_CASSETTE,
                  failures=[NO_CASSETTE], input=payload, duration_ms=1.0,
                  run_context={"run_id": f"run-{i}", "agent_name": "desk", "payload": payload, "channel": "email"})
        for i in range(runs)
    ]
    return CaseOutcome(nodeid="tests/desk.yaml::refunds", suite_path="tests/desk.yaml", line=17,
                       agent_name="desk", case_name="refunds", runs=runs, success_threshold=100, records=records)


def test_the_no_cassette_sentence_appears_once() -> None:
    text = failure_text(no_cassette_case(), Masker())
    assert text.count("no cassette for this case") == 1
    lines = text.split("\n")
    assert lines[0] == "tests/desk.yaml:17: case 'refunds' (desk) failed"  # what failed; then how and why
    assert lines[1] == f"    0/1 runs passed, threshold 100% needs 1: {NO_CASSETTE}"
    assert failure_reason_line(no_cassette_case()) == NO_CASSETTE  # pytest's crash line
    assert "        Failed:  as above" in lines
    assert "          ✗ desk [failed] (1ms)" in lines  # still marked failed, without the sentence again


def test_context_does_not_repeat_the_payload_run_id_or_agent() -> None:
    text = failure_text(no_cassette_case(), Masker())
    assert '        Context: {"channel":"email"}' in text
    assert text.count("refund please") == 1  # Input only


def test_several_runs_with_the_same_error_say_it_once() -> None:
    text = failure_text(no_cassette_case(runs=3), Masker())
    assert text.count("no cassette for this case") == 1
    assert text.count("        Failed:  as above") == 3


def test_summary_failure_details_point_at_the_reports_without_repeating_them() -> None:
    lines = failure_lines([no_cassette_case()], Masker(), full=False)
    assert lines == ["  → Failure details: in the failure report of each case above",
                     "    ✗ desk::refunds (tests/desk.yaml:17)"]
    full = "\n".join(failure_lines([no_cassette_case()], Masker(), full=True))  # --tb=no: the only place
    assert full.count("no cassette for this case") == 1


# --- the trace ---------------------------------------------------------------------------------


def test_an_abandoned_call_is_failed_in_the_trace() -> None:
    calls = [
        ToolCallRecord(seq=0, name="lookup", ref="t.lookup", params={}, has_result=True, result=1, agent="desk"),
        ToolCallRecord(seq=1, name="slow", ref="t.slow", params={}, agent="desk"),  # the run timed out in it
    ]
    record = RunRecord(run_id="r", agent_name="desk", index=0, status="timeout", tool_calls=calls,
                       error="the run exceeded timeout_s")
    spans = build_spans(record, masker=Masker())
    statuses = {s["name"]: s["status"] for s in spans if s["name"] == "tool_call"}
    assert [s["status"] for s in spans if s["name"] == "tool_call"] == ["ok", "error"], statuses
    lines = render_trace_tree(build_trace(record, masker=Masker()), indent=0)
    assert "  ✓ lookup() → 1 (0ms)" in lines
    assert "  ✗ slow() (0ms) — no result: the run ended while this call was running" in lines


# --- A/B deltas in the HTML report -------------------------------------------------------------


def test_ab_differences_are_coloured_by_direction_and_cost_has_its_unit() -> None:
    from pytest_connic.reports.ab_report import HTML_HEADERS, _html_row, difference_row

    diff = {"pass_rate": 0.1, "pass_rate_interval_95": [-0.05, 0.25], "mean_latency_ms": 40.0,
            "p50_latency_ms": -12.0, "p95_latency_ms": 0.0, "mean_tokens": -30.0, "mean_cost": 0.0004}
    row = _html_row(difference_row(diff))
    cells = row.split("<td")[1:]
    assert 'class="delta better"' in cells[3] and "▲" in cells[3]  # pass rate up: better
    assert 'class="delta worse"' in cells[4] and "▼" in cells[4]  # mean latency up: worse
    assert 'class="delta better"' in cells[5]  # p50 latency down: better
    assert "delta" not in cells[6]  # no change: no colour
    assert 'class="delta better"' in cells[7]  # fewer tokens: better
    assert 'class="delta worse"' in cells[8] and "+0.0004" in cells[8]  # dearer: worse
    assert HTML_HEADERS[-1] == "Cost/run (USD)"
    assert "delta" not in _html_row(["adds", "control", "10", "80.0%", "", "", "", "", ""])
    # a replay's latencies are local timings: not judged; pass rate, tokens and cost still are
    local = _html_row(difference_row(diff), measured=False).split("<td")[1:]
    assert all("delta" not in cell and "▲" not in cell and "▼" not in cell for cell in local[4:7])
    assert 'class="delta better"' in local[3] and 'class="delta worse"' in local[8]


def test_the_ab_section_says_when_its_latencies_are_local_timings() -> None:
    from pytest_connic.reports.ab_report import LOCAL_LATENCIES, ab_html, terminal_lines

    section = {"variant": "fast", "mode": "exploratory", "plan": None, "comparisons": [
        {"base": "calc", "variant": "calc-test-fast", "cases": [{"test_name": "adds", "error": "no runs"}],
         "overall": {"paused": False, "recommendation": None}}]}
    for latencies, said in (("local", True), ("measured", False)):
        text = "\n".join(terminal_lines({**section, "latencies": latencies}))
        assert (LOCAL_LATENCIES in text) is said
        assert ("Latencies are local timings" in ab_html({**section, "latencies": latencies})) is said


def test_a_calls_error_inside_the_reason_still_marks_its_span() -> None:
    call = ToolCallRecord(seq=0, name="add", ref="ops.add", params={"a": 13}, aborted=True,
                          error='aborted by before hook (AbortTool): {"error": "unlucky"}', agent="desk")
    reason = ('expected tool call ops.add: result.error == "unlucky" not satisfied (invocations=0): none of 1 '
              'call(s) matched; first call (it raised: aborted by before hook (AbortTool): {"error": "unlucky"})')
    record = RunRecord(run_id="r", agent_name="desk", index=0, tool_calls=[call], failures=[reason])
    outcome = CaseOutcome(nodeid="tests/a.yaml::x", suite_path="tests/a.yaml", line=3, agent_name="desk",
                          case_name="x", runs=1, success_threshold=100, records=[record])
    text = failure_text(outcome, Masker())
    assert '✗ add(a=13) [aborted] (0ms) — aborted by before hook (AbortTool): {"error": "unlucky"}' in text


#: 48 characters: with the file, the agent and ``failed`` it does not fit 80 columns
LONG_NAME = "high_priority_customer_escalates_balance_updates"
assert len(LONG_NAME) == 48


@pytest.mark.parametrize("name", [LONG_NAME, "answers a question about the refund policy for premium members"])
def test_a_failures_first_lines_fold_at_the_width_and_keep_the_name_whole(name: str) -> None:
    outcome = no_cassette_case()
    outcome.case_name, outcome.agent_name = name, "change-analyzer"
    outcome.records[0].failures = ["input guardrail 'moderation' has no judgement. Supply it:\n- write it\n- record it"]
    lines = failure_text(outcome, Masker(), width=80).split("\n")
    head = lines[:lines.index("    0/1 runs passed, threshold 100% needs 1: input guardrail 'moderation' has no "
                              "judgement. Supply it:")]
    assert len(head) in (2, 3) and all(display_width(line) <= 80 for line in head), head
    assert sum(f"'{name}'" in line for line in head) == 1  # whole, on one line: copied into -k as it is
    assert " ".join(line.strip() for line in head) == f"tests/desk.yaml:17: case '{name}' (change-analyzer) failed"
    assert head[0].startswith("tests/desk.yaml:17: case") and head[1].startswith("  ")
    assert lines[len(head) + 1:len(head) + 3] == ["    - write it", "    - record it"]
    assert failure_text(outcome, Masker()).split("\n")[0].endswith(f"'{name}' (change-analyzer) failed")  # no width


def test_a_name_wider_than_the_terminal_stands_whole_on_its_own_line() -> None:
    outcome = no_cassette_case()
    outcome.case_name = "x" * 100
    lines = failure_text(outcome, Masker(), width=80).split("\n")
    assert lines[:3] == ["tests/desk.yaml:17: case", f"  '{'x' * 100}'", "  (desk) failed"]


def test_wrap_folds_at_spaces_with_a_hanging_indent_and_loses_nothing() -> None:
    from pytest_connic.reports.table import wrap

    line = "  history: 3 case(s) changed since session 12 of 2026-12-01T09:14:03+00:00 at commit 4f2a9c1e0b7d (h.sqlite)"
    lines = wrap(line, 60)
    assert all(display_width(part) <= 60 for part in lines)
    assert lines[0].startswith("  history: ") and all(part.startswith("    ") for part in lines[1:])
    assert " ".join(part.strip() for part in lines) == line.strip()
    assert wrap(line, None) == [line] and wrap("short", 10) == ["short"]
    wide = "  名前 " * 12  # wide characters take two columns each
    assert all(display_width(part) <= 20 for part in wrap(wide.rstrip(), 20))
    assert wrap("x" * 30 + " y", 10) == ["x" * 30, "  y"]  # a word wider than the room stands alone
