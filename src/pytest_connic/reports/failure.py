"""How a failed case item reads: one line with where the case is, how it ended and why, then
each failing run's checks, evaluated operands and tool-call trace, saying each thing once."""

from __future__ import annotations

from pytest_connic.records.run import CaseOutcome
from pytest_connic.reports.terminal import Said, failure_details, failure_summary_line
from pytest_connic.secrets import Masker


def failure_text(outcome: CaseOutcome, masker: Masker) -> str:
    """The plain-text failure report of a case. First line: where the case is, how it ended and
    why (:func:`failure_summary_line`); then its failed runs, without saying any of that again.
    Its one-line reason alone (:func:`failure_reason_line`) is what pytest's short summary,
    ``--tb=line`` and JUnit's ``message`` show (``plugin/longrepr.py``)."""
    lines = [failure_summary_line(outcome, masker=masker)]
    said = Said(lines[0], masker.report_text(outcome.failure_reason or ""))
    details = failure_details(outcome, masker=masker, said=said)
    if details:
        lines.append(details)
    return "\n".join(lines)
