"""The package's import graph: one-way, pytest at the edge (docs/architecture.md).

Every import counts, at any depth: module level, inside functions, under ``TYPE_CHECKING``.
A cycle hidden behind a function-level import is still a cycle: it costs types and tricks.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "pytest_connic"
ROOT = "pytest_connic"
PLUGIN = f"{ROOT}.plugin"
#: what only the plugin layer may import
PYTEST_MODULES = ("pytest", "_pytest", "pluggy", "xdist")
#: the SDK boundary: the one module that imports Connic's SDK (quietly) and touches its privates
SDK_BOUNDARY = f"{ROOT}.project.sdk"
ARCHITECTURE = PACKAGE.parents[1] / "docs" / "architecture.md"


def documented_order(text: str | None = None) -> dict[str, int]:
    """Layer -> rank, from the table under "The layers, top to bottom" in docs/architecture.md."""
    text = ARCHITECTURE.read_text("utf-8") if text is None else text
    section = text.split("## The layers, top to bottom", 1)[1].split("\n## ", 1)[0]
    order: dict[str, int] = {}
    for rank, cells in re.findall(r"^\| (\d+) \| (.+) \|$", section, re.MULTILINE):
        for layer in re.findall(r"`([\w.]+)`", cells):
            order[f"{ROOT}.{layer}"] = int(rank)
    assert order, "docs/architecture.md has no table of the layers' order"
    return order


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = [package.name, *path.relative_to(package).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """``(line, absolute name)`` of every import in ``tree``; ``from a import b`` yields ``a.b``
    and ``a`` (``b`` may be a module or a name in ``a``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            yield node.lineno, source
            for alias in node.names:
                yield node.lineno, f"{source}.{alias.name}"


def import_graph(package: Path = PACKAGE) -> tuple[dict[str, set[str]], dict[str, list[tuple[int, str]]]]:
    """Module -> the package's modules it imports; module -> every (line, name) it imports."""
    files = {module_name(p, package): p for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    raw: dict[str, list[tuple[int, str]]] = {}
    for name, path in files.items():
        names = list(imported_names(ast.parse(path.read_text("utf-8")), name, path.name == "__init__.py"))
        raw[name] = names
        graph[name] = {n for _, n in names if n in files and n != name}
    return graph, raw


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle ``[a, b, ..., a]`` per strongly connected component of ``graph`` that has one."""
    cycles = []
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        # the component of ``start``: what it reaches that also reaches it back
        reach = _reachable(graph, start)
        component = {n for n in reach if start in _reachable(graph, n)}
        done |= component | {start}
        if start in reach:
            cycles.append(_path_back(graph, start, component))
    return cycles


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def _path_back(graph: dict[str, set[str]], start: str, component: set[str]) -> list[str]:
    """The shortest path from ``start`` back to itself inside ``component`` (breadth first)."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph.get(node, ()) & component):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if nxt not in previous:
                    previous[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError("no cycle back to start")  # pragma: no cover - start reaches itself


def in_plugin(module: str) -> bool:
    return module == PLUGIN or module.startswith(PLUGIN + ".")


def package_of(module: str) -> str:
    """The layer a module belongs to: its first-level package, or itself for a top-level module."""
    parts = module.split(".")
    return ".".join(parts[:2])


def order_problems(packages: dict[str, set[str]], order: dict[str, int]) -> list[str]:
    """An import that goes up or sideways in ``order``, and a layer ``order`` does not place."""
    problems = [f"layer {layer} is not in the layers' order (docs/architecture.md)"
                for layer in sorted(packages) if layer not in order]
    for layer, deps in sorted(packages.items()):
        for dep in sorted(deps):
            if layer in order and dep in order and order[dep] <= order[layer]:
                problems.append(f"layer {layer} (rank {order[layer]}) imports {dep} (rank {order[dep]}): "
                                "a layer imports only layers further down the order")
    return problems


def layering_problems(package: Path = PACKAGE, order: dict[str, int] | None = None) -> list[str]:
    graph, raw = import_graph(package)
    problems = []
    modules = {m: {n for n in deps if n != ROOT} for m, deps in graph.items() if m != ROOT}
    problems += ["import cycle: " + " -> ".join(cycle) for cycle in find_cycles(modules)]
    packages: dict[str, set[str]] = {}
    for module, deps in graph.items():
        if module == ROOT:
            continue
        packages.setdefault(package_of(module), set()).update(
            package_of(d) for d in deps if d != ROOT and package_of(d) != package_of(module))
    problems += ["cycle between layers: " + " -> ".join(cycle) for cycle in find_cycles(packages)]
    if order is not None:
        problems += order_problems(packages, order)
    for module, names in sorted(raw.items()):
        for line, name in names:
            top = name.split(".")[0]
            where = f"{module} (line {line})"
            if top == "connic" and module != SDK_BOUNDARY:
                problems.append(f"{where} imports {name}: only {SDK_BOUNDARY} imports the SDK")
            if top in PYTEST_MODULES and not in_plugin(module):
                problems.append(f"{where} imports {name}: only {PLUGIN} may import pytest")
            # the root package is the public facade: it re-exports the connic fixture's type lazily
            if in_plugin(name) and name in graph and not in_plugin(module) and module != ROOT:
                problems.append(f"{where} imports the plugin layer ({name})")
            if name.count(".") == 1 and name.startswith(ROOT + ".") and name not in graph and module != ROOT:
                problems.append(f"{where} imports {name} from the package facade; import the defining module")
    return sorted(set(problems))


def test_the_package_is_layered() -> None:
    problems = layering_problems(order=documented_order())
    assert not problems, "\n".join(problems)


def test_the_order_is_read_from_the_documented_table() -> None:
    order = documented_order()
    assert order[PLUGIN] < order[f"{ROOT}.ab"] < order[f"{ROOT}.execution"] < order[f"{ROOT}.runtime"]
    assert order[f"{ROOT}.runtime"] < order[f"{ROOT}.models"] < order[f"{ROOT}.errors"]
    text = "## The layers, top to bottom\n\n| rank | layers |\n| --- | --- |\n| 1 | `a`, `b` |\n| 2 | `c` |\n\n## Next\n"
    assert documented_order(text) == {f"{ROOT}.a": 1, f"{ROOT}.b": 1, f"{ROOT}.c": 2}


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"records.py": "from pytest_connic import runtime\n", "runtime.py": ""},
         ("layer pytest_connic.records (rank 2) imports pytest_connic.runtime (rank 1): "
         "a layer imports only layers further down the order")),
        ({"reports.py": "from pytest_connic import coverage\n", "coverage.py": "", "runtime.py": "", "records.py": ""},
         ("layer pytest_connic.reports (rank 1) imports pytest_connic.coverage (rank 1): "
         "a layer imports only layers further down the order")),
        ({"newlayer.py": "", "runtime.py": "", "records.py": ""},
         "layer pytest_connic.newlayer is not in the layers' order (docs/architecture.md)"),
    ],
)
def test_the_check_finds_an_import_against_the_order(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    package = tmp_path / ROOT
    package.mkdir()
    for name, text in {"__init__.py": "", **files}.items():
        (package / name).write_text(text)
    order = {f"{ROOT}.runtime": 1, f"{ROOT}.reports": 1, f"{ROOT}.coverage": 1, f"{ROOT}.records": 2}
    assert expected in layering_problems(package, order)


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"a.py": "from pytest_connic import b\n", "b.py": "def f():\n    from pytest_connic.a import x\n"},
         "import cycle: pytest_connic.a -> pytest_connic.b -> pytest_connic.a"),
        ({"a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n",
          "b.py": "from . import a\n"},
         "import cycle: pytest_connic.a -> pytest_connic.b -> pytest_connic.a"),
        ({"runtime/__init__.py": "", "runtime/x.py": "import pytest\n"},
         "pytest_connic.runtime.x (line 1) imports pytest: only pytest_connic.plugin may import pytest"),
        ({"project/__init__.py": "", "project/sdk.py": "import connic\n", "runtime.py": "from connic.core import Agent\n"},
         "pytest_connic.runtime (line 1) imports connic.core: only pytest_connic.project.sdk imports the SDK"),
        ({"plugin/__init__.py": "", "plugin/session.py": "", "records.py": "def f():\n    from pytest_connic.plugin import session\n"},
         "pytest_connic.records (line 2) imports the plugin layer (pytest_connic.plugin.session)"),
        ({"suite/__init__.py": "", "suite/a.py": "from pytest_connic.runtime import b\n",
          "runtime/__init__.py": "", "runtime/b.py": "from pytest_connic.suite.c import y\n",
          "suite/c.py": "y = 1\n"},
         "cycle between layers: pytest_connic.runtime -> pytest_connic.suite -> pytest_connic.runtime"),
    ],
)
def test_the_check_finds_each_kind_of_problem(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    package = tmp_path / ROOT
    for name, text in {"__init__.py": "", **files}.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    assert expected in layering_problems(package)


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    package = tmp_path / ROOT
    package.mkdir()
    (package / "__init__.py").write_text("def __getattr__(name):\n    from pytest_connic.plugin import fixture\n")
    (package / "plugin.py").write_text("import pytest\nfrom pytest_connic import records\n")
    (package / "records.py").write_text("import json\n")
    assert layering_problems(package) == []
