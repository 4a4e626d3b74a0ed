"""pytest-connic: run Connic agent test suites with plain pytest.

The public API is re-exported here lazily, so importing the plugin costs nothing
in a session without a Connic project.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "ConnicRunner": "pytest_connic.plugin.fixture",
    "RunRecord": "pytest_connic.records.run",
    "CaseOutcome": "pytest_connic.records.outcome",
    "ToolCallRecord": "pytest_connic.records.run",
    "ModelRequest": "pytest_connic.models.base",
    "ModelResponse": "pytest_connic.models.base",
    "ToolCallRequest": "pytest_connic.models.base",
    "ToolSpec": "pytest_connic.models.base",
    "CassetteError": "pytest_connic.models.base",
    "ProviderError": "pytest_connic.models.base",
    "ConnicWarning": "pytest_connic.warnings",
}

__all__ = [
    "CaseOutcome",
    "CassetteError",
    "ConnicRunner",
    "ConnicWarning",
    "ModelRequest",
    "ModelResponse",
    "ProviderError",
    "RunRecord",
    "ToolCallRecord",
    "ToolCallRequest",
    "ToolSpec",
    "__version__",
]

if TYPE_CHECKING:
    from pytest_connic.models.base import (
        CassetteError,
        ModelRequest,
        ModelResponse,
        ProviderError,
        ToolCallRequest,
        ToolSpec,
    )
    from pytest_connic.plugin.fixture import ConnicRunner
    from pytest_connic.records.outcome import CaseOutcome
    from pytest_connic.records.run import RunRecord, ToolCallRecord
    from pytest_connic.warnings import ConnicWarning


def pytest_addhooks(pluginmanager: Any) -> None:
    """``pytest -p pytest_connic``: the package's own name loads the plugin, as ``-p connic`` (the
    ``pytest11`` entry point's name) and ``-p pytest_connic.plugin`` (its module) do. pytest registers
    whatever module ``-p`` names; this package has no hooks but this one, which registers the
    plugin module under the entry point's name (so autoloading then finds it loaded), unless it is
    registered already or blocked (``-p no:connic``). docs/getting-started.md "Loading the plugin"."""
    from pytest_connic import plugin

    if pluginmanager.is_registered(plugin) or pluginmanager.is_blocked("connic"):
        return
    pluginmanager.register(plugin, "connic")


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_connic' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
