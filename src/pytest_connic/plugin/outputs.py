"""Writing the report files and the terminal summary at the end of a session."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pytest

    from pytest_connic.plugin.session import ConnicSession


def output_path(config: pytest.Config, value: str) -> Path:
    """An output path relative to the invocation directory."""
    path = Path(value)
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path


def write_outputs(state: ConnicSession, session: pytest.Session | None = None) -> None:
    """``--connic-json``, ``--connic-html`` and ``--connic-traces``, when asked for (``session``:
    for the HTML header's pytest outcome)."""
    settings = state.settings
    if not (settings.json or settings.html or settings.traces):
        return
    from pytest_connic.reports.json_report import add_warnings, build_json_report, report_text
    from pytest_connic.reports.stats import session_status

    status = "error" if state.infrastructure_errors else session_status(state.outcomes)
    report = build_json_report(state.outcomes, masker=state.masker, session_status=status,
                               environment_id=settings.env)
    add_warnings(report, case_warnings(state.config), masker=state.masker)
    if state.history is not None:
        report["history"] = state.history.section()
    if state.budget_section is not None:
        report["budget"] = state.budget_section
    if settings.ab:
        from pytest_connic.plugin.ab import add_section

        add_section(state.config, report)
    if settings.json:
        path = output_path(state.config, settings.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(report_text(report), "utf-8")
    if settings.html:
        from pytest_connic.reports.html import render_html

        path = output_path(state.config, settings.html)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_html(report, html_context(state, session)), "utf-8")
    if settings.traces:
        from pytest_connic.reports.traces import write_traces

        write_traces(output_path(state.config, settings.traces), state.outcomes, masker=state.masker)


def terminal_summary(state: ConnicSession, reporter: Any) -> None:
    """Connic's results table, failure details and ``N/M cases passed.``"""
    if not state.outcomes:
        return
    from pytest_connic.reports.terminal import failure_lines, results_table, summary_line

    reporter.write_sep("=", "connic results")
    marks = state.history.marks() if state.history is not None else None
    if state.config.get_verbosity() > -2:  # ``-qq`` drops the table
        for line in results_table(state.outcomes, width=table_width(state.config), marks=marks,
                                  encoding=console_encoding(reporter)):
            reporter.write_line(line)
    early = [o for o in state.outcomes if o.skipped_runs]
    for outcome in early:
        reason = outcome.early_stop_reason or ""
        what = (f"{outcome.skipped_runs} run(s) not started" if reason.startswith("budget spent")
                else f"early stop skipped {outcome.skipped_runs} run(s)")
        reporter.write_line(f"  {outcome.agent_name}::{outcome.case_name}: {what}: {reason}")
    full = getattr(state.config.option, "tbstyle", "auto") == "no"
    for line in failure_lines(state.outcomes, state.masker, full=full):
        reporter.write_line(line)
    passed = all(o.passed for o in state.outcomes)
    reporter.write_line(summary_line(state.outcomes), green=passed, red=not passed, bold=True)


def table_width(config: pytest.Config) -> int | None:
    """The width the results table fits: pytest's terminal width (``COLUMNS``), except where pytest
    itself does not cut its short summary (on CI, with ``-vv``): there the table is drawn whole."""
    import os

    if config.get_verbosity() >= 2 or os.environ.get("CI") or os.environ.get("BUILD_NUMBER"):
        return None
    width: int = config.get_terminal_writer().fullwidth
    return width


def case_warnings(config: pytest.Config) -> dict[str, list[str]]:
    """The warnings pytest recorded so far, per node id (what its warnings summary will list)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    found: dict[str, list[str]] = {}
    for report in (getattr(reporter, "stats", None) or {}).get("warnings", []):
        nodeid, message = getattr(report, "nodeid", ""), getattr(report, "message", None)
        if nodeid and isinstance(message, str):
            found.setdefault(nodeid, []).append(message.strip())
    return found


def console_encoding(reporter: Any) -> str | None:
    """The encoding of the terminal pytest writes to (None: unknown), so that a console without
    box characters (``PYTHONIOENCODING=cp1252``) gets an ASCII table rather than escapes."""
    writer = getattr(reporter, "_tw", None)  # pytest has no public name for its output file
    encoding = getattr(getattr(writer, "_file", None), "encoding", None)
    return encoding if isinstance(encoding, str) else None


def html_context(state: ConnicSession, session: pytest.Session | None) -> dict[str, Any]:
    """The HTML report's header: the project(s), the command, the time, the git commit, the
    versions and pytest's own outcome (its summary line and exit code), masked."""
    import datetime
    import platform
    import shlex
    from importlib import metadata

    import pytest

    config = state.config
    roots = sorted(state.coverage_roots) or [Path(config.rootpath)]
    context: dict[str, Any] = {
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
        code = int(state.exit_code(session.exitstatus))  # as the session's exit code will be
        line = ""
        if reporter is not None:
            with contextlib.suppress(Exception):  # pytest's own summary line, as it prints it
                parts, _ = reporter.build_summary_stats_line()
                line = ", ".join(text for text, _ in parts)
        context["pytest"] = f"{line or 'no tests ran'} (exit code {code})"
        context["pytest_status"] = "passed" if code == 0 else "failed" if code == 1 else "error"
    return {k: state.masker.text(v) if isinstance(v, str) else v for k, v in context.items()}


def _version(name: str, metadata: Any) -> str:
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
