"""Terminal text: the results table, failure details and summary lines of ``connic test``.

Every function returns plain text (no colour codes, no pytest): the plugin decides where it goes
and how it is coloured. The shapes copy the Connic CLI (``_render_test_cases``,
``_render_failed_runs``, ``_render_trace_tree``), so a person who knows ``connic test`` reads
them at once; the extras (latency and token columns, failed checks, tool parameters and results
in the trace) come after Connic's parts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from pytest_connic.jsonsafe import dumps, masked
from pytest_connic.records.events import OutboundEvent
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord, build_trace
from pytest_connic.records.spans import (
    AgentMeta,
    EventMeta,
    GuardrailMeta,
    ModelMeta,
    RunMeta,
    Span,
    SpanMeta,
    ToolMeta,
)
from pytest_connic.reports.json_report import as_text
from pytest_connic.reports.stats import runs_needed, sorted_outcomes
from pytest_connic.reports.table import (  # noqa: F401 -- re-exported: the table's home was here
    TEST_COMFORT,
    Column,
    ascii_lines,
    cell_text,
    cut,
    cut_middle,
    display_width,
    encodable,
    fit_table,
    for_console,
    table,
    wrap,
)
from pytest_connic.reports.table import escape_text as escape_text  # noqa: PLC0414 -- importers use it from here
from pytest_connic.secrets import Masker

FIELD_LIMIT = 800  #: Connic's ``_truncate`` default
SPAN_ERROR_LIMIT = 160
PARAMS_LIMIT = 120
RESULT_LIMIT = 80
TRUNCATED = " … (truncated)"
_NO_MASK = Masker()
#: a failing run's reason in a ``-v`` progress line is cut here
PROGRESS_REASON_LIMIT = 120


def truncate(text: str | None, limit: int = FIELD_LIMIT) -> str:
    """``text`` cut at ``limit`` characters with `` … (truncated)``, as Connic's ``_truncate``."""
    if not text:
        return ""
    return text if len(text) <= limit else text[:limit] + TRUNCATED


@dataclass(frozen=True)
class ResultColumn(Column):
    """A column of the results table: how a case's cell reads."""

    cell: Callable[[CaseOutcome], str] = lambda outcome: ""


def _tokens(outcome: CaseOutcome) -> str:
    return f"{outcome.input_tokens:,} in / {outcome.output_tokens:,} out" if outcome.executed else "—"


def _result(outcome: CaseOutcome) -> str:
    """The case's word; an invalid case (or one an infrastructure error stopped) is ``ERROR``, as
    the JSON report's and the HTML page's ``error``."""
    if outcome.passed:
        return " PASS "
    if outcome.interrupted:
        return " INTR "
    return " SKIP " if outcome.left_out else " ERROR " if outcome.status == "error" else " FAIL "


#: the results table: Connic's columns, then pytest-connic's (hidden first on a narrow terminal).
#: Another column is one more entry here.
RESULT_COLUMNS: list[ResultColumn] = [
    ResultColumn("Result", cell=_result),
    ResultColumn("Test", shrink=True, min_width=16, cell=lambda o: f"{o.agent_name}::{o.case_name}"),
    ResultColumn("Runs", cell=lambda o: f"{o.successes}/{o.runs}"),
    ResultColumn("Threshold", cell=lambda o: f"{o.success_threshold}%"),
    ResultColumn("Median latency", drop=1, cell=lambda o: median_latency(o)),
    ResultColumn("Tokens", drop=2, cell=_tokens),
    ResultColumn("Cost", drop=3, cell=lambda o: case_cost(o)),
]


def median_latency(outcome: CaseOutcome) -> str:
    """``202ms``; ``30.01s (30.00s virtual)`` when retry delays a replay skipped are part of it."""
    text = _latency(outcome.median_latency_ms)
    virtual = outcome.median_virtual_ms
    return f"{text} ({_latency(virtual)} virtual)" if virtual > 0 and outcome.median_latency_ms else text


def case_cost(outcome: CaseOutcome) -> str:
    """The case's cost in US dollars, ``—`` when a turn's price is unknown (models/pricing.py)."""
    from pytest_connic.models.pricing import format_cost

    if not outcome.executed:
        return "—"
    return format_cost(outcome.cost if outcome.cost_known else None)


