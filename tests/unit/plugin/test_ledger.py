"""The session's ledger (``plugin/ledger.py``): one outcome per case, pytest's verdict of its
worst phase, and the exit code an infrastructure error raises."""

from __future__ import annotations

import pytest

from pytest_connic.execution.outcomes import new_outcome
from pytest_connic.plugin.ledger import Ledger
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord

NODEID = "tests/calc.yaml::adds"


def outcome(setup_error: str | None = None) -> CaseOutcome:
    return new_outcome(NODEID, "tests/calc.yaml", 3, "calc", "adds", runs=1, success_threshold=100,
                       setup_error=setup_error)


def test_a_rerun_replaces_the_earlier_attempt_which_becomes_its_history() -> None:
    ledger = Ledger()
    first, second = outcome("the provider refused"), outcome()

    ledger.add_outcome(first)
    ledger.add_outcome(second)

    assert ledger.outcomes == [second]
    assert ledger.outcome_of(NODEID) is second
    assert [a["failure_reason"] for a in second.attempts] == ["the provider refused"]
    assert ledger.add_outcome(second) is second and ledger.outcomes == [second]  # the same one: no change


def test_the_worst_phase_of_an_attempt_is_its_verdict_and_a_failed_call_stays_failed() -> None:
    ledger = Ledger()
    case = ledger.add_outcome(outcome())

    ledger.set_verdict(NODEID, "passed", None)
    ledger.set_verdict(NODEID, "failed", "the threshold was not reached")
    ledger.set_verdict(NODEID, "error", "teardown raised")  # Connic's verdict is the call's

    assert (case.pytest_outcome, case.pytest_reason) == ("failed", "the threshold was not reached")
    ledger.new_attempt(NODEID)  # a rerun's setup: pytest has said nothing of it yet
    ledger.set_verdict(NODEID, "passed", None)
    assert case.pytest_outcome == "passed"


def test_an_outcome_that_comes_after_its_report_takes_the_verdict_already_known() -> None:
    ledger = Ledger()
    ledger.set_verdict(NODEID, "skipped", "interrupted")

    unreported, reported = ledger.add_outcome(outcome()), outcome()
    assert unreported.pytest_outcome is None
    ledger.add_outcome(reported, reported=True)  # the xdist controller: the report came first
    assert (reported.pytest_outcome, reported.pytest_reason) == ("skipped", "interrupted")


@pytest.mark.parametrize(("status", "expected"), [(0, 2), (1, 2), (2, 2), (5, 5)])
def test_an_infrastructure_error_raises_the_exit_code_to_2(status: int, expected: int) -> None:
    ledger = Ledger()
    assert ledger.exit_code(status) == status
    broken = ledger.add_outcome(outcome())
    assert ledger.infrastructure_errors == 0

    broken.records.append(RunRecord(run_id="r-1", agent_name="calc", status="failed",
                                    infrastructure_error="connection refused by 127.0.0.1:9"))
    assert ledger.infrastructure_errors == 1
    assert ledger.exit_code(status) == expected


def test_what_was_collected_started_and_reported_is_kept_first_come() -> None:
    ledger = Ledger()
    ledger.add_collected(NODEID, ("tests/calc.yaml", 2, "adds"))
    ledger.add_collected(NODEID, ("tests/calc.yaml", 9, "adds"))
    ledger.mark_started(NODEID, "gw1")
    ledger.mark_reported(NODEID)
    ledger.suite_failed_to_collect()

    assert ledger.collected == {NODEID: ("tests/calc.yaml", 2, "adds")}
    assert ledger.started == {NODEID: "gw1"} and NODEID in ledger.reported
    assert ledger.suite_collection_errors == 1
