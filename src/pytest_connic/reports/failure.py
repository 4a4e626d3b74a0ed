"""How a failed case item reads: a first line that fits the terminal and says which case failed,
then how it ended and why (a hint's list one line each), then each failing run's checks,
evaluated operands and tool-call trace, saying each thing once."""

from __future__ import annotations

from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.reports.terminal import Said, failure_details, failure_head_lines
from pytest_connic.secrets import Masker


def failure_text(outcome: CaseOutcome, masker: Masker, width: int | None = None) -> str:
    """The plain-text failure report of a case. First line: where the case is and that it failed,
    in ``width`` columns; then how it ended and why, a hint's list one line each
    (:func:`failure_head_lines`); then its failed runs, without saying any of that again. Its
    one-line reason alone (:func:`failure_reason_line`) is what pytest's short summary,
    ``--tb=line`` and JUnit's ``message`` show (``plugin/longrepr.py``)."""
    lines = failure_head_lines(outcome, masker=masker, width=width)
    said = Said(*lines, masker.report_text(outcome.failure_reason or ""))
    details = failure_details(outcome, masker=masker, said=said)
    if details:
        lines.append(details)
    return "\n".join(lines)
