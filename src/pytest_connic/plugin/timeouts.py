"""pytest-timeout: each case gets a timeout derived from its runs, unless the user chose one."""

from __future__ import annotations

import os

import pytest

from pytest_connic.plugin.items import CaseItem
from pytest_connic.plugin.session import state as state_of


def explicit_timeout(config: pytest.Config) -> bool:
    """Whether the user set pytest-timeout's timeout (``--timeout``, ``PYTEST_TIMEOUT`` or ini
    ``timeout``, ``0`` included: it means "no timeout")."""
    if config.getoption("timeout", None) is not None or os.environ.get("PYTEST_TIMEOUT", "").strip():
        return True
    try:
        return bool(str(config.getini("timeout") or "").strip())
    except ValueError:
        return False


def case_timeout(runs: int, timeout_s: float, concurrency: int, builder: bool = False) -> float:
    """Seconds a whole case may take: its runs in waves of ``concurrency``, each wave bounded by
    ``timeout_s`` (three times over with a builder: ``build()``, the run and ``cleanup()`` are each
    bounded by it), plus 30 s for worker start-up, middleware cleanup and cassette I/O."""
    waves = -(-int(runs) // max(1, concurrency))
    return waves * float(timeout_s) * (3 if builder else 1) + 30


def set_timeouts(config: pytest.Config, items: list[CaseItem], concurrency: int) -> None:
    """With pytest-timeout installed and no explicit timeout, give each case one derived from
    its runs, the concurrency and ``timeout_s``, so a hung tool cannot hang CI. A marker would
    beat ``--timeout`` in pytest-timeout, so none is added when the user chose a timeout."""
    if not items or not _has_timeout_plugin(config) or explicit_timeout(config):
        return
    marks: dict[float, pytest.MarkDecorator] = {}  # one (immutable) marker per value, not one per case
    for item in items:
        if item.get_closest_marker("timeout") is not None or item.spec.resolved is None:
            continue
        resolved = item.spec.resolved
        seconds = case_timeout(resolved["runs"], resolved["timeout_s"], concurrency, bool(resolved.get("builder")))
        if seconds not in marks:
            marks[seconds] = pytest.mark.timeout(seconds)
        item.add_marker(marks[seconds])


def _has_timeout_plugin(config: pytest.Config) -> bool:
    """pytest-timeout, loaded by its entry point (``timeout``) or as ``-p pytest_timeout``."""
    manager = config.pluginmanager
    return manager.hasplugin("timeout") or manager.hasplugin("pytest_timeout")


class ConnicTimeouts:
    """Gives the collected cases their timeouts (not registered in coverage mode: no case runs)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        cases = [i for i in items if isinstance(i, CaseItem)]
        set_timeouts(self.config, cases, state_of(self.config).settings.concurrency)
