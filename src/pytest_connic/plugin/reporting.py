"""Connic's reports at the end of a session: the report files, the coverage report, the
terminal summary, the exit code; and the ``-v`` per-run progress lines as runs finish. The
hooks that call these are ``plugin/lifecycle.py``'s."""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import TYPE_CHECKING

import pytest

from pytest_connic.plugin.session import state as state_of
from pytest_connic.plugin.verdicts import ERROR_ATTR, is_case_id, is_error_report, report_verdict
from pytest_connic.plugin.xdist import ends_runs, is_worker, placeholder_outcome

if TYPE_CHECKING:
    from pytest_connic.plugin.session import ConnicSession
    from pytest_connic.records.outcome import CaseOutcome
    from pytest_connic.records.run import RunRecord


class RunProgressLines:
    """``-v``: one line per finished run of a case with several runs, as it finishes; the case's
    lines are ended before pytest writes its result word."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._open: set[str] = set()

    def run_finished(self, outcome: CaseOutcome, record: RunRecord) -> None:
        if outcome.runs < 2:
            return
        from pytest_connic.reports.terminal import run_progress_line

        with self._terminal() as reporter:
            if reporter is None:
                return
            self._open.add(outcome.nodeid)
            reporter.write("\n" + run_progress_line(outcome, record, state_of(self.config).masker), flush=True)

    def case_reported(self, report: pytest.TestReport) -> None:
        """The report that ends a case's runs ends its open line."""
        if ends_runs(report) and report.nodeid in self._open:
            self._open.discard(report.nodeid)
            with self._terminal() as reporter:
                if reporter is not None:
                    reporter.write("\n")

    @contextlib.contextmanager
    def _terminal(self) -> Generator[pytest.TerminalReporter | None, None, None]:
        """The terminal reporter with output capturing suspended (as pytest's live logging does)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
            yield reporter


def mark_error(report: pytest.TestReport, call: pytest.CallInfo[None]) -> None:
    """A case's call report says when it is an error (``CaseErrored``), for every process."""
    from pytest_connic.plugin.items import CaseErrored

    if call.excinfo is not None and isinstance(call.excinfo.value, CaseErrored):
        setattr(report, ERROR_ATTR, True)


def teststatus(report: pytest.TestReport) -> tuple[str, str, str] | None:
    """A case whose runs could not happen (an infrastructure error, user code's
    ``BaseException``) or whose xdist worker crashed is an *error*, in pytest's counts as in
    JUnit and Connic's reports, though it failed in the call phase."""
    if is_error_report(report):
        return "error", "E", "ERROR"
    return None


def into_ledger(state: ConnicSession, report: pytest.TestReport) -> None:
    """pytest's outcome of a case (after every plugin's say) becomes its outcome's
    ``pytest_outcome``, the one truth of every report; the ledger remembers which cases have
    reports (an interrupted session reports the others) and which are under way."""
    if not is_case_id(report.nodeid):
        return
    ledger = state.ledger
    if report.when != "setup" or not report.passed:  # a passed setup is no result yet
        ledger.mark_reported(report.nodeid)
    if report.when == "setup":
        ledger.new_attempt(report.nodeid)
        if report.passed:  # its runs are under way (on this xdist worker node)
            ledger.mark_started(report.nodeid, getattr(report, "node", None))
    verdict = report_verdict(report)
    if verdict is not None:
        ledger.set_verdict(report.nodeid, *verdict)


def really_interrupted(session: pytest.Session, state: ConnicSession, interrupted: bool) -> bool:
    """Whether the cases that never finished are reported as interrupted: the session's stop
    signal (SIGINT, SIGTERM), or an interruption (``interrupted``: ``pytest_keyboard_interrupt``
    with more than pytest stopping on its own). The xdist controller stops with xdist's
    ``Interrupted`` (a ``KeyboardInterrupt``) also after ``-x``/``--maxfail`` or ``--sw``;
    pytest's session then says why (``shouldfail``, ``shouldstop``) and, as for Python tests, the
    cases that never ran are reported nowhere."""
    if state.stop.is_set():
        return True
    return interrupted and not (session.shouldfail or session.shouldstop)


def finish_session(config: pytest.Config, session: pytest.Session, interrupted: bool) -> None:
    """On the controller (or the only process): interrupted cases into the reports, the report
    files written, the coverage report, and the session's exit code."""
    from pytest_connic.plugin.outputs import write_outputs

    state = state_of(config)
    session.exitstatus = collection_exit_code(
        session.exitstatus, interrupted=interrupted or state.stop.is_set() or bool(session.shouldstop),
        collection_errors=session.testsfailed, suite_errors=state.ledger.suite_collection_errors)
    if really_interrupted(session, state, interrupted):
        items: list[tuple[str, tuple[str, int | None, str], pytest.Item | None]] = [
            (i.nodeid, i.location, i) for i in session.items]
        items += [(nodeid, location, None) for nodeid, location in state.ledger.collected.items()]
        mark_unfinished(config, state, items)
    write_outputs(state, session)
    settings = state.settings
    if settings.coverage or settings.coverage_json or settings.coverage_fail_under is not None:
        from pytest_connic.plugin.coverage_mode import finish_coverage

        code = finish_coverage(state, session)
        if code is not None:
            session.exitstatus = code
            return
    session.exitstatus = state.ledger.exit_code(session.exitstatus)


