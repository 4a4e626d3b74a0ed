"""Suite files: YAML with positions → validated ``Suite`` of ``CaseSpec``s.

Validation has two layers:

1. Keys. The shipped JSON Schema (``schema/suite.schema.json``) names every key
   Connic knows; any other key is an error naming the closest known key (Connic
   silently ignores it, which turns a typo into a test that asserts nothing).
   Keys starting with ``x-`` are ignored.
2. Values. Connic's own validator, the SDK's pydantic models (``TestDefaults``,
   ``TestCase``), decides what a value may be, so pytest-connic accepts and
   rejects exactly what Connic does, with Connic's messages, plus a location.

A file whose top level is invalid is one ``SuiteError``; an invalid case gets a
``CaseSpec.error`` and fails alone in setup while its siblings run.
"""

from __future__ import annotations

import difflib
import functools
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from . import sdk  # noqa: F401  (imports the SDK quietly)
from connic.test_schema import TestCase, TestDefaults, TestFile
from pydantic import TypeAdapter, ValidationError

from .compiled import CompiledCase, compile_case
from .expressions import ExpressionError
from .yamlpos import Positions, YamlError, format_path, load_with_positions


class SuiteError(Exception):
    """A suite file that cannot be used at all: one collection error."""


@dataclass
class CaseSpec:
    """One case of a suite, validated (or not) on its own."""

    index: int
    name: str
    line: int
    raw: dict[str, Any]
    #: Connic's resolved record (defaults merged), None when invalid
    resolved: dict[str, Any] | None = None
    compiled: CompiledCase | None = None
    #: the located validation error that makes this case fail in setup
    error: str | None = None


@dataclass
class Suite:
    """A parsed suite file."""

    path: Path
    relpath: str
    agent_name: str
    agent_explicit: bool
    version: str
    defaults: TestDefaults
    cases: list[CaseSpec] = field(default_factory=list)


@functools.lru_cache(maxsize=1)
def suite_schema() -> dict[str, Any]:
    """The JSON Schema shipped with the package (also for editors)."""
    text = resources.files("pytest_connic").joinpath("schema/suite.schema.json").read_text("utf-8")
    result: dict[str, Any] = json.loads(text)
    return result


def _known_keys(where: str) -> list[str]:
    schema = suite_schema()
    node = schema if where == "top" else schema["$defs"][where]
    return sorted(node["properties"])


def _loc(relpath: str, positions: Positions, path: tuple[Any, ...], *, key: bool = False) -> str:
    line, col = positions.of(path, key=key)
    return f"{relpath}:{line}:{col}"


def _unknown_keys(
    data: dict[Any, Any], where: str, path: tuple[Any, ...], relpath: str, positions: Positions
) -> list[str]:
    known = _known_keys(where)
    errors = []
    for key in data:
        if isinstance(key, str) and key.startswith("x-"):
            continue
        if key in known:
            continue
        hint = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
        did_you_mean = f"; did you mean '{hint[0]}'?" if hint else f"; known keys: {', '.join(known)}"
        location = _loc(relpath, positions, (*path, key), key=True)
        errors.append(
            f"{location}: {format_path((*path, key))}: unknown key '{key}'{did_you_mean}"
            " (Connic would silently ignore it; prefix local extensions with 'x-')"
        )
    return errors


def _strip_x(value: Any) -> Any:
    """Drop ``x-`` keys everywhere (local extensions Connic never sees)."""
    if isinstance(value, dict):
        return {k: _strip_x(v) for k, v in value.items() if not (isinstance(k, str) and k.startswith("x-"))}
    if isinstance(value, list):
        return [_strip_x(v) for v in value]
    return value


def _pydantic_errors(
    exc: ValidationError, path: tuple[Any, ...], relpath: str, positions: Positions
) -> list[str]:
    out = []
    for err in exc.errors():
        loc = (*path, *err["loc"])
        msg = str(err["msg"])
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        found = ""
        if err["type"] not in ("missing", "value_error") and "input" in err:
            found = f" (found {_short(err['input'])})"
        out.append(f"{_loc(relpath, positions, loc)}: {format_path(loc)}: {msg}{found}")
    return out


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _files_hint(relpath: str) -> str:
    if relpath.startswith("tests/files/"):
        return (
            "\nConnic parses every tests/**/*.yaml file as a suite, this fixture too, so `connic test` "
            "would reject it as well; give the fixture another extension (for example .yaml.txt or .json)."
        )
    return ""


def load_suite(path: Path, project_root: Path) -> Suite | None:
    """Parse and validate one suite file; None for an empty document (Connic skips it)."""
    relpath = path.relative_to(project_root).as_posix()
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"{relpath}: cannot read suite: {exc}") from None
    try:
        data, positions = load_with_positions(text)
    except YamlError as exc:
        where = f"{relpath}:{exc.line}:{exc.column}" if exc.line else relpath
        raise SuiteError(f"{where}: {exc.message}{_files_hint(relpath)}") from None
    if data is None:
        return None
    if not isinstance(data, dict):
        raise SuiteError(
            f"{relpath}:1:1: a suite must be a mapping with a `tests:` list, found {type(data).__name__}"
            f"{_files_hint(relpath)}"
        )
    return _build_suite(data, positions, path, relpath)


