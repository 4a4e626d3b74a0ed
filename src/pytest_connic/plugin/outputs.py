"""Writing the report files and the terminal summary at the end of a session."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_connic.jsonsafe import JsonObject, to_jsonable
from pytest_connic.plugin.terminal_fit import console_encoding, table_width, write_lines

if TYPE_CHECKING:
    import types
    from collections.abc import Callable

    import pytest

    from pytest_connic.plugin.session import ConnicSession
    from pytest_connic.records.outcome import CaseOutcome
    from pytest_connic.secrets import Masker


def output_path(config: pytest.Config, value: str) -> Path:
    """An output path relative to the invocation directory."""
    path = Path(value)
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path


def write_outputs(state: ConnicSession, session: pytest.Session | None = None) -> None:
    """``--connic-json``, ``--connic-html`` and ``--connic-traces``, when asked for (``session``:
    for the HTML header's pytest outcome). Each is written on its own: one that cannot be written
    (a full disk, a folder that is a file) is one line (``state.reports.output_failed``) naming its path and
    the OS's error, and the others, pytest's JUnit XML and the terminal summary still come."""
    from pytest_connic.files import write_text_file

    settings = state.settings
    if not (settings.json or settings.html or settings.traces):
        return
    try:
        report = _json_report(state)
    except Exception as exc:  # noqa: BLE001 - the traces and pytest's reports still come
        state.reports.output_failed(f"cannot write the JSON and HTML reports: {type(exc).__name__}: {exc}")
        report = None
    if settings.json and report is not None:
        from pytest_connic.reports.json_report import report_text

        write_report(state, "JSON report (--connic-json)", settings.json, lambda path: write_text_file(path, report_text(report)))
    if settings.html and report is not None:
        from pytest_connic.reports.html import render_html

        write_report(state, "HTML report (--connic-html)", settings.html,
               lambda path: write_text_file(path, render_html(report, html_context(state, session))))
    if settings.traces:
        from pytest_connic.reports.traces import write_traces

        write_report(state, "traces (--connic-traces)", settings.traces,
               lambda path: write_traces(path, state.ledger.outcomes, masker=state.masker))


def _json_report(state: ConnicSession) -> JsonObject:
    """The JSON report's data, which the HTML report renders too."""
    from pytest_connic.reports.json_report import add_warnings, build_json_report
    from pytest_connic.reports.stats import session_status

    settings = state.settings
    status = session_status(state.ledger.outcomes)
    if state.ledger.infrastructure_errors and status != "interrupted":
        status = "error"
    report = build_json_report(state.ledger.outcomes, masker=state.masker, session_status=status,
                               environment_id=settings.env)
    add_warnings(report, case_warnings(state.config), masker=state.masker)
    if state.reports.history is not None:
        report["history"] = to_jsonable(state.reports.history.section())
    if state.reports.budget_section is not None:
        report["budget"] = to_jsonable(state.reports.budget_section)
    from pytest_connic.plugin.compare import COMPARISON_KEY

    if COMPARISON_KEY in state.config.stash:  # --connic-compare
        report["comparison"] = to_jsonable(state.config.stash[COMPARISON_KEY])
    if settings.ab:
        from pytest_connic.plugin.ab import add_section

        add_section(state.config, report)
    return report


def write_report(state: ConnicSession, what: str, value: str, write: Callable[[Path], object]) -> None:
    """Run one report's ``write``; a failure is kept as one located line, never raised."""
    path = output_path(state.config, value)
    try:
        write(path)
    except OSError as exc:
        where = exc.filename if isinstance(exc.filename, str) else str(path)
        reason = f"[Errno {exc.errno}] {exc.strerror}" if exc.strerror else str(exc)
        state.reports.output_failed(f"{where}: cannot write the {what}: {reason}")
    except Exception as exc:  # noqa: BLE001 - a report never takes the others (or the session) down
        state.reports.output_failed(f"{path}: cannot write the {what}: {type(exc).__name__}: {exc}")


def output_failure_lines(state: ConnicSession) -> list[str]:
    """The report files that could not be written, one line each (the terminal summary's end)."""
    return [f"connic: {line}" for line in state.reports.output_failures]


def terminal_summary(state: ConnicSession, reporter: pytest.TerminalReporter) -> None:
    """Connic's results table, failure details and ``N/M cases passed.``; then a line for each
    report file that could not be written."""
    try:
        _results(state, reporter)
    finally:
        write_lines(reporter, output_failure_lines(state), red=True)


def _results(state: ConnicSession, reporter: pytest.TerminalReporter) -> None:
    if not state.ledger.outcomes:
        return
    from pytest_connic.reports.terminal import failure_lines, replay_lines, results_table, summary_line

    reporter.write_sep("=", "connic results")
    # a secret in a case name is masked here as in every report (the history's ids are masked too)
    outcomes = [masked_names(o, state.masker) for o in state.ledger.outcomes]
    marks = state.reports.history.marks() if state.reports.history is not None else None
    if state.config.get_verbosity() > -2:  # ``-qq`` drops the table
        for line in results_table(outcomes, width=table_width(state.config), marks=marks,
                                  encoding=console_encoding(reporter)):
            reporter.write_line(line)
    early = [o for o in outcomes if o.skipped_runs]
    for outcome in early:
        reason = outcome.early_stop_reason or ""
        what = (f"{outcome.skipped_runs} run(s) not started" if reason.startswith("budget spent")
                else f"early stop skipped {outcome.skipped_runs} run(s)")
        write_lines(reporter, [f"  {outcome.agent_name}::{outcome.case_name}: {what}: {reason}"])
    write_lines(reporter, replay_lines(outcomes))
    full = getattr(state.config.option, "tbstyle", "auto") == "no"
    write_lines(reporter, failure_lines(outcomes, state.masker, full=full))
    passed = all(o.passed for o in outcomes)
    reporter.write_line(summary_line(outcomes), green=passed, red=not passed, bold=True)


def masked_names(outcome: CaseOutcome, masker: Masker) -> CaseOutcome:
    """``outcome`` itself, or a copy whose case name and node id have their secrets masked."""
    import dataclasses

    if not (masker.find(outcome.case_name) or masker.find(outcome.nodeid)):
        return outcome
    return dataclasses.replace(outcome, case_name=masker.text(outcome.case_name), nodeid=masker.text(outcome.nodeid))


def case_warnings(config: pytest.Config) -> dict[str, list[str]]:
    """The warnings pytest recorded so far, per node id (what its warnings summary will list)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    found: dict[str, list[str]] = {}
    for report in (getattr(reporter, "stats", None) or {}).get("warnings", []):
        nodeid, message = getattr(report, "nodeid", ""), getattr(report, "message", None)
        if nodeid and isinstance(message, str):
            found.setdefault(nodeid, []).append(message.strip())
    return found


def html_context(state: ConnicSession, session: pytest.Session | None) -> dict[str, object]:
    """The HTML report's header: the project(s), the command, the time, the git commit, the
    versions and pytest's own outcome (its summary line and exit code), masked."""
    import datetime
    import platform
    import shlex
    from importlib import metadata

    import pytest

    config = state.config
    roots = sorted(state.reports.coverage_roots) or [Path(config.rootpath)]
    context: dict[str, object] = {
        "project": ", ".join(f"{root.name} ({root})" for root in roots),
        "command": shlex.join(["pytest", *config.invocation_params.args]),
        "time": datetime.datetime.now(datetime.timezone.utc).astimezone().isoformat(timespec="seconds"),
        "commit": _git_commit(roots[0]),
        "versions": {"Python": platform.python_version(), "pytest": pytest.__version__,
                     "pytest-connic": _version("pytest-connic", metadata),
                     "Connic SDK": _version("connic-composer-sdk", metadata)},
    }
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if session is not None:
        code = int(state.ledger.exit_code(session.exitstatus))  # as the session's exit code will be
        line = ""
        if reporter is not None:
            with contextlib.suppress(Exception):  # pytest's own summary line, as it prints it
                parts, _ = reporter.build_summary_stats_line()
                line = ", ".join(text for text, _ in parts)
        context["pytest"] = f"{line or 'no tests ran'} (exit code {code})"
        context["pytest_status"] = "passed" if code == 0 else "failed" if code == 1 else "error"
    return {k: state.masker.text(v) if isinstance(v, str) else v for k, v in context.items()}


def _version(name: str, metadata: types.ModuleType) -> str:
    try:
        return str(metadata.version(name))
    except Exception:  # noqa: BLE001 - not installed as a distribution (a source checkout)
        return "unknown"


def _git_commit(root: Path) -> str | None:
    """The short commit of the project's git checkout (and whether it has changes), or None."""
    from pytest_connic.plugin.history import git

    head = git(root, "rev-parse", "--short", "HEAD", timeout=5)
    if head is None:
        return None
    dirty = git(root, "status", "--porcelain", "--untracked-files=no", timeout=5)
    return head + (" (with uncommitted changes)" if dirty else "")
