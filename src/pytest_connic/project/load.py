"""Loading a Connic project through the SDK's ``ProjectLoader``, shared by the project index
(collection, ``validation_only=True``: the SDK parses user code with ``ast`` and executes
nothing) and the loaded project (running cases: tools, middleware, hooks and guardrails
imported the way Connic does).

What the SDK's loader only prints (a schema that does not load, ``output_schema`` on an agent
that is not an LLM agent, middleware or hooks that fail to load) and what it keeps aside (the
``api:`` refs it skipped) become ``LoadWarning``s: located at the file they are about, with
the line where it can be found, for the plugin to show once per session as ``connic lint``
shows them."""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from pytest_connic.errors import ConnicError
from pytest_connic.project import sdk
from pytest_connic.project.apispec import DEFAULT_DIR, ApiRegistry, spec_of
from pytest_connic.project.located import relative
from pytest_connic.project.sdk import Agent, ProjectLoader
from pytest_connic.project.yamlguard import guard_loader
from pytest_connic.yamlpos import KeyPath, YamlError, YamlPositions, parse_file


class ProjectError(ConnicError):
    """The project cannot be loaded (``agents/`` missing, load errors)."""


@dataclass(frozen=True)
class LoadWarning:
    """A warning about the project, as ``connic lint`` shows it, located at ``path:line``."""

    #: shown once per session per key (``output_schema:<agent>``, ``middleware:<agent>``, ...)
    key: str
    message: str
    #: the file the warning is about (absolute), and the 1-based line in it
    path: Path
    line: int
    #: an agent key that Connic's configuration does not have (``UnknownAgentKeyWarning``)
    unknown_key: bool = False


def new_loader(root: Path, *, validation_only: bool, api: ApiRegistry | None = None) -> ProjectLoader:
    """The SDK's loader for ``root``, given the tools of the OpenAPI specs the user named (``api``)
    as its registry, and guarded: alias bombs and huge files never reach the SDK's safe_load."""
    registry = api.sdk_registry() if api is not None and api.specs else None
    loader = ProjectLoader(str(root), api_spec_tools=registry, validation_only=validation_only)
    if registry:
        sdk.skip_unnamed_api_specs(loader, registry)
    guard_loader(loader, Path(root))
    return loader


def load_agents(root: Path, *, validation_only: bool, prepare: Callable[[ProjectLoader], None] | None = None,
                api: ApiRegistry | None = None) -> tuple[ProjectLoader, list[Agent], list[LoadWarning]]:
    """The loader, the project's agents and the load warnings (what the SDK printed while loading
    them, the ``api:`` refs it skipped). Raises ``ProjectError`` when ``agents/`` is missing.
    ``prepare(loader)`` runs before the agents load (``LoadedProject`` guards tool imports).

    ``api``: the OpenAPI specs the user named; the SDK's loader gets their tools as its registry,
    so ``api:<spec>.<tool>`` refs and wildcards resolve as on Connic; a ref to a spec not named is
    skipped (and warned) as without a registry; the specs' problems are load errors."""
    loader = new_loader(root, validation_only=validation_only, api=api)
    if prepare is not None:
        prepare(loader)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), sdk.yaml_read_by(parse_file):
        try:
            agents = loader.load_agents()
        except FileNotFoundError as exc:
            raise ProjectError(str(exc)) from None
    locator = Locator(Path(root), agents)
    warnings = [locator.printed(line) for line in printed_lines(printed.getvalue())]
    failed = api.failed if api is not None else set()
    warnings += locator.api_refs([r for r in sdk.api_spec_warnings(loader) if spec_of(r) not in failed])
    errors = sdk.load_errors(loader)
    errors[:] = [locator.api_error(e) for e in errors]
    if api is not None:
        errors.extend(api.errors)
        warnings += [LoadWarning(f"api_note:{p}", text, p, line) for p, line, text in api.notes]
    return loader, agents, warnings


_API_ERROR = re.compile(r"Agent '(?P<agent>[^']+)': cannot resolve (?P<label>tool|discoverable tool) "
                        r"'(?P<ref>api:[^']+)': ")


def printed_lines(text: str) -> list[str]:
    """The non-empty lines of what the SDK printed, stripped."""
    return [line.strip() for line in text.splitlines() if line.strip()]


_SCHEMA = re.compile(r"Warning: Could not load output schema '(?P<schema>.*)' for agent '(?P<agent>[^']*)': "
                     r"(?P<reason>.*)")
_SCHEMA_TYPE = re.compile(r"Warning: output_schema is only supported for LLM agents\. Ignoring for "
                          r"'(?P<agent>[^']*)' \(type: (?P<type>[^)]*)\)")
_MODULE = re.compile(r"Warning: (?:Failed to load|Could not discover) (?P<what>middleware|tool hooks|hooks) "
                     r"for (?P<agent>\S+?): (?P<reason>.*)")
_SYNTAX_LINE = re.compile(r"\(.*, line (\d+)\)")


