"""Static test coverage identical to ``connic test --coverage`` (spec §8.7), plus runtime extras.

``compute_coverage`` reproduces Connic's report: same algorithm, JSON shape, values (floats
unrounded) and messages. Agents load through the SDK's ``ProjectLoader`` in validation-only mode
(AST stubs: no user code runs); suites parse with the SDK's own ``TestFile`` model.

``add_runtime_coverage`` adds one top-level key, ``"pytest_connic"``: what only a test run knows
(tools called) and what Connic does not measure (asserted parameters). Connic's keys stay as they
are, so a CI job written for ``connic test --coverage --json`` reads our JSON unchanged.
"""

from __future__ import annotations

import ast
import copy
import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_connic.project.layout import DiscoveryError, discover_suites

__all__ = [
    "CoverageReport",
    "Inventory",
    "add_runtime_coverage",
    "asserted_from_suites",
    "compute_coverage",
    "coverage_exit_status",
    "merge_called",
    "params_in_expression",
    "render_coverage",
    "render_runtime_coverage",
    "resolve_tool",
    "tool_inventory",
]

#: Tools the runtime injects for ``discoverable_tools``; users did not author them.
DISCOVERY_MARKERS = frozenset({"search_tools", "use_tool"})

#: Agent name -> tool ref -> parameter names from the tool's schema (``None``: not known locally,
#: as for predefined tools whose implementation the runner injects).
Inventory = dict[str, dict[str, tuple[str, ...] | None]]

_MAX_EXPRESSION = 10_000  # far above Connic's 2 000; only guards ``ast.parse``


class CoverageReport(dict[str, Any]):
    """Connic's coverage report: a plain JSON-able ``dict``, equal to the SDK's. ``inventory``
    (agents' tools and parameters, for ``add_runtime_coverage``) is an attribute, never a key."""

    def __init__(self, data: Mapping[str, Any], inventory: Inventory | None = None) -> None:
        super().__init__(data)
        self.inventory: Inventory = inventory or {}


@dataclass(frozen=True)
class _Suite:
    """One discovered suite: its target agent and either the parsed file or an error."""

    agent: str
    parsed: Any  # connic.test_schema.TestFile | None
    error: str | None


def compute_coverage(project_root: Path) -> CoverageReport:
    """What ``connic test --coverage --json`` prints for the project: ``agents`` rows, ``overall``,
    and ``error`` when agents failed to load or suites of unreported agents failed to parse."""
    from pytest_connic.project import sdk
    from pytest_connic.project.yamlguard import guard_loader

    loader = sdk.ProjectLoader(str(project_root), validation_only=True)
    guard_loader(loader, project_root)  # alias bombs never reach the SDK's unbounded safe_load
    try:
        agents = loader.load_agents()
    except FileNotFoundError as exc:
        return CoverageReport({"agents": [], "overall": 0.0, "error": str(exc)})
    load_errors = list(sdk.load_errors(loader))
    try:
        by_agent = _suites_by_agent(project_root)
    except DiscoveryError as exc:
        return CoverageReport({"agents": [], "overall": 0.0, "error": str(exc)})
    rows: list[dict[str, Any]] = []
    inventory: Inventory = {}
    for agent in agents:
        if getattr(agent.config, "is_test_variant", False):
            continue  # A/B variants are measured through their base agent
        tools = _agent_tools(agent)
        inventory[agent.config.name] = tools
        rows.append(_agent_row(agent, set(tools), by_agent.get(agent.config.name, [])))
    report: dict[str, Any] = {"agents": rows, "overall": _overall(rows)}
    error = _global_error(load_errors, by_agent, {row["name"] for row in rows})
    if error:
        report["error"] = error
    return CoverageReport(report, inventory)


def tool_inventory(project_root: Path) -> Inventory:
    """The tools (and parameter names) ``compute_coverage`` measures per agent, for a report that
    was re-read from JSON and so lost its ``inventory`` attribute."""
    return compute_coverage(project_root).inventory


def coverage_exit_status(report: Mapping[str, Any]) -> int:
    """Connic's exit status for a coverage report: 1 on a global error or any parse error, else 0."""
    broken = any(row.get("parse_error") for row in report.get("agents", []))
    return 1 if report.get("error") or broken else 0


def _suites_by_agent(project_root: Path) -> dict[str, list[_Suite]]:
    """Suites grouped by target agent; groups in order of first appearance, like Connic."""
    grouped: dict[str, list[_Suite]] = {}
    for suite in _load_suites(project_root):
        grouped.setdefault(suite.agent, []).append(suite)
    return grouped


def _load_suites(project_root: Path) -> Iterator[_Suite]:
    """Every non-empty suite, parsed by Connic's ``TestFile``. Raises ``DiscoveryError``."""
    for path in discover_suites(project_root):
        suite = _parse_suite(path, project_root)
        if suite is not None:
            yield suite


