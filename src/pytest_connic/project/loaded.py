"""The project loaded for running cases: real tool functions, middleware, hooks and guardrails,
imported the way Connic does, once per session and project."""

from __future__ import annotations

import contextlib
import io
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_connic.errors import ConnicError
from pytest_connic.project import sdk
from pytest_connic.project.apispec import ApiRegistry
from pytest_connic.project.load import LoadWarning, Locator, ProjectError, load_agents, printed_lines
from pytest_connic.project.located import exception_text, relative, user_location
from pytest_connic.usertb import ImportCapture, attach, import_failure
from pytest_connic.yamlpos import YamlPositions


class UserImportError(ConnicError):
    """A module of the project failed to import; the message names its file, line and exception."""


def import_error(exc: BaseException, root: Path, path: Path) -> UserImportError:
    """``tools/t.py:1: importing it raised ModuleNotFoundError: No module named 'x'``."""
    relpath = relative(root, path)
    if isinstance(exc, SyntaxError) and exc.filename:
        where = f"{relpath}:{exc.lineno or 1}" if Path(exc.filename).resolve() == path.resolve() else None
    else:
        where = user_location(exc, root)
    where = where or relpath
    return attach(UserImportError(f"{where}: importing {relpath} raised {exception_text(exc)}"),
                  import_failure(exc, root, path))


class LoadedProject:
    """The project loaded for running: real tool functions, middleware, hooks, guardrails.

    ``interrupted(exc)`` tells the user's own Ctrl-C (it propagates) from what user code raised
    at import (``KeyboardInterrupt``, ``SystemExit``, any exception: a located load error)."""

    def __init__(self, root: Path, interrupted: Callable[[BaseException], bool] = lambda exc: False,
                 api: ApiRegistry | None = None) -> None:
        self.root = root
        #: the OpenAPI specs of ``api:`` tools the user named (their operations, where requests go)
        self.api = api if api is not None else ApiRegistry()
        self.interrupted = interrupted
        #: the tool modules that failed to import, each as a located message
        self.import_errors: list[str] = []
        #: what Connic's loader warned about, located (the plugin shows those that collection,
        #: which imports nothing, could not see: middleware or hooks that fail to import)
        self.warnings: list[LoadWarning]
        self.loader, agents, self.warnings = load_agents(root, validation_only=False, prepare=self._guard,
                                                          api=self.api)
        self.agents: dict[str, sdk.Agent] = {a.config.name: a for a in agents}
        self._locator = Locator(root, agents)
        self.load_errors = list(sdk.load_errors(self.loader))
        self._lock = threading.RLock()

    def yaml_file(self, path: Path) -> tuple[Any, YamlPositions] | None:
        """A project YAML file (an agent's) with its positions, read once per session; None when it
        cannot be read."""
        with self._lock:
            return self._locator.load(path)

    def _guard(self, loader: Any) -> None:
        def translate(exc: BaseException, module_name: str) -> BaseException | None:
            if self.interrupted(exc):
                return None
            path = self.root / "tools" / (module_name.replace(".", "/") + ".py")
            error = import_error(exc, self.root, path)
            if str(error) not in self.import_errors:
                self.import_errors.append(str(error))
            return error

        sdk.guard_tool_imports(loader, translate)

    def import_errors_for(self, agent_name: str) -> list[str]:
        """The load errors of ``agent_name`` that come from a module failing to import (those the
        project index, which imports nothing, could not see), and those that name no agent."""
        failed = [e for e in self.load_errors if any(i in e for i in self.import_errors)]
        return [e for e in failed if f"'{agent_name}'" in e or not re.search(r"[Aa]gent '", e)]

    def _user_import(self, what: str, path: Path, load: Callable[[], Any]) -> Any:
        """``load()``, where what user code raises beyond the SDK's ``except Exception`` (``SystemExit``,
        ``KeyboardInterrupt``, a custom ``BaseException``) at import is a located ``ProjectError``."""
        try:
            return load()
        except Exception:
            raise
        except BaseException as exc:
            if self.interrupted(exc):
                raise
            raise ProjectError(f"{what}: {import_error(exc, self.root, path)}") from None

    def agent(self, name: str) -> sdk.Agent:
        """The agent called ``name``; ``ProjectError`` when there is none."""
        try:
            return self.agents[name]
        except KeyError:
            raise ProjectError(f"unknown agent '{name}'") from None

    def middleware(self, agent_name: str) -> Any:
        """The agent's middleware, loaded by the SDK (its output kept off the terminal). One that
        fails to import is None, as on Connic, and a load warning (``self.warnings``)."""
        with self._lock:
            return self._printing(lambda: self._user_import(
                f"the middleware of agent '{agent_name}'", self.root / "middleware" / f"{agent_name}.py",
                lambda: self.loader.load_middleware(agent_name)))

    def hooks(self, agent_name: str) -> Any:
        """The agent's tool hooks, loaded by the SDK (its output kept off the terminal). Hooks that
        fail to import are None, as on Connic, and a load warning (``self.warnings``)."""
        with self._lock:
            return self._printing(lambda: self._user_import(
                f"the tool hooks of agent '{agent_name}'", self.root / "hooks" / f"{agent_name}.py",
                lambda: self.loader.load_tool_hooks(agent_name)))

    def _printing(self, load: Callable[[], Any]) -> Any:
        """``load()``, what the SDK printed meanwhile kept as located warnings."""
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                return load()
        finally:
            for line in printed_lines(printed.getvalue()):
                warning = self._locator.printed(line)
                if all(w.key != warning.key for w in self.warnings):
                    self.warnings.append(warning)

    def guardrail(self, name: str) -> Any:
        """The custom guardrail ``guardrails/<name>.py``; ``ProjectError`` with the SDK's reason
        when it cannot be loaded."""
        with self._lock:
            printed = ImportCapture(self.root, self.root / "guardrails" / f"{name}.py")  # the traceback
            with contextlib.redirect_stdout(printed):
                guardrail = self._user_import(f"custom guardrail '{name}'", self.root / "guardrails" / f"{name}.py",
                                              lambda: self.loader.load_guardrail(name))
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
