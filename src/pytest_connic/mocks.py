"""Test doubles of a case: mock modules (spec §5) and their resolution ladders.

Every run loads the case's mock module afresh, so module-level state never leaks
between runs, also when runs execute concurrently.
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema

_counter = itertools.count()
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]+")


class ModuleLoadError(Exception):
    """A builder or mocks module is missing or fails to import: the run fails before the agent."""


def load_fresh(path: Path, label: str) -> types.ModuleType:
    """Import ``path`` as a brand-new module object (never cached in ``sys.modules``)."""
    if not path.is_file():
        raise ModuleLoadError(f"{label}: {path.name} not found in {path.parent.name}/ (expected {path})")
    name = f"_connic_{path.parent.name}_{path.stem}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ModuleLoadError(f"{label}: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    # registered while it executes (dataclasses and typing need it), removed right after
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ModuleLoadError(f"{label}: importing {path.name} raised {type(exc).__name__}: {exc}") from exc
    finally:
        sys.modules.pop(name, None)
    return module


def normalise_segments(ref: str) -> list[str]:
    """Ref segments with every run of non-alphanumerics folded to ``_`` (split on ``.`` only)."""
    return [_NON_ALNUM.sub("_", segment) for segment in ref.split(".")]


def tool_ladder(ref: str, suffix: str = "") -> list[str]:
    """``data.customer.add`` → ``mock_data_customer_add``, ``mock_data_customer``, ``mock_data``, ``mock``."""
    segments = normalise_segments(ref)
    names = ["mock_" + "_".join(segments[:n]) + suffix for n in range(len(segments), 0, -1)]
    return [*names, "mock" + suffix]


def guardrail_ladder(direction: str, name: str) -> list[str]:
    """``guardrail_<direction>_<name>`` → ``guardrail_<direction>`` → ``guardrail``."""
    return [f"guardrail_{direction}_{_NON_ALNUM.sub('_', name)}", f"guardrail_{direction}", "guardrail"]


@dataclass
class Resolved:
    """A mock function found on a ladder."""

    name: str
    func: Callable[..., Any]


class MockSet:
    """One run's mocks module (or none) and the case's strict flags."""

    def __init__(self, module: types.ModuleType | None, flags: dict[str, bool]) -> None:
        self.module = module
        self.flags = flags

    def first(self, names: list[str]) -> Resolved | None:
        """The first callable of ``names`` the module defines."""
        if self.module is None:
            return None
        for name in names:
            func = getattr(self.module, name, None)
            if callable(func):
                return Resolved(name, func)
        return None

    def tool(self, ref: str) -> Resolved | None:
        return self.first(tool_ladder(ref))

    def hook(self, ref: str, phase: str) -> Resolved | None:
        return self.first(tool_ladder(ref, f"_hook_{phase}"))

    def middleware(self, phase: str) -> Resolved | None:
        return self.first([f"middleware_{phase}"])

    def guardrail(self, direction: str, name: str) -> Resolved | None:
        return self.first(guardrail_ladder(direction, name))


def signature_errors(params: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """How a mocked call's arguments miss the real tool's signature (missing, unknown, wrong type)."""
    if not isinstance(params, dict):
        return [f"arguments must be an object, got {type(params).__name__}"]
    properties = schema.get("properties") or {}
    required = schema.get("required") or []
    errors = [f"missing required argument '{name}'" for name in required if name not in params]
    errors += [
        f"unknown argument '{name}' (the tool takes: {', '.join(properties) or 'no arguments'})"
        for name in params
        if name not in properties
    ]
    for name, value in params.items():
        prop = properties.get(name)
        if prop is None or (value is None and name not in required):
            continue
        validator = jsonschema.Draft202012Validator(prop)
        for error in validator.iter_errors(value):
            errors.append(f"argument '{name}': {error.message}")
            break
    return errors
