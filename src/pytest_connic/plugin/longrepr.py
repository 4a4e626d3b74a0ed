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

from pytest_connic.plugin.pytest_private import (
    ExceptionChainRepr,
    ReprEntryNative,
    ReprFileLocation,
    ReprTraceback,
)

if TYPE_CHECKING:
    from pytest_connic.plugin.usertrace import TraceOptions
    from pytest_connic.records.outcome import CaseOutcome
    from pytest_connic.secrets import Masker
    from pytest_connic.usertb import TracebackData


def case_longrepr(text: str, outcome: CaseOutcome | None, masker: Masker, *,
                  style: str | None = None, trace: TraceOptions | None = None) -> ExceptionChainRepr | str:
    """``text`` (the case's failure report) with ``outcome``'s one-line reason as its crash line;
    with ``--tb=line`` (``style``) only that line, as pytest shows a Python test's failure; the
    user's traceback after the text when user code raised (``trace``: how pytest shows them)."""
    if outcome is None:
        return text
    from pytest_connic.reports.terminal import failure_reason_line
    from pytest_connic.usertb import case_traceback

    crash = ReprFileLocation(outcome.suite_path, outcome.line, failure_reason_line(outcome, masker=masker))
    return _with_traceback(text, crash, case_traceback(outcome), style=style, trace=trace)


def warning_longrepr(line: str, message: str, outcome: CaseOutcome, masker: Masker, *,
                     style: str | None = None, trace: TraceOptions | None = None) -> ExceptionChainRepr | str:
    """A case that a ``CassetteDivergenceWarning`` made an error (``-W error``): the warning's
    ``line``, then the run it is about (the first with a divergence note) with its trace, and the
    user's traceback when user code raised in that run (the tool whose error made it diverge);
    ``message`` is the crash line."""
    from pytest_connic.records.events import DivergenceNoteEvent
    from pytest_connic.reports.terminal import Said, run_details
    from pytest_connic.usertb import run_traceback

    runs = outcome.executed
    noted = next((r for r in runs if any(isinstance(e, DivergenceNoteEvent) for e in r.events)), runs[0] if runs else None)
    if noted is None:
        return line
    text = "\n".join([line, *run_details(noted, masker=masker, said=Said(line))])
    crash = ReprFileLocation(outcome.suite_path, outcome.line, message)
    return _with_traceback(text, crash, run_traceback(noted), style=style, trace=trace)


def _with_traceback(text: str, crash: ReprFileLocation, found: tuple[str, TracebackData] | None, *,
                    style: str | None, trace: TraceOptions | None) -> ExceptionChainRepr:
    """``text`` as a one-entry native traceback with ``crash`` as its crash line, then ``found``
    (what raised, the user's traceback) as pytest's own entries, the crash line then at the user's
    file and line."""
    from pytest_connic.plugin.usertrace import TraceOptions, traceback_elements

    body = "" if style == "line" else text if text.endswith("\n") else text + "\n"
    elements = traceback_elements(found[0], found[1], trace or TraceOptions(style or "auto")) if found else []
    if not elements:
        return ExceptionChainRepr([(ReprTraceback([ReprEntryNative([body])], None, "native"), crash, None)])
    last_tb, last_crash, _ = elements[-1]
    if last_crash.path:  # the user's file and line, the case's reason
        crash = ReprFileLocation(last_crash.path, last_crash.lineno, crash.message)
    if style == "line":
        return ExceptionChainRepr([(ReprTraceback([ReprEntryNative([""])], None, "native"), crash, None)])
    head = (ReprTraceback([ReprEntryNative([body])], None, "native"), crash, f"{found[0]} raised:")  # type: ignore[index]
    return ExceptionChainRepr([head, *elements[:-1], (last_tb, crash, None)])
