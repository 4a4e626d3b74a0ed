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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_connic' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
