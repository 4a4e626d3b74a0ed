"""The verdict of one case over its runs (``CaseOutcome``): its records, its threshold, pytest's
word on it, and what every report reads of it."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from pytest_connic.jsonsafe import JsonObject
from pytest_connic.records.events import CaseStatus
from pytest_connic.records.run import RunRecord

#: the outcomes of pytest's that decide a case's status whatever its runs say
_PYTEST_SAYS: tuple[CaseStatus, ...] = ("error", "skipped", "xfailed")


@dataclass
class CaseOutcome:
    """The verdict of one case over its runs."""

    nodeid: str
    suite_path: str  #: ``tests/<suite>.yaml`` relative to the project root
    line: int
    agent_name: str
    case_name: str
    runs: int
    success_threshold: int
    records: list[RunRecord] = field(default_factory=list)
    #: a failure that kept every run from starting (missing fixture, invalid case)
    setup_error: str | None = None
    skipped_runs: int = 0
    early_stop_reason: str | None = None
    #: why the case did not finish (``interrupted by SIGINT``): the session was stopped
    interrupted: str | None = None
    #: pytest's outcome of the case's item, after every plugin's say (``-W error``, pytest-timeout,
    #: a rerun, a crashed xdist worker): ``passed``, ``failed``, ``error``, ``skipped``,
    #: ``xfailed``; None when pytest has not reported on it (library use)
    pytest_outcome: str | None = None
    #: pytest's one-line reason when it is not the runs' own verdict (``CassetteDivergenceWarning:
    #: ...``, ``Timeout (>1.0s) from pytest-timeout.``)
    pytest_reason: str | None = None
    #: the earlier attempts of the case (pytest-rerunfailures), oldest first: ``attempt_summary``
    attempts: list[dict[str, object]] = field(default_factory=list)
    #: why the case could not finish and is skipped (``budget spent``): it has no verdict
    left_out: str | None = None
    #: why a recording session wrote no cassette for the case (a run's recording is incomplete):
    #: an error of the case, never a silent pass (docs/models.md, "A recording never fails in silence")
    recording_error: str | None = None
    #: the user's traceback when the case could not be set up because a module of the project
    #: failed to import (``usertb.import_traceback``)
    setup_traceback: JsonObject | None = None
    #: how many runs the replayed cassette holds (None: no run replayed one)
    recorded_runs: int | None = None
    #: how many of the case's runs replayed the cassette
    replayed_runs: int = 0

    @property
    def copies(self) -> int:
        """Runs that replayed a recorded run another run of the case replayed already: not an
        independent run (docs/models.md, "Runs beyond the recording")."""
        if self.recorded_runs is None:
            return 0
        return max(0, self.replayed_runs - self.recorded_runs)

    @property
    def replay_note(self) -> str | None:
        """``3 runs replayed from 1 recorded run`` when some runs are copies, else None."""
        if not self.copies or self.recorded_runs is None:
            return None
        recorded = f"{self.recorded_runs} recorded run" + ("s" if self.recorded_runs != 1 else "")
        return f"{self.replayed_runs} runs replayed from {recorded}"

    @property
    def successes(self) -> int:
        return sum(1 for r in self.records if r.passed)

    @property
    def verdict_passed(self) -> bool:
        """The runs' own verdict (Connic's threshold rule), whatever pytest said of the item."""
        if self.setup_error is not None or self.infrastructure_error is not None or self.interrupted:
            return False
        if self.left_out is not None or self.recording_error is not None:
            return False
        return self.successes * 100 >= self.success_threshold * self.runs

    @property
    def passed(self) -> bool:
        """The case passed: its runs' verdict, unless pytest's outcome of the item says otherwise
        (pytest is the single source of truth of every report)."""
        if self.pytest_outcome not in (None, "passed"):
            return False
        return self.verdict_passed

    @property
    def status(self) -> CaseStatus:
        """``passed``, ``failed``, ``error`` (a setup or infrastructure error kept runs from running,
        or pytest reported an error), ``interrupted`` (the session was stopped by a real SIGINT or
        SIGTERM before its verdict), ``skipped`` or ``xfailed`` (pytest's word)."""
        if self.interrupted is not None:
            return "interrupted"
        if self.left_out is not None:
            return "skipped"
        for word in _PYTEST_SAYS:
            if self.pytest_outcome == word:
                return word
        if self.infrastructure_error is not None or self.setup_error is not None or self.recording_error is not None:
            return "error"
        return "passed" if self.passed else "failed"

    def attempt_summary(self) -> dict[str, object]:
        """This attempt as the history of a rerun case keeps it."""
        return {
            "status": self.status,
            "failure_reason": self.failure_reason,
            "successes": self.successes,
            "runs": self.runs,
            "agent_run_ids": [r.run_id for r in self.executed],
        }

    @property
    def infrastructure_error(self) -> str | None:
        for record in self.records:
            if record.infrastructure_error:
                return record.infrastructure_error
        return None

    @property
    def failure_reason(self) -> str | None:
        if self.passed:
            return None
        if self.setup_error is not None:
            return self.setup_error
        if self.interrupted is not None:
            return self.interrupted
        if self.left_out is not None:
            return self.left_out
        if self.recording_error is not None:
            return self.recording_error
        for record in self.records:
            if record.infrastructure_error:
                return record.infrastructure_error
            if record.failures:
                return record.failures[0]
        return self.pytest_reason

    @property
    def executed(self) -> list[RunRecord]:
        return [r for r in self.records if not r.skipped]

    @property
    def median_latency_ms(self) -> float | None:
        durations = [r.duration_ms for r in self.executed]
        return statistics.median(durations) if durations else None

    @property
    def median_virtual_ms(self) -> float:
        """How much of the median latency is skipped retry delays: the virtual part of the median
        run (the mean of the two middle runs' for an even count)."""
        runs = sorted(self.executed, key=lambda r: r.duration_ms)
        if not runs:
            return 0.0
        middle = runs[(len(runs) - 1) // 2: len(runs) // 2 + 1]
        return sum(r.virtual_ms for r in middle) / len(middle)

    @property
    def cost_known(self) -> bool:
        """Whether every run's cost is known (a case that ran no model turn costs a known $0)."""
        return all(r.cost_known for r in self.records)

    @property
    def input_tokens(self) -> int:
        return sum(r.input_tokens for r in self.records)

    @property
    def output_tokens(self) -> int:
        return sum(r.output_tokens for r in self.records)

    @property
    def cost(self) -> float:
        return sum(r.cost for r in self.records)

    def to_dict(self) -> dict[str, object]:
        return {
            "nodeid": self.nodeid,
            "suite": self.suite_path,
            "line": self.line,
            "agent_name": self.agent_name,
            "test_name": self.case_name,
            "passed": self.passed,
            "successes": self.successes,
            "runs": self.runs,
            "success_threshold": self.success_threshold,
            "failure_reason": self.failure_reason,
            "setup_error": self.setup_error,
            "skipped_runs": self.skipped_runs,
            "early_stop_reason": self.early_stop_reason,
            "interrupted": self.interrupted,
            "pytest_outcome": self.pytest_outcome,
            "pytest_reason": self.pytest_reason,
            "attempts": list(self.attempts),
            "left_out": self.left_out,
            "recording_error": self.recording_error,
            "setup_traceback": self.setup_traceback,
            "recorded_runs": self.recorded_runs,
            "replayed_runs": self.replayed_runs,
            "agent_run_ids": [r.run_id for r in self.executed],
            "agent_run_passed": [r.passed for r in self.executed],
            "median_latency_ms": self.median_latency_ms,
            "median_latency_virtual_ms": self.median_virtual_ms,
            "tokens": {"input": self.input_tokens, "output": self.output_tokens},
            "cost": self.cost,
            "cost_known": self.cost_known,
            "records": [r.to_dict() for r in self.records],
        }
