"""Test doubles of a case: mock modules (https://connic.co/docs/v1/test/fixtures-and-mocks) and their resolution ladders.

Every run loads the case's mock module afresh, so module-level state never leaks
between runs, also when runs execute concurrently.
"""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Union

from pytest_connic.errors import ConnicError
from pytest_connic.jsonsafe import JsonObject, JsonValue
from pytest_connic.project.located import exception_text, user_location
from pytest_connic.runtime.signals import RunAborted
from pytest_connic.usertb import import_failure

_counter = itertools.count()
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]+")


class ModuleLoadError(ConnicError):
    """A builder or mocks module is missing or fails to import: the run fails before the agent."""


#: the folders of a project's ``tests/`` whose modules are loaded fresh for each run
FRESH_FOLDERS = ("builders", "mocks")


def fresh_name(path: Path) -> str:
    """The private module name a builder or mocks module (``tests/<folder>/<stem>.py``) is
    imported under for one run, ``_connic_<folder>_<stem>_<n>``: the one place that writes it
    (:func:`fresh_origin` reads it back)."""
    return f"_connic_{path.parent.name}_{path.stem}_{next(_counter)}"


def fresh_origin(module_name: str) -> tuple[str, str] | None:
    """``(folder, stem)`` of a module named by :func:`fresh_name` (``("mocks", "customer")``),
    None for any other module name."""
    for folder in FRESH_FOLDERS:
        prefix = f"_connic_{folder}_"
        if module_name.startswith(prefix):
            return folder, module_name[len(prefix):].rsplit("_", 1)[0]
    return None


def load_fresh(path: Path, label: str, *, static: bool = False) -> types.ModuleType:
    """Import ``path`` as a brand-new module object (never cached in ``sys.modules``).

    ``static``: read it without executing it (process isolation: a worker imports it when a run
    calls one of its functions); its functions are stubs that name it for the worker."""
    if not path.is_file():
        raise ModuleLoadError(f"{label}: {path.name} not found in {path.parent.name}/ (expected {path})")
    name = fresh_name(path)
    if static:
        from pytest_connic.project.sdk import static_module

        try:
            return static_module(name, path, lambda qualname: ("fresh", name, str(path), qualname))
        except (SyntaxError, ValueError, OSError) as exc:
            raise ModuleLoadError(f"{label}: {_where(exc, path)}importing {path.name} raised "
                                  f"{exception_text(exc)}") from None
    return import_fresh(name, path, label)


def import_fresh(name: str, path: Path, label: str) -> types.ModuleType:
    """``path`` executed as the new module ``name``; ``ModuleLoadError`` (located) when its import
    fails, whatever it raised (``SystemExit`` included)."""
    try:
        module = import_as(name, path)
    except Exception as exc:
        where = _where(exc, path)
        raise ModuleLoadError(f"{label}: {where}importing {path.name} raised {exception_text(exc)}") from exc
    except SystemExit as exc:  # sys.exit() at import: that run's setup error, never the session's end
        where = _where(exc, path)
        raise ModuleLoadError(f"{label}: {where}importing {path.name} called sys.exit({exc.code!r})") from None
    except BaseException as exc:  # KeyboardInterrupt, GeneratorExit, ... raised at import
        if type(exc).__name__ == "CancelledError":
            raise
        where = _where(exc, path)
        raise ModuleLoadError(f"{label}: {where}importing {path.name} raised {exception_text(exc)}") from None
    return module


def import_as(name: str, path: Path) -> types.ModuleType:
    """Execute ``path`` as a new module named ``name``; it is in ``sys.modules`` only while it
    executes (dataclasses and typing need it there), so every call gives a fresh module."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module


def _where(exc: BaseException, path: Path) -> str:
    """``tests/builders/x.py:3: ``: where in the module (relative to the project) its import failed;
    its traceback is kept for the run's failure report (``usertb.import_failure``)."""
    root = path.parent.parent.parent  # <project>/tests/<builders|mocks>/<name>.py
    import_failure(exc, root, path)
    if isinstance(exc, SyntaxError) and exc.filename:
        # a syntax error has no frame in the file (its traceback ends in importlib): its own
        # file and line say where it is
        file = Path(exc.filename)
        try:
            shown = file.resolve().relative_to(root.resolve()).as_posix()
        except (ValueError, OSError):
            shown = str(file)
        return f"{shown}:{exc.lineno or 1}: "
    where = user_location(exc, root)
    return f"{where}: " if where else ""


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
    func: Callable[..., object]


