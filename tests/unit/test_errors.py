"""Every exception class of the package derives from ``ConnicError`` (docs/architecture.md)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest_connic
from pytest_connic.errors import ConnicError


def package_exceptions() -> list[type[BaseException]]:
    found = []
    for info in pkgutil.walk_packages(pytest_connic.__path__, "pytest_connic."):
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if (issubclass(value, BaseException) and not issubclass(value, Warning)
                    and value.__module__ == info.name):
                found.append(value)
    return found


def test_every_exception_of_the_package_is_a_connic_error() -> None:
    exceptions = package_exceptions()
    assert len(exceptions) > 20  # the walk found the package's errors, not nothing
    assert [e.__qualname__ for e in exceptions if not issubclass(e, ConnicError)] == []


def test_value_errors_stay_value_errors() -> None:
    from pytest_connic.ab.options import ABOptionsError
    from pytest_connic.expressions import ExpressionError

    assert issubclass(ExpressionError, ValueError) and issubclass(ABOptionsError, ValueError)
