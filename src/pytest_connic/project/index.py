"""The project index: what collection needs to know about a Connic project (its agents, load
errors and warnings), loaded with ``validation_only=True`` so that no user code runs."""

from __future__ import annotations

import contextlib
import difflib
import io
from dataclasses import dataclass, field
from pathlib import Path

from pytest_connic.project import sdk
from pytest_connic.project.apispec import ApiRegistry
from pytest_connic.project.layout import DiscoveryError, discover_suites
from pytest_connic.project.load import LoadWarning, Locator, load_agents, printed_lines


@dataclass
class ProjectIndex:
    """What collection needs to know about a project: its agents and load errors."""

    root: Path
    agents: dict[str, sdk.Agent] = field(default_factory=dict)
    load_errors: list[str] = field(default_factory=list)
    #: what Connic's loader warns about (an unloadable schema, middleware that does not parse, a
    #: skipped ``api:`` ref, an unknown agent key), located: shown once per session at collection
    warnings: list[LoadWarning] = field(default_factory=list)
    _first_suite: tuple[Path | None] | None = field(default=None, init=False, repr=False, compare=False)

    def is_first_suite(self, path: Path) -> bool:
        """Whether ``path`` is the project's first suite in Connic's order, where load errors are
        reported (every suite, when the layout is refused). Found once per project, not per suite."""
        if self._first_suite is None:
            try:
                suites = discover_suites(self.root)
            except DiscoveryError:
                return True
            self._first_suite = (suites[0] if suites else None,)
        return self._first_suite[0] == path

    def unknown_agent_message(self, where: str, agent_name: str, from_stem: bool) -> str | None:
        """Connic's ``unknown agent`` error for a suite, located at ``where`` (``path:line:col`` of
        its ``agent:`` key, or of the file's first line), or None when the agent exists."""
        if agent_name in self.agents:
            return None
        message = f"{where}: unknown agent '{agent_name}'"
        if from_stem:
            message += " (from the file name; set `agent:` to target another agent)"
        matches = difflib.get_close_matches(agent_name, sorted(self.agents), n=3)
        if matches:
            message += f". Did you mean {', '.join(repr(m) for m in matches)}?"
        failed = [e for e in self.load_errors if f"'{agent_name}'" in e or f"/{agent_name}.yaml" in e]
        if failed:
            message += "\n" + "\n".join(f"  {e}" for e in failed)
        return message


def index_project(root: Path, api: ApiRegistry | None = None) -> ProjectIndex:
    """Load a project's agents without executing any of its code (``api``: its OpenAPI specs)."""
    loader, agents, warnings = load_agents(root, validation_only=True, api=api)
    index = ProjectIndex(root=root, warnings=warnings)
    for agent in agents:
        index.agents.setdefault(agent.config.name, agent)
    index.load_errors = list(sdk.load_errors(loader))
    index.warnings += module_warnings(root, loader, agents)
    index.warnings += setting_warnings(root, agents)
    from pytest_connic.project.agentkeys import agent_key_warnings

    index.warnings += agent_key_warnings(root)
    index.warnings += upload_warnings(root)
    return index


def module_warnings(root: Path, loader: object, agents: list[sdk.Agent]) -> list[LoadWarning]:
    """What ``connic lint`` warns about middleware and hooks: the SDK's discovery of
    ``middleware/*.py`` and ``hooks/*.py``, by ``ast`` (nothing executes), so a file that does
    not parse is found at collection. Its load errors are dropped, as lint drops them ("non-fatal")."""
    errors = sdk.load_errors(loader)
    before = len(errors)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for discover in ("discover_middlewares", "discover_tool_hooks"):
            method = getattr(loader, discover, None)
            if method is None:
                continue
            try:
                method()
            except Exception:  # noqa: BLE001,S112 -- lint's own "No middleware/ directory found" and the like
                continue
    del errors[before:]
    locator = Locator(root, agents)
    return [locator.printed(line) for line in printed_lines(printed.getvalue())]


def setting_warnings(root: Path, agents: list[sdk.Agent]) -> list[LoadWarning]:
    """Located warnings for agent settings a local run passes on or does not apply:
    ``reasoning_budget`` (deprecated, as ``connic lint`` says; passed to the model) and
    ``context_compression`` (not simulated)."""
    locator = Locator(root, agents)
    out: list[LoadWarning] = []
    for agent in agents:
        config = agent.config
        if getattr(config, "reasoning_budget", None) is not None:
            path, line = locator.key_line(config.name, ("reasoning_budget",))
            out.append(LoadWarning(
                f"reasoning_budget:{config.name}",
                f"{locator.rel(path)}: reasoning_budget is deprecated and only works with legacy models; use "
                f"reasoning_effort instead (connic lint). pytest-connic passes it to the model of agent "
                f"'{config.name}' as Connic does", path, line))
        compression = getattr(config, "context_compression", None)
        if compression is not None and getattr(compression, "enabled", True) and getattr(config.type, "value", config.type) == "llm":
            path, line = locator.key_line(config.name, ("context_compression",))
            out.append(LoadWarning(
                f"context_compression:{config.name}",
                f"{locator.rel(path)}: context_compression of agent '{config.name}' is not applied locally: "
                "no conversation is ever compressed, so a run that reaches a compression point (a provider "
                "context-window error, which Connic answers by compressing and retrying, or a reported "
                "prompt over max_prompt_tokens) can end differently here: an infrastructure error instead "
                "of a retry, or the model reading the whole conversation instead of its summary", path, line))
        kind = getattr(config.type, "value", config.type)
        if getattr(config, "mcp_servers", None) and kind != "llm":
            path, line = locator.key_line(config.name, ("mcp_servers",))
            out.append(LoadWarning(
                f"mcp_servers:{config.name}",
                f"{locator.rel(path)}: mcp_servers of agent '{config.name}' are not used: MCP servers give "
                f"tools to a model, and a '{kind}' agent has none (Connic connects them for LLM agents "
                "only)", path, line))
    return out


def upload_check(root: Path) -> str | None:
    """Connic's own packaging check (file types, links, the 5 MB code and 25 MB total limits),
    with Connic's message; None when the project would upload."""
    return sdk.validate_project_files(root)


def upload_warnings(root: Path) -> list[LoadWarning]:
    """A project Connic would refuse to upload, as one warning (not an error: files that other
    tools write under ``tests/``, a syrupy snapshot or a JUnit file, must not stop the local run).
    It names every file of a refused type, not only the first one Connic's check stops at."""
    message = upload_check(root)
    if message is None:
        return []
    refused = sdk.refused_file_types(root)
    text = f"Connic would refuse to upload this project: {message}"
    if len(refused) > 1 or (refused and str(refused[0]) not in message):
        text += f"\n  files of a type Connic refuses: {', '.join(p.as_posix() for p in refused)}"
    text += "\n  The cases run here; remove, move or rename these files before `connic deploy`."
    where = root / refused[0] if refused else root
    return [LoadWarning("upload", text, where, 1)]
