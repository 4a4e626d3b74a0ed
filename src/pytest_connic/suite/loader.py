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
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from pytest_connic.checks.compiled import CompiledCase, ResolvedCase, compile_case
from pytest_connic.errors import ConnicError
from pytest_connic.expressions.values import ExpressionError
from pytest_connic.jsonsafe import JsonObject, JsonValue
from pytest_connic.project.sdk import ChildAgentExpectation, TestCase, TestDefaults, TestFile
from pytest_connic.yamlpos import YamlError, YamlPositions, format_path, parse_file


class SuiteError(ConnicError):
    """A suite file that cannot be used at all: one collection error."""


@dataclass
class CaseSpec:
    """One case of a suite, validated (or not) on its own."""

    index: int
    name: str
    line: int
    raw: dict[str, object]
    #: Connic's resolved record (defaults merged), None when invalid
    resolved: ResolvedCase | None = None
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
    #: where the target agent is named: ``path:line:col`` of the ``agent:`` key, or the file's
    #: first line when the file name names the agent
    agent_where: str = ""
    #: the file's positions, for checks that run after loading (suite/static.py)
    positions: YamlPositions | None = field(default=None, repr=False, compare=False)


@functools.lru_cache(maxsize=1)
def suite_schema() -> JsonObject:
    """The JSON Schema shipped with the package (also for editors)."""
    text = resources.files("pytest_connic").joinpath("schema/suite.schema.json").read_text("utf-8")
    return _schema_object(json.loads(text))


def _schema_object(value: JsonValue) -> JsonObject:
    if not isinstance(value, dict):
        raise TypeError(f"schema/suite.schema.json: expected an object, found {value!r}")
    return value


def _known_keys(where: str) -> list[str]:
    schema = suite_schema()
    node = schema if where == "top" else _schema_object(_schema_object(schema["$defs"])[where])
    return sorted(_schema_object(node["properties"]))


def _loc(relpath: str, positions: YamlPositions, path: tuple[object, ...], *, key: bool = False) -> str:
    line, col = positions.of(path, key=key)
    return f"{relpath}:{line}:{col}"


def _unknown_keys(
    data: Mapping[object, object], where: str, path: tuple[object, ...], relpath: str, positions: YamlPositions
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


_STR: TypeAdapter[str] = TypeAdapter(str)
#: lists that Connic validates as a whole; an error is pointed at the failing entry
_LIST_FIELDS = ("expected_tool_calls", "expected_tool_call_order", "files")
_ENTRY_SHAPE = "expected_tool_calls entries must be a string or a single-key mapping."


def _pydantic_errors(
    exc: ValidationError, path: tuple[object, ...], relpath: str, positions: YamlPositions, raw: object = None
) -> list[str]:
    out = []
    for err in exc.errors():
        loc, tag, entry, key = _data_loc(raw, tuple(err["loc"]))
        msg = str(err["msg"])
        if tag is not None:  # a ToolCallExpectation union member: report the branch that fits the entry
            if isinstance(entry, dict) == (tag == "str"):
                continue
            msg = msg if isinstance(entry, dict) else _ENTRY_SHAPE
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
            loc = _entry_loc(raw, loc)
        if key:
            msg = f"invalid key: {msg}"
        found = ""
        if err["type"] not in ("missing", "value_error") and "input" in err:
            found = f" (found {_short(err['input'])})"
        full = (*path, *loc)
        line = f"{_loc(relpath, positions, full, key=key)}: {format_path(full)}: {msg}{found}"
        if line not in out:
            out.append(line)
    return out


def _data_loc(raw: object, loc: tuple[object, ...]) -> tuple[tuple[object, ...], str | None, object, bool]:
    """Pydantic's error location as a key path into the data: a union member tag (``str``,
    ``dict[str,str]``) dropped and returned with the entry it is about, ``[key]`` (the key
    itself is invalid) flagged."""
    out: list[object] = []
    node, tag, entry = raw, None, None
    for part in loc:
        if part == "[key]":
            return tuple(out), tag, entry, True
        if isinstance(node, dict) and part in node:  # noqa: SIM114 - one branch per type narrows part
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        elif isinstance(part, str) and (part == "str" or part.startswith("dict[")) and tag is None:
            tag, entry = part, node
            continue
        else:
            node = None
        out.append(part)
    return tuple(out), tag, entry, False


def _entry_loc(raw: object, loc: tuple[object, ...]) -> tuple[object, ...]:
    """Connic checks ``files`` and the expectation lists as a whole; find the entry that fails."""
    if not loc or loc[-1] not in _LIST_FIELDS or not isinstance(raw, dict):
        return loc
    owner: object = raw
    for part in loc[:-1]:
        owner = owner.get(part) if isinstance(owner, dict) else None
    entries = owner.get(loc[-1]) if isinstance(owner, dict) else None
    if not isinstance(entries, list):
        return loc
    model: type[TestCase | ChildAgentExpectation] = TestCase if len(loc) == 1 else ChildAgentExpectation
    base = {"name": "x", "payload": ""} if model is TestCase else {}
    seen: list[object] = []
    for index, entry in enumerate(entries):
        try:
            model.model_validate({**base, loc[-1]: [entry]})
        except ValidationError:
            return (*loc, index)
        if entry in seen:  # files: the repeated entry
            return (*loc, index)
        seen.append(entry)
    return loc


#: every character at which ``str.splitlines`` breaks, shown as its escape
_LINE_BREAKS = {c: repr(chr(c))[1:-1] for c in (0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x85, 0x2028, 0x2029)}


def _one_line(error: str) -> str:
    """One error, one line: a key or value quoted in a message (``'a.pdf\\n'``) shows its escapes."""
    return error.translate(_LINE_BREAKS)


def _short(value: object, limit: int = 60) -> str:
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
    try:  # the session's one parse of the file (universal newlines, as Connic's open() reads it)
        data, positions = parse_file(path)
    except OSError as exc:
        raise SuiteError(f"{relpath}:1:1: cannot read suite: {exc}") from None
    except UnicodeDecodeError as exc:
        raw = exc.object
        line, column = raw.count(b"\n", 0, exc.start) + 1, exc.start - raw.rfind(b"\n", 0, exc.start)
        raise SuiteError(f"{relpath}:{line}:{column}: not UTF-8 text: {exc.reason} (byte {exc.start})") from None
    except YamlError as exc:
        where = f"{relpath}:{exc.line or 1}:{exc.column or 1}"
        raise SuiteError(f"{where}: {_one_line(exc.message)}{_files_hint(relpath)}") from None
    if data is None:
        return None
    if not isinstance(data, dict):
        raise SuiteError(
            f"{relpath}:1:1: a suite must be a mapping with a `tests:` list, found {type(data).__name__}"
            f"{_files_hint(relpath)}"
        )
    return _build_suite(data, positions, path, relpath)


def case_lines(path: Path) -> dict[str, int]:
    """The line of each case of the suite file at ``path``, by the case's name as its item is named
    (``tests[2]`` for a case without one), read without validating the suite: where a case is
    when only its node id is known (an xdist controller, which collects nothing). Empty when the
    file cannot be read or is not a suite; ``OSError`` and ``YamlError`` are the caller's."""
    data, positions = parse_file(path)
    tests = data.get("tests") if isinstance(data, dict) else None
    if not isinstance(tests, list):
        return {}
    lines: dict[str, int] = {}
    for index, raw in enumerate(tests):
        lines.setdefault(_case_name(raw, index), positions.of(("tests", index))[0])
    return lines


def _build_suite(data: dict[object, object], positions: YamlPositions, path: Path, relpath: str) -> Suite:
    errors = _unknown_keys(data, "top", (), relpath, positions)
    clean = data  # unknown and x- keys: reported above, ignored by Connic's models
    defaults_raw = clean.get("defaults", {})
    defaults = TestDefaults()
    if defaults_raw is None or isinstance(defaults_raw, dict):
        if isinstance(defaults_raw, dict):
            errors += _unknown_keys(defaults_raw, "defaults", ("defaults",), relpath, positions)
        try:
            defaults = TestDefaults.model_validate(defaults_raw)
        except ValidationError as exc:
            errors += _pydantic_errors(exc, ("defaults",), relpath, positions, defaults_raw)
    else:
        errors.append(f"{_loc(relpath, positions, ('defaults',))}: defaults: must be a mapping")
    version, agent = "1.0", None
    for key in ("version", "agent"):
        if key in clean and not (key == "agent" and clean[key] is None):
            try:
                value = _STR.validate_python(clean[key])
            except ValidationError as exc:
                errors += _pydantic_errors(exc, (key,), relpath, positions)
                continue
            version, agent = (value, agent) if key == "version" else (version, value)
    tests: object = clean.get("tests")
    if "tests" not in clean:
        errors.append(f"{relpath}:1:1: tests: Field required (a suite needs a `tests:` list of cases)")
    elif not isinstance(tests, list):
        errors.append(f"{_loc(relpath, positions, ('tests',))}: tests: Input should be a valid list")
    elif not tests:
        errors.append(f"{_loc(relpath, positions, ('tests',))}: tests: List should have at least 1 item")
    if not errors and isinstance(tests, list):
        errors += _duplicate_names(tests, relpath, positions)
    if errors:
        raise SuiteError("\n".join(map(_one_line, errors)) + _files_hint(relpath))
    suite = Suite(
        path=path,
        relpath=relpath,
        agent_name=agent if agent is not None else path.stem,
        agent_explicit=agent is not None,
        version=version,
        defaults=defaults,
        agent_where=_loc(relpath, positions, ("agent",), key=True) if agent is not None else f"{relpath}:1:1",
        positions=positions,
    )
    assert isinstance(tests, list)
    for index, raw_case in enumerate(tests):
        suite.cases.append(_build_case(suite, index, raw_case, positions))
    return suite


def _duplicate_names(tests: list[object], relpath: str, positions: YamlPositions) -> list[str]:
    seen: dict[str, int] = {}
    errors = []
    for index, case in enumerate(tests):
        name = _name_of(case)
        if name is None:
            continue
        if name in seen:
            first = positions.of(("tests", seen[name], "name"))[0]
            errors.append(
                f"{_loc(relpath, positions, ('tests', index, 'name'))}: tests[{index}].name: "
                f"Duplicate test name '{name}' in file (first at line {first})."
            )
        else:
            seen[name] = index
    return errors


def _name_of(case: object) -> str | None:
    """A case's name as Connic compares it (after coercion: ``!!binary`` is a string), else None."""
    if not isinstance(case, dict) or "name" not in case:
        return None
    try:
        return _STR.validate_python(case["name"])
    except ValidationError:
        return None


def _case_name(raw: object, index: int) -> str:
    if isinstance(raw, dict) and isinstance(raw.get("name"), str) and raw["name"].strip():
        return str(raw["name"])
    return f"tests[{index}]"


def _build_case(suite: Suite, index: int, raw: object, positions: YamlPositions) -> CaseSpec:
    path: tuple[object, ...] = ("tests", index)
    line = positions.of(path)[0]
    spec = CaseSpec(index=index, name=_case_name(raw, index), line=line, raw=raw if isinstance(raw, dict) else {})
    if not isinstance(raw, dict):
        spec.error = (
            f"{_loc(suite.relpath, positions, path)}: tests[{index}]: a case must be a mapping, "
            f"found {type(raw).__name__}"
        )
        return spec
    errors = _nested_unknown_keys(raw, path, suite.relpath, positions)
    model: TestCase | None = None
    try:
        model = TestCase.model_validate(raw)  # unknown and x- keys: reported above, ignored here
    except ValidationError as exc:
        errors += _pydantic_errors(exc, path, suite.relpath, positions, raw)
    if model is not None and not errors:
        spec.resolved = TestFile.model_construct(
            version=suite.version, agent=suite.agent_name, defaults=suite.defaults, tests=[model]
        ).resolved(model)
        try:
            spec.compiled = compile_case(spec.resolved)
        except ExpressionError as exc:
            errors.append(_expression_error(exc, path, suite.relpath, positions))
    if errors:
        spec.error = "\n".join(e if isinstance(e, _Pointed) else _one_line(e) for e in errors)
        spec.resolved = None
    return spec


def _expression_error(exc: ExpressionError, path: tuple[object, ...], relpath: str, positions: YamlPositions) -> str:
    key_path = (*path, *getattr(exc, "key_path", ()))
    line, col = positions.of(key_path)
    pointer = exc.pointer()
    text = f"{relpath}:{line}:{col}: {format_path(key_path)}: {exc}"
    if not pointer:
        return text
    # the expression and a caret under the spot, indented under the message
    return _Pointed(_one_line(text) + "".join(f"\n    {_one_line(row)}" for row in pointer.split("\n")))


class _Pointed(str):
    """An error already on its own lines: the message, then the expression and a caret."""

    __slots__ = ()


def _nested_unknown_keys(raw: Mapping[object, object], path: tuple[object, ...], relpath: str, pos: YamlPositions) -> list[str]:
    errors = _unknown_keys(raw, "case", path, relpath, pos)
    children = raw.get("expected_child_agents")
    errors += _child_unknown_keys(children, (*path, "expected_child_agents"), relpath, pos)
    return errors


def _child_unknown_keys(children: object, path: tuple[object, ...], relpath: str, pos: YamlPositions) -> list[str]:
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
