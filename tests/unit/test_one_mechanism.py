"""One mechanism per job (docs/architecture.md, "One mechanism per job"): a test over the
package's ast keeps each in the one module that owns it."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest_connic

ROOT = Path(pytest_connic.__file__).parent


def _where(match: Callable[[ast.AST], bool]) -> set[str]:
    found = set()
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(match(node) for node in ast.walk(tree)):
            found.add(path.relative_to(ROOT).as_posix())
    return found


def _calls(name: str) -> Callable[[ast.AST], bool]:
    def match(node: ast.AST) -> bool:
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        return (isinstance(func, ast.Attribute) and func.attr == name) or (isinstance(func, ast.Name) and func.id == name)
    return match


def _strings(predicate: Callable[[str], bool]) -> Callable[[ast.AST], bool]:
    def match(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return predicate(node.value)
        return False
    return match


def test_one_located_warn_once() -> None:
    """pytest's side of the port (plugin/host.py); the history's own warning (plugin/history.py,
    reading no line of the history file) aside."""
    assert _where(_calls("warn_explicit")) == {"plugin/host.py", "plugin/history.py"}
    assert _where(_calls("WarnedKeys")) == {"plugin/host.py", "runtime/ports.py"}


def test_one_mock_resolution() -> None:
    """The strict flags are read where a mock is chosen (``MockSet.choose``), nowhere else."""
    def reads_strict_flag(node: ast.AST) -> bool:
        return (_calls("get")(node) and bool(node.args)  # type: ignore[attr-defined]
                and isinstance(node.args[0], ast.Constant)  # type: ignore[attr-defined]
                and str(node.args[0].value).startswith("strict_")  # type: ignore[attr-defined]
                and str(node.args[0].value).endswith("mocks"))  # type: ignore[attr-defined]
    assert _where(reads_strict_flag) <= {"runtime/mocks.py"}
    assert _where(_calls("choose")) == {"runtime/dispatch.py", "runtime/guardrails.py", "runtime/invocation.py"}


def test_one_placeholder_swap() -> None:
    """Only ``PlaceholderSwap`` (runtime/placeholders.py) tells the SDK's placeholders apart."""
    assert _where(_strings(lambda s: s == "connic.tools")) == {"runtime/placeholders.py"}


def test_one_fresh_module_name() -> None:
    """The private name of a run's builder and mocks modules is written and read in runtime/mocks.py."""
    def fresh(text: str) -> bool:  # f"_connic_{folder}_..." or the name spelt out
        return text == "_connic_" or text.startswith(("_connic_builders", "_connic_mocks"))
    assert _where(_strings(fresh)) == {"runtime/mocks.py"}