def summary(config: pytest.Config, terminalreporter: pytest.TerminalReporter) -> None:
    """The coverage report; then Connic's results table, failure details and ``N/M cases passed.``"""
    from pytest_connic.plugin.coverage_mode import coverage_summary
    from pytest_connic.plugin.outputs import terminal_summary

    state = state_of(config)
    coverage_summary(state, terminalreporter)
    terminal_summary(state, terminalreporter)
    message = state.reports.coverage_gate_message
    if message and message.startswith("FAIL") and not is_worker(config):
        gate_in_last_line(terminalreporter)


#: the key of pytest's last line that says the coverage gate failed the session
COVERAGE_GATE_FAILED = "coverage gate failed"


class _GateFailure:
    """What ``terminalreporter.stats`` counts for the failed coverage gate."""

    count_towards_summary = True


def gate_in_last_line(reporter: pytest.TerminalReporter) -> None:
    """A coverage gate that fails the session is in pytest's last line (``4 passed, 1 coverage gate
    failed``), in red: the last line never reads like a green run."""
    from pytest_connic.plugin.pytest_private import red_last_line

    reporter.stats.setdefault(COVERAGE_GATE_FAILED, []).append(_GateFailure())
    red_last_line(reporter)




def is_suite_file(config: pytest.Config, nodeid: str) -> bool:
    """Whether ``nodeid`` names a Connic suite file (a collector's report, not a case's)."""
    from pathlib import Path

    from pytest_connic.project.layout import suite_root

    if not nodeid or "::" in nodeid:
        return False
    try:
        return suite_root(Path(config.rootpath) / nodeid) is not None
    except OSError:
        return False


def collection_exit_code(status: int | pytest.ExitCode, *, interrupted: bool, collection_errors: int,
                         suite_errors: int) -> int | pytest.ExitCode:
    """The session's exit code after collection errors. pytest stops a session whose collection
    failed before any test runs and exits 2 ("Interrupted: N errors during collection"); when
    every one of those errors is a Connic suite (an unknown agent, a project that fails to load,
    a suite that does not validate), the session exits 1, as ``connic test`` does for a suite it
    cannot run: Connic keeps 2 for infrastructure (a provider down, a worker that cannot start).
    A real interruption (``interrupted``), or a collection error of another file (a Python test
    module), keeps pytest's code."""
    if status == pytest.ExitCode.INTERRUPTED and not interrupted and 0 < collection_errors == suite_errors:
        return pytest.ExitCode.TESTS_FAILED
    return status


def junit_as_error(config: pytest.Config, report: pytest.TestReport) -> None:
    """pytest's JUnit XML files every failed call as a ``<failure>``: a case that pytest counts as
    an error (``is_error_report``) gets an ``<error>``, as its setup's failure would."""
    from pytest_connic.plugin.pytest_private import junit_as_error as failure_as_error

    failure_as_error(config, report)


def mark_unfinished(config: pytest.Config, state: ConnicSession,
                    items: list[tuple[str, tuple[str, int | None, str], pytest.Item | None]]) -> None:
    """The session was interrupted: every case without reports gets an interrupted outcome and a
    skipped report (so it is in the terminal, JUnit, JSON, HTML and traces). ``items``:
    ``(nodeid, location, item or None)``; only Connic cases (``tests/*.yaml::name``) count."""
    from pytest_connic.execution.outcomes import suite_outcome
    from pytest_connic.plugin.items import CaseItem, case_name

    reason = state.interrupts.reason
    known = {o.nodeid for o in state.ledger.outcomes}
    for nodeid, location, item in items:
        if nodeid in state.ledger.reported or not is_case_id(nodeid):
            continue
        if nodeid not in known:
            if isinstance(item, CaseItem):
                outcome = suite_outcome(nodeid, item.suite, item.spec)
            else:  # the xdist controller knows only the node id
                outcome = placeholder_outcome(state, nodeid, case_name(nodeid.partition("::")[2]))
            outcome.interrupted = reason
            state.ledger.add_outcome(outcome)
            known.add(nodeid)
        state.ledger.mark_reported(nodeid)
        known_outcome = state.ledger.outcome_of(nodeid)
        path = location[0]
        # the case's own line (1-based in an outcome, 0-based in a location): the xdist controller's
        # locations have none, its outcomes have the suite's (``placeholder_outcome``)
        line = known_outcome.line - 1 if known_outcome is not None and known_outcome.line else location[1] or 0
        # a case whose setup was reported is skipped in its call, from the same (xdist) node, so
        # JUnit closes the testcase its setup opened
        started = nodeid in state.ledger.started
        for when, result, longrepr in (("call" if started else "setup", "skipped", (path, line + 1, f"Skipped: {reason}")),
                                       ("teardown", "passed", None)):
            report = pytest.TestReport(nodeid, (path, line, location[2]), {"connic": 1}, result,  # type: ignore[arg-type]
                                       longrepr, when)  # type: ignore[arg-type]
            if started and state.ledger.started[nodeid] is not None:
                report.node = state.ledger.started[nodeid]  # type: ignore[attr-defined]
            config.hook.pytest_runtest_logreport(report=report)
