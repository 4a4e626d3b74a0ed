"""The session's ledger: one outcome per case and what pytest has said of each case's reports.

The reports (JSON, JUnit, HTML, the terminal's table, the history) read the outcomes from here;
pytest's outcome of a case (after every plugin's say) becomes its outcome's ``pytest_outcome``
(``set_verdict``), the one truth of every report."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_connic.records.outcome import CaseOutcome

#: how bad each of pytest's outcomes is, for the worst phase of an attempt
_RANK = {"passed": 0, "xfailed": 1, "skipped": 1, "failed": 2, "error": 3}


class Ledger:
    """Outcomes by case, pytest's verdicts, which cases were reported, started and collected."""

    def __init__(self) -> None:
        #: one outcome per case (a rerun's earlier attempts are its ``attempts``): ``add_outcome``
        self._outcomes: list[CaseOutcome] = []
        self._by_nodeid: dict[str, CaseOutcome] = {}
        #: pytest's outcome of the current attempt of each case, from its reports (``set_verdict``)
        self._verdicts: dict[str, tuple[str, str | None]] = {}
        #: suite files that failed to collect: in coverage mode the report judges them
        self._suite_collection_errors = 0
        #: case items whose reports pytest has logged (the others are interrupted when the session is)
        self._reported: set[str] = set()
        #: cases whose setup passed and whose result is not in yet -> the xdist node running them
        self._started: dict[str, object] = {}
        #: on the xdist controller: the cases the workers collected (node id -> location)
        self._collected: dict[str, tuple[str, int, str]] = {}
        self._lock = threading.Lock()

    def add_outcome(self, outcome: CaseOutcome, *, reported: bool = False) -> CaseOutcome:
        """Record a case's outcome. A case has one: a new attempt of a case (pytest-rerunfailures)
        replaces the outcome of the earlier one, which becomes its history (``attempts``).
        ``reported``: the outcome came with its attempt's report (the xdist controller), so pytest's
        outcome of the attempt, already known, is applied (where the case runs, pytest's reports
        always follow the outcome; rerunfailures logs an attempt's reports after the next starts)."""
        with self._lock:
            previous = self._by_nodeid.get(outcome.nodeid)
            if previous is outcome:
                return outcome
            self._by_nodeid[outcome.nodeid] = outcome
            if previous is None:
                self._outcomes.append(outcome)
            else:
                if not outcome.attempts:  # an xdist worker's outcome brings its history along
                    outcome.attempts = [*previous.attempts, previous.attempt_summary()]
                self._outcomes[next(i for i, o in enumerate(self._outcomes) if o is previous)] = outcome
            verdict = self._verdicts.get(outcome.nodeid) if reported else None
            if verdict is not None:
                outcome.pytest_outcome, outcome.pytest_reason = verdict
            return outcome

    @property
    def outcomes(self) -> Sequence[CaseOutcome]:
        """The session's outcomes, one per case, in the order their cases first ended."""
        return self._outcomes

    def outcome_of(self, nodeid: str) -> CaseOutcome | None:
        return self._by_nodeid.get(nodeid)

    def new_attempt(self, nodeid: str) -> None:
        """A case's setup report: an attempt starts, pytest has said nothing of it yet."""
        self._verdicts.pop(nodeid, None)

    def set_verdict(self, nodeid: str, word: str, reason: str | None) -> None:
        """pytest's outcome of a phase of the current attempt of a case; the worst phase decides
        (a failed call stays failed when teardown then errs: Connic's verdict is the call's)."""
        current = self._verdicts.get(nodeid)
        if current is not None and (_RANK[current[0]] >= _RANK[word] or current[0] == "failed"):
            return
        self._verdicts[nodeid] = (word, reason)
        outcome = self._by_nodeid.get(nodeid)
        if outcome is not None:
            outcome.pytest_outcome, outcome.pytest_reason = word, reason

    def mark_reported(self, nodeid: str) -> None:
        """pytest has logged a report of the case (an interrupted session leaves it as it is)."""
        self._reported.add(nodeid)

    @property
    def reported(self) -> AbstractSet[str]:
        """The cases whose reports pytest has logged."""
        return self._reported

    def mark_started(self, nodeid: str, node: object) -> None:
        """The case's setup passed on ``node`` (its xdist node, or None): its runs are under way."""
        self._started[nodeid] = node

    @property
    def started(self) -> Mapping[str, object]:
        """Cases whose setup passed -> the xdist node running them (or None)."""
        return self._started

    def add_collected(self, nodeid: str, location: tuple[str, int, str]) -> None:
        """On the xdist controller: a case a worker collected (the first location is kept)."""
        self._collected.setdefault(nodeid, location)

    @property
    def collected(self) -> Mapping[str, tuple[str, int, str]]:
        """On the xdist controller: the cases the workers collected (node id -> location)."""
        return self._collected

    def suite_failed_to_collect(self) -> None:
        """A suite file failed to collect (the exit code; the coverage report judges it)."""
        self._suite_collection_errors += 1

    @property
    def suite_collection_errors(self) -> int:
        """How many suite files failed to collect."""
        return self._suite_collection_errors

    @property
    def infrastructure_errors(self) -> int:
        """Cases whose last attempt hit an infrastructure error (the session exits 2)."""
        return sum(1 for o in self.outcomes if o.infrastructure_error is not None and o.status == "error")

    def exit_code(self, status: int | pytest.ExitCode) -> int | pytest.ExitCode:
        """pytest's exit ``status``, raised to 2 when an infrastructure error (a provider down or
        refusing) kept cases from running."""
        return 2 if self.infrastructure_errors and status in (0, 1) else status
