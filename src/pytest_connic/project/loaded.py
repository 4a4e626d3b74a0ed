"""The project loaded for running cases: real tool functions, middleware, hooks and guardrails,
imported the way Connic does, once per session and project."""

from __future__ import annotations

import contextlib
import io
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_connic.project import sdk
from pytest_connic.project.load import ProjectError, load_agents


class LoadedProject:
    """The project loaded for running: real tool functions, middleware, hooks, guardrails."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.loader, agents, self.warnings = load_agents(root, validation_only=False)
        self.agents: dict[str, sdk.Agent] = {a.config.name: a for a in agents}
        self.load_errors = list(sdk.load_errors(self.loader))
        self._lock = threading.RLock()

    def agent(self, name: str) -> sdk.Agent:
        """The agent called ``name``; ``ProjectError`` when there is none."""
        try:
            return self.agents[name]
        except KeyError:
            raise ProjectError(f"unknown agent '{name}'") from None

    def middleware(self, agent_name: str) -> Any:
        """The agent's middleware, loaded by the SDK (its output kept off the terminal)."""
        with self._lock, contextlib.redirect_stdout(io.StringIO()):
            return self.loader.load_middleware(agent_name)

    def hooks(self, agent_name: str) -> Any:
        """The agent's tool hooks, loaded by the SDK (its output kept off the terminal)."""
        with self._lock, contextlib.redirect_stdout(io.StringIO()):
            return self.loader.load_tool_hooks(agent_name)

    def guardrail(self, name: str) -> Any:
        """The custom guardrail ``guardrails/<name>.py``; ``ProjectError`` with the SDK's reason
        when it cannot be loaded."""
        with self._lock:
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                guardrail = self.loader.load_guardrail(name)
            if guardrail is None:
                detail = printed.getvalue().strip() or "; ".join(
                    e for e in sdk.load_errors(self.loader) if f"'{name}'" in e
                )
                raise ProjectError(
                    f"custom guardrail '{name}' could not be loaded from guardrails/{name}.py"
                    + (f": {detail}" if detail else "")
                )
            return guardrail

    def modules(self) -> list[ModuleType]:
        """The project's loaded modules (tools, middleware, hooks, guardrails)."""
        prefixes = ("tools", "middleware", "hooks", "guardrails")
        root = str(self.root)
        return [
            module
            for name, module in list(sys.modules.items())
            if name.split(".", 1)[0] in prefixes and str(getattr(module, "__file__", "") or "").startswith(root)
        ]
