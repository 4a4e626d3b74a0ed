"""The Connic SDK boundary: every use of the SDK goes through this module.

Importing it imports the SDK, once and quietly: the SDK's pydantic models use class-based
``Config`` and emit ``PydanticDeprecatedSince20`` at import; that is the SDK's business, not
the user's, so it stays out of every test run's warning summary. Import this module where
the SDK is needed, not before: a session without Connic suites never imports the SDK.

The SDK's public names that pytest-connic uses are re-exported here, and every private
access (an underscore attribute, a module the SDK does not document) is a named function
below, so that an SDK upgrade that moves one of them breaks in one place.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import os
import threading
import types
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from pytest_connic.jsonsafe import JsonObject

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import connic
    import connic.connector_schema
    import connic.core
    import connic.loader
    import connic.test_schema
    import connic.tools

import yaml as _yaml
from connic import AbortTool, GuardrailResult, ProjectLoader, StopProcessing, ToolFile, TransferCall
from connic import tools as sdk_tools
from connic.connector_schema import AgentLink, ConnectorFile
from connic.core import (
    Agent,
    AgentConfig,
    AgentType,
    ApprovalConfig,
    CustomGuardrail,
    GuardrailRule,
    GuardrailsConfig,
    McpServerConfig,
    SessionConfig,
    Tool,
)
from connic.loader import PREDEFINED_TOOL_ALIASES, PREDEFINED_TOOL_NAMES
from connic.test_schema import ChildAgentExpectation, TestCase, TestDefaults, TestFile

from pytest_connic.project.apispec import spec_of
from pytest_connic.yamlpos import YamlPositions

__all__ = [
    "PREDEFINED_TOOL_ALIASES",
    "PREDEFINED_TOOL_NAMES",
    "AbortTool",
    "Agent",
    "AgentConfig",
    "AgentLink",
    "AgentType",
    "ApprovalConfig",
    "ChildAgentExpectation",
    "ConnectorFile",
    "CustomGuardrail",
    "GuardrailResult",
    "GuardrailRule",
    "GuardrailsConfig",
    "McpServerConfig",
    "ProjectLoader",
    "SessionConfig",
    "StopProcessing",
    "TestCase",
    "TestDefaults",
    "TestFile",
    "Tool",
    "ToolFile",
    "TransferCall",
    "api_spec_warnings",
    "contained_source",
    "escape_terminal_text",
    "exclude_agent_files",
    "generate_schema",
    "guard_tool_imports",
    "import_tool_module",
    "load_errors",
    "load_single_agent",
    "mark_static_stubs",
    "refused_file_types",
    "sdk_tools",
    "skip_unnamed_api_specs",
    "static_module",
    "static_reference",
    "validate_project_files",
    "yaml_read_by",
]


def load_errors(loader: ProjectLoader) -> list[str]:
    """The loader's list of load errors, itself (callers may append to it).

    The SDK exposes load errors only through the private ``ProjectLoader._load_errors``;
    ``connic lint`` reads it too.
    """
    errors: list[str] = loader._load_errors
    return errors


def api_spec_warnings(loader: ProjectLoader) -> list[str]:
    """The ``api:`` tool refs the loader skipped because it has no API spec registry
    (``"api:<ref>"`` each), from the private ``ProjectLoader._api_spec_warnings`` that
    ``connic lint`` prints as "N API spec tool ref(s) skipped (validated at deploy time)"."""
    refs: list[str] = list(getattr(loader, "_api_spec_warnings", None) or [])
    return refs


def skip_unnamed_api_specs(loader: ProjectLoader, named: Iterable[str]) -> None:
    """Make ``loader`` skip an ``api:`` ref whose spec is not in ``named`` as it skips every
    ``api:`` ref without a registry (into ``_api_spec_warnings``), instead of failing the agent
    with "API spec 'x' not found in registry": the user gave some specs, not necessarily all.
    Wraps the private ``ProjectLoader._resolve_api_spec_tools``."""
    resolve = loader._resolve_api_spec_tools
    known = frozenset(named)

    def resolve_named(stripped_ref: str) -> object:
        spec = spec_of(stripped_ref)
        if spec and spec not in known:
            loader._api_spec_warnings.append(f"api:{stripped_ref}")
            return []
        return resolve(stripped_ref)

    loader._resolve_api_spec_tools = resolve_named


def generate_schema(function: Callable[..., Any]) -> JsonObject:
    """The JSON schema of a tool function's parameters, from the SDK's own generator
    (the private ``ProjectLoader._generate_schema``), so a local tool is described exactly
    as Connic describes it."""
    schema: JsonObject = ProjectLoader(".", validation_only=True)._generate_schema(function)
    return schema


def contained_source(path: Path, directory: Path) -> Path:
    """``path``, checked to stay inside ``directory`` the way Connic checks a suite file
    (``connic.project_paths.contained_source``, an undocumented module)."""
    from connic.project_paths import contained_source as contained

    found: Path = contained(path, directory)
    return found


def escape_terminal_text(text: str) -> str:
    """Connic's rendering of control characters (``\\x0a``), so nothing steers the terminal
    (``connic.terminal.escape_terminal_text``, an undocumented module)."""
    from connic.terminal import escape_terminal_text as escape

    return str(escape(text))


def exclude_agent_files(loader: ProjectLoader, refused: Mapping[Path, str]) -> None:
    """Keep ``loader`` from reading the agent files in ``refused`` (path -> message): they are
    left out of its discovery, and a ``_defaults.yaml`` among them fails the cascade of its
    directory with its message. Wraps the loader's private ``_discover_agent_files`` and
    ``_load_defaults_for_directory``, the SDK's only way in."""
    discover = loader._discover_agent_files
    defaults = loader._load_defaults_for_directory

    def discover_bounded() -> list[Path]:
        return [p for p in discover() if p not in refused]

    def defaults_bounded(directory: Path) -> object:
        message = refused.get(Path(directory) / "_defaults.yaml")
        if message is not None:
            raise ValueError(message)
        return defaults(directory)

    loader._discover_agent_files = discover_bounded
    loader._load_defaults_for_directory = defaults_bounded


