"""``--connic-merge`` (and ``python -m pytest_connic merge``): a session that runs nothing and
reports the shards' cases, so every report is written by the code a single run uses: the JSON
and HTML reports, pytest's JUnit XML (``--junitxml``), the terminal summary, the runtime coverage
report and the exit code (docs/ci.md "Merging shards")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_connic.plugin.session import state as state_of

if TYPE_CHECKING:
    from pytest_connic.plugin.pytest_private import TerminalWriter
    from pytest_connic.records.outcome import CaseOutcome


def _is_invalid_case(suite_path: str, error: str) -> bool:
    """Whether a case's setup error is an invalid case (located ``suite:line:column:``), the one
    error of the setup phase; every other one happened in the call phase, where the runs are."""
    return re.match(rf"{re.escape(suite_path)}:\d+:\d+: ", error) is not None


class _SetupFailure:
    """The ``longrepr`` of a case that failed in setup, as ``pytest.fail(text, pytrace=False)``
    leaves it: the text, and ``Failed: <text>`` as the crash message (JUnit, short summary)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.reprcrash = _Crash(f"Failed: {text}")

    def __str__(self) -> str:
        return self.text

    def toterminal(self, out: TerminalWriter) -> None:
        out.line(self.text)


class _Crash:
    def __init__(self, message: str) -> None:
        self.message = message


class ConnicMerge:
    """Collects nothing; the run loop reports each shard's case as its shard did."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        if getattr(config.option, "numprocesses", None):
            raise pytest.UsageError("--connic-merge runs no case, so it takes no workers: run it with -n 0")

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Read and check every shard before the session starts: a shard that cannot be merged is
        a usage error (exit code 4), and since pytest then never finishes the session, no report
        (JSON, HTML, JUnit) is written and any earlier one is left as it was."""
        from pytest_connic.reports.merge import MergeError, load_shards, shard_files

        state = state_of(self.config)
        try:
            self.shards = load_shards(shard_files(state.settings.merge, Path(self.config.invocation_params.dir)))
        except MergeError as exc:
            raise pytest.UsageError(f"{exc}; nothing was merged and no report written") from None
        self.foreign = [f"{shard}: {count} case(s) whose suite file is not in this checkout ({self.config.rootpath}), "
                        f"the first {first}" for shard, count, first in self.shards.foreign(Path(self.config.rootpath))]
        if self.foreign and state.settings.merge_foreign == "error":
            raise pytest.UsageError(f"{self.foreign[0]}: a shard of another project or checkout "
                                    f"({state.settings.source('merge_foreign')}=error); nothing was merged and no "
                                    "report written")

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> bool:
        shards = self.shards
        session.items = []
        session.testscollected = len(shards.outcomes)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            from pytest_connic.plugin.terminal_fit import write_lines

            write_lines(reporter, [(f"connic: merging {len(shards.outcomes)} cases of {len(shards.files)} shard "
                                   "report(s); no case runs")])
            write_lines(reporter, [f"connic: {note}" for note in shards.notes], yellow=True)
        self._warn_foreign(reporter)
        return True

    def _warn_foreign(self, reporter: pytest.TerminalReporter | None) -> None:
        """One ``ConnicMergeWarning`` per shard with cases of suites this checkout does not have
        (pytest's warning capture is active in ``pytest_collection``, so its summary shows it)."""
        import warnings

        from pytest_connic.warnings import ConnicMergeWarning

        for line in self.foreign:
            try:
                warnings.warn(ConnicMergeWarning(f"{line}; merged as this project's cases "
                                                 "(--connic-merge-foreign=error refuses such a shard)"), stacklevel=1)
            except ConnicMergeWarning as exc:  # -W error: said as a line; =error is the way to refuse
                if reporter is not None:
                    from pytest_connic.plugin.terminal_fit import write_lines

                    write_lines(reporter, [f"connic: {exc}"], yellow=True)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        from pytest_connic.project.layout import suite_root
        from pytest_connic.reports.stats import sorted_outcomes

        state = state_of(self.config)
        for outcome in sorted_outcomes(self.shards.outcomes):
            state.ledger.add_outcome(outcome, reported=True)  # the shard's pytest outcome comes with it
            root = suite_root(Path(self.config.rootpath) / outcome.nodeid.partition("::")[0])
            if root is not None:
                state.reports.add_coverage_root(root)
            self._report(outcome)
        return True

    def _report(self, outcome: CaseOutcome) -> None:
        """The reports of one case, as its shard's pytest made them."""
        from pytest_connic.plugin.longrepr import case_longrepr
        from pytest_connic.plugin.verdicts import ERROR_ATTR
        from pytest_connic.reports.failure import failure_text
        from pytest_connic.reports.junit import junit_properties
        from pytest_connic.reports.terminal import escape_text

        state = state_of(self.config)
        hook = self.config.hook
        nodeid = outcome.nodeid
        path = nodeid.partition("::")[0]
        location = (path, outcome.line - 1, f"{outcome.agent_name}::{escape_text(outcome.case_name)}")
        properties = junit_properties(outcome) if state.settings.junit_properties else []
        duration = sum(r.duration_ms for r in outcome.records) / 1000
        phases: list[tuple[str, str, Any, float]]
        error = outcome.setup_error
        errored = False
        if outcome.interrupted is not None:
            phases = [("setup", "skipped", (path, outcome.line, f"Skipped: {outcome.interrupted}"), 0.0)]
        elif error is not None and _is_invalid_case(outcome.suite_path, error):
            phases = [("setup", "failed", _SetupFailure(error), 0.0)]  # an invalid case fails in setup
        elif outcome.left_out is not None:
            phases = [("setup", "passed", None, 0.0),
                      ("call", "skipped", (path, outcome.line, f"Skipped: {outcome.left_out}"), duration)]
        else:
            # the runs happen in the call phase; an error there (infrastructure, user code's
            # BaseException, a crashed worker) is counted as an error, as in the shard's run
            errored = outcome.pytest_outcome == "error" or outcome.infrastructure_error is not None
            failed = errored or not outcome.passed
            longrepr = None
            if failed:
                longrepr = case_longrepr(failure_text(outcome, state.masker), outcome, state.masker,
                                         style=self.config.getoption("tbstyle", "auto"))
            phases = [("setup", "passed", None, 0.0), ("call", "failed" if failed else "passed", longrepr, duration)]
        phases.append(("teardown", "passed", None, 0.0))
        hook.pytest_runtest_logstart(nodeid=nodeid, location=location)
        for when, result, longrepr, seconds in phases:
            report = pytest.TestReport(nodeid, location, {"connic": 1}, result, longrepr, when,  # type: ignore[arg-type]
                                       duration=seconds, user_properties=properties)
            if errored and when == "call":
                setattr(report, ERROR_ATTR, True)
            hook.pytest_runtest_logreport(report=report)
        hook.pytest_runtest_logfinish(nodeid=nodeid, location=location)