def _parse_suite(path: Path, project_root: Path) -> _Suite | None:
    """Parse one suite exactly as Connic does; ``None`` for an empty document."""
    import yaml

    from pytest_connic.project.sdk import TestFile, contained_source
    from pytest_connic.project.yamlguard import refusal

    rel = path.relative_to(project_root)
    agent = path.stem
    refused = refusal(path, rel.as_posix())
    if refused is not None:  # an alias bomb would keep Connic's validation busy forever
        return _Suite(agent, None, refused)
    try:
        # Text mode with the default encoding, as Connic reads it, so decode errors match too.
        with open(contained_source(path, project_root / "tests")) as stream:
            doc = yaml.safe_load(stream)
        if doc is None:
            return None
        if isinstance(doc, dict) and isinstance(doc.get("agent"), str):
            agent = doc["agent"]
        # ``TestFile(**doc)`` rather than ``model_validate``: a non-mapping document must fail
        # with the very same TypeError text Connic shows.
        return _Suite(agent, TestFile(**doc), None)
    except Exception as exc:  # noqa: BLE001 - Connic reports any failure as the suite's error
        return _Suite(agent, None, f"{rel}: {exc}")


def _agent_tools(agent: Any) -> dict[str, tuple[str, ...] | None]:
    """The agent's measured tools: ``tools`` + ``discoverable_tools`` minus discovery markers."""
    tools: dict[str, tuple[str, ...] | None] = {}
    for tool in [*agent.tools, *agent.discoverable_tools]:
        if tool.is_predefined and tool.name in DISCOVERY_MARKERS:
            continue
        properties = (tool.parameters or {}).get("properties")
        params = None if tool.is_predefined else tuple(sorted(properties or {}))
        tools[tool.ref or tool.name] = params
    return tools


def _agent_row(agent: Any, tools: set[str], suites: list[_Suite]) -> dict[str, Any]:
    """One row of the report."""
    errors = [suite.error for suite in suites if suite.error is not None]
    parse_error = "; ".join(errors) if errors else None
    tool_agent = _type_name(agent.config.type) == "tool"
    covered = _covered_tools(tool_agent, tools, suites)
    percent: float | None
    if parse_error is not None:
        percent = None
    elif tools:
        percent = 100.0 * len(covered) / len(tools)
    else:
        percent = 100.0 if suites else 0.0
    return {
        "name": agent.config.name,
        "type": _type_name(agent.config.type),
        "has_tests": bool(suites),
        "tools_total": len(tools),
        "tools_covered": len(covered),
        "uncovered_tools": sorted(tools - covered),
        "percent": percent,
        "parse_error": parse_error,
    }


def _covered_tools(tool_agent: bool, tools: set[str], suites: list[_Suite]) -> set[str]:
    """Tools named by positive assertions of the valid suites (a tool agent's by any case)."""
    covered: set[str] = set()
    for suite in suites:
        if suite.parsed is None:
            continue
        if tool_agent and suite.parsed.tests:
            covered |= tools  # a tool agent *is* its body tool: every run calls it
        for case in suite.parsed.tests:
            for name, _expression in _named_tools(case):
                ref = resolve_tool(name, tools)
                if ref is not None:
                    covered.add(ref)
    return covered


def _named_tools(expectation: Any) -> Iterator[tuple[str, str | None]]:
    """``(tool name, expression)`` of ``expected_tool_calls`` and ``expected_tool_call_order``."""
    # Not ``expected_no_tool_calls``: it asserts that a tool is *not* used, which covers nothing.
    for entry in expectation.expected_tool_calls:
        if isinstance(entry, str):
            yield entry, None
        else:
            yield next(iter(entry.items()))
    for name in expectation.expected_tool_call_order:
        yield name, None


def resolve_tool(name: str, refs: Iterable[str]) -> str | None:
    """The agent tool an assertion name means: the exact ref, else the one with the same short name
    (last dot segment: ``wrongmodule.add`` finds ``calc.add``, Connic's fallback)."""
    # The loader rejects agents whose tools share a function name, so at most one ref matches;
    # sorting only makes the choice deterministic regardless.
    ordered = sorted(refs)
    if name in ordered:
        return name
    short = name.split(".")[-1]
    return next((ref for ref in ordered if ref.split(".")[-1] == short), None)


def _type_name(agent_type: Any) -> str:
    """The agent type as the report spells it (``llm``, ``sequential``, ``tool``)."""
    return str(agent_type.value) if isinstance(agent_type, enum.Enum) else str(agent_type)


def _overall(rows: list[dict[str, Any]]) -> float:
    """Mean percent over rows without parse errors; each agent weighs the same."""
    valid = [row for row in rows if row["parse_error"] is None]
    return sum(row["percent"] for row in valid) / len(valid) if valid else 0.0


def _global_error(
    load_errors: list[str], by_agent: Mapping[str, list[_Suite]], reported: set[str]
) -> str | None:
    """Load errors, then every parse error if any broken suite targets an unreported agent."""
    parts = ["; ".join(load_errors)] if load_errors else []
    orphaned = any(
        suite.error for name, suites in by_agent.items() if name not in reported for suite in suites
    )
    if orphaned:
        every = [suite.error for suites in by_agent.values() for suite in suites if suite.error]
        parts.append(f"Test files failed to parse: {'; '.join(every)}")
    return "; ".join(parts) if parts else None


