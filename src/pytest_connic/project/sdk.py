"""Import the Connic SDK once, quietly.

The SDK's pydantic models use class-based ``Config`` and emit
``PydanticDeprecatedSince20`` at import; that is the SDK's business, not the
user's, so it stays out of every test run's warning summary.
"""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import connic
    import connic.core
    import connic.loader
    import connic.test_schema
    import connic.tools


def _exceptions_alias() -> None:
    """Connic's runtime offers ``connic.exceptions`` (StopProcessing, AbortTool, ...), the
    SDK does not; vendor middleware imports it (falling back to a plain class that would
    then fail the run), so the SDK's own classes are registered under that name."""
    import importlib.util
    import sys
    import types

    if "connic.exceptions" in sys.modules or importlib.util.find_spec("connic.exceptions") is not None:
        return
    module = types.ModuleType("connic.exceptions", "Connic's exceptions (alias registered by pytest-connic).")
    for name in ("StopProcessing", "AbortTool", "TransferCall"):
        if hasattr(connic.core, name):
            setattr(module, name, getattr(connic.core, name))
    sys.modules["connic.exceptions"] = module
    connic.exceptions = module


_exceptions_alias()
