"""Session-level hooks: reports, xdist merging, exit codes, coverage mode.

Registered by ``plugin.pytest_configure``; xdist-only hooks live in a class
registered only when xdist is active.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .state import SESSION_KEY, ConnicSession

WORKER_KEY = "connic_outcomes"


def _state(config: pytest.Config) -> ConnicSession:
    return config.stash[SESSION_KEY]


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


class ConnicReporting:
    """Reports after the run, on the controller (or the only process)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        state = _state(config)
        from .collect import CaseItem

        if not state.settings.coverage:
            _set_timeouts(config, [i for i in items if isinstance(i, CaseItem)], state.settings.concurrency)
            return

        keep = [i for i in items if not isinstance(i, CaseItem)]
        dropped = [i for i in items if isinstance(i, CaseItem)]
        for item in dropped:
            state.coverage_roots.add(item.project_root)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        state = _state(self.config)
        if _is_worker(self.config):
            self.config.workeroutput[WORKER_KEY] = json.dumps(  # type: ignore[attr-defined]
                [o.to_dict() for o in state.outcomes], default=repr
            )
            self.config.workeroutput["connic_infra"] = state.infrastructure_errors  # type: ignore[attr-defined]
            return
        from .reports.outputs import write_outputs

        write_outputs(state)
        if state.settings.coverage or state.settings.coverage_json:
            from .reports.coverage_output import finish_coverage

            code = finish_coverage(state, session)
            if code is not None:
                session.exitstatus = code
                return
        if state.infrastructure_errors and session.exitstatus in (0, 1):
            session.exitstatus = 2

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        state = _state(config)
        from .reports.outputs import terminal_summary

        terminal_summary(state, terminalreporter)


class ConnicXdist:
    """Merges workers' outcomes into the controller's session state."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        from .records_io import outcome_from_dict

        state = _state(self.config)
        output = getattr(node, "workeroutput", None) or {}
        raw = output.get(WORKER_KEY)
        if raw:
            state.outcomes.extend(outcome_from_dict(d) for d in json.loads(raw))
        state.infrastructure_errors += int(output.get("connic_infra", 0) or 0)


def _set_timeouts(config: pytest.Config, items: list[Any], concurrency: int) -> None:
    """With pytest-timeout installed and no explicit timeout, give each case one derived from
    its runs, the concurrency and ``timeout_s``, so a hung tool cannot hang CI."""
    if not items or not config.pluginmanager.hasplugin("timeout"):
        return
    if config.getoption("timeout", None) or config.getini("timeout"):
        return
    for item in items:
        if item.get_closest_marker("timeout") is not None or item.spec.resolved is None:
            continue
        resolved = item.spec.resolved
        waves = -(-int(resolved["runs"]) // max(1, concurrency))
        item.add_marker(pytest.mark.timeout(waves * int(resolved["timeout_s"]) + 30))


def register(config: pytest.Config) -> None:
    """Register the session plugins (xdist's only on an xdist controller)."""
    config.pluginmanager.register(ConnicReporting(config), "connic-reporting")
    if config.pluginmanager.hasplugin("xdist") and not _is_worker(config):
        config.pluginmanager.register(ConnicXdist(config), "connic-xdist")


def output_path(config: pytest.Config, value: str) -> Path:
    """An output path relative to the invocation directory."""
    path = Path(value)
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path