def render_coverage(report: Mapping[str, Any]) -> str:
    """The text ``connic test --coverage`` prints for ``report`` below its banner, without colours.

    A global ``error`` alone (Connic stops there); else "No agents found.", or the parse errors, or
    the table, uncovered tools and overall line. Control characters are escaped as Connic does.
    """
    if report.get("error"):
        return _escape(f"    ✗ {report['error']}") + "\n"
    rows = report["agents"]
    if not rows:
        return _escape("    ! No agents found.") + "\n"
    broken = [row for row in rows if row.get("parse_error")]
    if broken:
        details = "; ".join(f"{row['name']}: {row['parse_error']}" for row in broken)
        return _escape(f"    ✗ Test files failed to parse: {details}") + "\n"
    lines = _table(["Agent", "Type", "Tools covered", "Coverage"], [_table_row(row) for row in rows])
    gaps = [row for row in rows if row["has_tests"] and row["uncovered_tools"]]
    if gaps:
        lines += ["", _escape("  → Uncovered tools:")]
        lines += [_escape(f"    {row['name']}: {', '.join(row['uncovered_tools'])}") for row in gaps]
    plural = "s" if len(rows) != 1 else ""
    lines += ["", f"  Overall coverage: {report['overall']:.1f}%  ({len(rows)} agent{plural})", ""]
    return "\n".join(lines) + "\n"


def _table_row(row: Mapping[str, Any]) -> list[str]:
    """The four cells of one agent."""
    if not row["has_tests"]:
        tools_cell = "no tests"
    elif row["tools_total"] == 0:
        tools_cell = "—"
    else:
        tools_cell = f"{row['tools_covered']}/{row['tools_total']}"
    return [_escape(row["name"]), _escape(row["type"]), tools_cell, f"{row['percent']:5.1f}%"]


def _table(headers: list[str], rows: list[list[str]], indent: int = 4) -> list[str]:
    """A box-drawn table, columns as wide as their widest cell."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows)]
    pad = " " * indent

    def rule(left: str, joint: str, right: str) -> str:
        return pad + left + joint.join("─" * (width + 2) for width in widths) + right

    def line(cells: list[str]) -> str:
        return pad + "│ " + " │ ".join(c.ljust(w) for c, w in zip(cells, widths)) + " │"

    top, mid, bottom = rule("┌", "┬", "┐"), rule("├", "┼", "┤"), rule("└", "┴", "┘")
    return [top, line(headers), mid, *map(line, rows), bottom]


def _escape(text: str) -> str:
    """Connic's rendering of control characters (``\\x0a``), so nothing steers the terminal."""
    from pytest_connic.project.sdk import escape_terminal_text

    return escape_terminal_text(text)


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
) -> dict[str, Any]:
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
        suites = [suite for suite in _load_suites(project_root) if suite.parsed is not None]
    except DiscoveryError:
        suites = []
    for suite in suites:
        for case in suite.parsed.tests:
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


def _expectations(agent: str, expectation: Any) -> Iterator[tuple[str, str, str | None]]:
    """``(agent, tool name, expression)`` of a case and, recursively, of its child agents."""
    for name, expression in _named_tools(expectation):
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
            return ast.parse(candidate, mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return None


def _is_params(node: ast.AST) -> bool:
    """Whether ``node`` is the bare name ``params``."""
    return isinstance(node, ast.Name) and node.id == "params"


def render_runtime_coverage(report: Mapping[str, Any]) -> str:
    """A short section on what the run called and which parameters assertions leave out ("" when
    ``report`` has no ``"pytest_connic"`` key)."""
    extra = report.get("pytest_connic")
    if not extra:
        return ""
    lines = [_escape("  → Runtime tool usage (pytest-connic):")]
    for agent in extra["agents"]:
        total = len(agent["tools"])
        used = total - len(agent["never_called"])
        line = f"    {agent['name']}: {used}/{total} tools called"
        if agent["never_called"]:
            line += f"; never called: {', '.join(agent['never_called'])}"
        lines.append(_escape(line))
        lines += [_escape(text) for text in _param_lines(agent)]
    return "\n".join(lines) + "\n"


def _param_lines(agent: Mapping[str, Any]) -> Iterator[str]:
    """Detail lines for tools whose parameters assertions leave out or misname."""
    for ref, entry in agent["tools"].items():
        if ref in agent["asserted_tools"] and entry["unasserted_params"]:
            yield f"      {ref}: parameters never asserted: {', '.join(entry['unasserted_params'])}"
        if entry["unknown_params"]:
            yield f"      {ref}: assertions name unknown parameters: {', '.join(entry['unknown_params'])}"
    if agent["unmatched_assertions"]:
        yield f"      assertions naming no tool of the agent: {', '.join(agent['unmatched_assertions'])}"
