"""pytest's word for a case from its reports: an error or a failure, the verdict and its reason
(read by the terminal summary, the xdist controller and the merge)."""

from __future__ import annotations

import pytest


def is_case_id(nodeid: str) -> bool:
    """A Connic case's node id (``tests/<suite>.yaml::<name>``)."""
    suite, _, name = nodeid.partition("::")
    return bool(name) and suite.lower().endswith(".yaml")


#: set on a case's call report when it is an error, not a failure (``CaseErrored``)
ERROR_ATTR = "connic_error"


def is_error_report(report: pytest.TestReport) -> bool:
    """A failed report of a case that pytest must count as an error: the case's runs could not
    happen (``CaseErrored``), or its xdist worker crashed (xdist's report has ``when`` ``???``)."""
    if not report.failed or not is_case_id(report.nodeid):
        return False
    return bool(getattr(report, ERROR_ATTR, False)) or report.when not in ("setup", "call", "teardown")


def report_verdict(report: pytest.TestReport) -> tuple[str, str | None] | None:
    """pytest's word for the case from one of its reports (None: this report says nothing new)."""
    if report.outcome == "rerun":  # type: ignore[comparison-overlap]  # pytest-rerunfailures: this attempt failed
        return "failed", report_reason(report)
    if hasattr(report, "wasxfail"):
        return ("xfailed", str(report.wasxfail) or None) if report.skipped else ("passed", None)
    if report.passed:
        return ("passed", None) if report.when == "call" else None
    if report.skipped:
        return "skipped", report_reason(report)
    if report.when == "call" and not is_error_report(report):
        return "failed", report_reason(report)
    reason = report_reason(report)
    if report.when in ("setup", "teardown") and reason:
        reason = f"error at {report.when}: {reason}"
    return "error", reason


def report_reason(report: pytest.TestReport) -> str | None:
    """The one-line reason of a report: its crash message, a skip's reason, else its first line."""
    longrepr = report.longrepr
    if longrepr is None:
        return None
    if isinstance(longrepr, tuple):  # a skip: (path, line, "Skipped: reason")
        return str(longrepr[2]).removeprefix("Skipped: ") or None
    crash = getattr(longrepr, "reprcrash", None)
    text = str(getattr(crash, "message", "") or "") if crash is not None else str(longrepr)
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first or None
