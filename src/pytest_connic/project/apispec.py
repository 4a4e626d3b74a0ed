"""``api:`` tools: the OpenAPI specs a project names, and the tools Connic generates from them.

Connic imports an OpenAPI 3.x spec in its dashboard and generates one tool per operation,
referenced as ``api:<spec>.<tool>`` [guardrails-schemas-mcp]. Locally the user names each spec
(``--connic-api-spec NAME=PATH``, ini ``connic_api_specs``, or ``apis/<name>.yaml|yml|json`` in
the project); this module reads it (YAML or JSON, bounded, with positions), validates it with
``openapi-spec-validator`` when that is installed (the ``[api]`` extra), names its tools the way
Connic documents and builds the registry the SDK's ``ProjectLoader`` takes
(``api_spec_tools``). Every problem is a located message (``apis/billing.yaml:12: ...``).

Nothing here makes a request: ``runtime/api_tools.py`` does, from an ``ApiOperation``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pytest_connic.errors import ConnicError
from pytest_connic.files import IrregularFileError, read_bounded
from pytest_connic.project.located import relative
from pytest_connic.yamlpos import (
    MAX_BYTES,
    KeyPath,
    YamlError,
    YamlPositions,
    format_path,
    load_with_positions,
)

#: Connic's rule for a spec name (the ``api:`` prefix): "at most 64 characters, starting with a
#: lowercase letter and containing only lowercase letters, digits, and underscores"
SPEC_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
#: where a spec is found when no option names it, relative to the project root
DEFAULT_DIR = "apis"
SUFFIXES = (".yaml", ".yml", ".json")
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
#: action verbs that Connic moves to the end of an ``operationId`` (``createCharge`` ->
#: ``charge_create``); Connic does not publish its list, this is the common REST vocabulary
VERBS = frozenset({
    "get", "list", "create", "update", "delete", "remove", "patch", "put", "post", "add", "set",
    "search", "find", "fetch", "retrieve", "replace", "upsert", "cancel", "send", "read", "query",
    "check", "count", "modify", "edit", "upload", "download", "start", "stop", "refund", "capture",
    "archive", "restore", "enable", "disable", "verify", "validate", "submit", "approve", "reject",
})
_PREFIX = re.compile(r"api|v\d+(\.\d+)*")


@dataclass(frozen=True)
class ApiParam:
    """One parameter of an operation: where it goes in the request."""

    name: str
    location: str  #: path | query | header
    required: bool


@dataclass(frozen=True)
class ApiOperation:
    """One generated tool: its Connic name, the request it makes, its schema for the model."""

    spec: str
    tool: str
    method: str
    path: str
    description: str
    parameters: dict[str, object]
    params: tuple[ApiParam, ...] = ()
    has_body: bool = False
    line: int = 1

    def sdk_definition(self) -> dict[str, object]:
        """What the SDK's ``_make_api_spec_tool`` reads from a registry entry."""
        return {"description": self.description, "method": self.method.upper(), "path": self.path,
                "parameters": self.parameters}


@dataclass(frozen=True)
class ApiSpec:
    """A spec the user named: its tools, where requests go, the auth scheme it declares."""

    name: str
    path: Path
    operations: dict[str, ApiOperation]
    #: the spec's first server URL (variables at their defaults), None when it has none
    server: str | None
    #: the header of the spec's first ``apiKey`` security scheme in a header, if any
    api_key_header: str | None = None


