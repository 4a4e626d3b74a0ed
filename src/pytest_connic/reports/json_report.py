"""``--connic-json PATH``: the report of ``connic test --json``, plus what a local run knows more.

Connic's keys keep their names, order and meaning, so a script written against ``connic test
--json`` reads this report unchanged. The extras (per case ``nodeid``, ``suite``, ``line``,
``status``, ``pass_rate``, ``wilson_95``, ``median_latency_ms``, ``tokens``, ``cost``,
``skipped_runs``, ``early_stop_reason``, ``setup_error``, ``infrastructure_error``,
``pytest_outcome``, ``pytest_reason``, ``attempts``, ``runs_detail``, ``traceback`` (the user's, when
user code raised), ``warnings``; top-level
``summary``) follow Connic's keys. Every string passes through the
masker, and every value is plain JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pytest_connic.jsonsafe import JsonObject, JsonValue, dumps, masked, masked_again, to_jsonable
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord, build_spans
from pytest_connic.reports import stats
from pytest_connic.reports.stats import case_status, case_wilson, pass_rate, sorted_outcomes
from pytest_connic.secrets import Masker
from pytest_connic.usertb import case_traceback

#: ``connic test`` fetches the details of at most this many failed runs per case
MAX_FAILED_RUNS_SHOWN = 3


def build_json_report(
    outcomes: Iterable[CaseOutcome],
    *,
    masker: Masker,
    session_status: str | None = None,
    environment_id: str | None = None,
    test_run_id: str | None = None,
) -> JsonObject:
    """The whole report as a JSON-ready dict.

    ``session_status`` overrides the status derived from the outcomes (``passed``, ``failed``,
    ``error`` when an infrastructure error kept a case from running). ``environment_id`` is the
    ``--connic-env`` name; ``test_run_id`` an id of the caller's choosing (None keeps two reports
    of the same results byte-identical). Cases are ordered by suite, line and node id.
    """
    ordered = sorted_outcomes(outcomes)
    status = session_status if session_status is not None else stats.session_status(ordered)
    return {
        "status": status,
        "test_run_id": test_run_id,
        "deployment_id": None,
        "environment_id": environment_id,
        "cases": [case_entry(o, masker=masker) for o in ordered],
        "summary": dict[str, JsonValue](summary_counts(ordered)),
    }


def add_warnings(report: JsonObject, warnings: Mapping[str, list[str]], *, masker: Masker) -> None:
    """Give each case of ``report`` the warnings pytest recorded for its node id (``warnings``:
    node id -> messages, in order), masked, under ``warnings``; a case without any has none."""
    cases = report.get("cases")
    for case in cases if isinstance(cases, list) else []:
        found = warnings.get(str(case.get("nodeid"))) if isinstance(case, dict) else None
        if found and isinstance(case, dict):
            case["warnings"] = [masker.text(text) for text in dict.fromkeys(found)]


def report_text(report: Mapping[str, JsonValue]) -> str:
    """The report as the file ``--connic-json`` writes: indented like ``connic test --json``."""
    return dumps(report, indent=2) + "\n"


def summary_counts(outcomes: Iterable[CaseOutcome]) -> dict[str, int]:
    """``{cases, passed, failed, errors}``, and ``interrupted``, ``skipped``, ``xfailed`` when there
    are such cases; a setup or infrastructure error counts as an error."""
    statuses = [case_status(o) for o in outcomes]
    counts = {
        "cases": len(statuses),
        "passed": statuses.count("passed"),
        "failed": statuses.count("failed"),
        "errors": statuses.count("error"),
    }
    for extra in ("interrupted", "skipped", "xfailed"):
        if extra in statuses:
            counts[extra] = statuses.count(extra)
    return counts


def case_entry(outcome: CaseOutcome, *, masker: Masker) -> JsonObject:
    """One case: Connic's keys first, exactly as ``connic test --json`` has them, then extras."""
    executed = outcome.executed
    entry: JsonObject = {
        "agent_name": outcome.agent_name,
        "test_name": outcome.case_name,
        "passed": outcome.passed,
        "successes": outcome.successes,
        "runs": outcome.runs,
        "success_threshold": outcome.success_threshold,
        "failure_reason": masked(outcome.failure_reason, masker),
        "agent_run_ids": [r.run_id for r in executed],
        "agent_run_passed": [r.passed for r in executed],
    }
    if not outcome.passed and executed:
        entry["failed_runs"] = failed_runs(outcome, masker=masker)
    entry.update(_extras(outcome, masker=masker))
    # every value above is masked and bounded already: this pass masks what is left, and never
    # cuts the JSON text of bounded values (a span's metadata_json) a second time
    return masked_again(entry, masker)