class Locator:
    """Turns what the SDK's loader said into located ``LoadWarning``s."""

    def __init__(self, root: Path, agents: Iterable[Agent]) -> None:
        self.root = root
        self.files: dict[str, Path] = {
            a.config.name: root / a.config.source_path for a in agents if a.config.source_path}
        self._positions: dict[Path, tuple[object, YamlPositions] | None] = {}

    def rel(self, path: Path) -> str:
        return relative(self.root, path)

    def printed(self, line: str) -> LoadWarning:
        """A line the SDK printed while loading, located and explained."""
        if match := _SCHEMA.fullmatch(line):
            agent, schema, reason = match["agent"], match["schema"], match["reason"]
            path, number = self.key_line(agent, ("output_schema",))
            schema_file = f"schemas/{schema}.json"
            if reason.startswith(f"Schema '{schema}' not found at"):
                reason = "the file does not exist"
            return LoadWarning(
                f"output_schema:{agent}",
                f"{self.rel(path)}: output_schema '{schema}' of agent '{agent}' could not be loaded "
                f"({schema_file}: {reason}); Connic's loader skips it, so the agent's output is not "
                "validated, here as on Connic", path, number)
        if match := _SCHEMA_TYPE.fullmatch(line):
            agent = match["agent"]
            path, number = self.key_line(agent, ("output_schema",))
            return LoadWarning(
                f"output_schema_type:{agent}",
                f"{self.rel(path)}: output_schema is only supported for LLM agents; Connic's loader ignores "
                f"it for agent '{agent}' (type: {match['type']}), here as on Connic", path, number)
        if match := _MODULE.fullmatch(line):
            return self.module_failure("middleware" if match["what"] == "middleware" else "hooks",
                                       match["agent"], match["reason"])
        return LoadWarning(f"printed:{line}", f"Connic's loader: {line.removeprefix('Warning: ')}",
                           self.root / "agents", 1)

    def module_failure(self, what: str, agent: str, reason: str) -> LoadWarning:
        """``middleware/<agent>.py`` or ``hooks/<agent>.py`` (``what``) failed to load: the agent
        runs without it."""
        path = self.root / what / f"{agent}.py"
        found = _SYNTAX_LINE.search(reason)
        number = int(found.group(1)) if found else 1
        what_text = "middleware" if what == "middleware" else "tool hooks"
        parts = "before/after/cleanup" if what == "middleware" else "before/after of every tool call"
        return LoadWarning(
            f"{what}:{agent}",
            f"{self.rel(path)}: the {what_text} of agent '{agent}' failed to load: {reason}; Connic's loader "
            f"(connic lint, connic deploy) only warns about it and the agent runs WITHOUT its {what_text} "
            f"({parts}), here as on Connic: fix it, or the verdicts of its cases are those of an agent "
            f"without {what_text}", path, number)

    def _refs(self, wanted: set[str]) -> Iterable[tuple[str, Path, str, str, int]]:
        """(agent, file, field, ref, line) of every ``tools``/``discoverable_tools`` entry in ``wanted``."""
        for agent, path in self.files.items():
            data = self.load(path)
            if data is None:
                continue
            for field in ("tools", "discoverable_tools"):
                entries = data[0].get(field) if isinstance(data[0], dict) else None
                for index, entry in enumerate(entries if isinstance(entries, list) else []):
                    ref = next(iter(entry), None) if isinstance(entry, dict) and len(entry) == 1 else entry
                    if isinstance(ref, str) and ref in wanted:
                        yield agent, path, field, ref, data[1].of((field, index))[0]

    def api_refs(self, skipped: list[str]) -> list[LoadWarning]:
        """One warning per agent and ``api:`` ref that the loader skipped (no spec for it)."""
        out: list[LoadWarning] = []
        for agent, path, field, ref, number in self._refs(set(skipped)):
            spec = spec_of(ref)
            out.append(LoadWarning(
                f"api:{agent}:{ref}",
                f"{self.rel(path)}: {field} entry '{ref}' of agent '{agent}' is an API spec tool, "
                "configured in Connic's dashboard; with no spec registry Connic's loader skips it "
                "(connic lint: 'API spec tool ref(s) skipped (validated at deploy time)'), so the "
                f"model is never offered it locally; name its OpenAPI spec (--connic-api-spec {spec}=PATH, "
                f"or {DEFAULT_DIR}/{spec}.yaml) to resolve it as Connic's deploy does", path, number))
        return out

    def api_error(self, error: str) -> str:
        """A load error of the SDK about an ``api:`` ref, located at the ref's line in the agent file."""
        match = _API_ERROR.match(error)
        if match is None:
            return error
        for agent, path, _field, _ref, number in self._refs({match["ref"]}):
            if agent == match["agent"]:
                return f"{self.rel(path)}:{number}: {error}"
        return error

    def key_line(self, agent: str, key: KeyPath) -> tuple[Path, int]:
        """The agent's file and the line of ``key`` in it (or in the ``_defaults.yaml`` it comes from)."""
        path = self.files.get(agent)
        if path is None:
            return self.root / "agents", 1
        directory = path.parent
        candidates = [path]
        agents_dir = self.root / "agents"
        while directory.is_relative_to(agents_dir):
            candidates.append(directory / "_defaults.yaml")
            if directory == agents_dir:
                break
            directory = directory.parent
        for candidate in candidates:
            loaded = self.load(candidate)
            if loaded is not None and key in loaded[1].keys:
                return candidate, loaded[1].keys[key][0]
        return path, 1

    def load(self, path: Path) -> tuple[object, YamlPositions] | None:
        """The YAML file at ``path`` with its positions (read once), None when it cannot be read."""
        if path not in self._positions:
            try:
                self._positions[path] = parse_file(path)
            except (OSError, ValueError, YamlError):
                self._positions[path] = None
        return self._positions[path]