def results_table(outcomes: Iterable[CaseOutcome], *, width: int | None = None,
                  columns: list[ResultColumn] | None = None,
                  marks: Mapping[str, str] | None = None, encoding: str | None = None) -> list[str]:
    """Result | Test | Runs | Threshold (Connic's columns) | Median latency | Tokens | Cost, fitted to
    ``width`` terminal columns (None: as wide as the cells); and a History column when ``marks``
    (node id -> ``newly failing``, ``flaky (3 flips)``, ...) has any. A console ``encoding`` that
    has no box characters (cp1252) gets an ASCII table."""
    columns = list(RESULT_COLUMNS if columns is None else columns)
    if marks:
        shown = dict(marks)
        columns.append(ResultColumn("History", shrink=True, min_width=8,
                                    cell=lambda o: shown.get(o.nodeid, "")))
    rows = [[cell_text(c.cell(o)) for c in columns] for o in sorted_outcomes(outcomes)]
    return for_console(fit_table(list(columns), rows, width=width), encoding)


def replay_lines(outcomes: Iterable[CaseOutcome]) -> list[str]:
    """A line for each case whose runs replayed a recording more than once: they are copies, not
    independent runs (``CaseOutcome.replay_note``)."""
    return [f"  {o.agent_name}::{o.case_name}: {o.replay_note} (copies, not independent runs; record "
            f"{o.runs} with --connic-record-mode=new_runs)" for o in outcomes if o.replay_note]


def summary_line(outcomes: Iterable[CaseOutcome]) -> str:
    """Connic's last line: ``<passed>/<total> cases passed.``"""
    outcomes = list(outcomes)
    return f"{sum(1 for o in outcomes if o.passed)}/{len(outcomes)} cases passed."


def failure_summary_line(outcome: CaseOutcome, *, masker: Masker | None = None) -> str:
    """One line: ``tests/x.yaml:12: case 'name' (agent) failed: 3/5 runs passed, ...: <reason>``."""
    masker = masker or _NO_MASK
    line = f"{outcome.suite_path}:{outcome.line}: {failure_header(outcome, masker=masker)}"
    reason = _reason(outcome, masker)
    return f"{line}: {reason}" if reason else line


#: the indentation of a failure report's lines under its first line
INDENT = "    "


def failure_head_lines(outcome: CaseOutcome, *, masker: Masker | None = None, width: int | None = None) -> list[str]:
    """A failure report's first lines. The first says what failed: ``tests/x.yaml:12: case 'name'
    (agent) failed``, folded at spaces to ``width`` columns where it is wider, the case's quoted
    name always whole on one line (it is copied into ``-k`` and searched for). The next say how it
    ended and why (``3/5 runs passed, threshold 80% needs 4: <reason>``), a reason of several
    lines (a hint's list) on lines of its own."""
    masker = masker or _NO_MASK
    where = f"{outcome.suite_path}:{outcome.line}: "
    header = failure_header(outcome, masker=masker)
    what, _, how = header.partition(": ") if _has_counts(outcome) else (header, "", "")
    heads = wrap(where + what, width, keep=(f"'{one_line(outcome.case_name)}'",))
    reason = outcome.setup_error if outcome.setup_error is not None else outcome.failure_reason
    parts = [one_line(p) for p in masker.report_text(reason).split("\n")] if reason and outcome.interrupted is None else []
    parts = [p for p in parts if p]
    lines = list(heads)
    if how or parts:
        lines.append(INDENT + ": ".join(x for x in (how, parts[0] if parts else "") if x))
    lines += [INDENT + p for p in parts[1:]]
    return lines


def _has_counts(outcome: CaseOutcome) -> bool:
    """Whether the header says the runs' counts after its ``: `` (a case that ran and failed)."""
    return all(v is None for v in (outcome.setup_error, outcome.interrupted, outcome.left_out,
                                   outcome.infrastructure_error, outcome.recording_error))