def guard_tool_imports(loader: ProjectLoader, translate: Callable[[BaseException, str], BaseException | None]) -> None:
    """Route every import of a tool module by ``loader`` (the private ``_load_tool_module``)
    through ``translate(exc, module_name)``: what a failing import raised (``SystemExit`` and
    ``KeyboardInterrupt`` included, which the SDK would let end the session) becomes the
    exception ``translate`` returns (an ``Exception``, which the SDK files as that agent's load
    error), or propagates when it returns None. The half-imported module leaves ``sys.modules``."""
    import sys

    load = loader._load_tool_module

    def load_guarded(module_name: str) -> object:
        try:
            return load(module_name)
        except FileNotFoundError:
            raise  # the SDK's own "not found under tools/" message
        except BaseException as exc:
            if module_name not in loader._loaded_modules:
                sys.modules.pop(f"tools.{module_name}", None)
            replacement = translate(exc, module_name)
            if replacement is None:
                raise
            raise replacement from None

    loader._load_tool_module = load_guarded


#: the attribute of a stub function (the SDK's validation mode) naming the real function for a
#: worker process: ``("module", module name, qualname)`` or ``("fresh", module name, file, qualname)``
_REFERENCE = "__connic_reference__"


def static_reference(func: object) -> tuple[str, ...] | None:
    """The reference a stub made by ``mark_static_stubs`` or ``static_module`` carries, or None
    (a real function, or anything else)."""
    ref = getattr(func, _REFERENCE, None) if isinstance(func, types.FunctionType) else None
    return ref if isinstance(ref, tuple) else None


def _marking(loader: ProjectLoader, reference: Callable[[str, str], tuple[str, ...]]) -> None:
    """Make ``loader``'s AST stubs (the private ``_create_ast_stub`` of validation mode) carry
    ``reference(module name, function name)``."""
    create = loader._create_ast_stub

    def create_marked(node: ast.FunctionDef | ast.AsyncFunctionDef, module_name: str) -> object:
        stub = create(node, module_name)
        setattr(stub, _REFERENCE, reference(module_name, node.name))
        return stub

    loader._create_ast_stub = create_marked


def mark_static_stubs(loader: ProjectLoader) -> None:
    """A validation-mode ``loader``'s stubs (tools, middleware, hooks: the SDK parses them with
    ``ast``, nothing executes) name their real function in a project module, for a worker."""
    _marking(loader, lambda module_name, name: ("module", module_name, name))


def static_module(import_name: str, path: Path, reference: Callable[[str], tuple[str, ...]]) -> types.ModuleType:
    """``path`` read as the SDK's validation mode reads a tool module (its private
    ``_load_module_from_ast``: the public top-level functions, as stubs with their signatures and
    docstrings; nothing executes), each stub carrying ``reference(function name)``. Raises
    ``SyntaxError`` (and ``OSError``) as an import would."""
    loader = ProjectLoader(".", validation_only=True)
    _marking(loader, lambda _module, name: reference(name))
    module: types.ModuleType = loader._load_module_from_ast(import_name, path)
    return module


def import_tool_module(loader: ProjectLoader, module_name: str) -> types.ModuleType:
    """``tools/<module_name>`` imported for real by ``loader`` (its private ``_load_tool_module``:
    the SDK's own import, once per loader; what ``guard_tool_imports`` set up applies)."""
    module: types.ModuleType = loader._load_tool_module(module_name)
    return module


