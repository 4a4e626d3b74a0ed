"""Mistakes caught before the run: checks of a loaded suite against the project it targets.

``suite/loader.py`` validates a suite on its own (keys, values, expressions); this module knows the
project too (``project/index.py``: agents and their tools, as collection loads them, executing no
user code) and finds what would make a case wrong whatever the agent does:

- a tool name in ``expected_tool_calls``, ``expected_tool_call_order``, ``expected_no_tool_calls``
  (also under ``expected_child_agents``) that is neither the ref nor the function name of a tool
  the agent has (the SDK's connic/loader.py, ProjectLoader._resolve_tools, as ``checks/evaluate.py`` matches calls), or an ``approval_decisions``
  tool that is not the canonical ref of a tool some agent gates by approval (the SDK's connic/test_schema.py, TestApprovalDecision);
- an ``expected_child_agents`` name that no agent of the project has;
- a ``mocks:`` or ``builder:`` module that does not exist, and a ``build``, ``cleanup``, ``mock*``,
  ``middleware_*`` or ``guardrail*`` name in one that is bound to a value that cannot be called
  (read with ``ast``: nothing is imported).

A finding that makes the case wrong whatever the agent does is an error of its case (the case
fails in setup with ``path:line:col`` and the closest name). One that only makes an assertion
vacuous (``expected_no_tool_calls``, an ``approval_decisions`` entry that never answers), or that
is about an agent whose tools are not all known before the run (:func:`catalogue_is_open`), is a
located warning: the case runs, as it would on Connic.
"""

from __future__ import annotations

import ast
import difflib
import functools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pytest_connic.project.index import ProjectIndex
from pytest_connic.project.load import LoadWarning
from pytest_connic.pyparse import parse_module
from pytest_connic.suite.loader import CaseSpec, Suite
from pytest_connic.yamlpos import KeyPath, YamlPositions, format_path

#: the names Connic looks up in a builder or mocks module and calls (https://connic.co/docs/v1/test/fixtures-and-mocks): exact
#: names, then prefixes
_CALLED: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "builders": (("build", "cleanup"), ()),
    "mocks": (("mock",), ("mock_", "middleware_", "guardrail")),
}


def catalogue_is_open(config: object) -> bool:
    """Whether an agent's tools are not all known before the run: it has MCP servers (their tools
    come from the server) or ``api:`` tool refs (their tools come from a spec that may be
    missing or remote). Then an unknown tool name is a warning, not an error."""
    if getattr(config, "mcp_servers", None):
        return True
    for entry in [*(getattr(config, "tools", None) or []), *(getattr(config, "discoverable_tools", None) or [])]:
        ref = entry if isinstance(entry, str) else next(iter(entry), "") if isinstance(entry, dict) else ""
        if str(ref).startswith("api:"):
            return True
    return False


@dataclass
class Catalogue:
    """The tool names a run's trace of one agent can hold: every accepted name (ref or function
    name) to its ref. ``open``: names beyond these may appear (:func:`catalogue_is_open`)."""

    names: dict[str, str] = field(default_factory=dict)
    open: bool = False
    #: an agent that failed to load (or is unknown): nothing is said, the project error says it
    silent: bool = False

    def suggest(self, name: str) -> str | None:
        matches = difflib.get_close_matches(name, list(self.names), n=1, cutoff=0.6)
        return self.names.get(matches[0], matches[0]) if matches else None

    def listing(self, limit: int = 12) -> str:
        refs = sorted(set(self.names.values()))
        shown = ", ".join(refs[:limit]) + (f", ... ({len(refs)} in all)" if len(refs) > limit else "")
        return shown or "none"


