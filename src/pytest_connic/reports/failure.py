"""How a failed case item reads: a one-line summary with ``path:line``, then
each failing run's checks, evaluated operands and tool-call trace."""

from __future__ import annotations

from pytest_connic.records.run import CaseOutcome
from pytest_connic.reports.terminal import failure_details, failure_summary_line
from pytest_connic.secrets import Masker


def failure_text(outcome: CaseOutcome, masker: Masker) -> str:
    """The plain-text failure report of a case (first line: the one-line summary)."""
    lines = [failure_summary_line(outcome, masker=masker)]
    details = failure_details(outcome, masker=masker)
    if details:
        lines.append(details)
    return "\n".join(lines)