@dataclass
class ApiRegistry:
    """The project's specs, and what is wrong with them (located load errors and warnings)."""

    specs: dict[str, ApiSpec] = field(default_factory=dict)
    #: located problems that make the project fail to load, as ``connic deploy`` would
    errors: list[str] = field(default_factory=list)
    #: located notes (a spec not validated because openapi-spec-validator is missing): (path, line, text)
    notes: list[tuple[Path, int, str]] = field(default_factory=list)
    #: ``--connic-api-url NAME=URL``: where a spec's requests go instead of its server
    urls: dict[str, str] = field(default_factory=dict)
    #: the specs that were named but cannot be used (their problem is in ``errors``)
    failed: set[str] = field(default_factory=set)

    def sdk_registry(self) -> dict[str, dict[str, dict[str, object]]]:
        """The ``api_spec_tools`` argument of the SDK's ``ProjectLoader``: spec -> tool -> definition."""
        return {name: {tool: op.sdk_definition() for tool, op in spec.operations.items()}
                for name, spec in self.specs.items()}

    def operation(self, ref: str) -> ApiOperation | None:
        """The operation of ``api:<spec>.<tool>``."""
        spec_name, _, tool = ref.removeprefix("api:").rpartition(".")
        spec = self.specs.get(spec_name)
        return spec.operations.get(tool) if spec else None

    def base_url(self, spec: str) -> str | None:
        """Where requests of ``spec`` go: ``--connic-api-url``, else the spec's server."""
        return self.urls.get(spec) or (self.specs[spec].server if spec in self.specs else None)


def load_registry(root: Path, named: Mapping[str, str], urls: Mapping[str, str] | None = None,
                  *, source: str = "--connic-api-spec") -> ApiRegistry:
    """Every spec of the project: those ``named`` (name -> path, relative to ``root``), then those
    in ``apis/`` that are not named. A problem is an entry of ``errors`` and leaves that spec out."""
    registry = ApiRegistry(urls=dict(urls or {}))
    found: dict[str, tuple[Path, str]] = {}
    for name, raw in named.items():
        path = Path(raw) if Path(raw).is_absolute() else root / raw
        found[name] = (path, f"{source} {name}={raw}")
    directory = root / DEFAULT_DIR
    if directory.is_dir():
        for path in sorted(directory.iterdir()):
            taken = {p.resolve() for p, _ in found.values()}
            if path.suffix in SUFFIXES and path.is_file() and path.stem not in found and path.resolve() not in taken:
                found[path.stem] = (path, f"{DEFAULT_DIR}/{path.name}")
    for name, (path, origin) in found.items():
        rel = relative(root, path)
        if not SPEC_NAME.fullmatch(name):
            registry.errors.append(
                f"{rel}: API spec name '{name}' (from {origin}) is not a Connic spec name: at most 64 "
                "characters, starting with a lowercase letter, only lowercase letters, digits and underscores")
            continue
        try:
            spec = read_spec(name, path, rel, registry)
        except SpecError as exc:
            registry.errors.append(str(exc))
            registry.failed.add(name)
            continue
        registry.specs[name] = spec
    return registry


class SpecError(ConnicError):
    """A spec that cannot be used; the message starts with ``path:line:``."""


def read_spec(name: str, path: Path, rel: str, registry: ApiRegistry) -> ApiSpec:
    """One spec, validated and turned into tools. Raises ``SpecError`` (located)."""
    try:
        if path.stat().st_size > MAX_BYTES:
            raise SpecError(f"{rel}:1: the OpenAPI spec '{name}' is larger than {MAX_BYTES} bytes")
        text = read_bounded(path, f"OpenAPI spec '{name}'", MAX_BYTES).decode("utf-8")
    except IrregularFileError as exc:
        raise SpecError(f"{rel}:1: {str(exc).partition(': ')[2]}") from None
    except OSError as exc:
        raise SpecError(f"{rel}: the OpenAPI spec '{name}' cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{rel}:1: the OpenAPI spec '{name}' is not UTF-8 text") from None
    try:
        data, positions = load_with_positions(text)
    except YamlError as exc:
        raise SpecError(f"{rel}:{exc.line or 1}: the OpenAPI spec '{name}' does not parse: {exc.message}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{rel}:1: the OpenAPI spec '{name}' is not a mapping")
    version = str(data.get("openapi", ""))
    if not version.startswith("3."):
        line = positions.of(("openapi",))[0] if "openapi" in data else 1
        raise SpecError(f"{rel}:{line}: '{name}' is not an OpenAPI 3.x spec (Connic imports OpenAPI 3.x; "
                        f"found {('openapi: ' + version) if version else 'no openapi version'})")
    _validate(name, data, positions, rel, path, registry)
    operations = _operations(name, data, positions, rel)
    return ApiSpec(name, path, operations, _server(data), _api_key_header(data))