def failure_header(outcome: CaseOutcome, *, masker: Masker | None = None) -> str:
    """How the case ended, without its reason:
    ``case 'name' (agent) failed: 3/5 runs passed, threshold 80% needs 4``."""
    masker = masker or _NO_MASK
    head = f"case '{one_line(outcome.case_name)}' ({outcome.agent_name})"
    if outcome.setup_error is not None:
        return f"{head} could not be set up"
    if outcome.interrupted is not None:
        done = len(outcome.executed)
        return f"{head} was {outcome.interrupted}: {done} of {outcome.runs} run(s) started, no verdict"
    if outcome.left_out is not None:
        done = len(outcome.executed)
        return f"{head} was left out ({outcome.left_out}): {done} of {outcome.runs} run(s) started, no verdict"
    if outcome.infrastructure_error is not None:
        return f"{head} hit an infrastructure error"
    if outcome.recording_error is not None:
        return f"{head} could not be recorded"
    skipped = outcome.runs - len(outcome.executed)
    counts = f"{outcome.successes}/{outcome.runs} runs passed" + (f", {skipped} not started" if skipped else "")
    verdict = "passed" if outcome.passed else "failed"
    return f"{head} {verdict}: {counts}, threshold {outcome.success_threshold}% needs {runs_needed(outcome)}"


def _reason(outcome: CaseOutcome, masker: Masker) -> str | None:
    if outcome.interrupted is not None:
        return None
    reason = outcome.setup_error if outcome.setup_error is not None else outcome.failure_reason
    return one_line(masker.report_text(reason)) if reason else None


def failure_reason_line(outcome: CaseOutcome, *, masker: Masker | None = None) -> str:
    """The one-line reason a case failed (what pytest's short summary, ``--tb=line`` and JUnit's
    ``message`` show); how it ended when there is no reason (an interruption)."""
    masker = masker or _NO_MASK
    return _reason(outcome, masker) or failure_header(outcome, masker=masker)


def one_line(text: str) -> str:
    """``text`` with line breaks and tabs folded into spaces, other controls escaped."""
    return escape_text(re.sub(r"\s*[\r\n\t]+\s*", " ", text).strip())


class Said:
    """What a failure report has said already, so that it says each thing once: a text equal to
    one said (line breaks folded), or a long enough part of one, is not repeated."""

    #: a shorter text is only "said" when it is equal to one said (not merely inside one)
    PART_MIN = 16

    def __init__(self, *texts: str | None) -> None:
        self._said: list[str] = []
        for text in texts:
            self.add(text)

    def add(self, text: str | None) -> None:
        if text:
            self._said.append(one_line(text))

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and self.covers(text)

    def covers(self, text: str, *, part: bool = True) -> bool:
        """Whether ``text`` was said: equal to a text said, or (``part``) a long enough part of one."""
        if not text:
            return False
        line = one_line(text)
        return any(line == said or (part and len(line) >= self.PART_MIN and line in said) for said in self._said)

    def fresh(self, text: str | None) -> str | None:
        """``text`` if it says something new (and remember it), else None."""
        if not text or text in self:
            return None
        self.add(text)
        return text


def failure_section(outcomes: Iterable[CaseOutcome], *, masker: Masker, max_runs: int = 3) -> list[str]:
    """Connic's "Failure details:" block for every failed case (empty when all passed)."""
    failed = [o for o in sorted_outcomes(outcomes) if not o.passed and o.failure_reason and o.left_out is None]
    if not failed:
        return []
    lines = ["  → Failure details:"]
    for outcome in failed:
        reason = masker.report_text(outcome.failure_reason or "")
        lines.append(f"    ✗ {one_line(f'{outcome.agent_name}::{outcome.case_name}: {reason}')}")
        details = failure_details(outcome, masker=masker, max_runs=max_runs, said=Said(reason))
        if details:
            lines.extend(details.split("\n"))
    return lines


def failure_details(outcome: CaseOutcome, *, masker: Masker, max_runs: int = 3, said: Said | None = None) -> str:
    """Each failed run (at most ``max_runs``): Run, Input, Output, Context, Error, checks, trace;
    what ``said`` holds already (the reason above) is not repeated."""
    said = said if said is not None else Said()
    if outcome.setup_error is not None:
        if masker.report_text(outcome.setup_error) in said:
            return ""
        return "\n".join(_block("      Setup error: ", masker.report_text(outcome.setup_error)))
    failed = [r for r in outcome.executed if not r.passed]
    lines: list[str] = []
    for record in failed[:max_runs]:
        lines.extend(run_details(record, masker=masker, said=said))
    remaining = len(failed) - max_runs
    if remaining > 0:
        lines.append(f"      … and {remaining} more failed run(s) not shown")
    return "\n".join(lines)


#: run context keys another line of the run's report says already (when they agree with it)
_CONTEXT_SAID = ("run_id", "agent_name", "payload")


