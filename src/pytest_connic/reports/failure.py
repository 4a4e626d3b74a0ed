"""How a failed case item reads: the one-line reason, where the case is and how it ended, then
each failing run's checks, evaluated operands and tool-call trace, saying each thing once."""

from __future__ import annotations

from pytest_connic.records.run import CaseOutcome
from pytest_connic.reports.terminal import Said, failure_details, failure_header, failure_reason_line
from pytest_connic.secrets import Masker


def failure_text(outcome: CaseOutcome, masker: Masker) -> str:
    """The plain-text failure report of a case. First line: ``<suite>:<line>: <the one-line
    reason>`` (what pytest's short summary, ``--tb=line`` and JUnit's ``message`` show, see
    :func:`failure_reason_line`); then how the case ended, then its failed runs."""
    reason = failure_reason_line(outcome, masker=masker)
    header = failure_header(outcome, masker=masker)
    lines = [f"{outcome.suite_path}:{outcome.line}: {reason}"]
    if header != reason:
        lines.append(header)
    said = Said(reason, header, masker.report_text(outcome.failure_reason or ""))
    details = failure_details(outcome, masker=masker, said=said)
    if details:
        lines.append(details)
    return "\n".join(lines)
