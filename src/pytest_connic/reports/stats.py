"""Numbers the reports share: pass rate, Wilson interval, runs needed, ordering."""

from __future__ import annotations

import math
from collections.abc import Iterable

from pytest_connic.records.events import CaseStatus, SessionStatus
from pytest_connic.records.outcome import CaseOutcome

#: two-sided 95 % normal quantile
Z_95 = 1.959963984540054


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float] | None:
    """The Wilson score interval for ``successes`` out of ``trials``; None without trials.

    Unlike the naive ``p ± z·sqrt(p(1-p)/n)``, it stays inside [0, 1] and is not degenerate at
    0/n or n/n, which is exactly where small agent test suites live (5/5 runs passed).
    """
    if trials <= 0:
        return None
    p = successes / trials
    z2 = z * z
    denom = 1 + z2 / trials
    centre = (p + z2 / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / denom
    return max(0.0, round(centre - half, 6)), min(1.0, round(centre + half, 6))


def pass_rate(outcome: CaseOutcome) -> float | None:
    """Passed runs over executed runs (runs never started by an early stop do not count)."""
    executed = len(outcome.executed)
    return round(outcome.successes / executed, 6) if executed else None


def case_wilson(outcome: CaseOutcome) -> tuple[float, float] | None:
    """The 95 % Wilson interval of a case's pass rate over its executed runs; None when some runs
    replayed a recorded run again (copies are not independent runs: the interval would be a
    claim the runs cannot back)."""
    if outcome.copies:
        return None
    return wilson_interval(outcome.successes, len(outcome.executed))


def runs_needed(outcome: CaseOutcome) -> int:
    """How many passing runs the threshold asks for (``successes * 100 >= threshold * runs``)."""
    return math.ceil(outcome.success_threshold * outcome.runs / 100)


def case_status(outcome: CaseOutcome) -> CaseStatus:
    """``passed``, ``failed``, ``error``, ``interrupted``, ``skipped`` or ``xfailed``
    (``CaseOutcome.status``: pytest's view, after every plugin's say; a setup failure is an error).
    The session status below is Connic's."""
    return outcome.status


def session_status(outcomes: Iterable[CaseOutcome]) -> SessionStatus:
    """The run's status as ``connic test`` reports it.

    ``error`` only for an infrastructure error (exit code 2); a case that could not be set up is
    the suite author's to fix, so it makes the run ``failed`` (exit code 1). ``interrupted`` when
    the session was stopped (SIGINT, SIGTERM) before a case had its verdict (docs/reports.md).
    """
    outcomes = list(outcomes)
    if any(o.interrupted is not None for o in outcomes):
        return "interrupted"
    if any(o.infrastructure_error is not None for o in outcomes):
        return "error"
    # a case left out by the budget has no verdict: skipped, as in pytest (the reports list it)
    return "passed" if all(o.passed for o in outcomes if o.left_out is None) else "failed"


def sorted_outcomes(outcomes: Iterable[CaseOutcome]) -> list[CaseOutcome]:
    """Outcomes in a stable order (suite, line, node id) whatever order xdist workers finished in."""
    return sorted(outcomes, key=lambda o: (o.suite_path, o.line, o.nodeid))
