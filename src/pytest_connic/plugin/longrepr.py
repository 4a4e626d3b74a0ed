"""A failed case's report as pytest reads it: the whole text, and its one-line reason as the
"crash" line, so that pytest's short summary (``-r``), ``--tb=line`` and JUnit's ``message``
show why the case failed, not only where it is.

pytest takes that line from ``longrepr.reprcrash``, which a plain string does not have. The
report is a one-entry native traceback (``ReprEntryNative`` prints its text as it is) with a
``ReprFileLocation`` of the suite file, the case's line and the reason; pytest serialises that
shape between xdist workers and the controller like any traceback.

When user code raised (a tool, middleware), the user's traceback follows the case's text as
pytest's own entries (``plugin/usertrace.py``), and the crash line is at the user's file and line
(``--tb=line`` then names ``tools/x.py:42``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from _pytest._code.code import ExceptionChainRepr, ReprEntryNative, ReprFileLocation, ReprTraceback

if TYPE_CHECKING:
    from pytest_connic.plugin.usertrace import TraceOptions
    from pytest_connic.records.run import CaseOutcome
    from pytest_connic.secrets import Masker


def case_longrepr(text: str, outcome: CaseOutcome | None, masker: Masker, *,
                  style: str | None = None, trace: TraceOptions | None = None) -> ExceptionChainRepr | str:
    """``text`` (the case's failure report) with ``outcome``'s one-line reason as its crash line;
    with ``--tb=line`` (``style``) only that line, as pytest shows a Python test's failure; the
    user's traceback after the text when user code raised (``trace``: how pytest shows them)."""
    if outcome is None:
        return text
    from pytest_connic.plugin.usertrace import TraceOptions, case_traceback, traceback_elements
    from pytest_connic.reports.terminal import failure_reason_line

    reason = failure_reason_line(outcome, masker=masker)
    body = "" if style == "line" else text if text.endswith("\n") else text + "\n"
    crash = ReprFileLocation(outcome.suite_path, outcome.line, reason)
    found = case_traceback(outcome)
    elements = traceback_elements(found[0], found[1], trace or TraceOptions(style or "auto")) if found else []
    if not elements:
        return ExceptionChainRepr([(ReprTraceback([ReprEntryNative([body])], None, "native"), crash, None)])
    last_tb, last_crash, _ = elements[-1]
    if last_crash.path:  # the user's file and line, the case's reason
        crash = ReprFileLocation(last_crash.path, last_crash.lineno, reason)
    if style == "line":
        return ExceptionChainRepr([(ReprTraceback([ReprEntryNative([""])], None, "native"), crash, None)])
    head = (ReprTraceback([ReprEntryNative([body])], None, "native"), crash, f"{found[0]} raised:")  # type: ignore[index]
    return ExceptionChainRepr([head, *elements[:-1], (last_tb, crash, None)])
