"""pytest's private parts are reached in one module, ``plugin/pytest_private.py``, which names
each with the pytest releases it was tested with; ``tests/plugin/test_pytest_versions.py`` checks
that the installed pytest has them all. Here: nothing else imports ``_pytest`` or reads one of
those private attributes (a direct read elsewhere would fail a user, not this test suite, when a
pytest release moves it)."""

from __future__ import annotations

import ast
from pathlib import Path

from pytest_connic.plugin.pytest_private import ATTRIBUTES

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "pytest_connic"
HOME = PACKAGE / "plugin" / "pytest_private.py"


def _sources() -> list[tuple[Path, ast.AST]]:
    return [(path, ast.parse(path.read_text("utf-8"), str(path))) for path in sorted(PACKAGE.rglob("*.py"))
            if path != HOME]


def test_only_the_registry_imports_pytest_internals() -> None:
    found = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{path.relative_to(PACKAGE)}:{node.lineno}: {n}" for n in names
                      if n == "_pytest" or n.startswith("_pytest.")]
    assert found == []


def test_only_the_registry_reads_pytests_private_attributes() -> None:
    """In the plugin (the one package that holds pytest's objects): ``x._tw`` or
    ``getattr(x, "_tw")`` of an attribute the registry names, anywhere but in the registry."""
    found = []
    for path, tree in _sources():
        if path.parent.name != "plugin":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ATTRIBUTES:
                found.append(f"{path.name}:{node.lineno}: .{node.attr}")
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("getattr", "setattr", "hasattr") and len(node.args) > 1
                  and isinstance(node.args[1], ast.Constant) and node.args[1].value in ATTRIBUTES):
                found.append(f"{path.name}:{node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
    assert found == []