def _validate(name: str, data: dict[str, object], positions: YamlPositions, rel: str, path: Path,
              registry: ApiRegistry) -> None:
    try:
        from openapi_spec_validator import validate
    except ImportError:
        registry.notes.append((path, 1, (
            f"{rel}: the OpenAPI spec '{name}' was not validated: openapi-spec-validator is not "
            "installed (pip install 'pytest-connic[api]'); Connic refuses a spec that does not "
            "validate")))
        return
    try:
        validate(data)
    except Exception as exc:  # noqa: BLE001 -- the validator's own errors (jsonschema's and others)
        where: KeyPath = tuple(getattr(exc, "absolute_path", ()) or ())
        line = positions.of(where)[0] if where else 1
        message = str(getattr(exc, "message", None) or (str(exc).splitlines() or [type(exc).__name__])[0])
        at = f" at {format_path(where)}" if where else ""
        raise SpecError(f"{rel}:{line}: the OpenAPI spec '{name}' does not validate{at}: {message}") from None


def _server(data: dict[str, object]) -> str | None:
    servers = data.get("servers")
    if not isinstance(servers, list) or not servers or not isinstance(servers[0], dict):
        return None
    url = str(servers[0].get("url") or "")
    for key, variable in (servers[0].get("variables") or {}).items():
        if isinstance(variable, dict) and "default" in variable:
            url = url.replace("{" + str(key) + "}", str(variable["default"]))
    return url or None


def _api_key_header(data: dict[str, object]) -> str | None:
    components = data.get("components") or {}
    schemes = (components.get("securitySchemes") if isinstance(components, dict) else None) or {}
    for scheme in schemes.values() if isinstance(schemes, dict) else ():
        if isinstance(scheme, dict) and scheme.get("type") == "apiKey" and scheme.get("in") == "header":
            return str(scheme.get("name") or "") or None
    return None


def spec_of(ref: str) -> str:
    """The spec name of an ``api:`` ref: ``api:billing.invoice_*`` -> ``billing``."""
    stripped = ref.removeprefix("api:")
    return stripped.split(".", 1)[0] if "*" in stripped else stripped.rpartition(".")[0]


