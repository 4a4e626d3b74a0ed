"""``ConnicSession`` is told things through its methods: no other plugin module writes its attributes.

Over the ast of ``src/pytest_connic/plugin/*.py``: outside ``plugin/session.py`` nothing assigns
to, augments, deletes or mutates (``append``, ``add``, item assignment...) an attribute of a
``ConnicSession``, however the module reaches it: ``state`` / ``session_state``, a parameter
annotated ``ConnicSession``, a name bound to the session, a call of an accessor (``state``,
``state_of``, ``activate``: any function annotated to return one), ``config.stash[SESSION_KEY]``
or ``config.stash.get(SESSION_KEY)``, or ``self.<x>`` where ``x`` holds or returns the session.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PLUGIN = Path(__file__).resolve().parents[2] / "src" / "pytest_connic" / "plugin"
HUB = "session.py"
CLASS = "ConnicSession"
#: the names every plugin module gives the session
NAMES = frozenset({"state", "session_state"})
#: methods that change a list, set or dict in place
MUTATORS = frozenset({"append", "add", "extend", "update", "setdefault", "pop", "popitem", "clear",
                      "discard", "remove", "insert", "sort", "reverse", "__setitem__", "__delitem__"})
#: the session's service objects: calling their own methods (``masker.add(secret)``) is their job
SERVICES = frozenset({"config", "settings", "masker", "host", "stop", "interrupts"})


def _annotated_session(annotation: ast.expr | None) -> bool:
    """``ConnicSession`` (or a ``Callable[..., ConnicSession]``, an optional one) in an annotation."""
    if annotation is None:
        return False
    text = annotation.value if isinstance(annotation, ast.Constant) else ast.unparse(annotation)
    return isinstance(text, str) and CLASS in text


def accessors(trees: dict[str, ast.Module]) -> frozenset[str]:
    """The functions that return the session (``state``, ``activate``...), with their import aliases."""
    names = {node.name for tree in trees.values() for node in ast.walk(tree)
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _annotated_session(node.returns)}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names |= {alias.asname for alias in node.names if alias.name in names and alias.asname}
    return frozenset(names)


class _Finder:
    """The expressions of one module that are the session."""

    def __init__(self, tree: ast.Module, accessor_names: frozenset[str]) -> None:
        self.accessors = accessor_names
        self.names = set(NAMES)
        self.self_attrs: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                self.names |= {a.arg for a in args if _annotated_session(a.annotation)}
                if _annotated_session(node.returns) and args and args[0].arg == "self":
                    self.self_attrs.add(node.name)  # a property or method returning the session
                    self.accessors |= {node.name}
        for _ in range(3):  # names bound to the session, and to names bound to it
            for node in ast.walk(tree):
                value = getattr(node, "value", None)
                if not isinstance(node, (ast.Assign, ast.AnnAssign)) or value is None or not self.is_session(value):
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        self.names.add(target.id)
                    elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                            and target.value.id == "self":
                        self.self_attrs.add(target.attr)

    def is_session(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.names
        if isinstance(node, ast.Attribute):
            return isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr in self.self_attrs
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name in self.accessors:
                return True
            return name == "get" and isinstance(func, ast.Attribute) and _is_stash(func.value) \
                and bool(node.args) and _is_key(node.args[0])
        if isinstance(node, ast.Subscript):
            return _is_stash(node.value) and _is_key(node.slice)
        return False

    def session_attr(self, node: ast.expr) -> str | None:
        """``attr`` when ``node`` is ``<session>.attr``."""
        if isinstance(node, ast.Attribute) and self.is_session(node.value):
            return node.attr
        return None


def _is_stash(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "stash"


def _is_key(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "SESSION_KEY"


def writes(source: str, accessor_names: frozenset[str] = frozenset({"state", "state_of", "activate"})) -> list[str]:
    """Each write to an attribute of the session in ``source``: ``line: code``."""
    tree = ast.parse(source)
    finder = _Finder(tree, accessor_names)
    found: list[ast.AST] = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for target in targets:
            elements = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
            for each in elements:
                if finder.session_attr(each) is not None:  # state.attr = ..., state.attr += ...
                    found.append(node)
                elif isinstance(each, ast.Subscript) and finder.session_attr(each.value) is not None:
                    found.append(node)  # state.attr[key] = ...
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            attr = finder.session_attr(node.func.value)
            if attr is not None and attr not in SERVICES:  # state.attr.append(...)
                found.append(node)
    return sorted({f"{getattr(n, 'lineno', 0)}: {ast.unparse(n).splitlines()[0]}" for n in found})


def test_no_plugin_module_writes_the_session_s_attributes() -> None:
    sources = {path.name: path.read_text("utf-8") for path in sorted(PLUGIN.glob("*.py"))}
    names = accessors({name: ast.parse(source) for name, source in sources.items()})
    assert {"state", "state_of", "activate"} <= names
    offences = {name: writes(source, names) for name, source in sources.items() if name != HUB}
    offences = {name: found for name, found in offences.items() if found}
    assert offences == {}, "tell ConnicSession through a method (plugin/session.py): " + repr(offences)


@pytest.mark.parametrize("code", [
    "state.history = None",
    "state.coverage_texts = []",
    "state_of(self.config).suite_collection_errors += 1",
    "session_state.coverage_roots.add(root)",
    "state.output_failures.append('x')",
    "state.started[nodeid] = node",
    "state.collected.setdefault(row, where)",
    "state_of(config).run_listeners.append(listener)",
    "config.stash[SESSION_KEY].reported.add(nodeid)",
    "config.stash.get(SESSION_KEY, None).history_warning = 'x'",
    "def f(s: ConnicSession) -> None:\n    s.budget_section = {}",
    "def f(self) -> None:\n    st = self.activate(self.config)\n    st.coverage_roots.update(roots)",
    ("class A:\n    def __init__(self, st: 'ConnicSession') -> None:\n        self.st = st\n"
     "    def f(self) -> None:\n        del self.st.history"),
    ("class A:\n    @property\n    def session(self) -> ConnicSession: ...\n"
     "    def f(self) -> None:\n        self.session.reported.clear()"),
])
def test_the_check_sees_each_way_of_writing(code: str) -> None:
    assert writes(code)


@pytest.mark.parametrize("code", [
    "state.mark_reported(nodeid)",
    "state.masker.add(values)",  # the masker's own job
    "state.interrupts.raised = True",  # an attribute of the interrupts, not of the session
    "self.session.shouldstop = reason",  # pytest's session, in a module whose ``session`` is not ours
    "roots = set(state.coverage_roots)\nroots.add(root)",
])
def test_the_check_leaves_the_rest(code: str) -> None:
    assert writes(code) == []
