"""Agent keys that Connic's agent configuration does not have (``max_iteration:``).

Connic's loader hands an agent file (merged with its ``_defaults.yaml`` cascade) to the SDK's
pydantic models, which ignore unknown keys: a misspelt setting is silently nothing, on Connic
and here. Connic deploys such a file, so an unknown key is a located warning, not an error,
with the closest known key when there is one (as ``suite/loader.py`` does for suite keys).
The known keys are the fields of ``AgentConfig`` and of its nested models, walked from their
annotations; models that forbid unknown keys are left to the SDK (its load error says so), and
free-form dicts (a guardrail rule's ``config``, MCP ``headers``) are not walked. Keys starting
with ``x-`` are local extensions and never warned about.
"""

from __future__ import annotations

import difflib
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel

from pytest_connic.project.load import LoadWarning
from pytest_connic.project.sdk import AgentConfig
from pytest_connic.yamlpos import KeyPath, YamlError, YamlPositions, format_path, parse_file


def models_in(annotation: object) -> list[type[BaseModel]]:
    """The pydantic models inside an annotation (through Optional, Union, List, Dict, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found.extend(models_in(arg))
    return found


def _dict_of_models(annotation: object) -> bool:
    """``Dict[str, Model]`` (possibly inside Optional/Union): its values are the models."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_dict_of_models(arg) for arg in typing.get_args(annotation))
    return origin is dict and bool(models_in(annotation))


def _names(model: type[BaseModel]) -> dict[str, str]:
    """Every key the model accepts (field names, aliases) -> the field's name."""
    names: dict[str, str] = {}
    for name, info in model.model_fields.items():
        names[name] = name
        if info.alias:
            names[info.alias] = name
        if isinstance(info.validation_alias, AliasChoices):
            names.update({c: name for c in info.validation_alias.choices if isinstance(c, str)})
        elif isinstance(info.validation_alias, str):
            names[info.validation_alias] = name
    return names


def _walk(model: type[BaseModel], data: dict[Any, Any], path: KeyPath, found: list[tuple[KeyPath, str | None]]) -> None:
    names = _names(model)
    ignores = model.model_config.get("extra") in (None, "ignore")
    for key, value in data.items():
        if isinstance(key, str) and key.startswith("x-"):
            continue
        field = names.get(key) if isinstance(key, str) else None
        if field is None:
            if ignores:  # a model that forbids extras fails the load itself, in the SDK's words
                hint = difflib.get_close_matches(str(key), sorted(model.model_fields), n=1, cutoff=0.6)
                found.append(((*path, key), hint[0] if hint else None))
            continue
        annotation = model.model_fields[field].annotation
        nested = models_in(annotation)
        if not nested:
            continue
        target = nested[0]
        if isinstance(value, dict) and _dict_of_models(annotation):
            for name, item in value.items():
                if isinstance(item, dict):
                    _walk(target, item, (*path, key, name), found)
        elif isinstance(value, dict):
            _walk(target, value, (*path, key), found)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, dict):
                    _walk(target, item, (*path, key, index), found)


def unknown_keys(data: object) -> list[tuple[KeyPath, str | None]]:
    """The unknown keys of an agent (or ``_defaults.yaml``) mapping, each with its closest known key."""
    found: list[tuple[KeyPath, str | None]] = []
    if isinstance(data, dict):
        _walk(AgentConfig, data, (), found)
    return found


def _message(relpath: str, positions: YamlPositions, path: KeyPath, hint: str | None) -> tuple[str, int]:
    line, column = positions.of(path, key=True)
    where = f"{relpath}:{line}:{column}: {format_path(path)}"
    if hint is not None:
        text = (f"{where}: unknown agent key '{path[-1]}'; did you mean '{hint}'? Connic's loader ignores "
                "unknown keys, so this setting has no effect, on Connic as here (prefix local extensions "
                "with 'x-')")
    else:
        text = (f"{where}: unknown agent key '{path[-1]}', not a setting of Connic's agent configuration; "
                "Connic's loader ignores it, on Connic as here (prefix local extensions with 'x-')")
    return text, line


def agent_key_warnings(root: Path) -> list[LoadWarning]:
    """A warning per unknown key of every agent file and ``_defaults.yaml`` under ``agents/``
    (hidden paths skipped, as the SDK does; files that do not parse are the SDK's to report)."""
    agents_dir = root / "agents"
    if not agents_dir.is_dir():
        return []
    out: list[LoadWarning] = []
    for file in sorted(agents_dir.rglob("*.yaml")):
        if any(part.startswith(".") for part in file.relative_to(agents_dir).parts) or not file.is_file():
            continue
        try:
            data, positions = parse_file(file)
        except (OSError, ValueError, YamlError):
            continue
        relpath = file.relative_to(root).as_posix()
        for path, hint in unknown_keys(data):
            message, line = _message(relpath, positions, path, hint)
            out.append(LoadWarning(f"agent_key:{relpath}:{format_path(path)}", message, file, line,
                                   unknown_key=True))
    return out
