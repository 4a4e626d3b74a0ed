"""Connic's reports at the end of a session: the report files, the coverage report, the
terminal summary, the exit code; and the ``-v`` per-run progress lines as runs finish."""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_connic.plugin.session import state as state_of
from pytest_connic.plugin.xdist import ends_runs, is_worker, verbose

if TYPE_CHECKING:
    from pytest_connic.plugin.session import ConnicSession
    from pytest_connic.records.run import CaseOutcome, RunRecord


class ConnicReporting:
    """Reports after the run, on the controller (or the only process)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._progress_open: set[str] = set()
        if verbose(config) and not is_worker(config):
            state_of(config).run_listeners.append(self._run_finished)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """End the live per-run lines of a case before pytest writes its result word (and
        remember which cases have reports: an interrupted session reports the others)."""
        if report.nodeid.partition("::")[0].lower().endswith(".yaml"):
            state_of(self.config).reported.add(report.nodeid)
        if ends_runs(report) and report.nodeid in self._progress_open:
            self._progress_open.discard(report.nodeid)
            with self._terminal() as reporter:
                if reporter is not None:
                    reporter.write("\n")

    def _run_finished(self, outcome: CaseOutcome, record: RunRecord) -> None:
        """``-v``: one line per finished run of a case with several runs, as it finishes."""
        if outcome.runs < 2:
            return
        from pytest_connic.reports.terminal import run_progress_line

        with self._terminal() as reporter:
            if reporter is None:
                return
            self._progress_open.add(outcome.nodeid)
            reporter.write("\n" + run_progress_line(outcome, record, state_of(self.config).masker), flush=True)

    @contextlib.contextmanager
    def _terminal(self) -> Generator[Any, None, None]:
        """The terminal reporter with output capturing suspended (as pytest's live logging does)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
            yield reporter

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if is_worker(self.config):
            return  # the worker's outcomes go to the controller (``xdist.ConnicWorker``)
        from pytest_connic.plugin.outputs import write_outputs

        state = state_of(self.config)
        if state.stop.is_set() or exitstatus == pytest.ExitCode.INTERRUPTED:
            items: list[tuple[str, Any, Any]] = [(i.nodeid, i.location, i) for i in session.items]
            items += [(nodeid, location, None) for nodeid, location in state.collected.items()]
            mark_unfinished(self.config, state, items)
        write_outputs(state, session)
        settings = state.settings
        if settings.coverage or settings.coverage_json or settings.coverage_fail_under is not None:
            from pytest_connic.plugin.coverage_mode import finish_coverage

            code = finish_coverage(state, session)
            if code is not None:
                session.exitstatus = code
                return
        if state.infrastructure_errors and session.exitstatus in (0, 1):
            session.exitstatus = 2

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        """The coverage report; then Connic's results table, failure details and ``N/M cases passed.``"""
        from pytest_connic.plugin.coverage_mode import coverage_summary
        from pytest_connic.plugin.outputs import terminal_summary

        state = state_of(config)
        coverage_summary(state, terminalreporter)
        terminal_summary(state, terminalreporter)


def mark_unfinished(config: pytest.Config, state: ConnicSession, items: list[tuple[str, Any, Any]]) -> None:
    """The session was interrupted: every case without reports gets an interrupted outcome and a
    skipped report (so it is in the terminal, JUnit, JSON, HTML and traces). ``items``:
    ``(nodeid, location, item or None)``; only Connic cases (``tests/*.yaml::name``) count."""
    from pytest_connic.execution.outcomes import new_outcome, suite_outcome
    from pytest_connic.plugin.items import CaseItem

    reason = state.interrupts.reason
    known = {o.nodeid for o in state.outcomes}
    for nodeid, location, item in items:
        suite, _, name = nodeid.partition("::")
        if nodeid in state.reported or not name or not suite.lower().endswith(".yaml"):
            continue
        if nodeid not in known:
            if isinstance(item, CaseItem):
                outcome = suite_outcome(nodeid, item.suite, item.spec)
            else:  # the xdist controller knows only the node id
                agent = next((o.agent_name for o in state.outcomes if o.suite_path == suite and o.agent_name),
                             Path(suite).stem)
                outcome = new_outcome(nodeid, suite, 0, agent, name, runs=0, success_threshold=100)
            outcome.interrupted = reason
            state.outcomes.append(outcome)
            known.add(nodeid)
        state.reported.add(nodeid)
        path, line = location[0], location[1] or 0
        for when, result, longrepr in (("setup", "skipped", (path, line + 1, f"Skipped: {reason}")),
                                       ("teardown", "passed", None)):
            report = pytest.TestReport(nodeid, (path, line, location[2]), {"connic": 1}, result,  # type: ignore[arg-type]
                                       longrepr, when)  # type: ignore[arg-type]
            config.hook.pytest_runtest_logreport(report=report)
