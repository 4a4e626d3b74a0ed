"""Run events and trace spans are read through their types, never by a string key.

A run's events (``records/events.py``) and its spans' metadata (``records/spans.py``) are frozen
classes: readers in ``records/``, ``reports/``, ``execution/`` and ``plugin/`` dispatch on the
class (``isinstance``, ``match``) and read fields. This test walks the package's ast and fails on
a *read* of ``"type"`` or ``"kind"`` by subscript or ``.get`` (``event["type"]``,
``meta.get("kind")``) from a name that holds an event, a span or its metadata (``event``, ``e``,
``meta``, ``span``, ...). Building a dict with such a key (``{"type": "object"}``, a JSON schema,
``to_dict``) is construction, not reading, and is not flagged; nor is an assignment to such a key.

The one place that reads an event's ``type`` is the JSON boundary, ``records/events.py``'s
``event_from_dict`` (report shards and xdist workers' outcomes read back): it is exempt by name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest_connic

PACKAGE = Path(pytest_connic.__file__).parent
#: the packages whose modules read run events and spans
READERS = ("records", "reports", "execution", "plugin")
#: the keys that name an event's or a span's kind
KIND_KEYS = frozenset({"type", "kind"})
#: names (variables, attributes, parameters) that hold an event, a span or a span's metadata
EVENT_NAMES = frozenset({"event", "events", "e", "ev", "meta", "metadata", "span", "spans", "s", "stage",
                         "hook", "h", "note"})
#: (module relative to the package, function) allowed to read the kind: the JSON boundary
EXEMPT = {("records/events.py", "event_from_dict")}


def _holder(node: ast.expr) -> str | None:
    """The name an expression reads from: ``event`` in ``event``, ``self.event``, ``x.meta``,
    ``events[0]``; None for anything else (a call, a literal)."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _kind_key(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value in KIND_KEYS


def kind_reads(tree: ast.AST) -> list[tuple[int, str, str | None]]:
    """``(line, source form, enclosing function)`` of every read of an event's kind in ``tree``."""
    found: list[tuple[int, str, str | None]] = []

    def visit(node: ast.AST, function: str | None) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _kind_key(node.slice)
                and _holder(node.value) in EVENT_NAMES):
            found.append((node.lineno, ast.unparse(node), function))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("get", "pop") and node.args and _kind_key(node.args[0])
                and _holder(node.func.value) in EVENT_NAMES):
            found.append((node.lineno, ast.unparse(node), function))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, None)
    return found


def offences(root: Path = PACKAGE) -> list[str]:
    out = []
    for package in READERS:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            for line, text, function in kind_reads(ast.parse(path.read_text("utf-8"), rel)):
                if (rel, function) not in EXEMPT:
                    out.append(f"{rel}:{line}: {text}")
    return out


def test_no_reader_dispatches_on_an_event_kind_by_string_key() -> None:
    assert offences() == []


def test_the_check_finds_reads_and_leaves_construction_alone() -> None:
    source = '''
def reader(event, meta, spans, record):
    a = event.get("type") == "retry"
    b = meta.get("kind")
    c = spans[0]["kind"]
    d = record.events[-1]["type"]
    e = self.meta["type"]
def builder(schema):
    x = {"type": "object", "properties": {"q": {"type": "string"}}}
    meta = {"kind": "event"}
    meta["kind"] = "tool"
    y = schema.get("type")
    z = part["type"]
'''
    reads = [text for _, text, _ in kind_reads(ast.parse(source))]
    assert reads == ["event.get('type')", "meta.get('kind')", "spans[0]['kind']", "record.events[-1]['type']",
                     "self.meta['type']"]


def test_the_boundary_is_the_only_exemption() -> None:
    source = (PACKAGE / "records" / "events.py").read_text("utf-8")
    functions = {function for _, _, function in kind_reads(ast.parse(source))}
    assert functions <= {f for _, f in EXEMPT}
