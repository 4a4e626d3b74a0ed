"""Writing the report files and the terminal summary at the end of a session."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_connic.plugin.session import ConnicSession
    from pytest_connic.records.run import CaseOutcome, RunRecord
    from pytest_connic.secrets import Masker

#: a failing run's reason in a ``-v`` progress line is cut here
PROGRESS_REASON_LIMIT = 120


def write_outputs(state: ConnicSession) -> None:
    """``--connic-json``, ``--connic-html`` and ``--connic-traces``, when asked for."""
    from pytest_connic.plugin.reporting import output_path

    settings = state.settings
    if not (settings.json or settings.html or settings.traces):
        return
    from pytest_connic.reports.json_report import build_json_report, report_text
    from pytest_connic.reports.stats import session_status

    status = "error" if state.infrastructure_errors else session_status(state.outcomes)
    report = build_json_report(state.outcomes, masker=state.masker, session_status=status,
                               environment_id=settings.env)
    if settings.ab:
        from pytest_connic.plugin.ab import add_section

        add_section(state.config, report)
    if settings.json:
        path = output_path(state.config, settings.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(report_text(report), "utf-8")
    if settings.html:
        from pytest_connic.reports.html import render_html

        path = output_path(state.config, settings.html)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_html(report), "utf-8")
    if settings.traces:
        from pytest_connic.reports.traces import write_traces

        write_traces(output_path(state.config, settings.traces), state.outcomes, masker=state.masker)


def terminal_summary(state: ConnicSession, reporter: Any) -> None:
    """The coverage report; then Connic's results table, failure details and ``N/M cases passed.``"""
    from pytest_connic.plugin.coverage_mode import coverage_summary

    coverage_summary(state, reporter)
    if not state.outcomes:
        return
    from pytest_connic.reports.terminal import results_table, summary_line

    reporter.write_sep("=", "connic results")
    for line in results_table(state.outcomes):
        reporter.write_line(line)
    early = [o for o in state.outcomes if o.skipped_runs]
    for outcome in early:
        reporter.write_line(
            f"  {outcome.agent_name}::{outcome.case_name}: early stop skipped {outcome.skipped_runs} run(s): "
            f"{outcome.early_stop_reason}"
        )
    full = getattr(state.config.option, "tbstyle", "auto") == "no"
    for line in failure_lines(state.outcomes, state.masker, full=full):
        reporter.write_line(line)
    passed = all(o.passed for o in state.outcomes)
    reporter.write_line(summary_line(state.outcomes), green=passed, red=not passed, bold=True)


def failure_lines(outcomes: list[CaseOutcome], masker: Masker, *, full: bool) -> list[str]:
    """Connic's "Failure details" block. Each case's failed runs (at most 3, with their checks
    and traces) are already in pytest's failure report of the case, so here they are only
    repeated when that report is not shown (``--tb=no``); otherwise one line per failed case."""
    from pytest_connic.reports.terminal import failure_section

    lines = failure_section(outcomes, masker=masker, max_runs=3)
    if full or not lines:
        return lines
    heads = [line for line in lines[1:] if line.startswith("    ✗ ")]
    return ["  → Failure details (failed runs and traces: in the failure report of each case above):", *heads]


def run_progress_line(outcome: CaseOutcome, record: RunRecord, masker: Masker) -> str:
    """``  run 3/20 passed (124ms)``; a failing run adds its first reason (``-v`` progress).

    The number is the run's 1-based index (trace files use the 0-based ``run<index>``)."""
    from pytest_connic.reports.terminal import one_line, truncate

    status = "passed" if record.passed else ("error" if record.infrastructure_error else "failed")
    line = f"  run {record.index + 1}/{outcome.runs} {status} ({_duration(record.duration_ms)})"
    if record.passed:
        return line
    reason = record.infrastructure_error or (record.failures[0] if record.failures else None)
    reason = reason or record.error or f"status {record.status}"
    return f"{line}: {one_line(truncate(masker.text(reason), PROGRESS_REASON_LIMIT))}"


def _duration(ms: float) -> str:
    return f"{ms / 1000:.2f}s" if ms >= 1000 else f"{round(ms)}ms"
