"""``--connic-filter TEXT``: only the cases whose name contains TEXT, as ``connic test --filter``
(docs/running.md "Selecting cases").

Connic's CLI sends one value as the test run's ``test_filter``, and "runs only tests whose name
contains" it: a case-sensitive substring of the case's ``name`` (not its suite file, not its
agent), one value (given twice, the last wins, as with Connic's ``click`` option), an empty one
selecting everything. The other cases are deselected through ``pytest_deselected``, in every
process that collects (each xdist worker too), so pytest's counts say so; other tests of the
session (Python tests using the ``connic`` fixture) are not cases and are left alone.

When the filter leaves nothing to run, the session exits 0 with a notice instead of pytest's 5
("no tests ran"), the spec's proposal for ``connic test --filter`` matching nothing (a run with
no cases passes).
"""

from __future__ import annotations

import pytest

from pytest_connic.plugin.items import CaseItem
from pytest_connic.plugin.xdist import is_worker


def selected(name: str, text: str) -> bool:
    """Whether ``connic test --filter text`` runs the case called ``name``."""
    return text in name


class ConnicFilter:
    """Deselects the cases ``--connic-filter`` leaves out; says so when nothing is left."""

    def __init__(self, config: pytest.Config, text: str) -> None:
        self.config = config
        self.text = text
        self.nothing_ran = False

    @pytest.hookimpl(tryfirst=True)  # before the timeouts and the A/B comparison see the cases
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        keep = [i for i in items if not isinstance(i, CaseItem) or selected(i.spec.name, self.text)]
        if len(keep) == len(items):
            return
        kept = {id(i) for i in keep}
        self.config.hook.pytest_deselected(items=[i for i in items if id(i) not in kept])
        items[:] = keep

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Nothing ran (each process collected no test, or the filter left none): a notice, exit 0."""
        if is_worker(self.config):
            return
        if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and session.testscollected == 0:
            self.nothing_ran = True
            session.exitstatus = pytest.ExitCode.OK

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.nothing_ran:
            terminalreporter.write_line(
                f"--connic-filter {self.text!r}: no case's name contains it, nothing ran "
                "(as `connic test --filter` matching nothing, the session passes)", yellow=True)