def run_context_shown(record: RunRecord) -> dict[str, object]:
    """The run context without what the report says elsewhere: the run id (the ``Run`` line),
    the agent (the header) and the payload (``Input``)."""
    context = record.run_context if isinstance(record.run_context, dict) else {}
    same = {"run_id": record.run_id, "agent_name": record.agent_name, "payload": record.input}
    return {k: v for k, v in context.items() if not (k in _CONTEXT_SAID and v == same[k])}


def run_details(record: RunRecord, *, masker: Masker, said: Said | None = None) -> list[str]:
    """One failed run in Connic's layout, with its failed checks before the trace; what ``said``
    holds already is not repeated (a run whose whole failure was said reads ``as above``)."""
    said = said if said is not None else Said()
    lines = [f"      Run {escape_text(record.run_id)}"]
    context = run_context_shown(record)
    error = said.fresh(masker.report_text(record.error) if record.error else None)
    infrastructure = said.fresh(masker.report_text(record.infrastructure_error or "") or None)
    fields = [
        ("Input:   ", as_text(masked(record.input, masker))),
        ("Output:  ", as_text(masked(record.output_raw, masker))),
        ("Context: ", dumps(masked(context, masker)) if context else None),
        ("Error:   ", error),
        ("Infrastructure error: ", infrastructure),
    ]
    for label, value in fields:
        if value:
            lines.append(f"        {label}{escape_text(truncate(value))}")
    failures = [masker.report_text(f) for f in record.failures]
    new = [f for f in failures if said.fresh(f)]
    if new:
        lines.extend(_block("        Failed:  ", "\n".join(new)))
    elif (failures or record.error or record.infrastructure_error) and not (error or infrastructure):
        lines.append("        Failed:  as above")
    lines.append("        Trace:")
    lines.extend(render_trace_tree(build_trace(record, masker=masker), indent=10, said=said))
    return lines


def _block(label: str, text: str) -> list[str]:
    """``label`` then ``text``; continuation lines aligned under the first, each escaped."""
    pad = " " * len(label)
    rows = text.splitlines() or [""]
    return [f"{label if i == 0 else pad}{escape_text(truncate(row))}" for i, row in enumerate(rows)]


def render_trace_tree(spans: list[Span], indent: int, said: Said | None = None) -> list[str]:
    """Connic's span tree: ✓/✗, label, ``(<n>ms)``, and `` — <error>`` on failed spans (unless
    ``said`` holds that error already)."""
    ids = {s.span_id for s in spans if s.span_id}
    roots: list[Span] = []
    children: dict[str, list[Span]] = {}
    for span in sorted(spans, key=lambda s: s.span_order):
        parent = span.parent_span_id
        if parent is not None and parent in ids:
            children.setdefault(parent, []).append(span)
        else:
            roots.append(span)
    lines: list[str] = []
    seen: set[str] = set()

    def walk(level: list[Span], depth: int) -> None:
        for span in level:
            lines.append(" " * indent + "  " * depth + span_line(span, said))
            sid = span.span_id
            if sid and sid not in seen:
                seen.add(sid)
                walk(children.get(sid, []), depth + 1)

    walk(roots, 0)
    return lines


def span_line(span: Span, said: Said | None = None) -> str:
    """One span: glyph, label (with the extras of its kind), duration, error (unless ``said``)."""
    meta = span.meta
    ok = span.ok
    # a guardrail check counted as passed without a judgement is no green check
    unjudged = isinstance(meta, GuardrailMeta) and meta.status == "not_evaluated"
    glyph = "○" if unjudged else "✓" if ok else "✗"
    text = f"{glyph} {escape_text(span_label(span))}"
    if span.duration_ms is not None:
        text += f" ({int(span.duration_ms)}ms)"
    error = _error(meta)
    # a run's error is often part of the reason (``agent error: <error>``); a call's error in
    # a reason still says which call it was, so it is only left out when it is the same text
    if not ok and error and not (said is not None and said.covers(error, part=isinstance(meta, RunMeta))):
        text += f" — {one_line(truncate(error, SPAN_ERROR_LIMIT))}"
    where = _where(meta)
    if not ok and where:  # the user's file and line the error was raised at
        text += f" at {escape_text(where)}"
    return text


def _error(meta: SpanMeta) -> str | None:
    """The error (or a guardrail's message) a span shows."""
    match meta:
        case RunMeta(error=error) | ToolMeta(error=error) | AgentMeta(error=error) | EventMeta(error=error):
            return error
        case GuardrailMeta(message=message):
            return message
        case _:
            return None


