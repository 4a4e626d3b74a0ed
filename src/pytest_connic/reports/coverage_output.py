"""``--connic-coverage``, ``--connic-coverage-json`` and ``--connic-coverage-fail-under``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..records import CaseOutcome, RunRecord
    from ..state import ConnicSession


def project_roots(state: ConnicSession) -> list[Path]:
    """The Connic projects of this session: the ones whose suites were collected, else the
    projects the command-line paths (or the invocation directory) lie in."""
    from ..discovery import find_project_root

    roots = set(state.coverage_roots)
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


def called_tools(outcomes: list[CaseOutcome]) -> dict[str, list[str]]:
    """Tools actually called during the run, per agent, by canonical ref."""
    called: dict[str, set[str]] = {}
    for outcome in outcomes:
        _called(outcome.records, called)
    return {agent: sorted(refs) for agent, refs in called.items()}


def build_report(state: ConnicSession, root: Path) -> dict[str, Any]:
    from ..coverage import add_runtime_coverage, asserted_from_suites, compute_coverage

    report = compute_coverage(root)
    asserted, asserted_params = asserted_from_suites(root)
    return add_runtime_coverage(report, called_tools(state.outcomes), asserted, asserted_params)


def finish_coverage(state: ConnicSession, session: pytest.Session) -> int | None:
    """Compute, print (later, in the summary) and write the coverage report; the exit code
    coverage mode imposes, or None to keep pytest's."""
    from ..coverage import coverage_exit_status, render_coverage, render_runtime_coverage
    from ..session_hooks import output_path

    settings = state.settings
    roots = project_roots(state)
    reports = {root: build_report(state, root) for root in roots}
    texts = []
    for root, report in reports.items():
        header = f"Connic coverage: {root}" if len(reports) > 1 else "Connic coverage"
        texts.append((header, render_coverage(report), render_runtime_coverage(report) if state.outcomes else ""))
    state.coverage_texts = texts
    if settings.coverage_json:
        path = output_path(state.config, settings.coverage_json)
        path.parent.mkdir(parents=True, exist_ok=True)
        if len(reports) == 1:
            data: Any = next(iter(reports.values()))
        else:
            data = {"projects": {str(root): report for root, report in reports.items()}}
        path.write_text(json.dumps(data, indent=2) + "\n", "utf-8")
    code = max([coverage_exit_status(r) for r in reports.values()], default=0)
    if not reports:
        state.coverage_texts = [("Connic coverage", "No Connic project (a folder with agents/) found.", "")]
        code = 1
    gate = settings.coverage_fail_under
    if gate is not None:
        low = [r for r in reports.values() if float(r.get("overall") or 0.0) < gate]
        if low:
            state.coverage_gate_message = (
                f"FAIL Required coverage of {gate:g}% not reached: overall "
                + ", ".join(f"{float(r.get('overall') or 0):.1f}%" for r in low)
            )
            code = max(code, 1)
    if settings.coverage:
        return code
    return code if code and session.exitstatus == 0 else None


def coverage_summary(state: ConnicSession, reporter: Any) -> None:
    """Print the coverage report(s) in the terminal summary."""
    for header, table, extra in getattr(state, "coverage_texts", []):
        reporter.write_sep("=", header.lower())
        for line in table.splitlines():
            reporter.write_line(line)
        for line in extra.splitlines():
            reporter.write_line(line)
    message = getattr(state, "coverage_gate_message", None)
    if message:
        reporter.write_line(message, red=True)