class MockSet:
    """One run's mocks module (or none) and the case's strict flags."""

    def __init__(self, module: types.ModuleType | None, flags: dict[str, bool]) -> None:
        self.module = module
        self.flags = flags

    @property
    def label(self) -> str:
        """``tests/mocks/<name>.py``, or a note that the case has no mocks module."""
        path = Path(getattr(self.module, "__file__", None) or "")
        if self.module is None or not path.name:
            return "no mocks module"
        return "/".join(path.parts[-3:])

    def tried(self, names: list[str]) -> str:
        """The names a lookup tried, where, for a strict flag's failure message."""
        where = f"in {self.label}" if self.module is not None else "(the case sets no `mocks:` module)"
        return f"tried {', '.join(names)} {where}"

    def first(self, names: list[str]) -> Resolved | None:
        """The first callable of ``names`` the module defines."""
        if self.module is None:
            return None
        for name in names:
            func = getattr(self.module, name, None)
            if callable(func):
                return Resolved(name, func)
        return None

    def choose(self, names: list[str], flag: str, missing: Callable[[str], str],
               real: Callable[..., object] | None) -> tuple[Callable[..., object] | None, str | None]:
        """The one resolution of user code a case can mock: the first mock of ``names`` (a
        ladder: :func:`tool_ladder`, :func:`guardrail_ladder`, ``middleware_<phase>``) as
        ``(mock, its name)``; else, when the case sets the strict ``flag``, ``RunAborted`` with
        ``"<flag>: " + missing(<the names tried, where>)``; else ``(real, None)``."""
        found = self.first(names)
        if found is not None:
            return found.func, found.name
        if self.flags.get(flag):
            raise RunAborted(f"{flag}: {missing(self.tried(names))}")
        return real, None


_BASIC: dict[object, str] = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array",
                          dict: "object", type(None): "null"}


def argument_schema(annotation: object) -> JsonObject:
    """The JSON schema a mocked call's argument must meet, from the parameter's type hint.

    The SDK's mapping (``ProjectLoader._type_to_schema``) where it is exact; where the SDK
    falls back to ``string`` for a hint JSON Schema cannot say (no hint, ``Any``, a class),
    any value passes, since the real function would accept it; a union admits each member.
    """
    if annotation in _BASIC:
        return {"type": _BASIC[annotation]}
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return {"enum": list(args)}
    if origin is Union or origin is types.UnionType:
        options: list[JsonValue] = [argument_schema(a) for a in args]
        return {} if {} in options else {"anyOf": options}
    if origin is list:
        items = argument_schema(args[0]) if args else {}
        return {"type": "array", **({"items": items} if items else {})}
    if origin is dict:
        values = argument_schema(args[1]) if len(args) >= 2 else {}
        return {"type": "object", **({"additionalProperties": values} if values else {})}
    return {}


def _hints(func: Callable[..., object] | None) -> dict[str, object] | None:
    if func is None:
        return None
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    try:
        resolved = typing.get_type_hints(func)
    except Exception:  # noqa: BLE001  (unresolvable forward references: those parameters take anything)
        resolved = {}
    return {name: resolved.get(name, inspect.Parameter.empty) for name in signature.parameters}


def signature_errors(
    params: Mapping[str, object], schema: Mapping[str, object], func: Callable[..., object] | None = None
) -> list[str]:
    """How a mocked call's arguments miss the real tool's signature: a missing required
    argument, an unknown one, or a value of the wrong type (https://connic.co/docs/v1/test/fixtures-and-mocks).

    ``schema`` is the tool's schema as the SDK generated it (what the model was offered);
    ``func`` the real function, whose type hints decide the types (see ``argument_schema``).
    """
    if not isinstance(params, dict):
        return [f"arguments must be an object, got {type(params).__name__}"]
    # imported here: 0.1 s that a worker process (which imports this module) never needs
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    declared, needed = schema.get("properties"), schema.get("required")
    properties = declared if isinstance(declared, dict) else {}
    required = needed if isinstance(needed, list) else []
    hints = _hints(func)
    errors = [f"missing required argument '{name}'" for name in required if name not in params]
    errors += [
        f"unknown argument '{name}' (the tool takes: {', '.join(properties) or 'no arguments'})"
        for name in params
        if name not in properties
    ]
    for name, value in params.items():
        if name not in properties or (value is None and name not in required):
            continue
        prop = argument_schema(hints[name]) if hints is not None and name in hints else properties[name]
        error = best_match(Draft202012Validator(prop).iter_errors(value))
        if error is not None:
            where = "".join(f"[{p!r}]" for p in error.absolute_path)
            errors.append(f"argument '{name}'{where}: {error.message}")
    return errors