def agent_catalogue(index: ProjectIndex, name: str, seen: frozenset[str] = frozenset()) -> Catalogue:
    """The catalogue of agent ``name``: its tools and discoverable tools (with ``search_tools`` and
    ``use_tool``), its approval input tools; for a sequential agent the union of its stages
    (their calls are the pipeline's trace). Unknown or failed agents make it open."""
    agent = index.agents.get(name)
    if agent is None or name in seen or _failed(index, name):
        return Catalogue(open=True, silent=name not in seen)
    config = agent.config
    catalogue = Catalogue(open=catalogue_is_open(config))
    for tool in [*agent.tools, *getattr(agent, "discoverable_tools", [])]:
        ref = tool.ref or tool.name
        catalogue.names.setdefault(ref, ref)
        catalogue.names.setdefault(tool.name, ref)
    approval = getattr(config, "approval", None)
    for item in getattr(approval, "inputs", None) or []:
        for input_name in item:
            catalogue.names.setdefault(input_name, input_name)
    if getattr(config.type, "value", config.type) == "sequential":
        for stage in getattr(config, "agents", None) or []:
            inner = agent_catalogue(index, stage, seen | {name})
            catalogue.open = catalogue.open or inner.open
            catalogue.silent = catalogue.silent or inner.silent
            for key, ref in inner.names.items():
                catalogue.names.setdefault(key, ref)
    return catalogue


def _failed(index: ProjectIndex, name: str) -> bool:
    """An agent with a load error (its tools may be incomplete): the project error says so."""
    return any(f"'{name}'" in e or f"/{name}.yaml" in e for e in index.load_errors)


def _gated(index: ProjectIndex) -> tuple[Catalogue, dict[str, str]]:
    """The refs ``approval_decisions`` can name (every tool gated by approval in the project,
    and every approval input tool), and every tool's function name and ref to its ref."""
    # approval.tools lists MCP tools by name too, so only an agent that failed to load (whose
    # approval config is unknown) hides gates; the project's load error is reported anyway
    gated = Catalogue(silent=bool(index.load_errors))
    every: dict[str, str] = {}
    for agent in index.agents.values():
        tools = [*agent.tools, *getattr(agent, "discoverable_tools", [])]
        for tool in tools:
            every.setdefault(tool.name, tool.ref or tool.name)
            every.setdefault(tool.ref or tool.name, tool.ref or tool.name)
        approval = getattr(agent.config, "approval", None)
        if approval is None:
            continue
        for item in approval.tools or []:
            listed = item if isinstance(item, str) else next(iter(item), "")
            ref = next((t.ref or t.name for t in tools if listed in (t.ref, t.name)), listed)
            gated.names.setdefault(ref, ref)
        for item in approval.inputs or []:
            for input_name in item:
                gated.names.setdefault(input_name, input_name)
    return gated, every


@dataclass
class Findings:
    """What checking one case found: errors (the case fails) and warnings (it runs)."""

    errors: list[str] = field(default_factory=list)
    warnings: list[tuple[str, int]] = field(default_factory=list)  #: message, line


@dataclass
class _SuiteMemo:
    """What every case of a suite checks against, computed once: the catalogue of each agent and
    the tools some agent gates by approval."""

    index: ProjectIndex
    catalogues: dict[str, Catalogue] = field(default_factory=dict)
    _gated: tuple[Catalogue, dict[str, str]] | None = None

    def catalogue(self, agent: str) -> Catalogue:
        if agent not in self.catalogues:
            self.catalogues[agent] = agent_catalogue(self.index, agent)
        return self.catalogues[agent]

    def gated(self) -> tuple[Catalogue, dict[str, str]]:
        if self._gated is None:
            self._gated = _gated(self.index)
        return self._gated