def _extras(outcome: CaseOutcome, *, masker: Masker) -> JsonObject:
    wilson = case_wilson(outcome)
    return {
        "nodeid": outcome.nodeid,
        "suite": outcome.suite_path,
        "line": outcome.line,
        "status": case_status(outcome),
        "pass_rate": pass_rate(outcome),
        "wilson_95": list(wilson) if wilson else None,
        "recorded_runs": outcome.recorded_runs,
        "replayed_runs": outcome.replayed_runs,
        "replay_note": outcome.replay_note,
        "median_latency_ms": outcome.median_latency_ms,
        "median_latency_virtual_ms": outcome.median_virtual_ms,
        "tokens": {"input": outcome.input_tokens, "output": outcome.output_tokens},
        "cost": outcome.cost,
        "cost_known": outcome.cost_known,
        "skipped_runs": outcome.skipped_runs,
        "early_stop_reason": outcome.early_stop_reason,
        "interrupted": outcome.interrupted,
        "left_out": outcome.left_out,
        "setup_error": masked(outcome.setup_error, masker),
        "infrastructure_error": masked(outcome.infrastructure_error, masker),
        "recording_error": masked(outcome.recording_error, masker),
        "pytest_outcome": outcome.pytest_outcome,
        "pytest_reason": masked(outcome.pytest_reason, masker),
        "attempts": masked(outcome.attempts, masker),
        "runs_detail": [run_detail(r, masker=masker) for r in outcome.records],
        "traceback": _traceback(outcome, masker=masker),
    }


def _traceback(outcome: CaseOutcome, *, masker: Masker) -> JsonObject | None:
    """The user's traceback the failure report shows (``usertb.case_traceback``): what raised, where,
    and its text as Python prints it (masked, bounded); None when user code raised nothing."""
    if outcome.passed:
        return None
    found = case_traceback(outcome)
    if found is None:
        return None
    what, data = found
    return {"origin": what, "where": data.get("where"), "text": masked(data.get("text"), masker)}


def failed_runs(outcome: CaseOutcome, *, masker: Masker, limit: int = MAX_FAILED_RUNS_SHOWN) -> JsonObject:
    """``{"total_failed": n, "shown": [...]}`` with the first ``limit`` failed runs, as Connic."""
    failed = [r for r in outcome.executed if not r.passed]
    return {"total_failed": len(failed), "shown": [shown_run(r, masker=masker) for r in failed[:limit]]}


def shown_run(record: RunRecord, *, masker: Masker) -> JsonObject:
    """One failed run as Connic's run API returns it: text fields, context and spans."""
    return {
        "run_id": record.run_id,
        "input": as_text(masked(record.input, masker)),
        "output": as_text(masked(record.output_raw, masker)),
        "error": masked(record.error or record.infrastructure_error, masker),
        "run_context": masked(record.run_context, masker),
        "traces": list[JsonValue](build_spans(record, masker=masker)),
    }


def run_detail(record: RunRecord, *, masker: Masker) -> JsonObject:
    """A run's full record (``RunRecord.to_dict()``) and its spans under ``traces``."""
    detail: JsonObject = masked(record.to_dict(), masker)
    detail["traces"] = list[JsonValue](build_spans(record, masker=masker))
    return detail


def as_text(value: object) -> str | None:
    """A payload or output as Connic shows it: strings as they are, anything else as JSON."""
    if value is None or isinstance(value, str):
        return value
    return dumps(to_jsonable(value))
