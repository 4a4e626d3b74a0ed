"""Static test coverage identical to ``connic test --coverage`` (the SDK's connic/cli.py, _compute_local_coverage).

``compute_coverage`` reproduces Connic's report: same algorithm, JSON shape, values (floats
unrounded) and messages. Agents load through the SDK's ``ProjectLoader`` in validation-only mode
(AST stubs: no user code runs); suites parse with the SDK's own ``TestFile`` model. The runtime
extras are in ``coverage.runtime``, the text Connic prints in ``coverage.render``.
"""

from __future__ import annotations

import contextlib
import enum
import io
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_connic.project.layout import DiscoveryError, discover_suites

if TYPE_CHECKING:
    from pytest_connic.project.apispec import ApiRegistry
    from pytest_connic.project.sdk import Agent, ChildAgentExpectation, TestCase, TestFile

__all__ = [
    "DISCOVERY_MARKERS",
    "CoverageReport",
    "Inventory",
    "compute_coverage",
    "coverage_exit_status",
    "load_suites",
    "named_tools",
    "resolve_tool",
    "tool_inventory",
]

#: Tools the runtime injects for ``discoverable_tools``; users did not author them.
DISCOVERY_MARKERS = frozenset({"search_tools", "use_tool"})

#: Agent name -> tool ref -> parameter names from the tool's schema (``None``: not known locally,
#: as for predefined tools whose implementation the runner injects).
Inventory = dict[str, dict[str, tuple[str, ...] | None]]

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
    parsed: TestFile | None
    error: str | None


def compute_coverage(project_root: Path, *, api: ApiRegistry | None = None) -> CoverageReport:
    """What ``connic test --coverage --json`` prints for the project: ``agents`` rows, ``overall``,
    and ``error`` when agents failed to load or suites of unreported agents failed to parse.

    ``api``: the OpenAPI specs of ``api:`` tools (``project.apispec.load_registry``). Without it
    ``api:`` refs resolve to nothing and do not count, as in ``connic test --coverage``; with it
    the tools of the specs given count, as Connic's deploy (which has the dashboard's specs)
    counts them, and the specs' problems are load errors."""
    from pytest_connic.project import sdk
    from pytest_connic.project.load import new_loader

    loader = new_loader(project_root, validation_only=True, api=api)
    try:
        # the SDK prints what it warns about; collection has shown each of these, located
        # (project/index.py), and a print here would land in the middle of pytest's output
        with contextlib.redirect_stdout(io.StringIO()):
            agents = loader.load_agents()
    except FileNotFoundError as exc:
        return CoverageReport({"agents": [], "overall": 0.0, "error": str(exc)})
    load_errors = list(sdk.load_errors(loader)) + (list(api.errors) if api is not None else [])
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


def tool_inventory(project_root: Path, *, api: ApiRegistry | None = None) -> Inventory:
    """The tools (and parameter names) ``compute_coverage`` measures per agent, for a report that
    was re-read from JSON and so lost its ``inventory`` attribute."""
    return compute_coverage(project_root, api=api).inventory


def coverage_exit_status(report: Mapping[str, Any]) -> int:
    """Connic's exit status for a coverage report: 1 on a global error or any parse error, else 0."""
    broken = any(row.get("parse_error") for row in report.get("agents", []))
    return 1 if report.get("error") or broken else 0


def _suites_by_agent(project_root: Path) -> dict[str, list[_Suite]]:
    """Suites grouped by target agent; groups in order of first appearance, like Connic."""
    grouped: dict[str, list[_Suite]] = {}
    for suite in load_suites(project_root):
        grouped.setdefault(suite.agent, []).append(suite)
    return grouped


def load_suites(project_root: Path) -> Iterator[_Suite]:
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


def _agent_tools(agent: Agent) -> dict[str, tuple[str, ...] | None]:
    """The agent's measured tools: ``tools`` + ``discoverable_tools`` minus discovery markers."""
    tools: dict[str, tuple[str, ...] | None] = {}
    for tool in [*agent.tools, *agent.discoverable_tools]:
        if tool.is_predefined and tool.name in DISCOVERY_MARKERS:
            continue
        properties = (tool.parameters or {}).get("properties")
        ref = tool.ref or tool.name
        # an api: tool's parameters are its OpenAPI operation's (project/apispec.py)
        params = None if tool.is_predefined and not ref.startswith("api:") else tuple(sorted(properties or {}))
        tools[ref] = params
    return tools


def _agent_row(agent: Agent, tools: set[str], suites: list[_Suite]) -> dict[str, Any]:
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
            for name, _expression in named_tools(case):
                ref = resolve_tool(name, tools)
                if ref is not None:
                    covered.add(ref)
    return covered


def named_tools(expectation: TestCase | ChildAgentExpectation) -> Iterator[tuple[str, str | None]]:
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


def _type_name(agent_type: object) -> str:
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
