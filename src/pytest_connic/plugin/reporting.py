"""Session-level hooks: reports, xdist merging, exit codes, coverage mode, per-run progress.

Registered by ``plugin.pytest_configure``; xdist-only hooks live in a class
registered only on an xdist controller.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_connic.plugin.session import SESSION_KEY, ConnicSession

if TYPE_CHECKING:
    from pytest_connic.records.run import CaseOutcome, RunRecord

WORKER_KEY = "connic_outcomes"
INFRA_KEY = "connic_infra"
ROOTS_KEY = "connic_roots"
#: the per-run lines of a case, carried from an xdist worker by the report that ends its runs
RUNS_ATTR = "connic_runs"
#: a case's outcome (masked JSON), carried the same way: a worker that crashes later loses nothing
OUTCOME_ATTR = "connic_outcome"


def _state(config: pytest.Config) -> ConnicSession:
    return config.stash[SESSION_KEY]


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _verbose(config: pytest.Config) -> bool:
    return config.get_verbosity(pytest.Config.VERBOSITY_TEST_CASES) >= 1


class ConnicReporting:
    """Reports after the run, on the controller (or the only process)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.suite_collection_errors = 0
        #: (worker) cases whose outcome already travelled with their report
        self.sent: set[str] = set()
        self._progress_open: set[str] = set()
        if _verbose(config) and not _is_worker(config):
            _state(config).run_listeners.append(self._run_finished)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        state = _state(config)
        from pytest_connic.plugin.items import CaseItem

        if not state.settings.coverage:
            _set_timeouts(config, [i for i in items if isinstance(i, CaseItem)], state.settings.concurrency)
            return

        keep = [i for i in items if not isinstance(i, CaseItem)]
        dropped = [i for i in items if isinstance(i, CaseItem)]
        for item in dropped:
            state.coverage_roots.add(item.project_root)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """Count suite files that failed to collect: in coverage mode the report judges them."""
        if report.failed and _is_suite_file(self.config, report.nodeid):
            self.suite_collection_errors += 1

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[
            None, pytest.TestReport, pytest.TestReport]:
        report = yield
        from pytest_connic.plugin.items import CaseItem

        outcome = item.outcome if isinstance(item, CaseItem) else None
        if _ends_runs(report) and outcome is not None and _is_worker(self.config):
            from pytest_connic.jsonsafe import masked

            masker = _state(self.config).masker
            setattr(report, OUTCOME_ATTR, json.dumps(masked(outcome.to_dict(), masker)))
            self.sent.add(outcome.nodeid)
            if outcome.runs > 1:
                from pytest_connic.plugin.outputs import run_progress_line

                setattr(report, RUNS_ATTR, [run_progress_line(outcome, r, masker) for r in outcome.executed])
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """End the live per-run lines of a case before pytest writes its result word."""
        if _ends_runs(report) and report.nodeid in self._progress_open:
            self._progress_open.discard(report.nodeid)
            with self._terminal() as reporter:
                if reporter is not None:
                    reporter.write("\n")

    def _run_finished(self, outcome: CaseOutcome, record: RunRecord) -> None:
        """``-v``: one line per finished run of a case with several runs, as it finishes."""
        if outcome.runs < 2:
            return
        from pytest_connic.plugin.outputs import run_progress_line

        with self._terminal() as reporter:
            if reporter is None:
                return
            self._progress_open.add(outcome.nodeid)
            reporter.write("\n" + run_progress_line(outcome, record, _state(self.config).masker), flush=True)

    @contextlib.contextmanager
    def _terminal(self) -> Generator[Any, None, None]:
        """The terminal reporter with output capturing suspended (as pytest's live logging does)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
            yield reporter

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        state = _state(self.config)
        if _is_worker(self.config):
            _send_to_controller(self.config, state, self.sent)
            return
        from pytest_connic.plugin.outputs import write_outputs

        write_outputs(state)
        if state.settings.coverage or state.settings.coverage_json or state.settings.coverage_fail_under is not None:
            from pytest_connic.plugin.coverage_mode import finish_coverage

            code = finish_coverage(state, session, self.suite_collection_errors)
            if code is not None:
                session.exitstatus = code
                return
        if state.infrastructure_errors and session.exitstatus in (0, 1):
            session.exitstatus = 2

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        state = _state(config)
        from pytest_connic.plugin.outputs import terminal_summary

        terminal_summary(state, terminalreporter)


class ConnicXdist:
    """Merges workers' outcomes into the controller's session state."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        #: cases whose outcome came with their report (a worker's final output repeats them)
        self.received: set[str] = set()

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        from pytest_connic.records.serialize import outcome_from_dict

        state = _state(self.config)
        output = getattr(node, "workeroutput", None) or {}
        raw = output.get(WORKER_KEY)
        if raw:
            fresh = [d for d in json.loads(raw) if d.get("nodeid") not in self.received]
            state.outcomes.extend(outcome_from_dict(d) for d in fresh)
        state.infrastructure_errors += int(output.get(INFRA_KEY, 0) or 0)
        state.coverage_roots.update(Path(p) for p in output.get(ROOTS_KEY) or ())

    @pytest.hookimpl(tryfirst=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        """A worker died while running ``crashitem`` (``os._exit`` in a tool, a segfault): the case
        still appears in every report, failed with xdist's message."""
        from pytest_connic.records.run import CaseOutcome

        if crashitem in self.received or "::" not in crashitem:
            return
        suite, _, name = crashitem.partition("::")
        if not suite.lower().endswith(".yaml"):
            return
        self.received.add(crashitem)
        state = _state(self.config)
        # a suite targets one agent: a sibling case knows it, else the file name is Connic's default
        agent = next((o.agent_name for o in state.outcomes if o.suite_path == suite and o.agent_name),
                     Path(suite).stem)
        reason = f"{report.longrepr}; the case's runs and their records were lost with the worker"
        state.outcomes.append(CaseOutcome(nodeid=crashitem, suite_path=suite, line=0, agent_name=agent,
                                          case_name=name, runs=0, success_threshold=100, setup_error=reason))

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A case's outcome arrives with the report that ends its runs; and, with ``-v`` under
        xdist (a worker cannot write to this terminal while its runs execute), a case's per-run
        lines follow its result line."""
        raw = getattr(report, OUTCOME_ATTR, None)
        if isinstance(raw, str) and report.nodeid not in self.received:
            from pytest_connic.records.serialize import outcome_from_dict

            self.received.add(report.nodeid)
            _state(self.config).outcomes.append(outcome_from_dict(json.loads(raw)))
        lines = getattr(report, RUNS_ATTR, None)
        if not _ends_runs(report) or not lines or not _verbose(self.config):
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            for line in lines:
                reporter.write_line(line)


def _ends_runs(report: pytest.TestReport) -> bool:
    """Whether ``report`` closes the phases in which a case's runs happened: ``setup`` runs them
    (and fails on an infrastructure error), ``call`` judges them."""
    return report.when == "call" or (report.when == "setup" and report.failed)


def _send_to_controller(config: pytest.Config, state: ConnicSession, sent: set[str]) -> None:
    """Outcomes travel masked (the controller never loads ``--connic-env``) and as plain JSON,
    so the controller's reports equal a single process's. Those that went with their case's
    report (``sent``) are not sent twice."""
    from pytest_connic.jsonsafe import masked

    output = config.workeroutput  # type: ignore[attr-defined]
    rest = [o for o in state.outcomes if o.nodeid not in sent]
    output[WORKER_KEY] = json.dumps([masked(o.to_dict(), state.masker) for o in rest])
    output[INFRA_KEY] = state.infrastructure_errors
    output[ROOTS_KEY] = sorted(str(p) for p in state.coverage_roots)


def _is_suite_file(config: pytest.Config, nodeid: str) -> bool:
    from pytest_connic.project.layout import suite_root

    if not nodeid or "::" in nodeid:
        return False
    try:
        return suite_root(Path(config.rootpath) / nodeid) is not None
    except OSError:
        return False


def explicit_timeout(config: pytest.Config) -> bool:
    """Whether the user set pytest-timeout's timeout (``--timeout``, ``PYTEST_TIMEOUT`` or ini
    ``timeout``, ``0`` included: it means "no timeout")."""
    if config.getoption("timeout", None) is not None or os.environ.get("PYTEST_TIMEOUT", "").strip():
        return True
    try:
        return bool(str(config.getini("timeout") or "").strip())
    except ValueError:
        return False


def case_timeout(runs: int, timeout_s: float, concurrency: int) -> float:
    """Seconds a whole case may take: its runs in waves of ``concurrency``, each wave bounded by
    ``timeout_s``, plus 30 s for builders, cleanup and cassette I/O."""
    waves = -(-int(runs) // max(1, concurrency))
    return waves * float(timeout_s) + 30


def _set_timeouts(config: pytest.Config, items: list[Any], concurrency: int) -> None:
    """With pytest-timeout installed and no explicit timeout, give each case one derived from
    its runs, the concurrency and ``timeout_s``, so a hung tool cannot hang CI. A marker would
    beat ``--timeout`` in pytest-timeout, so none is added when the user chose a timeout."""
    if not items or not config.pluginmanager.hasplugin("timeout") or explicit_timeout(config):
        return
    marks: dict[float, Any] = {}  # one (immutable) marker per value, not one per case
    for item in items:
        if item.get_closest_marker("timeout") is not None or item.spec.resolved is None:
            continue
        resolved = item.spec.resolved
        seconds = case_timeout(resolved["runs"], resolved["timeout_s"], concurrency)
        if seconds not in marks:
            marks[seconds] = pytest.mark.timeout(seconds)
        item.add_marker(marks[seconds])


def register(config: pytest.Config) -> None:
    """Register the session plugins (xdist's only on an xdist controller)."""
    config.pluginmanager.register(ConnicReporting(config), "connic-reporting")
    if config.pluginmanager.hasplugin("xdist") and not _is_worker(config):
        config.pluginmanager.register(ConnicXdist(config), "connic-xdist")
    if _state(config).settings.ab:
        from pytest_connic.plugin.ab import register as register_ab

        register_ab(config, _state(config))


def output_path(config: pytest.Config, value: str) -> Path:
    """An output path relative to the invocation directory."""
    path = Path(value)
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path