def _build_suite(data: dict[Any, Any], positions: Positions, path: Path, relpath: str) -> Suite:
    errors = _unknown_keys(data, "top", (), relpath, positions)
    clean = _strip_x(data)
    defaults_raw = clean.get("defaults", {})
    defaults = TestDefaults()
    if defaults_raw is None or isinstance(defaults_raw, dict):
        if isinstance(defaults_raw, dict):
            errors += _unknown_keys(defaults_raw, "defaults", ("defaults",), relpath, positions)
        try:
            defaults = TestDefaults.model_validate(defaults_raw)
        except ValidationError as exc:
            errors += _pydantic_errors(exc, ("defaults",), relpath, positions)
    else:
        errors.append(f"{_loc(relpath, positions, ('defaults',))}: defaults: must be a mapping")
    version, agent = "1.0", None
    for key in ("version", "agent"):
        if key in clean and not (key == "agent" and clean[key] is None):
            try:
                value = TypeAdapter(str).validate_python(clean[key])
            except ValidationError as exc:
                errors += _pydantic_errors(exc, (key,), relpath, positions)
                continue
            version, agent = (value, agent) if key == "version" else (version, value)
    tests = clean.get("tests")
    if "tests" not in clean:
        errors.append(f"{relpath}:1:1: tests: Field required (a suite needs a `tests:` list of cases)")
    elif not isinstance(tests, list):
        errors.append(f"{_loc(relpath, positions, ('tests',))}: tests: Input should be a valid list")
    elif not tests:
        errors.append(f"{_loc(relpath, positions, ('tests',))}: tests: List should have at least 1 item")
    if not errors:
        errors += _duplicate_names(tests, relpath, positions)
    if errors:
        raise SuiteError("\n".join(errors) + _files_hint(relpath))
    suite = Suite(
        path=path,
        relpath=relpath,
        agent_name=agent if agent is not None else path.stem,
        agent_explicit=agent is not None,
        version=version,
        defaults=defaults,
    )
    assert isinstance(tests, list)
    for index, raw_case in enumerate(data["tests"]):
        suite.cases.append(_build_case(suite, index, raw_case, positions))
    return suite


def _duplicate_names(tests: list[Any], relpath: str, positions: Positions) -> list[str]:
    seen: dict[str, int] = {}
    errors = []
    for index, case in enumerate(tests):
        if not isinstance(case, dict) or not isinstance(case.get("name"), str):
            continue
        name = case["name"]
        if name in seen:
            first = positions.of(("tests", seen[name], "name"))[0]
            errors.append(
                f"{_loc(relpath, positions, ('tests', index, 'name'))}: tests[{index}].name: "
                f"Duplicate test name '{name}' in file (first at line {first})."
            )
        else:
            seen[name] = index
    return errors


def _case_name(raw: Any, index: int) -> str:
    if isinstance(raw, dict) and isinstance(raw.get("name"), str) and raw["name"].strip():
        return str(raw["name"])
    return f"tests[{index}]"


def _build_case(suite: Suite, index: int, raw: Any, positions: Positions) -> CaseSpec:
    path: tuple[Any, ...] = ("tests", index)
    line = positions.of(path)[0]
    spec = CaseSpec(index=index, name=_case_name(raw, index), line=line, raw=raw if isinstance(raw, dict) else {})
    if not isinstance(raw, dict):
        spec.error = (
            f"{_loc(suite.relpath, positions, path)}: tests[{index}]: a case must be a mapping, "
            f"found {type(raw).__name__}"
        )
        return spec
    errors = _nested_unknown_keys(raw, path, suite.relpath, positions)
    clean = _strip_x(raw)
    model: TestCase | None = None
    try:
        model = TestCase.model_validate(clean)
    except ValidationError as exc:
        errors += _pydantic_errors(exc, path, suite.relpath, positions)
    if model is not None and not errors:
        spec.resolved = TestFile.model_construct(
            version=suite.version, agent=suite.agent_name, defaults=suite.defaults, tests=[model]
        ).resolved(model)
        try:
            spec.compiled = compile_case(spec.resolved)
        except ExpressionError as exc:
            errors.append(_expression_error(exc, path, suite.relpath, positions))
    if errors:
        spec.error = "\n".join(errors)
        spec.resolved = None
    return spec


def _expression_error(exc: ExpressionError, path: tuple[Any, ...], relpath: str, positions: Positions) -> str:
    key_path = (*path, *getattr(exc, "key_path", ()))
    line, col = positions.of(key_path)
    return f"{relpath}:{line}:{col}: {format_path(key_path)}: {exc}"


def _nested_unknown_keys(raw: dict[Any, Any], path: tuple[Any, ...], relpath: str, pos: Positions) -> list[str]:
    errors = _unknown_keys(raw, "case", path, relpath, pos)
    children = raw.get("expected_child_agents")
    errors += _child_unknown_keys(children, (*path, "expected_child_agents"), relpath, pos)
    return errors


def _child_unknown_keys(children: Any, path: tuple[Any, ...], relpath: str, pos: Positions) -> list[str]:
    if not isinstance(children, dict):
        return []
    errors = []
    for name, spec in children.items():
        if isinstance(spec, dict):
            errors += _unknown_keys(spec, "child", (*path, name), relpath, pos)
            errors += _child_unknown_keys(
                spec.get("expected_child_agents"), (*path, name, "expected_child_agents"), relpath, pos
            )
    return errors
