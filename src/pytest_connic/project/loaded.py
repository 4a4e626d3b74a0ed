"""The project loaded for running cases: real tool functions, middleware, hooks and guardrails,
imported the way Connic does, once per session and project.

Under process isolation pytest's process reads the project statically (``static=True``: the
SDK's validation mode, whose stubs name their real function for a worker; nothing of the user's
executes) and a worker imports the real modules: before a case's agent first runs, a worker
imports its modules one by one (``worker_import``) and describes the agent as the SDK loads it
for real (``worker_describe``), which pytest's process adopts (``adopt``): exact tool schemas, the
import errors, the middleware and hooks that fail to load."""

from __future__ import annotations

import contextlib
import inspect
import io
import re
import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from pytest_connic.errors import ConnicError
from pytest_connic.project import sdk
from pytest_connic.project.apispec import ApiRegistry
from pytest_connic.project.load import (
    LoadWarning,
    Locator,
    ProjectError,
    load_agents,
    new_loader,
    printed_lines,
)
from pytest_connic.project.located import exception_text, relative, user_location
from pytest_connic.usertb import ImportCapture, attach, import_failure
from pytest_connic.yamlpos import YamlPositions

_T = TypeVar("_T")


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


#: the head of the SDK's printed warning about middleware or hooks that failed to load
_MODULE_REASON = re.compile(r"^Warning: (?:Failed to load|Could not discover) (?:middleware|tool hooks|hooks) for \S+?: ")

#: the projects loaded in this process by root (a worker's calls by reference find theirs here)
_PROJECTS: weakref.WeakValueDictionary[str, LoadedProject] = weakref.WeakValueDictionary()


