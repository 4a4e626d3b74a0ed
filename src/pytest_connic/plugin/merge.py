"""``--connic-merge`` (and ``python -m pytest_connic merge``): a session that runs nothing and
reports the shards' cases, so every report is written by the code a single run uses: the JSON
and HTML reports, pytest's JUnit XML (``--junitxml``), the terminal summary, the runtime coverage
report and the exit code (docs/ci.md "Merging shards")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_connic.plugin.session import state as state_of

#: the phase in which a single run reports a case's ``setup_error``: these come from the call phase
_CALL_PHASE_SETUP_ERRORS = ("the Connic project failed to load", "internal error in pytest-connic")


class _SetupFailure:
    """The ``longrepr`` of a case that failed in setup, as ``pytest.fail(text, pytrace=False)``
    leaves it: the text, and ``Failed: <text>`` as the crash message (JUnit, short summary)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.reprcrash = _Crash(f"Failed: {text}")

    def __str__(self) -> str:
        return self.text

    def toterminal(self, out: Any) -> None:
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
    def pytest_collection(self, session: pytest.Session) -> bool:
        from pytest_connic.reports.merge import MergeError, load_shards, shard_files

        state = state_of(self.config)
        try:
            shards = load_shards(shard_files(state.settings.merge, Path(self.config.invocation_params.dir)))
        except MergeError as exc:
            raise pytest.UsageError(str(exc)) from None
        self.shards = shards
        session.items = []
        session.testscollected = len(shards.outcomes)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"connic: merging {len(shards.outcomes)} cases of {len(shards.files)} shard "
                                "report(s); no case runs")
            for note in shards.notes:
                reporter.write_line(f"connic: {note}", yellow=True)
        return True

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        from pytest_connic.project.layout import suite_root
        from pytest_connic.reports.stats import sorted_outcomes

        state = state_of(self.config)
        for outcome in sorted_outcomes(self.shards.outcomes):
            state.add_outcome(outcome, reported=True)  # the shard's pytest outcome comes with it
            root = suite_root(Path(self.config.rootpath) / outcome.nodeid.partition("::")[0])
            if root is not None:
                state.coverage_roots.add(root)
            self._report(outcome)
        return True

    def _report(self, outcome: Any) -> None:
        """The reports of one case, as its shard's pytest made them."""
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
        if outcome.interrupted is not None:
            phases = [("setup", "skipped", (path, outcome.line, f"Skipped: {outcome.interrupted}"), 0.0)]
        elif outcome.infrastructure_error is not None:
            phases = [("setup", "failed", _SetupFailure(failure_text(outcome, state.masker)), duration)]
        elif error is not None and not error.startswith(_CALL_PHASE_SETUP_ERRORS):
            phases = [("setup", "failed", _SetupFailure(error), 0.0)]
        else:
            text = None if outcome.passed else failure_text(outcome, state.masker)
            phases = [("setup", "passed", None, duration), ("call", "passed" if text is None else "failed", text, 0.0)]
        phases.append(("teardown", "passed", None, 0.0))
        hook.pytest_runtest_logstart(nodeid=nodeid, location=location)
        for when, result, longrepr, seconds in phases:
            report = pytest.TestReport(nodeid, location, {"connic": 1}, result, longrepr, when,  # type: ignore[arg-type]
                                       duration=seconds, user_properties=properties)
            hook.pytest_runtest_logreport(report=report)
        hook.pytest_runtest_logfinish(nodeid=nodeid, location=location)
