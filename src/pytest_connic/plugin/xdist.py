"""pytest-xdist: what a worker sends with its reports and at its end, and how the controller
merges it (outcomes, infrastructure errors, the projects for coverage, crashed cases).

Outcomes travel masked (the controller never loads ``--connic-env``) and as plain JSON, so the
controller's reports equal a single process's. This module stays light: the controller's
plugin is registered in every distributed session, Connic project or not.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pytest

from pytest_connic.plugin.verdicts import is_case_id, report_verdict

if TYPE_CHECKING:
    from pytest_connic.plugin.session import ConnicSession
    from pytest_connic.records.outcome import CaseOutcome

WORKER_KEY = "connic_outcomes"
ROOTS_KEY = "connic_roots"
#: the per-run lines of a case, carried from an xdist worker by the report that ends its runs
RUNS_ATTR = "connic_runs"
#: a case's outcome (masked JSON), carried the same way: a worker that crashes later loses nothing
OUTCOME_ATTR = "connic_outcome"


def is_worker(config: pytest.Config) -> bool:
    """Whether this process is an xdist worker."""
    return hasattr(config, "workerinput")


#: the verbosity of test cases (pytest 8.1 and later); pytest 8.0 has only the overall one
TEST_CASE_VERBOSITY: str | None = getattr(pytest.Config, "VERBOSITY_TEST_CASES", None)


def verbose(config: pytest.Config) -> bool:
    """``-v``: the per-run progress lines of a case with several runs are shown."""
    kind = TEST_CASE_VERBOSITY
    return (config.get_verbosity(kind) if kind is not None else config.get_verbosity()) >= 1


def ends_runs(report: pytest.TestReport) -> bool:
    """Whether ``report`` closes the phases in which a case's runs happened: ``call`` runs and
    judges them (an invalid case fails in ``setup``, before any run)."""
    return report.when == "call" or (report.when == "setup" and report.failed)


class ConnicWorker:
    """On a worker: a case's outcome goes with the report that ends its runs, the rest at the end."""

    def __init__(self, config: pytest.Config, state: ConnicSession) -> None:
        self.config = config
        self.state = state
        #: cases whose outcome already travelled with their report
        self.sent: set[str] = set()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[
            None, pytest.TestReport, pytest.TestReport]:
        report = yield
        outcome = getattr(item, "outcome", None) if is_case(item) else None
        if ends_runs(report) and outcome is not None:
            from pytest_connic.jsonsafe import masked
            from pytest_connic.reports.terminal import run_progress_line

            masker = self.state.masker
            setattr(report, OUTCOME_ATTR, json.dumps(masked(outcome.to_dict(), masker)))
            self.sent.add(outcome.nodeid)
            if outcome.runs > 1:
                setattr(report, RUNS_ATTR, [run_progress_line(outcome, r, masker) for r in outcome.executed])
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        """The outcomes that did not go with their case's report (``sent``) are not sent twice."""
        from pytest_connic.jsonsafe import masked

        state = self.state
        output = self.config.workeroutput  # type: ignore[attr-defined]
        rest = [o for o in state.ledger.outcomes if o.nodeid not in self.sent]
        output[WORKER_KEY] = json.dumps([masked(o.to_dict(), state.masker) for o in rest])
        output[ROOTS_KEY] = sorted(str(p) for p in state.reports.coverage_roots)


class WorkerNode(Protocol):
    """An xdist worker as the controller's hooks see it (xdist's ``WorkerController``; xdist ships
    no types)."""

    workerinput: dict[str, object]


def placeholder_outcome(state: ConnicSession, nodeid: str, case_name: str, **fields: str | None) -> CaseOutcome:
    """The outcome of a case the controller knows only by its node id (its worker crashed, or the
    session stopped before it reported): its line is read from its suite (:func:`suite_line`), its
    agent is a sibling case's, else the file name's (Connic's default)."""
    from pytest_connic.execution.outcomes import new_outcome

    suite = nodeid.partition("::")[0]
    agent = next((o.agent_name for o in state.ledger.outcomes if o.suite_path == suite and o.agent_name),
                 Path(suite).stem)
    line = suite_line(Path(state.config.rootpath), nodeid)
    return new_outcome(nodeid, suite, line, agent, case_name, runs=0, success_threshold=100, **fields)


def suite_line(rootpath: Path, nodeid: str) -> int:
    """The line of the case ``nodeid`` in its suite file, read from the file (the controller
    collects nothing); 0 when the file no longer holds it."""
    from pytest_connic.errors import ConnicError
    from pytest_connic.plugin.items import case_name
    from pytest_connic.suite.loader import case_lines

    path, _, name = nodeid.partition("::")
    try:
        lines = case_lines(rootpath / path)
    except (ConnicError, OSError, UnicodeDecodeError):
        return 0
    # an item name may end in its xdist group (``name@group``, plugin/items.py)
    return lines.get(case_name(name)) or lines.get(case_name(name.rpartition("@")[0])) or 0


def worker_id(node: object) -> str | None:
    """The id of an xdist worker node on the controller (``gw0``), None when unknown."""
    gateway = getattr(node, "gateway", None)
    if gateway is not None and isinstance(getattr(gateway, "id", None), str):
        return str(gateway.id)
    workerid = (getattr(node, "workerinput", None) or {}).get("workerid")
    return workerid if isinstance(workerid, str) else None


