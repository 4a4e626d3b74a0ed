"""The always-on hooks of a session with Connic suites, in the order pytest calls them.

Registered once, at activation (``plugin/activation.py``: the first suite collected, the first
``connic`` fixture, or an option that needs the session). Each hook is a few lines that hand the
work to the session's jobs (``plugin/session.py``: the ledger of outcomes, the registry of
project runtimes, the report state) or to the module that does it (masking, reporting,
interrupts, timeouts). Optional features have plugin objects of their own, registered only when
they are on (activation.py lists them: the xdist worker and controller, ``--connic-filter``,
``--connic-coverage``, A/B, the progress line, the history, merge).

The order marks say where a hook must stand among pytest's own:

- ``pytest_make_collect_report`` and ``pytest_runtest_makereport`` wrap outermost
  (``tryfirst``): a report is masked after every other plugin has had its say;
- ``pytest_runtest_logreport`` wraps first: the JUnit XML's names are masked and the ledger
  knows pytest's verdict before any reporter records it, and JUnit files an errored case as an
  ``<error>`` after;
- ``pytest_warning_recorded`` runs first: the warning is masked before the terminal reporter and
  xdist read it;
- ``pytest_sessionfinish`` runs first: the reports are written and the exit code set before
  pytest's terminal reporter writes its summary;
- ``pytest_terminal_summary`` runs first among the plain implementations: Connic's table comes
  after pytest's failures and warnings, before its short summary.
"""

from __future__ import annotations

import warnings
from collections.abc import Generator

import pluggy
import pytest

from pytest_connic.plugin.masking import ReportMasking
from pytest_connic.plugin.reporting import (
    RunProgressLines,
    finish_session,
    into_ledger,
    is_suite_file,
    junit_as_error,
    mark_error,
    summary,
    teststatus,
)
from pytest_connic.plugin.session import ConnicSession
from pytest_connic.plugin.terminal_fit import ascii_symbols
from pytest_connic.plugin.verdicts import is_error_report
from pytest_connic.plugin.xdist import is_case, is_worker, verbose


class ConnicLifecycle:
    """The session's hooks; ``plugin/lifecycle.py``'s docstring says why each stands where it does."""

    def __init__(self, config: pytest.Config, state: ConnicSession) -> None:
        self.config = config
        self.state = state
        self.masking = ReportMasking(config)
        self.progress = RunProgressLines(config)
        #: the session was interrupted for real (``pytest_keyboard_interrupt``)
        self.interrupted = False
        if verbose(config) and not is_worker(config):
            state.add_run_listener(self.progress.run_finished)
        ascii_symbols(config)  # a cp1252 console: the plugin's symbols in ASCII, not escaped
        if not state.settings.coverage:  # in coverage mode no case runs
            from pytest_connic.plugin.timeouts import register_case_timers

            register_case_timers(config)

    # collection

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_make_collect_report(self, collector: pytest.Collector) -> Generator[
            None, pluggy.Result[pytest.CollectReport], None]:
        self.masking.collecting(collector)
        outcome = yield
        self.masking.mask_report(outcome.get_result())

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """Count the suite files that fail to collect (the exit code, the coverage report)."""
        if report.failed and is_suite_file(self.config, report.nodeid):
            self.state.ledger.suite_failed_to_collect()

    @pytest.hookimpl(trylast=True)  # after --connic-filter deselected what it leaves out
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Each case gets its timeout (pytest-timeout; none in coverage mode: no case runs)."""
        if self.state.settings.coverage:
            return
        from pytest_connic.plugin.items import CaseItem
        from pytest_connic.plugin.timeouts import set_timeouts

        set_timeouts(self.config, [i for i in items if isinstance(i, CaseItem)], self.state.settings.concurrency)

    # the run loop and each case

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        """The SIGINT/SIGTERM handlers of ``plugin/interrupts.py`` around a loop that holds cases;
        before the first case, what running one imports and waits for (``Runtimes.before_first_case``)."""
        if not any(is_case(item) for item in session.items):
            return (yield)
        interrupts = self.state.interrupts
        with interrupts.installed():
            self.state.runtimes.before_first_case(interrupts.stop.is_set)
            return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[
            None, pytest.TestReport, pytest.TestReport]:
        report = yield
        mark_error(report, call)
        self.masking.mask_case_report(report)
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport) -> object:
        return teststatus(report)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        self.masking.mask_junit_names(report)
        into_ledger(self.state, report)
        self.progress.case_reported(report)
        result = yield
        if is_error_report(report) and report.when == "call":
            junit_as_error(self.config, report)
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_warning_recorded(self, warning_message: warnings.WarningMessage) -> None:
        self.masking.mask_warning(warning_message)

    # the end of the session

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """A real interruption (Ctrl-C, ``pytest.exit``), not pytest stopping on its own
        (``session.Interrupted``: a collection error, ``-x``/``--sw`` stopping; see
        ``reporting.really_interrupted`` for xdist's): only then do the cases that never started
        appear in the reports, as interrupted."""
        if not isinstance(excinfo.value, pytest.Session.Interrupted):
            self.interrupted = True

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            self.masking.mask_warnings_summary(reporter.stats)
        if not is_worker(self.config):  # a worker's outcomes go to the controller (``xdist.ConnicWorker``)
            finish_session(self.config, session, self.interrupted)

    @pytest.hookimpl(tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        summary(self.config, terminalreporter)
