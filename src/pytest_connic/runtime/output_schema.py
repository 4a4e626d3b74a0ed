"""Output schemas as Connic validates them: the subset of JSON Schema its docs list.

Connic "honors the keywords the model needs to produce conforming output and validates the
parsed response against them" [guardrails-schemas-mcp]: ``type``, ``properties``, ``required``,
``items``, ``description``, ``default``, ``additionalProperties``, ``nullable`` (or a ``type``
list with ``"null"``), ``enum``, ``const``, ``minimum``, ``maximum``, ``exclusiveMinimum``,
``exclusiveMaximum``, ``multipleOf``, ``minLength``, ``maxLength``, ``pattern``, ``minItems``,
``maxItems``. A keyword outside that list (``format``, ``oneOf``, ``$ref``, ``uniqueItems``, ...)
is not enforced there, so it is not enforced here either: :func:`connic_subset` drops it and
names it, and the run warns once. Pure annotations (``$schema``, ``title``, ...) constrain
nothing in any validator and are dropped without a word.
"""

from __future__ import annotations

from collections.abc import Mapping

#: the keywords Connic documents and enforces
SUPPORTED = frozenset({
    "type", "properties", "required", "items", "description", "default", "additionalProperties",
    "nullable", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "minLength", "maxLength", "pattern", "minItems", "maxItems",
})
#: annotations: no validator enforces them, so leaving them out changes nothing
ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "title", "examples", "readOnly", "writeOnly",
                         "deprecated"})


def connic_subset(schema: object) -> tuple[dict[str, object], list[str]]:
    """``schema`` reduced to the keywords Connic enforces (``nullable`` turned into "or null"),
    and the dropped keywords as ``path: keyword`` (``<root>`` for the top level), in order."""
    dropped: list[str] = []
    reduced = _reduce(schema, "<root>", dropped)
    return (reduced if isinstance(reduced, dict) else {}), dropped


def _reduce(schema: object, path: str, dropped: list[str]) -> object:
    if not isinstance(schema, Mapping):
        return schema  # a boolean schema (true/false) means the same everywhere
    out: dict[str, object] = {}
    for key, value in schema.items():
        if key in ANNOTATIONS:
            continue
        if key not in SUPPORTED:
            dropped.append(f"{path}: {key}")
            continue
        if key == "properties" and isinstance(value, Mapping):
            out[key] = {name: _reduce(sub, f"{_join(path, 'properties')}.{name}", dropped)
                        for name, sub in value.items()}
        elif key == "items":
            if isinstance(value, list):  # draft-07 tuple form: not in Connic's list
                dropped.append(f"{path}: items (a list of schemas)")
                continue
            out[key] = _reduce(value, _join(path, "items"), dropped)
        elif key == "additionalProperties":
            out[key] = _reduce(value, _join(path, "additionalProperties"), dropped)
        elif key != "nullable":
            out[key] = value
    if schema.get("nullable") is True:
        return {"anyOf": [out, {"type": "null"}]}
    return out


def _join(path: str, key: str) -> str:
    return key if path == "<root>" else f"{path}.{key}"


def first_error(schema: Mapping[str, object], value: object) -> tuple[str, str] | None:
    """The most relevant violation of ``schema`` (already reduced) by ``value`` as
    ``(where, message)``, or None when it conforms. Raises ``jsonschema.SchemaError`` for a
    schema that is not valid JSON Schema."""
    from jsonschema import Draft202012Validator  # imported on first use: 0.1 s
    from jsonschema.exceptions import best_match

    Draft202012Validator.check_schema(schema)
    error = best_match(Draft202012Validator(schema).iter_errors(value))
    if error is None:
        return None
    return "/".join(str(p) for p in error.absolute_path) or "<root>", error.message
