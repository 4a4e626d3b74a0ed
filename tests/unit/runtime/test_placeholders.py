"""The SDK's ``connic.tools`` placeholders swapped for dispatchers and put back (runtime/placeholders.py)."""

from __future__ import annotations

import asyncio
import types

import connic.tools as sdk_tools
import pytest

from pytest_connic.runtime import placeholders


def test_placeholders_swap_module_globals_and_restore_them() -> None:
    original = sdk_tools.db_find
    module = types.ModuleType("user_tools")
    module.find = original  # type: ignore[attr-defined]  # ``from connic.tools import db_find as find``
    placeholders.install()
    try:
        placeholders.rebind_modules([module])
        assert placeholders.is_dispatcher(sdk_tools.db_find) and placeholders.is_dispatcher(module.find)
        with pytest.raises(RuntimeError, match="called outside a pytest-connic run"):
            asyncio.run(module.find("orders"))
        with pytest.raises(TypeError, match=r"connic.tools.db_find\(\)"):
            asyncio.run(sdk_tools.db_find(nope=1))
    finally:
        placeholders.uninstall()
    assert sdk_tools.db_find is original and module.find is original