def load_single_agent(loader: ProjectLoader, path: Path) -> Agent:
    """The agent of ``path`` alone, loaded by ``loader`` (the private ``_load_single_agent`` that
    ``load_agents`` calls for each file; its exceptions are that agent's load error)."""
    agent: Agent = loader._load_single_agent(path)
    return agent


class _YamlReadBy:
    """``yaml`` as the SDK's loader sees it while ``yaml_read_by`` holds: ``safe_load`` of a file
    is a deep copy of ``parse(path)`` (the data ``yaml.safe_load`` gives); anything ``parse``
    refuses is left to PyYAML, so the SDK words its own errors."""

    def __init__(self, parse: Callable[[Path], tuple[object, YamlPositions]]) -> None:
        self._parse = parse

    def __getattr__(self, name: str) -> object:
        return getattr(_yaml, name)

    def safe_load(self, stream: str | bytes | IO[str] | IO[bytes]) -> object:
        name = getattr(stream, "name", None)
        if isinstance(name, str):
            try:
                data = self._parse(Path(name))[0]
            except Exception:  # noqa: BLE001,S110  (the SDK's own read reports it in its words)
                pass
            else:
                return copy.deepcopy(data)  # the SDK merges and validates in place
        return _yaml.safe_load(stream)


_YAML_LOCK = threading.RLock()


@contextlib.contextmanager
def yaml_read_by(parse: Callable[[Path], tuple[object, YamlPositions]]) -> Iterator[None]:
    """While it holds, the SDK's loader reads agent files and ``_defaults.yaml`` through ``parse``
    (the session's one parse of each file) instead of parsing them again: its module's ``yaml``
    (``connic.loader.yaml``, an implementation detail) is swapped for one that asks ``parse``."""
    module = connic.loader
    with _YAML_LOCK:
        original = module.yaml
        module.yaml = _YamlReadBy(parse)
        try:
            yield
        finally:
            module.yaml = original


_CWD_LOCK = threading.Lock()


def validate_project_files(root: Path) -> str | None:
    """Connic's own packaging check (the private ``connic.cli._validate_project_files``: file
    types, links, the 5 MB code and 25 MB total limits), with Connic's message; None when the
    project would upload, or when the SDK no longer has the check (nothing to compare against).

    The check reads the current directory, so it runs there under a lock. ``connic.cli`` is
    heavy (questionary, prompt_toolkit, httpx): imported on the first call.
    """
    from connic import cli

    validate = getattr(cli, "_validate_project_files", None)
    if validate is None:
        return None
    with _CWD_LOCK:
        previous = os.getcwd()
        os.chdir(root)
        try:
            valid, message, _ = validate()
        finally:
            os.chdir(previous)
    return None if valid else str(message)


def refused_file_types(root: Path) -> list[Path]:
    """Every file under ``root`` whose type Connic's packaging check refuses (its
    ``ALLOWED_EXTENSIONS`` outside ``tests/files/``, ``.py`` only under ``tests/builders/``).
    The SDK stops at the first; a warning that names them all saves one fix-and-rerun per file.
    Hidden files and ``__pycache__`` are skipped, as Connic skips them."""
    from connic import cli

    allowed = getattr(cli, "ALLOWED_EXTENSIONS", None)
    if allowed is None:
        return []
    files_prefix = Path(getattr(cli, "TEST_FILES_PREFIX", "tests/files"))
    builders_prefix = Path(getattr(cli, "TEST_BUILDERS_PREFIX", "tests/builders"))
    refused: list[Path] = []
    for dirname in getattr(cli, "PROJECT_DIRECTORIES", ()):
        for path in sorted((root / dirname).rglob("*")):
            relative = path.relative_to(root)
            if any(part.startswith(".") or part == "__pycache__" for part in relative.parts):
                continue
            if path.is_symlink() or not path.is_file() or relative.is_relative_to(files_prefix):
                continue
            if relative.is_relative_to(builders_prefix):
                if path.suffix != ".py":
                    refused.append(relative)
            elif path.suffix.lower() not in allowed and path.suffix != ".pyc":
                refused.append(relative)
    return refused


def _exceptions_alias() -> None:
    """Connic's runtime offers ``connic.exceptions`` (StopProcessing, AbortTool, ...), the
    SDK does not; vendor middleware imports it (falling back to a plain class that would
    then fail the run), so the SDK's own classes are registered under that name."""
    import importlib.util
    import sys
    import types

    if "connic.exceptions" in sys.modules or importlib.util.find_spec("connic.exceptions") is not None:
        return
    module = types.ModuleType("connic.exceptions", "Connic's exceptions (alias registered by pytest-connic).")
    for name in ("StopProcessing", "AbortTool", "TransferCall"):
        if hasattr(connic.core, name):
            setattr(module, name, getattr(connic.core, name))
    sys.modules["connic.exceptions"] = module
    connic.exceptions = module


_exceptions_alias()
