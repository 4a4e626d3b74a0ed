"""Plugins of the pytest ecosystem that cannot act on Connic cases say so at the start of the
session, under pytest's header, also with ``-q`` (docs/ci.md "Other pytest plugins")."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pytest_connic.plugin.options import SETTINGS_KEY, Settings


def in_connic_project(config: pytest.Config) -> bool:
    """Whether the session's root, its invocation directory or one of their parents is a Connic
    project (``agents/`` beside ``tests/``)."""
    for start in (Path(config.rootpath), Path(config.invocation_params.dir)):
        for folder in (start, *start.parents):
            if (folder / "agents").is_dir() and (folder / "tests").is_dir():
                return True
    return False


def unsupported_lines(config: pytest.Config) -> list[str]:
    """One line per loaded plugin option that leaves Connic cases alone."""
    lines = []
    count = getattr(config.option, "count", None)
    if config.pluginmanager.hasplugin("repeat") and isinstance(count, int) and count > 1:
        lines.append(f"connic: pytest-repeat's --count {count} repeats Python tests only: each Connic case "
                     "runs once (its `runs:` sets how many times the agent runs)")
    picked = getattr(config.option, "picked", None)
    if config.pluginmanager.hasplugin("picked") and picked:
        lines.append(f"connic: pytest-picked (--picked={picked}) picks changed Python test files only: "
                     "changed Connic suites (tests/*.yaml) are not picked; name them on the command line")
    if _testmon_active(config) and _isolated(config):
        lines.append("connic: pytest-testmon measures pytest's process only, and user code runs in worker "
                     "processes: an edit of a tool reruns no case; run with --connic-isolation=none")
    elif _testmon_active(config) and _isolation_source(config) == "--testmon":
        lines.append("connic: --testmon: user code runs in pytest's process for this session (isolation "
                     "none), so pytest-testmon sees the tool code each case runs")
    return lines


def with_testmon(config: pytest.Config, settings: Settings) -> Settings:
    """``settings`` with isolation ``none`` when pytest-testmon is active and the isolation was not
    chosen (neither ``--connic-isolation`` nor ini ``connic_isolation``): testmon measures pytest's
    process per test and cannot be fed the lines user code runs in workers. A chosen process
    isolation is kept (and said at the start, :func:`unsupported_lines`)."""
    if settings.isolation == "none" or settings.source("isolation") != "default" or not _testmon_active(config):
        return settings
    sources = {**settings.sources, "isolation": "--testmon"}
    return dataclasses.replace(settings, isolation="none", sources=sources)


def _testmon_active(config: pytest.Config) -> bool:
    """Whether pytest-testmon selects or collects in this session (``--testmon``, ``--testmon-noselect``,
    ``--testmon-forceselect``)."""
    return any(getattr(config.option, name, False) for name in ("testmon", "testmon_noselect", "testmon_forceselect"))


def _isolated(config: pytest.Config) -> bool:
    """Whether user code runs in worker processes this session (the resolved settings)."""
    settings = config.stash.get(SETTINGS_KEY, None)
    return settings is not None and settings.isolation != "none"


def _isolation_source(config: pytest.Config) -> str | None:
    """Where this session's isolation came from (``--testmon`` when :func:`with_testmon` chose it)."""
    settings = config.stash.get(SETTINGS_KEY, None)
    return settings.source("isolation") if settings is not None else None


class ConnicEcosystem:
    """The session's first lines about other plugins."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(tryfirst=True)  # after the terminal reporter's header, before "collecting ..."
    def pytest_collection(self) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        lines = unsupported_lines(self.config)
        if reporter is None or not lines or not in_connic_project(self.config):
            return
        from pytest_connic.plugin.terminal_fit import write_lines

        write_lines(reporter, lines, yellow=True)


class SetupErrorAnnotations:
    """pytest-github-actions-annotate-failures annotates failures of the call phase only; a case
    that fails in setup (an invalid case: its error is located in the suite) is annotated here,
    with that plugin's own command builder, in the shape it gives a call failure: at the case's
    ``- name:`` line, the case's title, then its message (docs/ci.md "GitHub Actions annotations")."""

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        import os

        if os.environ.get("GITHUB_ACTIONS") != "true" or report.when != "setup" or not report.failed:
            return
        from pytest_connic.plugin.verdicts import is_case_id

        if not is_case_id(report.nodeid):
            return
        try:
            from pytest_github_actions_annotate_failures.plugin import _build_workflow_command, compute_path
        except ImportError:  # an older release of the plugin: no annotation rather than a crash
            return
        path, lineno, _ = report.location
        message = report.head_line or "test"
        text = report.longreprtext
        if text:
            message += "\n\n" + text
        import sys

        line = (lineno or 0) + 1
        print(_build_workflow_command("error", compute_path(path), line, message=message), file=sys.stderr)