def each_row(nodeid: str, worker: str | None) -> str:
    """Under ``--dist each`` every worker runs every case: a case's row on the controller is one per
    worker, named with the worker as pytest-xdist names its result lines (``tests/a.yaml::one [gw1]``)."""
    return f"{nodeid} [{worker}]" if worker else nodeid


def is_case(item: pytest.Item) -> bool:
    from pytest_connic.plugin.items import CaseItem

    return isinstance(item, CaseItem)


class ConnicXdist:
    """On the controller: merges workers' outcomes into the session state, which ``activate``
    creates when the first of them arrives."""

    def __init__(self, config: pytest.Config, activate: Callable[[pytest.Config], ConnicSession]) -> None:
        self.config = config
        self.activate = activate
        #: cases whose outcome came with their report (a worker's final output repeats them)
        self.received: set[str] = set()
        #: ``--dist each``: a case's outcome from each worker is a row of its own (:func:`each_row`)
        self.each = config.getoption("dist", None) == "each"
        #: the keyed warnings shown already, by (class name, key)
        self.warned: set[tuple[str, str]] = set()

    @pytest.hookimpl(trylast=True)
    def pytest_warning_recorded(self, warning_message: warnings.WarningMessage, nodeid: str) -> None:
        """A warning shown once per session for its key (``ConnicWarning(message, key)``): each
        worker shows it once, so the controller keeps the first worker's and takes the others back
        out of the terminal's warnings (recorded there just before this hook, which runs last;
        ``pytest_warning_recorded`` is historic, so no wrapper)."""
        from pytest_connic.plugin.pytest_private import drop_last_warning
        from pytest_connic.warnings import ConnicWarning

        message = warning_message.message
        if not isinstance(message, ConnicWarning) or message.key is None:
            return
        key = (type(message).__name__, message.key)
        if key not in self.warned:
            self.warned.add(key)
            return
        drop_last_warning(self.config, nodeid, (warning_message.filename, warning_message.lineno))

    def _row(self, outcome: CaseOutcome, node: object) -> CaseOutcome:
        """``outcome`` as the row of the worker ``node`` under ``--dist each`` (unchanged otherwise)."""
        worker = worker_id(node) if self.each else None
        if worker:
            outcome.nodeid = each_row(outcome.nodeid, worker)
            outcome.case_name = f"{outcome.case_name} [{worker}]"
        return outcome

    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        """The controller learns the cases from the workers' collections: a real SIGINT or SIGTERM
        (``plugin/interrupts.py``: here both become pytest's own interruption) then ends the session
        with every case in every report, those without a result interrupted."""
        cases = [i for i in ids if is_case_id(i)]
        if not cases:
            return
        state = self.activate(self.config)
        worker = worker_id(node) if self.each else None
        for nodeid in cases:
            suite, _, name = nodeid.partition("::")
            state.ledger.add_collected(each_row(nodeid, worker), (suite, 0, name))
        state.interrupts.install()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        from pytest_connic.plugin.session import SESSION_KEY

        state = self.config.stash.get(SESSION_KEY, None)
        if state is not None:
            state.interrupts.restore()

    def pytest_testnodedown(self, node: object, error: object) -> None:
        output = getattr(node, "workeroutput", None) or {}
        if not any(key in output for key in (WORKER_KEY, ROOTS_KEY)):
            return  # the worker saw no Connic case
        from pytest_connic.records.serialize import outcome_from_dict

        state = self.activate(self.config)
        raw = output.get(WORKER_KEY)
        if raw:
            worker = worker_id(node) if self.each else None
            for data in json.loads(raw):
                row = each_row(str(data.get("nodeid")), worker)
                if row not in self.received and state.ledger.outcome_of(row) is None:
                    state.ledger.add_outcome(self._row(outcome_from_dict(data), node))
        for root in output.get(ROOTS_KEY) or ():
            state.reports.add_coverage_root(Path(root))

    @pytest.hookimpl(tryfirst=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: object) -> None:
        """A worker died while running ``crashitem`` (``os._exit`` in a tool, a segfault): the case
        still appears in every report, failed with xdist's message."""
        node = getattr(report, "node", None)
        row = each_row(crashitem, worker_id(node) if self.each else None)
        if row in self.received or not is_case_id(crashitem):
            return
        self.received.add(row)
        state = self.activate(self.config)
        reason = f"{report.longrepr}; the case's runs and their records were lost with the worker"
        name = crashitem.partition("::")[2]
        state.ledger.add_outcome(self._row(placeholder_outcome(state, crashitem, name, setup_error=reason), node))

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A case's outcome arrives with the report that ends its runs (a rerun's next attempt
        replaces it, keeping it as history); and, with ``-v`` under
        xdist (a worker cannot write to this terminal while its runs execute), a case's per-run
        lines follow its result line."""
        raw = getattr(report, OUTCOME_ATTR, None)
        if isinstance(raw, str):
            from pytest_connic.records.serialize import outcome_from_dict

            outcome = self._row(outcome_from_dict(json.loads(raw)), getattr(report, "node", None))
            self.received.add(outcome.nodeid)
            state = self.activate(self.config)
            if outcome.nodeid != report.nodeid:  # --dist each: pytest's word of this worker's report
                verdict = report_verdict(report)
                if verdict is not None:
                    outcome.pytest_outcome, outcome.pytest_reason = verdict
                state.ledger.mark_reported(outcome.nodeid)
            state.ledger.add_outcome(outcome, reported=outcome.nodeid == report.nodeid)
        lines = getattr(report, RUNS_ATTR, None)
        if not ends_runs(report) or not lines or not verbose(self.config):
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            for line in lines:
                reporter.write_line(line)
