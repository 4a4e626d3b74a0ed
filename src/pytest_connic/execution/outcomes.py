"""The one place a ``CaseOutcome`` is started: what a case is, before any of its runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_connic.records.outcome import CaseOutcome

if TYPE_CHECKING:
    from pytest_connic.suite.loader import CaseSpec, Suite


def new_outcome(nodeid: str, suite_path: str, line: int, agent_name: str, case_name: str, *,
                runs: int, success_threshold: int, setup_error: str | None = None) -> CaseOutcome:
    """An outcome with no records yet (``setup_error``: the case could not start)."""
    return CaseOutcome(nodeid=nodeid, suite_path=suite_path, line=line, agent_name=agent_name,
                       case_name=case_name, runs=runs, success_threshold=success_threshold,
                       setup_error=setup_error)


def suite_outcome(nodeid: str, suite: Suite, spec: CaseSpec, *, agent_name: str | None = None,
                  runs: int | None = None, setup_error: str | None = None) -> CaseOutcome:
    """The outcome of a suite case: its runs and threshold as resolved (the suite's defaults
    for a case that did not resolve); ``agent_name`` and ``runs`` override (an A/B arm)."""
    resolved = spec.resolved
    return new_outcome(
        nodeid, suite.relpath, spec.line, agent_name or suite.agent_name, spec.name,
        runs=runs if runs is not None else resolved["runs"] if resolved else suite.defaults.runs,
        success_threshold=resolved["success_threshold"] if resolved else suite.defaults.success_threshold,
        setup_error=setup_error,
    )
