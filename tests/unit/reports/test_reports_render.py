"""The report renderers, fed with hand-built outcomes: JSON, terminal, JUnit, trace files, HTML."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pytest_connic.jsonsafe import to_jsonable
from pytest_connic.records.events import HookEvent, MiddlewareEvent, NoteEvent, StageEvent
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import (
    ApprovalRecord,
    GuardrailRecord,
    ModelTurnRecord,
    RunRecord,
    ToolCallRecord,
    TriggerRecord,
    build_trace,
)
from pytest_connic.reports.html import render_html
from pytest_connic.reports.json_report import build_json_report, report_text
from pytest_connic.reports.junit import junit_properties
from pytest_connic.reports.stats import wilson_interval
from pytest_connic.reports.terminal import (
    failure_details,
    failure_section,
    failure_summary_line,
    render_trace_tree,
    results_table,
    summary_line,
)
from pytest_connic.reports.traces import build_spans, write_traces
from pytest_connic.secrets import Masker

SECRET = "sk-live-9f8e7d6c5b4a"
XSS = "<img src=x onerror=alert(1)>"
CONNIC_CASE_KEYS = [
    "agent_name", "test_name", "passed", "successes", "runs", "success_threshold",
    "failure_reason", "agent_run_ids", "agent_run_passed",
]
EXTRA_CASE_KEYS = [
    "nodeid", "suite", "line", "status", "pass_rate", "wilson_95", "recorded_runs", "replayed_runs", "replay_note",
    "median_latency_ms", "median_latency_virtual_ms", "tokens", "cost", "cost_known",
    "skipped_runs", "early_stop_reason", "interrupted", "left_out", "setup_error", "infrastructure_error", "recording_error",
    "pytest_outcome",
    "pytest_reason", "attempts", "runs_detail", "traceback",
]
SPAN_KEYS = ["name", "status", "duration_ms", "span_id", "parent_span_id", "span_order", "metadata_json"]
SHOWN_KEYS = ["run_id", "input", "output", "error", "run_context", "traces"]


# --- outcomes ---------------------------------------------------------------------------------


def turn(agent: str, index: int, calls: int = 0, content: str | None = None) -> ModelTurnRecord:
    return ModelTurnRecord(agent=agent, index=index, content=content, tool_calls=[{"name": "t"}] * calls,
                           input_tokens=100, output_tokens=10, cost=0.001, duration_ms=5.0)


def passing_case() -> CaseOutcome:
    records = [
        RunRecord(run_id=f"run-greet-{i}", agent_name="greeter", index=i, output_raw='{"greeting": "hi"}',
                  input={"name": "Ada"}, duration_ms=100.0 + 10 * i, model_turns=[turn("greeter", 0, content="hi")])
        for i in range(3)
    ]
    return CaseOutcome(nodeid="tests/greeter.yaml::greets user", suite_path="tests/greeter.yaml", line=4,
                       agent_name="greeter", case_name="greets user", runs=3, success_threshold=100, records=records)


def calc_run(i: int, *, fail: bool) -> RunRecord:
    calls = [
        ToolCallRecord(seq=0, name="add", ref="calc.add", params={"a": 4, "b": 6, "key": SECRET}, has_result=True,
                       result=10, mocked=True, mock_function="mock_add", duration_ms=1.0, agent="calc"),
        ToolCallRecord(seq=1, name="charge", ref="billing.charge", params={"amount": 5}, aborted=True, agent="calc"),
        ToolCallRecord(seq=2, name="refund", ref="billing.refund", params={"amount": 1}, approval="rejected",
                       agent="calc"),
    ]
    return RunRecord(
        run_id=f"run-calc-{i}", agent_name="calc", index=i, status="failed" if fail else "completed",
        error=f"tool exploded with {SECRET}" if fail else None,
        output_raw=f"the answer, token {SECRET}" + ("x" * 1000 if fail else ""),
        input=f"add 4 and 6 using {SECRET}", run_context={"user": "u1", "api_key": SECRET},
        duration_ms=200.0 + i, tool_calls=calls, model_turns=[turn("calc", 0, calls=3), turn("calc", 1)],
        guardrails=[GuardrailRecord(direction="input", type="pii", name="no_pii", status="passed")],
        approvals=[ApprovalRecord(tool="billing.refund", params={"amount": 1}, decision="reject")],
        failures=[f"agent error: tool exploded with {SECRET}", "output.total > 0\n  where output.total = 0"]
        if fail else [],
    )


def failing_case() -> CaseOutcome:
    records = [calc_run(i, fail=i != 0) for i in range(5)]
    return CaseOutcome(nodeid="tests/calc.yaml::adds numbers", suite_path="tests/calc.yaml", line=12,
                       agent_name="calc", case_name="adds numbers", runs=5, success_threshold=80, records=records)


def child_case() -> CaseOutcome:
    child = RunRecord(run_id="run-sum-0", agent_name="summarizer", index=0, output_raw='{"summary": "short"}',
                      input='{"text": "long"}', duration_ms=40.0, model_turns=[turn("summarizer", 0)],
                      status="failed", error="summarizer gave up")
    parent = RunRecord(
        run_id="run-orch-0", agent_name="orchestrator", index=0, duration_ms=90.0,
        tool_calls=[ToolCallRecord(seq=0, name="trigger_agent", ref="trigger_agent",
                                   params={"agent_name": "summarizer", "payload": '{"text": "long"}'},
                                   has_result=True, result='{"summary": "short"}', agent="orchestrator")],
        triggers=[TriggerRecord(agent_name="summarizer", tool="trigger_agent", wait_for_response=True,
                                payload={"text": "long"}, payload_raw='{"text": "long"}', child_run=child)],
        model_turns=[turn("orchestrator", 0, calls=1), turn("orchestrator", 1)],
        failures=["expected child agent summarizer to complete"],
    )
    return CaseOutcome(nodeid="tests/orch.yaml::delegates", suite_path="tests/orch.yaml", line=3,
                       agent_name="orchestrator", case_name="delegates", runs=1, success_threshold=100,
                       records=[parent])


def setup_error_case() -> CaseOutcome:
    return CaseOutcome(nodeid=f"tests/bad.yaml::{XSS}", suite_path="tests/bad.yaml", line=7, agent_name="calc",
                       case_name=XSS, runs=2, success_threshold=50,
                       setup_error="tests/bad.yaml:9:5: tests[0].builder: no builder 'missing'\navailable: base")


def infra_case() -> CaseOutcome:
    record = RunRecord(run_id="run-infra-0", agent_name="calc", index=0, status="failed",
                       infrastructure_error="provider openai returned 503")
    return CaseOutcome(nodeid="tests/calc.yaml::live", suite_path="tests/calc.yaml", line=30, agent_name="calc",
                       case_name="live", runs=1, success_threshold=100, records=[record])


def all_cases() -> list[CaseOutcome]:
    return [passing_case(), failing_case(), child_case(), setup_error_case(), infra_case()]


@pytest.fixture
def masker() -> Masker:
    return Masker([SECRET])


def case_by_name(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in report["cases"] if c["test_name"] == name)


def meta(span: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(span["metadata_json"])
    return result


# --- JSON report ------------------------------------------------------------------------------


def test_top_level_keys_and_summary(masker: Masker) -> None:
    report = build_json_report(all_cases(), masker=masker, environment_id="staging")
    assert list(report) == ["status", "test_run_id", "deployment_id", "environment_id", "cases", "summary"]
    assert report["status"] == "error"  # the infrastructure error wins
    assert report["test_run_id"] is None and report["deployment_id"] is None
    assert report["environment_id"] == "staging"
    assert report["summary"] == {"cases": 5, "passed": 1, "failed": 2, "errors": 2}


@pytest.mark.parametrize(
    ("cases", "status"),
    [([passing_case], "passed"), ([passing_case, failing_case], "failed"), ([setup_error_case], "failed"),
     ([passing_case, infra_case], "error")],
)
def test_session_status(cases: list[Callable[[], CaseOutcome]], status: str, masker: Masker) -> None:
    assert build_json_report([c() for c in cases], masker=masker)["status"] == status
    override = build_json_report([c() for c in cases], masker=masker, session_status="cancelled")
    assert override["status"] == "cancelled"


def test_case_keys_connic_first_then_extras(masker: Masker) -> None:
    report = build_json_report(all_cases(), masker=masker)
    passing = case_by_name(report, "greets user")
    assert list(passing) == CONNIC_CASE_KEYS + EXTRA_CASE_KEYS
    failing = case_by_name(report, "adds numbers")
    assert list(failing) == CONNIC_CASE_KEYS + ["failed_runs"] + EXTRA_CASE_KEYS
    setup = case_by_name(report, XSS)
    assert "failed_runs" not in setup  # no run ids: Connic adds failed_runs only with runs
    assert setup["status"] == "error" and setup["failure_reason"].startswith("tests/bad.yaml:9:5:")


def test_connic_values_of_a_failing_case(masker: Masker) -> None:
    case = case_by_name(build_json_report([failing_case()], masker=masker), "adds numbers")
    assert case["agent_name"] == "calc" and case["passed"] is False
    assert (case["successes"], case["runs"], case["success_threshold"]) == (1, 5, 80)
    assert case["failure_reason"] == "agent error: tool exploded with ***"
    assert case["agent_run_ids"] == [f"run-calc-{i}" for i in range(5)]
    assert case["agent_run_passed"] == [True, False, False, False, False]


def test_failed_runs_capped_at_three(masker: Masker) -> None:
    failed_runs = case_by_name(build_json_report([failing_case()], masker=masker), "adds numbers")["failed_runs"]
    assert failed_runs["total_failed"] == 4
    assert [r["run_id"] for r in failed_runs["shown"]] == ["run-calc-1", "run-calc-2", "run-calc-3"]
    shown = failed_runs["shown"][0]
    assert list(shown) == SHOWN_KEYS
    assert shown["input"] == "add 4 and 6 using ***"
    assert shown["error"] == "tool exploded with ***"
    assert shown["run_context"] == {"user": "u1", "api_key": "***"}
    for span in shown["traces"]:
        assert list(span) == SPAN_KEYS
        assert span["status"] in ("ok", "error")


def test_spans_of_tool_calls(masker: Masker) -> None:
    spans = build_spans(calc_run(1, fail=True), masker=masker)
    names = [(s["name"], meta(s).get("tool_name") or meta(s).get("name")) for s in spans]
    assert names == [
        ("agent_run", "calc"), ("guardrail", "input guardrail no_pii"), ("llm_call", "model #1"),
        ("tool_call", "add"), ("tool_call", "charge"), ("tool_call", "refund"), ("llm_call", "model #2"),
    ]
    root, _, _, add, charge, refund, _ = spans
    assert root["parent_span_id"] is None and root["status"] == "error"
    assert all(s["parent_span_id"] == root["span_id"] for s in spans[1:])
    assert [s["span_order"] for s in spans] == list(range(7))
    assert meta(add)["params"] == {"a": 4, "b": 6, "key": "***"}
    assert (meta(add)["result"], meta(add)["mocked"], meta(add)["mock_function"]) == (10, True, "mock_add")
    assert charge["status"] == "error" and meta(charge)["aborted"] is True
    assert refund["status"] == "error" and meta(refund)["approval"] == "rejected"


def test_child_run_spans_nest_under_the_trigger_call(masker: Masker) -> None:
    spans = build_spans(child_case().records[0], masker=masker)
    by_id = {s["span_id"]: s for s in spans}
    trigger = next(s for s in spans if meta(s).get("tool_name") == "trigger_agent")
    child_root = next(s for s in spans if meta(s).get("agent_name") == "summarizer" and s["name"] == "agent_run")
    assert child_root["parent_span_id"] == trigger["span_id"]
    assert meta(child_root)["child"] is True and meta(child_root)["error"] == "summarizer gave up"
    assert meta(trigger)["trigger"]["child_run_id"] == "run-sum-0"
    child_turn = next(s for s in spans if s["name"] == "llm_call" and meta(s)["agent"] == "summarizer")
    assert by_id[child_turn["parent_span_id"]] is child_root
    assert len({s["span_id"] for s in spans}) == len(spans)


def pipeline_run() -> RunRecord:
    """A sequential pipeline as the runtime records it: stages merged in, lifecycle events."""
    fetch = ToolCallRecord(seq=0, name="fetch", ref="web.fetch", params={}, has_result=True, result="ok",
                           agent="extract")
    return RunRecord(
        run_id="run-pipe-0", agent_name="pipeline", status="blocked", error="output blocked by no_secrets",
        events=[
            MiddlewareEvent(phase="before", mock=None),
            HookEvent(phase="before", tool="web.fetch", mock="mock_before_fetch"),
            HookEvent(phase="after", tool="web.fetch", mock=None),
            StageEvent(agent="extract", status="completed", run_id="st-1", error=None),
            StageEvent(agent="summarize", status="failed", run_id="st-2", error="bad JSON"),
            MiddlewareEvent(phase="after", mock="mock_after"),
            NoteEvent(name="note: the key", text=SECRET),  # an event's data is masked in the trace
            MiddlewareEvent(phase="cleanup", mock=None, error="RuntimeError: db closed"),
        ],
        model_turns=[turn("extract", 0, calls=1), turn("extract", 1), turn("summarize", 0)],
        tool_calls=[fetch],
        guardrails=[GuardrailRecord(direction="output", type="custom", name="no_secrets", status="blocked",
                                    message="leaks a key", mocked=True, mock_function="mock_guard")],
    )


def test_spans_of_a_pipeline_with_events_and_a_blocked_output(masker: Masker) -> None:
    spans = build_spans(pipeline_run(), masker=masker)
    by_id = {s["span_id"]: s for s in spans}
    shape = [(s["name"], meta(s)["name"], by_id.get(s["parent_span_id"] or "", {}).get("name")) for s in spans]
    assert shape == [
        ("agent_run", "pipeline", None), ("middleware", "middleware before", "agent_run"),
        ("agent", "extract", "agent_run"), ("llm_call", "model #1", "agent"), ("tool_call", "fetch", "agent"),
        ("llm_call", "model #2", "agent"), ("agent", "summarize", "agent_run"), ("llm_call", "model #1", "agent"),
        ("middleware", "middleware after", "agent_run"), ("note", "note: the key", "agent_run"),
        ("guardrail", "output guardrail no_secrets", "agent_run"), ("middleware", "middleware cleanup", "agent_run"),
    ]
    assert meta(spans[4])["hooks"] == [{"phase": "before", "mock": "mock_before_fetch"},
                                        {"phase": "after", "mock": None}]
    assert meta(spans[9])["text"] == "***" and meta(spans[6])["run_id"] == "st-2"
    assert spans[10]["status"] == "error" and meta(spans[10])["guardrail_name"] == "no_secrets"
    assert [s.to_dict() for s in build_trace(pipeline_run(), masker=masker)] == spans
    assert render_trace_tree(build_trace(pipeline_run(), masker=masker), indent=0) == [
        "✗ pipeline [blocked] (0ms) — output blocked by no_secrets",
        "  ✓ middleware before",
        "  ✓ agent extract",
        "    ✓ model #1 · 100 in / 10 out tokens (5ms)",
        '    ✓ fetch() → "ok" [before hook mocked by mock_before_fetch] (0ms)',
        "    ✓ model #2 · 100 in / 10 out tokens (5ms)",
        "  ✗ agent summarize [failed] — bad JSON",
        "    ✓ model #1 · 100 in / 10 out tokens (5ms)",
        "  ✓ middleware after [mocked by mock_after]",
        "  ✓ note: the key",
        "  ✗ output guardrail no_secrets: blocked [mocked by mock_guard] — leaks a key",
        "  ✗ middleware cleanup — RuntimeError: db closed",
    ]


def test_hook_events_skip_aborted_calls(masker: Masker) -> None:
    record = calc_run(1, fail=True)
    record.tool_calls.append(ToolCallRecord(seq=3, name="charge", ref="billing.charge", params={}, agent="calc"))
    record.events = [HookEvent(phase="before", tool="billing.charge", mock="m")]
    tools = {meta(s)["seq"]: meta(s) for s in build_spans(record, masker=masker) if s["name"] == "tool_call"}
    assert "hooks" not in tools[1]  # aborted: its before hook raised, so no event is its own
    assert tools[3]["hooks"] == [{"phase": "before", "mock": "m"}]


def test_extras(masker: Masker) -> None:
    report = build_json_report(all_cases(), masker=masker)
    failing = case_by_name(report, "adds numbers")
    assert failing["nodeid"] == "tests/calc.yaml::adds numbers"
    assert (failing["suite"], failing["line"], failing["status"]) == ("tests/calc.yaml", 12, "failed")
    assert failing["pass_rate"] == 0.2
    assert failing["wilson_95"] == [0.036224, 0.624465]
    assert failing["median_latency_ms"] == 202.0
    assert failing["tokens"] == {"input": 1000, "output": 100}
    assert failing["cost"] == pytest.approx(0.01)
    assert [r["run_id"] for r in failing["runs_detail"]] == [f"run-calc-{i}" for i in range(5)]
    detail = failing["runs_detail"][1]
    assert detail["tool_calls"][0]["params"]["key"] == "***" and detail["traces"][0]["name"] == "agent_run"
    setup = case_by_name(report, XSS)
    assert (setup["pass_rate"], setup["wilson_95"], setup["median_latency_ms"]) == (None, None, None)


def test_early_stop_extras(masker: Masker) -> None:
    outcome = passing_case()
    outcome.runs, outcome.skipped_runs, outcome.early_stop_reason = 5, 2, "threshold decided"
    outcome.records += [RunRecord(run_id=f"skip-{i}", agent_name="greeter", index=i, skipped=True) for i in (3, 4)]
    case = build_json_report([outcome], masker=masker)["cases"][0]
    assert case["agent_run_ids"] == ["run-greet-0", "run-greet-1", "run-greet-2"]
    assert (case["skipped_runs"], case["early_stop_reason"], case["pass_rate"]) == (2, "threshold decided", 1.0)
    assert case["wilson_95"] == [0.438503, 1.0] == list(wilson_interval(3, 3) or ())
    assert len(case["runs_detail"]) == 5


@pytest.mark.parametrize(
    ("k", "n", "expected"),
    [(3, 5, (0.230724, 0.882379)), (0, 10, (0.0, 0.277533)), (10, 10, (0.722467, 1.0)), (1, 5, (0.036224, 0.624465))],
)
def test_wilson_interval(k: int, n: int, expected: tuple[float, float]) -> None:
    assert wilson_interval(k, n) == pytest.approx(expected, abs=1e-6)


def test_wilson_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    for k, n in [(0, 1), (1, 3), (7, 9), (19, 20), (50, 100)]:
        ci = stats.binomtest(k, n).proportion_ci(method="wilson")
        assert wilson_interval(k, n) == pytest.approx((ci.low, ci.high), abs=1e-6)
    assert wilson_interval(0, 0) is None


def test_report_is_deterministic_and_serialisable(masker: Masker) -> None:
    first = report_text(build_json_report(all_cases(), masker=masker))
    second = report_text(build_json_report(list(reversed(all_cases())), masker=masker))
    assert first == second
    assert [c["nodeid"] for c in json.loads(first)["cases"]] == [
        f"tests/bad.yaml::{XSS}", "tests/calc.yaml::adds numbers", "tests/calc.yaml::live",
        "tests/greeter.yaml::greets user", "tests/orch.yaml::delegates",
    ]


def test_unserialisable_values_become_json(masker: Masker) -> None:
    class Opaque:
        def __repr__(self) -> str:
            return f"Opaque({SECRET})"

    looped: dict[str, Any] = {"name": "loop"}
    looped["self"] = looped
    record = RunRecord(run_id="r", agent_name="a", output_raw=b"\x00\xffraw", input={"obj": Opaque(), 1: {3, 1}},
                       run_context={"nan": float("nan"), "loop": looped, "tuple": (1, 2)})
    outcome = CaseOutcome(nodeid="n", suite_path="tests/a.yaml", line=1, agent_name="a", case_name="c", runs=1,
                          success_threshold=100, records=[record])
    text = report_text(build_json_report([outcome], masker=masker))
    detail = json.loads(text)["cases"][0]["runs_detail"][0]
    assert detail["output"] == "base64:AP9yYXc="
    assert detail["input"] == {"obj": "Opaque(***)", "1": [1, 3]}
    assert detail["run_context"] == {"nan": "nan", "loop": {"name": "loop", "self": "<cycle>"}, "tuple": [1, 2]}
    assert to_jsonable({1.5: None, None: 1}) == {"1.5": None, "None": 1}


def test_secret_never_appears_anywhere(masker: Masker, tmp_path: Path) -> None:
    outcomes = all_cases()
    report = build_json_report(outcomes, masker=masker)
    texts = [report_text(report), render_html(report), "\n".join(results_table(outcomes)),
             "\n".join(failure_section(outcomes, masker=masker))]
    texts += [failure_details(o, masker=masker) for o in outcomes]
    texts += [failure_summary_line(o, masker=masker) for o in outcomes]
    texts += [p.read_text(encoding="utf-8") for p in write_traces(tmp_path, outcomes, masker=masker)]
    assert all(SECRET not in text for text in texts)
    assert "***" in texts[0] and "***" in texts[5]  # masked, not dropped


# --- terminal ---------------------------------------------------------------------------------


def test_results_table_cells() -> None:
    lines = results_table([passing_case(), failing_case(), setup_error_case()])
    assert lines[0].startswith("    ┌") and lines[-1].startswith("    └")
    header = [c.strip() for c in lines[1].strip().strip("│").split("│")]
    assert header == ["Result", "Test", "Runs", "Threshold", "Median latency", "Tokens", "Cost"]
    rows = [[c.strip() for c in line.strip().strip("│").split("│")] for line in lines[3:-1]]
    assert [row[:6] for row in rows] == [
        ["ERROR", f"calc::{XSS}", "0/2", "50%", "—", "—"],
        ["FAIL", "calc::adds numbers", "1/5", "80%", "202ms", "1,000 in / 100 out"],
        ["PASS", "greeter::greets user", "3/3", "100%", "110ms", "300 in / 30 out"],
    ]
    assert rows[0][6] == "—"  # no run started
    assert all(row[6].startswith("$") or row[6] == "—" for row in rows) and "$0.0000" not in rows[1][6]
    assert lines[3].startswith("    │  ERROR  │ ") and lines[4].startswith("    │  FAIL   │ ")
    assert len({len(line) for line in lines}) == 1  # every row as wide as the box


def test_failure_details_layout(masker: Masker) -> None:
    text = failure_details(failing_case(), masker=masker)
    lines = text.split("\n")
    assert lines[0] == "      Run run-calc-1"
    assert lines[1] == "        Input:   add 4 and 6 using ***"
    assert lines[2].startswith("        Output:  the answer, token ***xxx")
    assert lines[2].endswith("x … (truncated)") and len(lines[2]) == len("        Output:  ") + 800 + 14
    assert lines[3] == '        Context: {"user":"u1","api_key":"***"}'
    assert lines[4] == "        Error:   tool exploded with ***"
    assert lines[5] == "        Failed:  agent error: tool exploded with ***"
    assert lines[6] == "                 output.total > 0"
    assert lines[7] == "                   where output.total = 0"
    assert lines[8] == "        Trace:"
    assert lines[9] == "          ✗ calc [failed] (201ms)"  # its error is the Error line above
    assert lines[10] == "            ✓ input guardrail no_pii: passed"
    assert lines[11] == "            ✓ model #1 · 100 in / 10 out tokens (5ms)"
    assert lines[12] == '            ✓ add(a=4, b=6, key="***") → 10 [mocked by mock_add] (1ms)'
    assert lines[13] == "            ✗ charge(amount=5) [aborted] (0ms) — aborted by a before-hook (AbortTool)"
    assert lines[14] == "            ✗ refund(amount=1) [approval: rejected] (0ms) — approval rejected"
    assert lines[-1] == "      … and 1 more failed run(s) not shown"
    assert text.count("      Run ") == 3


def test_failure_details_nests_child_runs(masker: Masker) -> None:
    text = failure_details(child_case(), masker=masker)
    assert "          ✓ orchestrator (90ms)\n" in text
    assert '            ✓ trigger_agent(agent_name="summarizer", payload="{\\"text\\": \\"long\\"}")' in text
    assert "              ✗ summarizer [failed] (40ms) — summarizer gave up\n" in text
    assert "                ✓ model #1 · 100 in / 10 out tokens (5ms)" in text
    assert "        Failed:  expected child agent summarizer to complete" in text


def test_failure_details_setup_and_infrastructure(masker: Masker) -> None:
    assert failure_details(setup_error_case(), masker=masker).split("\n") == [
        "      Setup error: tests/bad.yaml:9:5: tests[0].builder: no builder 'missing'",
        "                   available: base",
    ]
    text = failure_details(infra_case(), masker=masker)
    assert "        Infrastructure error: provider openai returned 503" in text
    assert "          ✗ calc [failed] (0ms)\n" in text + "\n"  # the error once: the line above


def test_control_characters_are_escaped(masker: Masker) -> None:
    outcome = failing_case()
    outcome.records[1].output_raw = "red \x1b[31mALERT\x1b[0m\x07 done"
    outcome.case_name = "bell\x07case"
    text = failure_details(outcome, masker=masker)
    assert "\x1b" not in text and "\x07" not in text
    assert "        Output:  red \\x1b[31mALERT\\x1b[0m\\x07 done" in text
    assert "\x07" not in "".join(results_table([outcome]))
    assert "case 'bell\\x07case'" in failure_summary_line(outcome)


def test_failure_section(masker: Masker) -> None:
    lines = failure_section(all_cases(), masker=masker)
    assert lines[0] == "  → Failure details:"
    headers = [line for line in lines if line.startswith("    ✗ ")]
    assert headers == [
        f"    ✗ calc::{XSS}: tests/bad.yaml:9:5: tests[0].builder: no builder 'missing' available: base",
        "    ✗ calc::adds numbers: agent error: tool exploded with ***",
        "    ✗ calc::live: provider openai returned 503",
        "    ✗ orchestrator::delegates: expected child agent summarizer to complete",
    ]
    assert failure_section([passing_case()], masker=masker) == []


def test_summary_lines(masker: Masker) -> None:
    assert summary_line(all_cases()) == "1/5 cases passed."
    assert summary_line([]) == "0/0 cases passed."
    assert failure_summary_line(failing_case(), masker=masker) == (
        "tests/calc.yaml:12: case 'adds numbers' (calc) failed: 1/5 runs passed, threshold 80% needs 4: "
        "agent error: tool exploded with ***"
    )
    assert failure_summary_line(setup_error_case()) == (
        f"tests/bad.yaml:7: case '{XSS}' (calc) could not be set up: "
        "tests/bad.yaml:9:5: tests[0].builder: no builder 'missing' available: base"
    )
    assert failure_summary_line(infra_case()) == (
        "tests/calc.yaml:30: case 'live' (calc) hit an infrastructure error: provider openai returned 503"
    )
    assert failure_summary_line(passing_case()) == (
        "tests/greeter.yaml:4: case 'greets user' (greeter) passed: 3/3 runs passed, threshold 100% needs 3"
    )


def test_failure_summary_line_counts_runs_not_started() -> None:
    outcome = failing_case()
    outcome.records = outcome.records[:3] + [RunRecord(run_id="s", agent_name="calc", index=3, skipped=True)]
    outcome.skipped_runs = 2
    line = failure_summary_line(outcome)
    assert "failed: 1/5 runs passed, 2 not started, threshold 80% needs 4: " in line
    assert "\n" not in failure_summary_line(setup_error_case())


# --- JUnit ------------------------------------------------------------------------------------


def test_junit_properties() -> None:
    assert junit_properties(failing_case()) == [
        ("runs", "5"), ("successes", "1"), ("success_threshold", "80"), ("pass_rate", "0.2"),
        ("wilson_low", "0.036224"), ("wilson_high", "0.624465"), ("median_latency_ms", "202"),
        ("input_tokens", "1000"), ("output_tokens", "100"), ("cost", "0.01"),
        ("run_ids", "run-calc-0,run-calc-1,run-calc-2,run-calc-3,run-calc-4"), ("skipped_runs", "0"),
        ("recorded_runs", ""), ("replay", ""),
    ]
    copied = failing_case()
    copied.recorded_runs, copied.replayed_runs = 2, 5
    props = dict(junit_properties(copied))
    assert (props["recorded_runs"], props["replay"]) == ("2", "5 runs replayed from 2 recorded runs")
    assert (props["wilson_low"], props["wilson_high"]) == ("", "")  # copies are not independent runs
    props = dict(junit_properties(setup_error_case()))
    assert (props["pass_rate"], props["wilson_low"], props["median_latency_ms"], props["run_ids"]) == ("", "", "", "")
    assert all(isinstance(v, str) for _, v in junit_properties(passing_case()))


# --- trace files ------------------------------------------------------------------------------


def test_trace_files(masker: Masker, tmp_path: Path) -> None:
    paths = write_traces(tmp_path / "traces", [passing_case(), child_case()], masker=masker)
    assert [p.name for p in paths] == [
        "tests.greeter__greets_user__run0.json", "tests.greeter__greets_user__run1.json",
        "tests.greeter__greets_user__run2.json", "tests.orch__delegates__run0.json",
    ]
    document = json.loads(paths[3].read_text(encoding="utf-8"))
    assert list(document) == ["nodeid", "suite", "line", "agent_name", "test_name", "run", "traces"]
    assert document["run"]["triggers"][0]["child_run"]["run_id"] == "run-sum-0"
    assert any(meta(s).get("agent_name") == "summarizer" for s in document["traces"])


@pytest.mark.parametrize(
    "name", ["../../etc/passwd", "a/b\\c", "CON", ".hidden", "", "ünïcode ✓ name", "x" * 300, "..", "a\x00b"]
)
def test_trace_file_names_are_safe(name: str, masker: Masker, tmp_path: Path) -> None:
    outcome = passing_case()
    outcome.case_name, outcome.suite_path = name, f"tests/../{name}.yaml"
    paths = write_traces(tmp_path, [outcome], masker=masker)
    for path in paths:
        assert path.parent == tmp_path.resolve()
        assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*\.json", path.name), path.name
        assert len(path.name) < 160 and path.exists()
        assert not path.name.upper().startswith("CON")


def test_trace_file_name_collisions_get_a_digest(masker: Masker, tmp_path: Path) -> None:
    first, second = passing_case(), passing_case()
    second.case_name, second.nodeid = "greets-user", "tests/greeter.yaml::greets user!"
    second.case_name = "greets user!"
    paths = write_traces(tmp_path, [first, second], masker=masker)
    assert len({p.name for p in paths}) == 6
    assert paths[3].name.startswith("tests.greeter__greets_user__run0-")


# --- HTML -------------------------------------------------------------------------------------


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.data_json = ""
        self._in_data = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_data = tag == "script" and dict(attrs).get("type") == "application/json"

    def handle_endtag(self, tag: str) -> None:
        self._in_data = False

    def handle_data(self, data: str) -> None:
        if self._in_data:
            self.data_json += data


def test_html_embeds_the_report_and_escapes_everything(masker: Masker) -> None:
    outcome = failing_case()
    outcome.records[1].output_raw = "</script><script>alert(1)</script><!-- & -->"
    report = build_json_report([setup_error_case(), outcome], masker=masker)
    page = render_html(report)
    assert XSS not in page and "</script><script>alert" not in page and "<!--" not in page
    parser = _Collector()
    parser.feed(page)
    assert json.loads(parser.data_json) == report
    assert [t for t, _ in parser.tags].count("img") == 0
    assert [t for t, a in parser.tags if t == "script"] == ["script", "script"]
    assert page.startswith("<!DOCTYPE html>") and "<title>Connic test report: failed</title>" in page


def test_html_has_no_external_references(masker: Masker) -> None:
    report = build_json_report(all_cases(), masker=masker, environment_id="<b>env</b>")
    page = render_html(report)
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.IGNORECASE)
    assert "@import" not in page and "url(" not in page
    parser = _Collector()
    parser.feed(page)
    assert not [a for t, a in parser.tags if t in ("link", "img", "iframe") or (t == "script" and "src" in a)]
    assert "default-src 'none'" in page
    assert "environment &lt;b&gt;env&lt;/b&gt;" in page
