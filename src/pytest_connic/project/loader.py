"""The Connic project, loaded through the SDK's ``ProjectLoader``.

Collection uses ``validation_only=True`` (the SDK parses user code with ``ast``
and executes nothing); running cases loads the project for real, once per
session, importing tools, middleware, hooks and guardrails the way Connic does.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_connic.project import sdk  # noqa: F401  (imports the SDK quietly, before any connic import)
from connic import ProjectLoader
from connic.core import Agent

from pytest_connic.suite.discovery import DiscoveryError, discover_suites


class ProjectError(Exception):
    """The project cannot be loaded (``agents/`` missing, load errors)."""


@dataclass
class ProjectIndex:
    """What collection needs to know about a project: its agents and load errors."""

    root: Path
    agents: dict[str, Agent] = field(default_factory=dict)
    load_errors: list[str] = field(default_factory=list)
    #: what the SDK printed while loading (warnings such as an unloadable schema)
    warnings: list[str] = field(default_factory=list)
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

    def unknown_agent_message(self, relpath: str, agent_name: str, from_stem: bool) -> str | None:
        """Connic's ``unknown agent`` error for a suite, or None when the agent exists."""
        if agent_name in self.agents:
            return None
        message = f"{relpath}: unknown agent '{agent_name}'"
        if from_stem:
            message += " (from the file name; set `agent:` to target another agent)"
        matches = difflib.get_close_matches(agent_name, sorted(self.agents), n=3)
        if matches:
            message += f". Did you mean {', '.join(repr(m) for m in matches)}?"
        failed = [e for e in self.load_errors if f"'{agent_name}'" in e or f"/{agent_name}.yaml" in e]
        if failed:
            message += "\n" + "\n".join(f"  {e}" for e in failed)
        return message


def _load(root: Path, *, validation_only: bool) -> tuple[ProjectLoader, list[Agent], list[str]]:
    loader = ProjectLoader(str(root), validation_only=validation_only)
    from pytest_connic.project.yamlguard import guard_loader

    guard_loader(loader, Path(root))  # alias bombs and huge files never reach the SDK's safe_load
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        try:
            agents = loader.load_agents()
        except FileNotFoundError as exc:
            raise ProjectError(str(exc)) from None
    warnings = [line.strip() for line in printed.getvalue().splitlines() if line.strip()]
    return loader, agents, warnings


def index_project(root: Path) -> ProjectIndex:
    """Load a project's agents without executing any of its code."""
    loader, agents, warnings = _load(root, validation_only=True)
    index = ProjectIndex(root=root, warnings=warnings)
    for agent in agents:
        index.agents.setdefault(agent.config.name, agent)
    index.load_errors = list(loader._load_errors)
    upload_error = upload_check(root)
    if upload_error:
        index.load_errors.append(f"the project cannot be uploaded to Connic: {upload_error}")
    return index


_CWD_LOCK = threading.Lock()


def upload_check(root: Path) -> str | None:
    """Connic's own packaging check (file types, links, the 5 MB code and 25 MB total limits),
    with Connic's message; None when the project would upload."""
    import os

    from connic import cli

    validate = getattr(cli, "_validate_project_files", None)
    if validate is None:  # the SDK moved it: nothing to compare against
        return None
    with _CWD_LOCK:
        previous = os.getcwd()
        os.chdir(root)
        try:
            valid, message, _ = validate()
        finally:
            os.chdir(previous)
    return None if valid else str(message)


class RuntimeProject:
    """The project loaded for running: real tool functions, middleware, hooks, guardrails."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.loader, agents, self.warnings = _load(root, validation_only=False)
        self.agents: dict[str, Agent] = {a.config.name: a for a in agents}
        self.load_errors = list(self.loader._load_errors)
        self._lock = threading.RLock()

    def agent(self, name: str) -> Agent:
        try:
            return self.agents[name]
        except KeyError:
            raise ProjectError(f"unknown agent '{name}'") from None

    def middleware(self, agent_name: str):  # type: ignore[no-untyped-def]
        with self._lock, contextlib.redirect_stdout(io.StringIO()):
            return self.loader.load_middleware(agent_name)

    def hooks(self, agent_name: str):  # type: ignore[no-untyped-def]
        with self._lock, contextlib.redirect_stdout(io.StringIO()):
            return self.loader.load_tool_hooks(agent_name)

    def guardrail(self, name: str):  # type: ignore[no-untyped-def]
        with self._lock:
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                guardrail = self.loader.load_guardrail(name)
            if guardrail is None:
                detail = printed.getvalue().strip() or "; ".join(
                    e for e in self.loader._load_errors if f"'{name}'" in e
                )
                raise ProjectError(
                    f"custom guardrail '{name}' could not be loaded from guardrails/{name}.py"
                    + (f": {detail}" if detail else "")
                )
            return guardrail

    def schema_path(self, name: str) -> Path:
        return self.root / "schemas" / f"{name}.json"

    def modules(self) -> list[Any]:
        """The project's loaded modules (tools, middleware, hooks, guardrails)."""
        import sys

        prefixes = ("tools", "middleware", "hooks", "guardrails")
        root = str(self.root)
        return [
            module
            for name, module in list(sys.modules.items())
            if name.split(".", 1)[0] in prefixes and str(getattr(module, "__file__", "") or "").startswith(root)
        ]