def words(text: str) -> list[str]:
    """``createCharge`` / ``create_charge`` / ``create-charge`` -> ``["create", "charge"]``."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", text))
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]


def tool_name(method: str, path: str, operation_id: str | None) -> str:
    """Connic's name of an operation's tool [guardrails-schemas-mcp]: with an ``operationId``,
    snake_case with the action verb at the end (``createCharge`` -> ``charge_create``; no verb:
    the HTTP method appended); without, path + verb (``GET /users/{id}`` -> ``users_by_id_get``),
    common prefixes (``/api/v1``, ``/v2``) stripped."""
    method = method.lower()
    if operation_id and words(operation_id):
        parts = words(operation_id)
        if parts[-1] in VERBS and len(parts) > 1:
            return "_".join(parts)
        if parts[0] in VERBS and len(parts) > 1:
            return "_".join([*parts[1:], parts[0]])
        return "_".join([*parts, method])
    segments = [s for s in path.split("/") if s]
    while segments and _PREFIX.fullmatch(segments[0].lower()):
        segments = segments[1:]
    parts = []
    for segment in segments:
        if segment.startswith("{") and segment.endswith("}"):
            parts += ["by", *words(segment[1:-1])]
        else:
            parts += words(segment)
    return "_".join([*parts, method])


def _operations(name: str, data: dict[str, object], positions: YamlPositions, rel: str) -> dict[str, ApiOperation]:
    out: dict[str, ApiOperation] = {}
    paths = data.get("paths") or {}
    for path, item in paths.items() if isinstance(paths, dict) else ():
        if not isinstance(item, dict):
            continue
        shared = item.get("parameters") or []
        for method in METHODS:
            operation = item.get(method)
            if not isinstance(operation, dict):
                continue
            line = positions.of(("paths", path, method), key=True)[0]
            tool = tool_name(method, str(path), operation.get("operationId"))
            if tool in out:
                other = out[tool]
                raise SpecError(
                    f"{rel}:{line}: the OpenAPI spec '{name}' generates the tool name '{tool}' twice "
                    f"({other.method.upper()} {other.path} at line {other.line}, {method.upper()} {path}); "
                    "give one of them another operationId (on Connic you would rename it in the dashboard)")
            out[tool] = _operation(name, tool, method, str(path), operation, shared, data, line)
    return out


def _operation(spec: str, tool: str, method: str, path: str, operation: dict[str, object], shared: list[object],
               data: dict[str, object], line: int) -> ApiOperation:
    own = operation.get("parameters") or []
    listed = [_deref(p, data) for p in [*shared, *(own if isinstance(own, list) else [])]]
    properties, required, params = _parameters(listed, data)
    body = _deref(operation.get("requestBody"), data)
    has_body = isinstance(body, dict)
    if isinstance(body, dict):
        properties["body"] = _body_schema(body, data)
        if body.get("required"):
            required.append("body")
    description = str(operation.get("summary") or operation.get("description") or f"{method.upper()} {path}")
    parameters: dict[str, object] = {"type": "object", "properties": properties, "required": required}
    return ApiOperation(spec, tool, method, path, description, parameters, tuple(params), has_body, line)


def _parameters(listed: list[object], data: dict[str, object]) -> tuple[dict[str, object], list[str], list[ApiParam]]:
    """The path, query and header parameters (an operation's own override the path's shared ones
    of the same name and place): their schemas by name, the required names, and how each is sent."""
    properties: dict[str, object] = {}
    required: list[str] = []
    params: list[ApiParam] = []
    declared = {(p.get("name"), p.get("in")): p for p in listed if isinstance(p, dict)}
    for (pname, where), param in declared.items():
        if where not in ("path", "query", "header") or not isinstance(pname, str):
            continue
        schema = dict(_schema(_inline(param.get("schema") or {"type": "string"}, data)))
        if param.get("description"):
            schema.setdefault("description", param["description"])
        properties[pname] = schema
        is_required = bool(param.get("required")) or where == "path"
        if is_required:
            required.append(pname)
        params.append(ApiParam(pname, str(where), is_required))
    return properties, required, params


def _body_schema(body: dict[str, object], data: dict[str, object]) -> dict[str, object]:
    """The schema of the ``body`` argument: the JSON media type's (else the first one's), inlined."""
    content = body.get("content") or {}
    media = content.get("application/json") or next(iter(content.values()), None) if isinstance(content, dict) else None
    found = (media or {}).get("schema") if isinstance(media or {}, dict) else None
    schema = _schema(_inline(found or {"type": "object"}, data))
    return {**schema, "description": str(body.get("description") or "the request body")}


def _schema(value: object) -> dict[str, object]:
    """A schema of the spec, once inlined: a mapping (a spec whose schema is not one is refused)."""
    if not isinstance(value, dict):
        raise TypeError(f"expected a schema (a mapping), found {type(value).__name__}")
    return value


def _deref(value: object, data: dict[str, object]) -> object:
    """A local ``$ref`` (``#/components/...``) resolved, one level."""
    if isinstance(value, dict) and isinstance(value.get("$ref"), str) and value["$ref"].startswith("#/"):
        target: object = data
        for part in value["$ref"][2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, dict) else None
        return target if isinstance(target, dict) else {}
    return value


def _inline(schema: object, data: dict[str, object], depth: int = 0) -> object:
    """A schema with its local ``$ref``s inlined (the model reads one self-contained schema);
    a reference nested deeper than 16 levels (a recursive schema) becomes ``{}``."""
    if depth > 16:
        return {}
    if isinstance(schema, dict):
        if "$ref" in schema:
            return _inline(_deref(schema, data), data, depth + 1)
        return {k: _inline(v, data, depth + 1) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_inline(v, data, depth + 1) for v in schema]
    return schema
