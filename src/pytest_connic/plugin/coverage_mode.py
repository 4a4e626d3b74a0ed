"""``--connic-coverage``, ``--connic-coverage-json`` and ``--connic-coverage-fail-under``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_connic.plugin.items import CaseItem
from pytest_connic.plugin.session import ConnicSession
from pytest_connic.plugin.session import state as state_of

if TYPE_CHECKING:
    from pytest_connic.records.outcome import CaseOutcome
    from pytest_connic.records.run import RunRecord


class ConnicCoverageMode:
    """``--connic-coverage``: no case runs (each is deselected, its project is reported), and
    the suite files that fail to collect are counted, since the report judges them."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        session_state = state_of(self.config)
        keep = [i for i in items if not isinstance(i, CaseItem)]
        dropped = [i for i in items if isinstance(i, CaseItem)]
        for item in dropped:
            session_state.reports.add_coverage_root(item.project_root)
        if dropped:
            self.config.hook.pytest_deselected(items=dropped)
            items[:] = keep


def project_roots(state: ConnicSession) -> list[Path]:
    """The Connic projects of this session: the ones whose suites were collected, else the
    projects the command-line paths (or the invocation directory) lie in."""
    from pytest_connic.project.layout import find_project_root

    roots = set(state.reports.coverage_roots)
    if not roots:
        config = state.config
        args = [a.split("::")[0] for a in config.args] or [str(config.invocation_params.dir)]
        for arg in args:
            path = Path(arg)
            path = path if path.is_absolute() else Path(config.invocation_params.dir) / path
            root = find_project_root(path.resolve() if path.is_dir() else path.resolve().parent)
            if root is not None:
                roots.add(root)
    return sorted(roots)


def _called(records: list[RunRecord], into: dict[str, set[str]]) -> None:
    for record in records:
        for call in record.tool_calls:
            into.setdefault(call.agent or record.agent_name, set()).add(call.ref)
        _called([t.child_run for t in record.triggers if t.child_run], into)


def called_tools(outcomes: Sequence[CaseOutcome]) -> dict[str, list[str]]:
    """Tools actually called during the run, per agent, by canonical ref."""
    called: dict[str, set[str]] = {}
    for outcome in outcomes:
        _called(outcome.records, called)
    return {agent: sorted(refs) for agent, refs in called.items()}


def build_report(state: ConnicSession, root: Path) -> dict[str, object]:
    from pytest_connic.coverage import add_runtime_coverage, asserted_from_suites, compute_coverage

    report = compute_coverage(root, api=state.runtimes.api_registry(root))
    asserted, asserted_params = asserted_from_suites(root)
    return add_runtime_coverage(report, called_tools(state.ledger.outcomes), asserted, asserted_params)


def finish_coverage(state: ConnicSession, session: pytest.Session) -> int | None:
    """Compute and write the coverage report (it is printed in the terminal summary); return the
    exit code it imposes, or None to keep pytest's.

    With ``--connic-coverage`` the code is Connic's (1 when inputs cannot be parsed or the gate
    fails), raised to 1 when other (Python) tests of the session failed. Otherwise (a normal run
    with ``--connic-coverage-json`` or the gate) a failing report turns a passing session into 1.
    """
    from pytest_connic.coverage import (
        coverage_exit_status,
        render_coverage,
        render_runtime_coverage,
    )
    from pytest_connic.files import write_text_file
    from pytest_connic.plugin.outputs import write_report
    from pytest_connic.project import sdk  # noqa: F401 - the SDK's import warnings stay quiet (an xdist controller collects nothing)

    settings = state.settings
    reports = {root: build_report(state, root) for root in project_roots(state)}
    state.reports.set_coverage_texts([
        (f"Connic coverage: {root}" if len(reports) > 1 else "Connic coverage", render_coverage(report),
         render_runtime_coverage(report) if state.ledger.outcomes else "")
        for root, report in reports.items()
    ])
    if settings.coverage_json and reports:
        data: object = next(iter(reports.values())) if len(reports) == 1 else {
            "projects": {str(root): report for root, report in reports.items()}}
        write_report(state, "coverage report (--connic-coverage-json)", settings.coverage_json,
                     lambda path: write_text_file(path, json.dumps(data, indent=2) + "\n"))
    code = max([coverage_exit_status(r) for r in reports.values()], default=0)
    if not reports:
        state.reports.set_coverage_texts([("Connic coverage", "No Connic project (a folder with agents/) found.", "")])
        code = 1
    code = max(code, _gate(state, list(reports.values())))
    if settings.coverage:
        return _coverage_mode_exit(session, code, state.ledger.suite_collection_errors)
    return code if code and session.exitstatus == 0 else None


def _percent(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0


def _gate(state: ConnicSession, reports: list[dict[str, object]]) -> int:
    """``--connic-coverage-fail-under``: 1 and a message when a project's ``overall`` is below."""
    gate = state.settings.coverage_fail_under
    if gate is None or not reports:
        return 0
    overall = [_percent(r.get("overall")) for r in reports]
    shown = ", ".join(f"{value:.1f}%" for value in overall)
    if any(value < gate for value in overall):
        state.reports.set_coverage_gate(f"FAIL Required coverage of {gate:g}% not reached: overall {shown}")
        return 1
    state.reports.set_coverage_gate(f"Required coverage of {gate:g}% reached: overall {shown}")
    return 0


def _coverage_mode_exit(session: pytest.Session, code: int, suite_collection_errors: int) -> int:
    """The report decides; suites that fail to collect count only through it (Connic parses them
    with its own, laxer schema), but other tests' failures, an interruption and internal or
    usage errors keep pytest's code."""
    status = session.exitstatus
    if status in (pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
        return int(status)
    if status == pytest.ExitCode.INTERRUPTED and not suite_collection_errors:
        return int(status)
    others_failed = session.testsfailed - suite_collection_errors > 0
    return max(code, 1 if others_failed else 0)


def coverage_summary(state: ConnicSession, reporter: pytest.TerminalReporter) -> None:
    """Print the coverage report(s) in the terminal summary."""
    for header, table, extra in state.reports.coverage_texts:
        reporter.write_sep("=", header.lower())
        for line in table.splitlines():
            reporter.write_line(line)
        for line in extra.splitlines():
            reporter.write_line(line)
    message = state.reports.coverage_gate_message
    if message:
        failed = message.startswith("FAIL")
        reporter.write_line(message, red=failed, green=not failed)
