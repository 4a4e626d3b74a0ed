"""Terminal text: the results table, failure details and summary lines of ``connic test``.

Every function returns plain text (no colour codes, no pytest): the plugin decides where it goes
and how it is coloured. The shapes copy the Connic CLI (``_render_test_cases``,
``_render_failed_runs``, ``_render_trace_tree``), so a person who knows ``connic test`` reads
them at once; the extras (latency and token columns, failed checks, tool parameters and results
in the trace) come after Connic's parts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_connic.jsonsafe import dumps, masked
from pytest_connic.records.run import CaseOutcome, RunRecord, build_spans
from pytest_connic.reports.json_report import as_text
from pytest_connic.reports.stats import runs_needed, sorted_outcomes
from pytest_connic.secrets import Masker

FIELD_LIMIT = 800  #: Connic's ``_truncate`` default
SPAN_ERROR_LIMIT = 160
PARAMS_LIMIT = 120
RESULT_LIMIT = 80
TRUNCATED = " … (truncated)"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_NO_MASK = Masker()
#: a failing run's reason in a ``-v`` progress line is cut here
PROGRESS_REASON_LIMIT = 120


def escape_text(text: str) -> str:
    """C0, DEL and C1 control characters as visible ``\\xNN`` (Connic's ``escape_terminal_text``)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def truncate(text: str | None, limit: int = FIELD_LIMIT) -> str:
    """``text`` cut at ``limit`` characters with `` … (truncated)``, as Connic's ``_truncate``."""
    if not text:
        return ""
    return text if len(text) <= limit else text[:limit] + TRUNCATED


def table(headers: list[str], rows: list[list[str]], indent: int = 4) -> list[str]:
    """Connic's box-drawn table, one string per line; cells must be escaped already."""
    if not rows:
        return []
    pad = " " * indent
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return f"{pad}│ " + " │ ".join(c.ljust(w) for c, w in zip(cells, widths)) + " │"

    def rule(left: str, mid: str, right: str) -> str:
        return pad + left + mid.join("─" * (w + 2) for w in widths) + right

    return [rule("┌", "┬", "┐"), line(headers), rule("├", "┼", "┤"), *map(line, rows), rule("└", "┴", "┘")]


def results_table(outcomes: Iterable[CaseOutcome], marks: Mapping[str, str] | None = None) -> list[str]:
    """Result | Test | Runs | Threshold (Connic's columns) | Median latency | Tokens; and a History
    column when ``marks`` (node id -> ``newly failing``, ``flaky (3 flips)``, ...) has any."""
    rows = [
        [
            " PASS " if o.passed else " INTR " if o.interrupted else " SKIP " if o.left_out else " FAIL ",
            escape_text(f"{o.agent_name}::{o.case_name}"),
            f"{o.successes}/{o.runs}",
            f"{o.success_threshold}%",
            _latency(o.median_latency_ms),
            f"{o.input_tokens:,} in / {o.output_tokens:,} out" if o.executed else "—",
        ]
        for o in sorted_outcomes(outcomes)
    ]
    headers = ["Result", "Test", "Runs", "Threshold", "Median latency", "Tokens"]
    if marks:
        nodeids = [o.nodeid for o in sorted_outcomes(outcomes)]
        rows = [[*row, escape_text(marks.get(nodeid, ""))] for row, nodeid in zip(rows, nodeids)]
        headers.append("History")
    return table(headers, rows)


def summary_line(outcomes: Iterable[CaseOutcome]) -> str:
    """Connic's last line: ``<passed>/<total> cases passed.``"""
    outcomes = list(outcomes)
    return f"{sum(1 for o in outcomes if o.passed)}/{len(outcomes)} cases passed."


def failure_summary_line(outcome: CaseOutcome, *, masker: Masker | None = None) -> str:
    """One line: ``tests/x.yaml:12: case 'name' (agent) failed: 3/5 runs passed, ...: <reason>``."""
    masker = masker or _NO_MASK
    head = f"{outcome.suite_path}:{outcome.line}: case '{one_line(outcome.case_name)}' ({outcome.agent_name})"
    if outcome.setup_error is not None:
        return f"{head} could not be set up: {one_line(masker.report_text(outcome.setup_error))}"
    if outcome.interrupted is not None:
        done = len(outcome.executed)
        return f"{head} was {outcome.interrupted}: {done} of {outcome.runs} run(s) started, no verdict"
    if outcome.left_out is not None:
        done = len(outcome.executed)
        return f"{head} was left out ({outcome.left_out}): {done} of {outcome.runs} run(s) started, no verdict"
    if outcome.infrastructure_error is not None:
        return f"{head} hit an infrastructure error: {one_line(masker.report_text(outcome.infrastructure_error))}"
    skipped = outcome.runs - len(outcome.executed)
    counts = f"{outcome.successes}/{outcome.runs} runs passed" + (f", {skipped} not started" if skipped else "")
    verdict = "passed" if outcome.passed else "failed"
    line = f"{head} {verdict}: {counts}, threshold {outcome.success_threshold}% needs {runs_needed(outcome)}"
    reason = outcome.failure_reason
    return f"{line}: {one_line(masker.report_text(reason))}" if reason else line


def one_line(text: str) -> str:
    """``text`` with line breaks and tabs folded into spaces, other controls escaped."""
    return escape_text(re.sub(r"\s*[\r\n\t]+\s*", " ", text).strip())


def failure_section(outcomes: Iterable[CaseOutcome], *, masker: Masker, max_runs: int = 3) -> list[str]:
    """Connic's "Failure details:" block for every failed case (empty when all passed)."""
    failed = [o for o in sorted_outcomes(outcomes) if not o.passed and o.failure_reason and o.left_out is None]
    if not failed:
        return []
    lines = ["  → Failure details:"]
    for outcome in failed:
        header = f"{outcome.agent_name}::{outcome.case_name}: {masker.report_text(outcome.failure_reason or '')}"
        lines.append(f"    ✗ {one_line(header)}")
        details = failure_details(outcome, masker=masker, max_runs=max_runs)
        if details:
            lines.extend(details.split("\n"))
    return lines


def failure_details(outcome: CaseOutcome, *, masker: Masker, max_runs: int = 3) -> str:
    """Each failed run (at most ``max_runs``): Run, Input, Output, Context, Error, checks, trace."""
    if outcome.setup_error is not None:
        return "\n".join(_block("      Setup error: ", masker.report_text(outcome.setup_error)))
    failed = [r for r in outcome.executed if not r.passed]
    lines: list[str] = []
    for record in failed[:max_runs]:
        lines.extend(run_details(record, masker=masker))
    remaining = len(failed) - max_runs
    if remaining > 0:
        lines.append(f"      … and {remaining} more failed run(s) not shown")
    return "\n".join(lines)


def run_details(record: RunRecord, *, masker: Masker) -> list[str]:
    """One failed run in Connic's layout, with its failed checks before the trace."""
    lines = [f"      Run {escape_text(record.run_id)}"]
    fields = [
        ("Input:   ", as_text(masked(record.input, masker))),
        ("Output:  ", as_text(masked(record.output_raw, masker))),
        ("Context: ", dumps(masked(record.run_context, masker)) if record.run_context else None),
        ("Error:   ", masker.report_text(record.error) if record.error else None),
        ("Infrastructure error: ", masker.report_text(record.infrastructure_error or "") or None),
    ]
    for label, value in fields:
        if value:
            lines.append(f"        {label}{escape_text(truncate(value))}")
    if record.failures:
        lines.extend(_block("        Failed:  ", "\n".join(masker.report_text(f) for f in record.failures)))
    lines.append("        Trace:")
    lines.extend(render_trace_tree(build_spans(record, masker=masker), indent=10))
    return lines


def _block(label: str, text: str) -> list[str]:
    """``label`` then ``text``; continuation lines aligned under the first, each escaped."""
    pad = " " * len(label)
    rows = text.splitlines() or [""]
    return [f"{label if i == 0 else pad}{escape_text(truncate(row))}" for i, row in enumerate(rows)]


def render_trace_tree(spans: list[dict[str, Any]], indent: int) -> list[str]:
    """Connic's span tree: ✓/✗, label, ``(<n>ms)``, and `` — <error>`` on failed spans."""
    ids = {s["span_id"] for s in spans if s.get("span_id")}
    roots: list[dict[str, Any]] = []
    children: dict[str, list[dict[str, Any]]] = {}
    for span in sorted(spans, key=lambda s: s.get("span_order") or 0):
        parent = span.get("parent_span_id")
        if isinstance(parent, str) and parent in ids:
            children.setdefault(parent, []).append(span)
        else:
            roots.append(span)
    lines: list[str] = []
    seen: set[str] = set()

    def walk(level: list[dict[str, Any]], depth: int) -> None:
        for span in level:
            lines.append(" " * indent + "  " * depth + span_line(span))
            sid = span.get("span_id")
            if sid and sid not in seen:
                seen.add(sid)
                walk(children.get(sid, []), depth + 1)

    walk(roots, 0)
    return lines


def span_line(span: dict[str, Any]) -> str:
    """One span: glyph, label (with the extras of its kind), duration, error."""
    meta = _meta(span)
    ok = span.get("status") == "ok"
    # a guardrail check counted as passed without a judgement is no green check
    glyph = "○" if meta.get("kind") == "guardrail" and meta.get("status") == "not_evaluated" else "✓" if ok else "✗"
    text = f"{glyph} {escape_text(span_label(span, meta))}"
    duration = span.get("duration_ms")
    if duration is not None:
        text += f" ({int(duration)}ms)"
    error = meta.get("error") or meta.get("message")
    if not ok and error:
        text += f" — {one_line(truncate(str(error), SPAN_ERROR_LIMIT))}"
    return text


def span_label(span: dict[str, Any], meta: dict[str, Any]) -> str:
    """The label Connic would show, richer for tool calls, model turns, runs and guardrails."""
    kind = meta.get("kind")
    base = str(meta.get("tool_name") or meta.get("name") or span.get("name") or "span")
    if kind == "tool":
        return _tool_label(base, meta)
    if kind == "model":
        return f"{base} · {meta.get('input_tokens', 0)} in / {meta.get('output_tokens', 0)} out tokens"
    if kind == "run":
        status = meta.get("status")
        return base if status == "completed" else f"{base} [{status}]"
    if kind == "guardrail":
        status = "not evaluated (counted as passed)" if meta.get("status") == "not_evaluated" else meta.get("status")
        return f"{base}: {status}" + _mock_mark(meta)
    if kind == "agent":
        status = meta.get("status")
        return f"agent {base}" + (f" [{status}]" if status not in (None, "completed") else "")
    if kind == "event":
        return base + _mock_mark(meta)
    return base


def _tool_label(name: str, meta: dict[str, Any]) -> str:
    params = meta.get("params")
    args = ", ".join(f"{k}={_compact(v, 60)}" for k, v in params.items()) if isinstance(params, dict) else ""
    label = f"{name}({truncate(args, PARAMS_LIMIT)})"
    if meta.get("has_result"):
        label += f" → {_compact(meta.get('result'), RESULT_LIMIT)}"
    label += _mock_mark(meta)
    for hook in meta.get("hooks") or []:
        if isinstance(hook, dict) and hook.get("mock"):
            label += f" [{hook.get('phase')} hook mocked by {hook['mock']}]"
    if meta.get("aborted"):
        label += " [aborted]"
    if meta.get("approval"):
        label += f" [approval: {meta['approval']}]"
    if meta.get("via_discovery"):
        label += " [via use_tool]"
    return label


def _mock_mark(meta: dict[str, Any]) -> str:
    if not meta.get("mocked"):
        return ""
    return f" [mocked by {meta['mock_function']}]" if meta.get("mock_function") else " [mocked]"


def _compact(value: Any, limit: int) -> str:
    """``value`` as compact JSON on one line, cut at ``limit`` characters."""
    text = re.sub(r"\s+", " ", dumps(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _meta(span: dict[str, Any]) -> dict[str, Any]:
    try:
        meta = json.loads(span.get("metadata_json") or "{}")
    except (TypeError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _latency(ms: float | None) -> str:
    if ms is None:
        return "—"
    return f"{ms / 1000:.2f}s" if ms >= 1000 else f"{round(ms)}ms"


def failure_lines(outcomes: list[CaseOutcome], masker: Masker, *, full: bool) -> list[str]:
    """Connic's "Failure details" block. Each case's failed runs (at most 3, with their checks
    and traces) are already in pytest's failure report of the case, so here they are only
    repeated when that report is not shown (``--tb=no``); otherwise one line per failed case."""
    lines = failure_section(outcomes, masker=masker, max_runs=3)
    if full or not lines:
        return lines
    heads = [line for line in lines[1:] if line.startswith("    ✗ ")]
    return ["  → Failure details (failed runs and traces: in the failure report of each case above):", *heads]


def run_progress_line(outcome: CaseOutcome, record: RunRecord, masker: Masker) -> str:
    """``  run 3/20 passed (124ms)``; a failing run adds its first reason (``-v`` progress).

    The number is the run's 1-based index (trace files use the 0-based ``run<index>``)."""
    status = "passed" if record.passed else ("error" if record.infrastructure_error else "failed")
    line = f"  run {record.index + 1}/{outcome.runs} {status} ({_duration(record.duration_ms)})"
    if record.passed:
        return line
    reason = record.infrastructure_error or (record.failures[0] if record.failures else None)
    reason = reason or record.error or f"status {record.status}"
    return f"{line}: {one_line(truncate(masker.report_text(reason), PROGRESS_REASON_LIMIT))}"


def _duration(ms: float) -> str:
    return f"{ms / 1000:.2f}s" if ms >= 1000 else f"{round(ms)}ms"
