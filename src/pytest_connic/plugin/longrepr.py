"""A failed case's report as pytest reads it: the whole text, and its one-line reason as the
"crash" line, so that pytest's short summary (``-r``), ``--tb=line`` and JUnit's ``message``
show why the case failed, not only where it is.

pytest takes that line from ``longrepr.reprcrash``, which a plain string does not have. The
report is a one-entry native traceback (``ReprEntryNative`` prints its text as it is) with a
``ReprFileLocation`` of the suite file, the case's line and the reason; pytest serialises that
shape between xdist workers and the controller like any traceback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from _pytest._code.code import ExceptionChainRepr, ReprEntryNative, ReprFileLocation, ReprTraceback

if TYPE_CHECKING:
    from pytest_connic.records.run import CaseOutcome
    from pytest_connic.secrets import Masker


def case_longrepr(text: str, outcome: CaseOutcome | None, masker: Masker, *,
                  style: str | None = None) -> ExceptionChainRepr | str:
    """``text`` (the case's failure report) with ``outcome``'s one-line reason as its crash line;
    with ``--tb=line`` (``style``) only that line, as pytest shows a Python test's failure."""
    if outcome is None:
        return text
    from pytest_connic.reports.terminal import failure_reason_line

    reason = failure_reason_line(outcome, masker=masker)
    body = "" if style == "line" else text if text.endswith("\n") else text + "\n"
    entry = ReprEntryNative([body])
    crash = ReprFileLocation(outcome.suite_path, outcome.line, reason)
    return ExceptionChainRepr([(ReprTraceback([entry], None, "native"), crash, None)])
