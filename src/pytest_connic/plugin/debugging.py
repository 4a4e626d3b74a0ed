"""``--pdb``, ``--trace`` and ``breakpoint()``: the debugger runs in pytest's process, so user code
does too for that session (isolation ``none``), said in one line at the start; an explicit
``--connic-isolation=process`` with them is a usage error (docs/running.md, "Debugging").

With ``--pdb``, a case that fails because user code raised hands pytest that exception's own
traceback (:func:`live_traceback`), so the post-mortem debugger stops in the user's frame.
"""

from __future__ import annotations

import dataclasses
from types import TracebackType
from typing import TYPE_CHECKING

import pytest

from pytest_connic.plugin.options import Settings

if TYPE_CHECKING:
    from pytest_connic.records.outcome import CaseOutcome


def debugger_flag(config: pytest.Config) -> str | None:
    """``--pdb`` or ``--trace`` when the session runs pytest's debugger, else None."""
    if config.getoption("usepdb", False):
        return "--pdb"
    if config.getoption("trace", False):
        return "--trace"
    return None


def with_debugger(config: pytest.Config, settings: Settings) -> Settings:
    """``settings`` with isolation ``none`` under ``--pdb`` / ``--trace``; an explicit
    ``--connic-isolation=process`` then is a ``pytest.UsageError``."""
    flag = debugger_flag(config)
    if flag is None or settings.isolation == "none":
        return settings
    if settings.source("isolation") == "--connic-isolation":
        raise pytest.UsageError(
            f"--connic-isolation=process cannot be used with {flag}: the debugger runs in pytest's process "
            f"and cannot stop in user code running in a worker process. Drop --connic-isolation=process "
            f"({flag} runs user code in pytest's process for the session)")
    sources = {**settings.sources, "isolation": flag}
    return dataclasses.replace(settings, isolation="none", sources=sources)


def live_traceback(outcome: CaseOutcome) -> TracebackType | None:
    """The traceback object of the user exception a failed case shows (``--pdb`` only), or None."""
    from pytest_connic import usertb
    from pytest_connic.plugin.usertrace import case_traceback

    found = case_traceback(outcome)
    exc = usertb.live_exception(found[1]) if found else None
    return exc.__traceback__ if exc is not None else None


class DebuggerLine:
    """Under ``--pdb`` / ``--trace`` in a Connic project: the session's first line says where user
    code runs, and the live exceptions behind recorded tracebacks are kept for the debugger. A
    plain project hears nothing of it and imports nothing for it."""

    def __init__(self, flag: str) -> None:
        self.flag = flag

    @pytest.hookimpl(tryfirst=True)  # after pytest's header, before "collecting ..."
    def pytest_collection(self, session: pytest.Session) -> None:
        from pytest_connic.plugin.ecosystem import in_connic_project

        if not in_connic_project(session.config):
            return
        from pytest_connic import usertb

        usertb.keep_live(True)
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            from pytest_connic.plugin.terminal_fit import write_lines

            write_lines(reporter, [(f"connic: {self.flag}: user code runs in pytest's process for this session "
                                   "(isolation none), so the debugger can stop in it")], yellow=True)
