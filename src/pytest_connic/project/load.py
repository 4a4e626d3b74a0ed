"""Loading a Connic project through the SDK's ``ProjectLoader``, shared by the project index
(collection, ``validation_only=True``: the SDK parses user code with ``ast`` and executes
nothing) and the loaded project (running cases: tools, middleware, hooks and guardrails
imported the way Connic does)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_connic.errors import ConnicError
from pytest_connic.project.sdk import Agent, ProjectLoader
from pytest_connic.project.yamlguard import guard_loader


class ProjectError(ConnicError):
    """The project cannot be loaded (``agents/`` missing, load errors)."""


def load_agents(root: Path, *, validation_only: bool, prepare: Callable[[Any], None] | None = None,
                ) -> tuple[ProjectLoader, list[Agent], list[str]]:
    """The loader, the project's agents and what the SDK printed while loading them (warnings
    such as an unloadable schema). Raises ``ProjectError`` when ``agents/`` is missing.
    ``prepare(loader)`` runs before the agents load (``LoadedProject`` guards tool imports)."""
    loader = ProjectLoader(str(root), validation_only=validation_only)
    guard_loader(loader, Path(root))  # alias bombs and huge files never reach the SDK's safe_load
    if prepare is not None:
        prepare(loader)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        try:
            agents = loader.load_agents()
        except FileNotFoundError as exc:
            raise ProjectError(str(exc)) from None
    warnings = [line.strip() for line in printed.getvalue().splitlines() if line.strip()]
    return loader, agents, warnings