def _where(meta: SpanMeta) -> str | None:
    match meta:
        case RunMeta(where=where) | ToolMeta(where=where) | GuardrailMeta(where=where):
            return where
        case _:
            return None


def span_label(span: Span) -> str:
    """The label Connic would show, richer for tool calls, model turns, runs and guardrails."""
    meta = span.meta
    base = meta.name or span.name or "span"
    match meta:
        case ToolMeta():
            return _tool_label(base, meta)
        case ModelMeta(input_tokens=tokens_in, output_tokens=tokens_out):
            return f"{base} · {tokens_in} in / {tokens_out} out tokens"
        case RunMeta(status=status):
            return base if status == "completed" else f"{base} [{status}]"
        case GuardrailMeta(status=status):
            shown = "not evaluated (counted as passed)" if status == "not_evaluated" else status
            return f"{base}: {shown}" + _mock_mark(meta.mocked, meta.mock_function)
        case AgentMeta(status=status):
            return f"agent {base}" + (f" [{status}]" if status not in (None, "completed") else "")
        case EventMeta(event=OutboundEvent()):  # its entry's kind stands in the span's kind
            return base
        case EventMeta(mocked=mocked, mock_function=mock_function):
            return base + _mock_mark(mocked, mock_function)
        case _:
            return base


def _tool_label(name: str, meta: ToolMeta) -> str:
    params = meta.params
    args = ", ".join(f"{k}={_compact(v, 60)}" for k, v in params.items()) if isinstance(params, dict) else ""
    label = f"{name}({truncate(args, PARAMS_LIMIT)})"
    if meta.has_result:
        label += f" → {_compact(meta.result, RESULT_LIMIT)}"
    label += _mock_mark(meta.mocked, meta.mock_function)
    for hook in meta.hooks:
        if hook.mock:
            label += f" [{hook.phase} hook mocked by {hook.mock}]"
    if meta.aborted:
        label += " [aborted]"
    if meta.approval:
        label += f" [approval: {meta.approval}]"
    if meta.via_discovery:
        label += " [via use_tool]"
    return label


def _mock_mark(mocked: bool, mock_function: str | None) -> str:
    if not mocked:
        return ""
    return f" [mocked by {mock_function}]" if mock_function else " [mocked]"


def _compact(value: object, limit: int) -> str:
    """``value`` as compact JSON on one line, cut at ``limit`` characters."""
    text = re.sub(r"\s+", " ", dumps(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _latency(ms: float | None) -> str:
    if ms is None:
        return "—"
    return f"{ms / 1000:.2f}s" if ms >= 1000 else f"{round(ms)}ms"


def failure_lines(outcomes: list[CaseOutcome], masker: Masker, *, full: bool) -> list[str]:
    """Connic's "Failure details" block. Each case's reason, failed runs (at most 3, with their
    checks and traces) are already in pytest's failure report of the case, so here they are only
    repeated when that report is not shown (``--tb=no``); otherwise one line per failed case with
    where it is."""
    apart = not_run_lines(outcomes, masker)
    if full:
        return failure_section([o for o in outcomes if o.status not in NOT_RUN], masker=masker, max_runs=3) + apart
    failed = [o for o in sorted_outcomes(outcomes) if not o.passed and o.failure_reason and o.status not in NOT_RUN]
    if not failed:
        return apart
    return ["  → Failure details: in the failure report of each case above",
            *(f"    ✗ {one_line(f'{o.agent_name}::{o.case_name}')} ({o.suite_path}:{o.line})" for o in failed),
            *apart]


#: a case's statuses that are no failure: it has no verdict and no failure report
NOT_RUN = ("skipped", "interrupted")


def not_run_lines(outcomes: Iterable[CaseOutcome], masker: Masker) -> list[str]:
    """Skipped (a spent budget) and interrupted cases, apart from the failures, each with why."""
    apart = [o for o in sorted_outcomes(outcomes) if o.status in NOT_RUN]
    if not apart:
        return []
    lines = ["  → Not run to a verdict (no failure report):"]
    for o in apart:
        why = masker.report_text(o.left_out or o.interrupted or o.pytest_reason or o.status)
        lines.append(f"    - {one_line(f'{o.agent_name}::{o.case_name}')} ({o.suite_path}:{o.line}): "
                     f"{o.status}, {one_line(truncate(why, SPAN_ERROR_LIMIT))}")
    return lines


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
