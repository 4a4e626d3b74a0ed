"""What a case's verdict depends on, as per-part digests for the history (docs/history.md, "What
counts as a case's configuration"): the suite file (its ``defaults`` with it), the builder, mocks
and files the case names, the agent and every agent it reaches (pipeline stages, children, and
agents the tools it uses name in their source), their tool modules, middleware, hooks, custom
guardrails and schemas, the project's ``conftest.py`` (the ``pytest_connic_*`` hooks), and the
plugin's settings that change a verdict. The cassette is its own digest (``cassette_digest``).

Reached files are found statically: every string of an agent's YAML (and of the case's suite
entry and ``defaults``) that names a project file or an agent counts. Each file is read and
hashed once per session (cached by path), each agent's reach computed once per project.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

#: the settings (``Settings`` attribute names) that change what a replayed case does
VERDICT_SETTINGS = ("record_mode", "live", "cassette_dir", "model_alias", "api_spec", "api_url", "mcp_url",
                    "env", "guardrail_model", "unjudged_guardrails", "isolation")
#: the part that stands for the settings (a name no project file has)
SETTINGS_PART = "plugin settings"
_QUOTED = re.compile(r"""["']([A-Za-z0-9_.-]{1,100})["']""")


def _strings(data: object) -> Iterator[str]:
    """Every string (keys too) in a YAML value."""
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from _strings(key)
            yield from _strings(value)
    elif isinstance(data, list):
        for value in data:
            yield from _strings(value)


def combined(parts: dict[str, str]) -> str:
    """One digest of every part (what the flaky count compares)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


class CaseParts:
    """Per-part digests of a session's cases, each file hashed once (see the module docstring)."""

    def __init__(self, settings: object) -> None:
        self._files: dict[Path, str | None] = {}
        self._yaml: dict[Path, object] = {}
        self._agents: dict[Path, dict[str, list[Path]]] = {}
        self._reach: dict[tuple[Path, str], frozenset[Path]] = {}
        values = {name: getattr(settings, name, None) for name in VERDICT_SETTINGS}
        self.settings = hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def digest(self, path: Path) -> str | None:
        """The file's digest (None: no such file), once per path."""
        if path not in self._files:
            try:
                self._files[path] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
            except OSError:
                self._files[path] = None
        return self._files[path]

    def _data(self, path: Path) -> object:
        if path not in self._yaml:
            import yaml

            try:
                self._yaml[path] = yaml.safe_load(path.read_text("utf-8"))
            except (OSError, UnicodeDecodeError, yaml.YAMLError):
                self._yaml[path] = None
        return self._yaml[path]

    def parts(self, root: Path, suite_path: str, case_name: str, agent_name: str) -> dict[str, str]:
        """``{project-relative path: digest, "plugin settings": digest}`` of one case."""
        suite = root / suite_path
        files = {suite, root / "conftest.py", root / "tests" / "conftest.py"}
        files |= self._case_files(root, suite, case_name)
        files |= self.reach(root, agent_name)
        found = {p.relative_to(root).as_posix(): d for p in files
                 if p.is_relative_to(root) and ".." not in p.parts and (d := self.digest(p)) is not None}
        found[SETTINGS_PART] = self.settings
        return dict(sorted(found.items()))

    def _case_files(self, root: Path, suite: Path, case_name: str) -> set[Path]:
        """The builder, mocks and files the suite's ``defaults`` and the case's entry name."""
        data = self._data(suite)
        if not isinstance(data, dict):
            return set()
        tests_ = data.get("tests")
        cases: list[object] = tests_ if isinstance(tests_, list) else []
        entry = next((c for c in cases if isinstance(c, dict) and c.get("name") == case_name), {})
        tests = root / "tests"
        found: set[Path] = set()
        for text in (*_strings(data.get("defaults")), *_strings(entry)):
            found |= {tests / "builders" / f"{text}.py", tests / "mocks" / f"{text}.py", tests / "files" / text}
        return {p for p in found if self.digest(p) is not None}

    def _agent_files(self, root: Path) -> dict[str, list[Path]]:
        """Agent name -> its YAML file(s), and ``""`` -> the ``_defaults`` files (once per project)."""
        if root not in self._agents:
            folder = root / "agents"
            by_name: dict[str, list[Path]] = {"": []}
            for path in sorted(folder.rglob("*.y*ml")) if folder.is_dir() else []:
                key = "" if path.stem == "_defaults" else path.stem
                by_name.setdefault(key, []).append(path)
            self._agents[root] = by_name
        return self._agents[root]

    def reach(self, root: Path, agent_name: str) -> frozenset[Path]:
        """The files of ``agent_name`` and of every agent it reaches (once per project and agent)."""
        key = (root, agent_name)
        if key not in self._reach:
            agents = self._agent_files(root)
            files: set[Path] = set(agents[""])
            seen, todo = set(), [agent_name]
            while todo:
                name = todo.pop()
                if name in seen:
                    continue
                seen.add(name)
                own = self._own_files(root, name, agents.get(name, []))
                files |= own
                todo += [s for path in own for s in self._named(path) if s in agents and s not in seen]
            self._reach[key] = frozenset(files)
        return self._reach[key]

    def _own_files(self, root: Path, name: str, yamls: list[Path]) -> set[Path]:
        """One agent's YAML, middleware, hooks, and the tools, guardrails and schemas it names."""
        found = {*yamls, root / "middleware" / f"{name}.py", root / "hooks" / f"{name}.py"}
        for path in yamls:
            for text in _strings(self._data(path)):
                base = text.removesuffix(".*")  # ``module.function``, ``module.*``
                module = base.rpartition(".")[0] or base
                found |= {root / "tools" / f"{module.replace('.', '/')}.py", root / "tools" / f"{base}.py",
                          root / "guardrails" / f"{text}.py", root / "schemas" / f"{text}.json",
                          root / "schemas" / f"{text}.yaml", root / "agents" / f"{text}.yaml"}
        return {p for p in found if self.digest(p) is not None}

    def _named(self, path: Path) -> Iterator[str]:
        """The names an agent's file mentions: YAML strings, or quoted names in a tool module's
        source (``trigger_agent("summarizer")``)."""
        if path.suffix in (".yaml", ".yml"):
            yield from _strings(self._data(path))
        elif path.suffix == ".py":
            try:
                yield from _QUOTED.findall(path.read_text("utf-8"))
            except (OSError, UnicodeDecodeError):
                return

