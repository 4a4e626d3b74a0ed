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
    from pytest_connic.expressions.values import ExpressionError

    assert issubclass(ExpressionError, ValueError) and issubclass(ABOptionsError, ValueError)


def test_the_runtime_passes_through_one_base_of_control_flow() -> None:
    """One ``RunSignal`` base; the one pass-through tuple is it and the SDK's ``StopProcessing``."""
    from pytest_connic.errors import RunSignal
    from pytest_connic.models.base import CallFailed, CassetteError, ProviderError
    from pytest_connic.project.sdk import StopProcessing
    from pytest_connic.runtime import signals

    assert signals.PASS_THROUGH == (StopProcessing, RunSignal)
    for cls in (signals.RunAborted, signals.RunFailed, signals.UserCodeEnded, signals.AwaitingApproval,
                signals.InfrastructureFailure, CassetteError, ProviderError):
        assert issubclass(cls, RunSignal), cls
    # what the model reads as a tool's error, or ends one call only, is not a signal
    assert not issubclass(CallFailed, RunSignal) and not issubclass(signals.ExitCalled, RunSignal)


def test_no_other_pass_through_tuple_of_signals() -> None:
    """No module of the package spells a tuple of control-flow classes of its own."""
    import ast
    import pathlib

    names = {"RunAborted", "RunFailed", "AwaitingApproval", "InfrastructureFailure", "CassetteError",
             "ProviderError", "StopProcessing"}
    root = pathlib.Path(pytest_connic.__file__).parent
    found = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Tuple):
                members = {e.id for e in node.elts if isinstance(e, ast.Name)} & names
                if len(members) > 2:  # a handler may name two (runtime/invocation.py)
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == []
