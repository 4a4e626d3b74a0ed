"""Writing the report files and the terminal summary at the end of a session."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .stats import session_status

if TYPE_CHECKING:
    from ..state import ConnicSession


def write_outputs(state: ConnicSession) -> None:
    """``--connic-json``, ``--connic-html`` and ``--connic-traces``, when asked for."""
    from ..session_hooks import output_path

    settings = state.settings
    if not (settings.json or settings.html or settings.traces):
        return
    from .json_report import build_json_report, report_text

    status = "error" if state.infrastructure_errors else session_status(state.outcomes)
    report = build_json_report(state.outcomes, masker=state.masker, session_status=status,
                               environment_id=settings.env)
    if settings.json:
        path = output_path(state.config, settings.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(report_text(report), "utf-8")
    if settings.html:
        from .html import render_html

        path = output_path(state.config, settings.html)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_html(report), "utf-8")
    if settings.traces:
        from .traces import write_traces

        write_traces(output_path(state.config, settings.traces), state.outcomes, masker=state.masker)


def terminal_summary(state: ConnicSession, reporter: Any) -> None:
    """The results table and ``N/M cases passed.`` after the run, and the coverage report."""
    from .coverage_output import coverage_summary

    coverage_summary(state, reporter)
    if not state.outcomes:
        return
    from .terminal import results_table, summary_line

    reporter.write_sep("=", "connic results")
    for line in results_table(state.outcomes):
        reporter.write_line(line)
    early = [o for o in state.outcomes if o.skipped_runs]
    for outcome in early:
        reporter.write_line(
            f"  {outcome.agent_name}::{outcome.case_name}: early stop skipped {outcome.skipped_runs} run(s): "
            f"{outcome.early_stop_reason}"
        )
    reporter.write_line(summary_line(state.outcomes))