class _CaseChecker:
    def __init__(self, suite: Suite, case: CaseSpec, index: ProjectIndex, memo: _SuiteMemo) -> None:
        self.suite, self.case, self.index = suite, case, index
        self.memo = memo
        self.positions = suite.positions or YamlPositions()
        self.found = Findings()

    def where(self, path: KeyPath, *, key: bool = False) -> tuple[str, int]:
        line, col = self.positions.of(path, key=key)
        return f"{self.suite.relpath}:{line}:{col}", line

    def report(self, path: KeyPath, message: str, *, key: bool = False, warn: bool = False) -> None:
        where, line = self.where(path, key=key)
        text = f"{where}: {format_path(path)}: {message}"
        if warn:
            self.found.warnings.append((text, line))
        else:
            self.found.errors.append(text)

    def tool_lists(self, spec: Mapping[str, object], path: KeyPath, agent: str) -> None:
        catalogue = self.memo.catalogue(agent)
        if catalogue.silent:
            return
        for entry_path, key, name in _named_tools(spec, path):
            if not isinstance(name, str) or name in catalogue.names:
                continue
            hint = catalogue.suggest(name)
            did_you_mean = f"; did you mean '{hint}'?" if hint else ""
            if catalogue.open:
                self.report(entry_path, f"agent '{agent}' has no known tool '{name}'{did_you_mean} (not checked: "
                            "its MCP servers or api: tools are known only when it runs)", key=key, warn=True)
            elif "expected_no_tool_calls" in entry_path:  # vacuous, not wrong: the case can pass
                self.report(entry_path, f"agent '{agent}' has no tool '{name}'{did_you_mean} (its tools: "
                            f"{catalogue.listing()}); this assertion can never fail", warn=True)
            else:
                self.report(entry_path, f"agent '{agent}' has no tool '{name}'{did_you_mean} (its tools: "
                            f"{catalogue.listing()}); the assertion could never hold", key=key)

    def children(self, spec: Mapping[str, object], path: KeyPath) -> None:
        children = spec.get("expected_child_agents")
        if not isinstance(children, dict):
            return
        for name, child in children.items():
            child_path = (*path, "expected_child_agents", name)
            if name not in self.index.agents:
                matches = difflib.get_close_matches(str(name), sorted(self.index.agents), n=1)
                hint = f"; did you mean '{matches[0]}'?" if matches else ""
                self.report(child_path, f"no agent '{name}' in this project{hint} (agents: "
                            f"{', '.join(sorted(self.index.agents)) or 'none'}); it can never be triggered",
                            key=True)
                continue
            if isinstance(child, dict):
                self.tool_lists(child, child_path, str(name))
                self.children(child, child_path)

    def approvals(self, decisions: object) -> None:
        if not isinstance(decisions, list) or not decisions:
            return
        gated, every = self.memo.gated()
        if gated.silent:
            return
        for i, decision in enumerate(decisions):
            tool = decision.get("tool") if isinstance(decision, dict) else None
            if not isinstance(tool, str) or tool in gated.names:
                continue
            path = ("tests", self.case.index, "approval_decisions", i, "tool")
            ref = every.get(tool)
            # a warning: the decision is never used, but the case can still be right (a run that
            # ends awaiting approval may be what it expects)
            if ref is not None and ref != tool and ref in gated.names:
                self.report(path, f"approval decisions name the tool by its canonical ref: write '{ref}', "
                            f"not '{tool}' (Connic matches a decision by its canonical ref, never by a short name: this decision "
                            "never answers a request)", warn=True)
                continue
            hint = gated.suggest(tool)
            did_you_mean = f"; did you mean '{hint}'?" if hint else ""
            what = (f"no agent gates '{tool}' by approval{did_you_mean} (gated: {gated.listing()}); "
                    "this decision could never answer a request")
            self.report(path, what, warn=True)


def _named_tools(spec: Mapping[str, object], path: KeyPath) -> Iterator[tuple[KeyPath, bool, object]]:
    """Every tool name of a case's (or child's) tool assertions: its key path, whether the path
    is a mapping key (``- tool: expression``), and the name."""
    entries = spec.get("expected_tool_calls") or []
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        if isinstance(entry, dict):
            for tool in entry:
                yield (*path, "expected_tool_calls", i, tool), True, tool
        else:
            yield (*path, "expected_tool_calls", i), False, entry
    for key in ("expected_tool_call_order", "expected_no_tool_calls"):
        names = spec.get(key) or []
        for i, name in enumerate(names if isinstance(names, list) else []):
            yield (*path, key, i), False, name


def check_case(suite: Suite, case: CaseSpec, index: ProjectIndex, memo: _SuiteMemo) -> Findings:
    """Check one valid case against the project (tool names, child agents, modules)."""
    checker = _CaseChecker(suite, case, index, memo)
    if case.error is not None or case.resolved is None:
        return checker.found
    path: KeyPath = ("tests", case.index)
    checker.tool_lists(case.raw, path, suite.agent_name)
    checker.children(case.raw, path)
    checker.approvals(case.raw.get("approval_decisions"))
    _modules(checker, index.root)
    return checker.found


