"""pytest-connic's runtime extras to Connic's coverage report.

``add_runtime_coverage`` adds one top-level key, ``"pytest_connic"``: what only a test run knows
(tools called) and what Connic does not measure (asserted parameters). Connic's keys stay as they
are, so a CI job written for ``connic test --coverage --json`` reads our JSON unchanged.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_connic.coverage.compute import (
    DISCOVERY_MARKERS,
    Inventory,
    load_suites,
    named_tools,
    resolve_tool,
)
from pytest_connic.project.layout import DiscoveryError
from pytest_connic.pyparse import parse_expression

if TYPE_CHECKING:
    from pytest_connic.project.sdk import ChildAgentExpectation, TestCase

__all__ = ["add_runtime_coverage", "asserted_from_suites", "merge_called", "params_in_expression"]

_MAX_EXPRESSION = 10_000  # far above Connic's 2 000; only guards ``ast.parse``


def merge_called(a: Mapping[str, Iterable[str]], b: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """Union of two ``agent -> called tools`` maps (e.g. from two xdist workers), sorted."""
    merged: dict[str, set[str]] = {}
    for source in (a, b):
        for agent, tools in source.items():
            merged.setdefault(agent, set()).update(tools)
    return _sorted_lists(merged)


def add_runtime_coverage(
    report: Mapping[str, Any],
    called: Mapping[str, Iterable[str]],
    asserted: Mapping[str, Iterable[str]],
    asserted_params: Mapping[str, Mapping[str, Iterable[str]]],
    *,
    inventory: Inventory | None = None,
) -> dict[str, Any]:
    """A copy of ``report`` with a ``"pytest_connic"`` key describing the test run.

    ``called``: agent -> canonical refs of the tools called during the run; ``asserted`` and
    ``asserted_params`` as returned by ``asserted_from_suites``, whose names are resolved to the
    agent's refs with Connic's short-name fallback. ``inventory`` defaults to the one
    ``compute_coverage`` attached.
    """
    tools_of = inventory if inventory is not None else getattr(report, "inventory", None)
    if tools_of is None:
        raise ValueError("the report carries no tool inventory; pass inventory=tool_inventory(root)")
    rows: list[dict[str, Any]] = []
    for name in (row["name"] for row in report.get("agents", [])):
        tools = tools_of.get(name, {})
        params = asserted_params.get(name, {})
        rows.append(_runtime_row(name, tools, called.get(name, ()), asserted.get(name, ()), params))
    result = copy.deepcopy(dict(report))
    result["pytest_connic"] = {"agents": rows}
    return result


def _runtime_row(
    name: str,
    tools: Mapping[str, tuple[str, ...] | None],
    called: Iterable[str],
    asserted: Iterable[str],
    params: Mapping[str, Iterable[str]],
) -> dict[str, object]:
    """The runtime entry of one agent."""
    # Calls are recorded by canonical ref: no short-name guessing, which could credit an MCP tool's
    # call to a same-named file tool.
    called_refs = set(called)
    asserted_list = list(asserted)
    asserted_refs = {ref for ref in (resolve_tool(tool, tools) for tool in asserted_list) if ref}
    mentioned: dict[str, set[str]] = {}
    for tool, names in params.items():
        ref = resolve_tool(tool, tools)
        if ref is not None:
            mentioned.setdefault(ref, set()).update(names)
    return {
        "name": name,
        "called_tools": sorted(called_refs),
        "asserted_tools": sorted(asserted_refs),
        "never_called": sorted(set(tools) - called_refs),
        "unmatched_assertions": sorted(
            {t for t in asserted_list if t not in DISCOVERY_MARKERS and resolve_tool(t, tools) is None}
        ),
        "tools": {
            ref: _param_entry(schema, mentioned.get(ref, set())) for ref, schema in sorted(tools.items())
        },
    }


def _param_entry(schema: tuple[str, ...] | None, mentioned: set[str]) -> dict[str, list[str]]:
    """Asserted, unasserted and unknown parameter names of one tool.

    A predefined tool's parameters are not known locally (``schema`` is None): every mentioned
    name then counts as asserted and none as unknown.
    """
    if schema is None:
        return {"asserted_params": sorted(mentioned), "unasserted_params": [], "unknown_params": []}
    known = set(schema)
    return {
        "asserted_params": sorted(mentioned & known),
        "unasserted_params": sorted(known - mentioned),
        "unknown_params": sorted(mentioned - known),
    }


def asserted_from_suites(
    project_root: Path,
) -> tuple[dict[str, list[str]], dict[str, dict[str, list[str]]]]:
    """What the project's valid suites assert, per agent: tool names and parameter names.

    Returns ``(asserted, asserted_params)``: agent -> tool names as written in
    ``expected_tool_calls`` and ``expected_tool_call_order``; agent -> tool name -> parameter
    names used as ``params.<name>``, ``params["<name>"]`` or ``"<name>" in params`` in
    ``expected_tool_calls`` expressions. ``expected_child_agents`` expectations count for the child
    agent. Broken or undiscoverable suites contribute nothing (``compute_coverage`` reports them);
    an expression that does not parse contributes its tool name only.
    """
    tools: dict[str, set[str]] = {}
    params: dict[str, dict[str, set[str]]] = {}
    try:
        suites = [suite for suite in load_suites(project_root) if suite.parsed is not None]
    except DiscoveryError:
        suites = []
    for suite in suites:
        for case in suite.parsed.tests if suite.parsed is not None else ():
            for agent, name, expression in _expectations(suite.agent, case):
                tools.setdefault(agent, set()).add(name)
                found = params_in_expression(expression) if expression else set()
                if found:
                    params.setdefault(agent, {}).setdefault(name, set()).update(found)
    nested = {agent: _sorted_lists(per_tool) for agent, per_tool in sorted(params.items())}
    return _sorted_lists(tools), nested


def _sorted_lists(mapping: Mapping[str, set[str]]) -> dict[str, list[str]]:
    """``{key: sorted(values)}`` in key order: stable, JSON-friendly output."""
    return {key: sorted(values) for key, values in sorted(mapping.items())}


def _expectations(agent: str, expectation: TestCase | ChildAgentExpectation) -> Iterator[tuple[str, str, str | None]]:
    """``(agent, tool name, expression)`` of a case and, recursively, of its child agents."""
    for name, expression in named_tools(expectation):
        yield agent, name, expression
    for child, child_expectation in (expectation.expected_child_agents or {}).items():
        yield from _expectations(child, child_expectation)


def params_in_expression(expression: str) -> set[str]:
    """Top-level parameter names an ``expected_tool_calls`` expression reads from ``params``.

    ``params.amount > 0`` and ``params["amount"] > 0`` give ``{"amount"}``; so does
    ``"amount" in params``. ``params.address.city`` gives ``{"address"}``. An expression Python
    cannot parse gives an empty set: the plugin's evaluator reports it, this only measures.
    """
    tree = _parse_expression(expression)
    if tree is None:
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_params(node.value):
            found.add(node.attr)
        elif isinstance(node, ast.Subscript) and _is_params(node.value):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                found.add(node.slice.value)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1:
            # "name" in params / "name" not in params
            left, op, right = node.left, node.ops[0], node.comparators[0]
            membership = isinstance(op, (ast.In, ast.NotIn)) and _is_params(right)
            if membership and isinstance(left, ast.Constant) and isinstance(left.value, str):
                found.add(left.value)
    return found


def _parse_expression(expression: str) -> ast.Expression | None:
    """The expression's AST; YAML block scalars may span lines, so retry inside parentheses."""
    text = expression.strip()
    if not text or len(text) > _MAX_EXPRESSION:
        return None
    for candidate in (text, f"({text}\n)"):
        try:
            return parse_expression(candidate)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return None


def _is_params(node: ast.AST) -> bool:
    """Whether ``node`` is the bare name ``params``."""
    return isinstance(node, ast.Name) and node.id == "params"