@dataclass
class AgentReport:
    """An agent as a worker loaded it for real (``worker_describe``), for pytest's process."""

    #: tool ref -> (description, parameters) of every tool of the project's modules
    tools: dict[str, tuple[str, dict[str, object]]] = field(default_factory=dict)
    #: the agent's load error (a module that failed to import, a tool the SDK refuses), as Connic words it
    errors: list[str] = field(default_factory=list)
    #: "middleware" / "hooks" that failed to load for real (the agent runs without them, warned)
    failed: list[str] = field(default_factory=list)
    warnings: list[LoadWarning] = field(default_factory=list)

    def to_data(self) -> dict[str, object]:
        """The report as plain data (it crosses from a worker as data, never pickled)."""
        return {"tools": {ref: [text, params] for ref, (text, params) in self.tools.items()},
                "errors": list(self.errors), "failed": list(self.failed),
                "warnings": [[w.key, w.message, str(w.path), w.line, w.unknown_key] for w in self.warnings]}

    @classmethod
    def from_data(cls, data: object) -> AgentReport:
        """The report ``to_data`` gave (``ProjectError`` when ``data`` is not one: user code
        replaced the worker's own code)."""
        try:
            assert isinstance(data, dict)
            tools = {str(ref): (str(text), dict(params)) for ref, (text, params) in data["tools"].items()}
            warnings = [LoadWarning(str(key), str(message), Path(str(path)), int(line), bool(unknown))
                        for key, message, path, line, unknown in data["warnings"]]
            return cls(tools, [str(e) for e in data["errors"]], [str(f) for f in data["failed"]], warnings)
        except (AssertionError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ProjectError("the Connic project failed to load: a worker process described an agent with "
                               f"something that is not an agent's report ({type(exc).__name__})") from None


#: not looked up yet (``LoadedProject._loaded``)
_UNLOADED = object()


class LoadedProject:
    """The project loaded for running: real tool functions, middleware, hooks, guardrails.

    ``interrupted(exc)`` tells the user's own Ctrl-C (it propagates) from what user code raised
    at import (``KeyboardInterrupt``, ``SystemExit``, any exception: a located load error).

    ``static``: read as the SDK's validation mode reads it (nothing executes; the functions are
    stubs that name their real function for a worker process), as pytest's process does under
    process isolation and a worker before it imports what a run needs (``import_module``, which
    calls ``on_import`` with each module it imported)."""

    def __init__(self, root: Path, interrupted: Callable[[BaseException], bool] = lambda exc: False,
                 api: ApiRegistry | None = None, *, static: bool = False,
                 on_import: Callable[[str, ModuleType], None] | None = None) -> None:
        self.root = root
        #: the OpenAPI specs of ``api:`` tools the user named (their operations, where requests go)
        self.api = api if api is not None else ApiRegistry()
        self.interrupted = interrupted
        self.static = static
        self.on_import = on_import
        #: the tool modules that failed to import, each as a located message
        self.import_errors: list[str] = []
        #: what Connic's loader warned about, located (the plugin shows those that collection,
        #: which imports nothing, could not see: middleware or hooks that fail to import)
        self.warnings: list[LoadWarning]
        self.loader, agents, self.warnings = load_agents(
            root, validation_only=static, prepare=sdk.mark_static_stubs if static else self._guard, api=self.api)
        self.agents: dict[str, sdk.Agent] = {a.config.name: a for a in agents}
        self._locator = Locator(root, agents)
        self.load_errors = list(sdk.load_errors(self.loader))
        self._lock = threading.RLock()
        #: static: the agents a worker described (``adopt``), their load errors, what failed to load
        self.described: set[str] = set()
        self._agent_errors: dict[str, list[str]] = {}
        self._failed: set[tuple[str, str]] = set()
        self._real: sdk.ProjectLoader | None = None  #: static: the SDK's real loader, for ``import_module``
        self._adopted: set[str] = set()
        self._import_failures: dict[str, str] = {}
        #: an agent's middleware and tool hooks as the SDK loaded them (it keeps them too), by kind and agent
        self._loaded: dict[tuple[str, str], object] = {}
        _PROJECTS[str(root)] = self

    def yaml_file(self, path: Path) -> tuple[Any, YamlPositions] | None:
        """A project YAML file (an agent's) with its positions, read once per session; None when it
        cannot be read."""
        with self._lock:
            return self._locator.load(path)

    def _guard(self, loader: sdk.ProjectLoader) -> None:
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
        project index, which imports nothing, could not see), and those that name no agent.
        Static: those a worker reported (``adopt``)."""
        if self.static:
            return list(self._agent_errors.get(agent_name, ()))
        failed = [e for e in self.load_errors if any(i in e for i in self.import_errors)]
        return [e for e in failed if f"'{agent_name}'" in e or not re.search(r"[Aa]gent '", e)]

    def _user_import(self, what: str, path: Path, load: Callable[[], _T]) -> _T:
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

    def middleware(self, agent_name: str) -> object:
        """The agent's middleware, loaded by the SDK (its output kept off the terminal). One that
        fails to import is None, as on Connic, and a load warning (``self.warnings``)."""
        if ("middleware", agent_name) in self._failed:
            return None
        loaded = self._loaded.get(("middleware", agent_name), _UNLOADED)
        if loaded is not _UNLOADED:  # the SDK keeps what it loaded: asked per invocation, looked up once
            return loaded
        with self._lock:
            loaded = self._loaded[("middleware", agent_name)] = self._printing(lambda: self._user_import(
                f"the middleware of agent '{agent_name}'", self.root / "middleware" / f"{agent_name}.py",
                lambda: self.loader.load_middleware(agent_name)))
            return loaded

    def hooks(self, agent_name: str) -> object:
        """The agent's tool hooks, loaded by the SDK (its output kept off the terminal). Hooks that
        fail to import are None, as on Connic, and a load warning (``self.warnings``)."""
        if ("hooks", agent_name) in self._failed:
            return None
        loaded = self._loaded.get(("hooks", agent_name), _UNLOADED)
        if loaded is not _UNLOADED:  # the SDK keeps what it loaded: asked per tool call, looked up once
            return loaded
        with self._lock:
            loaded = self._loaded[("hooks", agent_name)] = self._printing(lambda: self._user_import(
                f"the tool hooks of agent '{agent_name}'", self.root / "hooks" / f"{agent_name}.py",
                lambda: self.loader.load_tool_hooks(agent_name)))
            return loaded

    def _printing(self, load: Callable[[], _T]) -> _T:
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

    def guardrail(self, name: str) -> sdk.CustomGuardrail:
        """The custom guardrail ``guardrails/<name>.py``; ``ProjectError`` with the SDK's reason
        when it cannot be loaded."""
        if self.static:
            return self._static_guardrail(name)
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

    # -- static reading (pytest's process) and imports by reference (a worker) ------------------
    def _static_guardrail(self, name: str) -> sdk.CustomGuardrail:
        """``guardrails/<name>.py`` read statically: its ``check`` a stub for a worker, located
        errors for what the SDK would refuse (a name with a path, a missing file or ``check``)."""
        directory = self.root / "guardrails"
        path = directory / f"{name}.py"
        label = f"custom guardrail '{name}' could not be loaded from guardrails/{name}.py"
        if not name or name in {".", ".."} or any(c in name for c in "/\\:\0") \
                or not path.resolve().is_relative_to(directory.resolve()):
            raise ProjectError(f"{label}: name must be a bare filename that stays within the project's "
                               "guardrails directory")
        if not path.is_file():
            raise ProjectError(label)
        module_name = f"guardrails.{name}"
        try:
            module = sdk.static_module(module_name, path, lambda qualname: ("module", module_name, qualname))
        except (SyntaxError, OSError, ValueError) as exc:
            raise ProjectError(f"{label}: {import_error(exc, self.root, path)}") from None
        check = getattr(module, "check", None)
        if not callable(check):
            raise ProjectError(f"{label}: missing or non-callable 'check' function")
        return sdk.CustomGuardrail(name=name, check=check, is_async=inspect.iscoroutinefunction(check))

    def modules_of(self, agent_name: str) -> list[tuple[str, Path]]:
        """Static: the project modules ``agent_name`` runs (its tools', its middleware and hooks),
        each with its file, in the order a worker imports them."""
        agent = self.agents.get(agent_name)
        if agent is None:
            return []
        found: dict[str, Path] = {}
        for tool in [*agent.tools, *(getattr(agent, "discoverable_tools", None) or [])]:
            ref = sdk.static_reference(getattr(tool, "func", None))
            if ref is not None and ref[0] == "module":
                found.setdefault(ref[1], self.root / (ref[1].replace(".", "/") + ".py"))
        for folder in ("middleware", "hooks"):
            path = self.root / folder / f"{agent_name}.py"
            if path.is_file():
                found.setdefault(f"{folder}.{agent_name}", path)
        return list(found.items())

    def _real_loader(self) -> sdk.ProjectLoader:
        if self._real is None:
            loader = new_loader(self.root, validation_only=False, api=self.api)
            self._guard(loader)
            self._real = loader
        return self._real

    def import_module(self, name: str) -> ModuleType:
        """The project module ``name`` (``tools.x``, ``middleware.<agent>``, ``hooks.<agent>``,
        ``guardrails.<name>``) imported here for real by the SDK (a worker resolving a reference);
        ``UserImportError`` (located) when it fails, ``ProjectError`` for a guardrail the SDK refuses."""
        with self._lock:
            if name in self._import_failures:
                raise UserImportError(self._import_failures[name])
            module = sys.modules.get(name)
            if module is not None and name in self._adopted:
                return module
            head, _, rest = name.partition(".")
            path = self.root / (name.replace(".", "/") + ".py")
            loader = self._real_loader()
            if head == "tools":
                sdk.import_tool_module(loader, rest)
            elif head == "middleware":
                self._loaded_by_sdk("middleware", rest, lambda: loader.load_middleware(rest))
            elif head == "hooks":
                self._loaded_by_sdk("hooks", rest, lambda: loader.load_tool_hooks(rest))
            elif head == "guardrails":
                printed = ImportCapture(self.root, path)  # the traceback, carried to pytest's process
                with contextlib.redirect_stdout(printed):
                    guardrail = self._user_import(f"custom guardrail '{rest}'", path, lambda: loader.load_guardrail(rest))
                if guardrail is None:
                    detail = printed.getvalue().strip() or "; ".join(
                        e for e in sdk.load_errors(loader) if f"'{rest}'" in e)
                    raise attach(ProjectError(f"custom guardrail '{rest}' could not be loaded from guardrails/{rest}.py"
                                              + (f": {detail}" if detail else "")), printed.failure)
            self._adopt_imported()
            module = sys.modules.get(name)
            if module is None:
                raise UserImportError(f"{relative(self.root, path)}: module {name} could not be loaded")
            return module

    def preload(self, name: str) -> bool:
        """Import ``name`` ahead, in the template every worker is forked from (after a worker
        imported it without trouble for the agent's first case), so later runs start with it
        loaded. Whatever goes wrong leaves no trace: the module and any failure are forgotten,
        and each run's worker imports it itself, as without the preload."""
        try:
            self.import_module(name)
        except BaseException:  # noqa: BLE001  (a run's own import reports it, located)
            with self._lock:
                self._import_failures.pop(name, None)
                self._adopted.discard(name)
            sys.modules.pop(name, None)
            return False
        return True

    def _loaded_by_sdk(self, what: str, agent_name: str, load: Callable[[], Any]) -> None:
        """Middleware or hooks loaded by the SDK; one that fails to load is ``UserImportError``
        with the located warning's text (the SDK only prints it)."""
        key = f"{what}.{agent_name}"
        if key not in self._import_failures:
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                loaded = self._user_import(f"the {what} of agent '{agent_name}'",
                                           self.root / what / f"{agent_name}.py", load)
            if loaded is not None:
                return
            reasons = [_MODULE_REASON.sub("", line) for line in printed_lines(printed.getvalue())]
            self._import_failures[key] = "; ".join(reasons) or f"{what}/{agent_name}.py could not be loaded"
            sys.modules.pop(key, None)  # the SDK leaves the half-imported module there
        raise UserImportError(self._import_failures[key])

    def _adopt_imported(self) -> None:
        """Hand every project module imported here since the last call to ``on_import``."""
        for module in self.modules():
            name = module.__name__
            if name not in self._adopted:
                self._adopted.add(name)
                if self.on_import is not None:
                    self.on_import(name, module)

    def describe(self, agent_name: str) -> AgentReport:
        """``agent_name`` as the SDK loads it for real here (a worker): its tools' descriptions and
        schemas, its load error, and whether its middleware and hooks load."""
        report = AgentReport()
        agent = self.agents.get(agent_name)
        if agent is None or not agent.config.source_path:
            return report
        path = self.root / agent.config.source_path
        loader = self._real_loader()
        printed = io.StringIO()
        errors = sdk.load_errors(loader)
        known = len(errors)
        with self._lock, contextlib.redirect_stdout(printed):
            try:
                real = sdk.load_single_agent(loader, path)
            except Exception as exc:  # noqa: BLE001  (the SDK files it as the agent's load error)
                report.errors.append(f"Failed to load agent: {relative(self.root, path)}: {exc}")
            else:
                for tool in [*real.tools, *(getattr(real, "discoverable_tools", None) or [])]:
                    if getattr(tool, "func", None) is not None and tool.ref:
                        report.tools[tool.ref] = (tool.description, tool.parameters)
            self._adopt_imported()
        # a tool whose module fails to import is the SDK's load error of the agent (it loads without
        # the tool): as in pytest's process under isolation none, it fails the agent's cases
        report.errors += [e for e in errors[known:] if any(i in e for i in self.import_errors)]
        for what in ("middleware", "hooks"):
            if (self.root / what / f"{agent_name}.py").is_file():
                try:
                    self.import_module(f"{what}.{agent_name}")
                except UserImportError as exc:
                    report.failed.append(what)
                    report.warnings.append(self._locator.module_failure(what, agent_name, str(exc)))
        report.warnings += [self._locator.printed(line) for line in printed_lines(printed.getvalue())]
        return report

    def adopt(self, agent_name: str, report: AgentReport) -> None:
        """What a worker found loading ``agent_name`` for real: the tools' exact descriptions and
        schemas replace the static ones, its load errors fail its cases, middleware or hooks that
        failed to load are left out (and warned), as they would be in this process."""
        with self._lock:
            agent = self.agents.get(agent_name)
            if agent is not None:
                for tool in [*agent.tools, *(getattr(agent, "discoverable_tools", None) or [])]:
                    real = report.tools.get(tool.ref or "")
                    if real is not None:
                        tool.description, tool.parameters = real
            self._agent_errors[agent_name] = list(report.errors)
            self._failed.update((what, agent_name) for what in report.failed)
            for warning in report.warnings:
                if all(w.key != warning.key for w in self.warnings):
                    self.warnings.append(warning)
            self.described.add(agent_name)


def worker_import(root: str, name: str) -> None:
    """In a worker: import the project module ``name`` (a reference pytest's process calls)."""
    _PROJECTS[root].import_module(name)


def worker_describe(root: str, agent_name: str) -> dict[str, object]:
    """In a worker: ``agent_name`` as the SDK loads it for real (a reference pytest's process
    calls), as data (``AgentReport.from_data`` reads it)."""
    return _PROJECTS[root].describe(agent_name).to_data()