def _modules(checker: _CaseChecker, root: Path) -> None:
    """``builder:`` and ``mocks:`` modules: missing ones (with the closest existing name), and
    names Connic calls bound to values that cannot be called."""
    case = checker.case
    resolved = case.resolved
    for key, folder in (("builder", "builders"), ("mocks", "mocks")):
        name = resolved.get(key) if resolved is not None else None
        if not isinstance(name, str) or not name:
            continue
        path: KeyPath = ("tests", case.index, key) if key in case.raw else ("defaults", key)
        stem = name.removesuffix(".py")
        file = root / "tests" / folder / f"{stem}.py"
        if not file.is_file():
            existing = sorted(p.stem for p in (root / "tests" / folder).glob("*.py")) if (root / "tests" / folder).is_dir() else []
            matches = difflib.get_close_matches(stem, existing, n=1)
            hint = f"; did you mean '{matches[0]}'?" if matches else ""
            checker.report(path, f"no {key} module tests/{folder}/{stem}.py{hint} ({folder}: "
                           f"{', '.join(existing) or 'none'}); Connic fails the case before the agent starts")
            continue
        for attr, line, col, kind in not_callable(file, folder):
            rel = file.relative_to(root).as_posix()
            checker.report(path, f"{rel}:{line}:{col}: '{attr}' is {kind}, not a function; Connic calls it, "
                           f"so it must be a def (or another callable)")


def not_callable(path: Path, folder: str) -> list[tuple[str, int, int, str]]:
    """Module-level names Connic calls in a builder (``folder`` "builders") or mocks file bound to a literal (a number, a
    string, None, a list, ...): name, line, column (1-based), what it is. Read with ``ast``."""
    try:
        stat = path.stat()
    except OSError:
        return []
    return _not_callable(str(path), folder, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=256)
def _not_callable(path: str, folder: str, mtime: int, size: int) -> list[tuple[str, int, int, str]]:
    names, prefixes = _CALLED[folder]
    try:
        tree = parse_module(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return []  # the run reports a module that does not import, with its traceback
    out: dict[str, tuple[str, int, int, str]] = {}
    for node in tree.body:
        for target, value in _bindings(node):
            if target.id not in names and not target.id.startswith(prefixes):
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.pop(target.id, None)
                continue
            kind = _literal_kind(value)
            if kind is None:
                out.pop(target.id, None)  # an expression: it may well be callable
            else:
                out[target.id] = (target.id, target.lineno, target.col_offset + 1, kind)
    return list(out.values())


def _bindings(node: ast.stmt) -> Iterable[tuple[ast.Name, ast.expr | None]]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield ast.Name(id=node.name, lineno=node.lineno, col_offset=node.col_offset), None
    elif isinstance(node, ast.Assign):
        for target in node.targets:
            if isinstance(target, ast.Name):
                yield target, node.value
    elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        yield node.target, node.value


def _literal_kind(value: ast.expr | None) -> str | None:
    if isinstance(value, ast.Constant):
        return "None" if value.value is None else f"{value.value!r:.40} ({type(value.value).__name__})"
    names = {ast.List: "a list", ast.Tuple: "a tuple", ast.Dict: "a dict", ast.Set: "a set",
             ast.JoinedStr: "a str", ast.ListComp: "a list", ast.DictComp: "a dict", ast.SetComp: "a set"}
    return names.get(type(value))


def check_suite(suite: Suite, index: ProjectIndex) -> list[LoadWarning]:
    """Check every case of ``suite``: a case with an error gets it as ``CaseSpec.error`` (it fails
    in setup, its siblings run); the warnings are returned, located at the suite's lines."""
    out: list[LoadWarning] = []
    memo = _SuiteMemo(index)
    for case in suite.cases:
        found = check_case(suite, case, index, memo)
        if found.errors:
            case.error = "\n".join(found.errors)
        for message, line in found.warnings:
            out.append(LoadWarning(f"static:{message}", message, suite.path, line))
    return out
