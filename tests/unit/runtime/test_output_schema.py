"""Output schemas reduced to the JSON Schema subset Connic documents (runtime/output_schema.py)."""

from __future__ import annotations

import jsonschema
import pytest

from pytest_connic.runtime.output_schema import connic_subset, first_error


def test_keywords_outside_the_subset_are_dropped_and_named_annotations_silently() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#", "title": "T", "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email", "maxLength": 20},
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "uniqueItems": True},
            "extra": {"type": "object", "additionalProperties": {"type": "integer", "examples": [1]}},
        },
        "oneOf": [{"required": ["email"]}],
        "required": ["email"],
    }
    reduced, dropped = connic_subset(schema)
    assert dropped == ["properties.email: format", "properties.tags: uniqueItems", "<root>: oneOf"]
    assert reduced == {
        "type": "object",
        "properties": {
            "email": {"type": "string", "maxLength": 20},
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}},
            "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
        "required": ["email"],
    }


def test_nullable_allows_null_and_nothing_else() -> None:
    reduced, dropped = connic_subset({"type": "object", "properties": {"note": {"type": "string", "nullable": True}}})
    assert dropped == []
    assert first_error(reduced, {"note": None}) is None
    assert first_error(reduced, {"note": "x"}) is None
    assert first_error(reduced, {"note": 3}) is not None


@pytest.mark.parametrize(
    "value, where",
    [
        ({"n": 11}, "n"),
        ({"n": 2.5}, "n"),
        ({"n": 4, "s": "toolong"}, "s"),
        ({"n": 4, "k": "x"}, "<root>"),
        ({"n": 4, "l": []}, "l"),
        ({"n": 4, "c": "b"}, "c"),
    ],
)
def test_the_documented_keywords_are_enforced(value: dict[str, object], where: str) -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 0, "exclusiveMaximum": 10, "multipleOf": 2},
            "s": {"type": "string", "maxLength": 3},
            "l": {"type": "array", "minItems": 1},
            "c": {"const": "a"},
        },
        "required": ["n"],
        "additionalProperties": False,
    }
    reduced, _ = connic_subset(schema)
    error = first_error(reduced, value)
    assert error is not None and error[0] == where


def test_a_tuple_items_list_is_dropped_and_an_invalid_schema_raises() -> None:
    assert connic_subset({"type": "array", "items": [{"type": "string"}]}) == (
        {"type": "array"}, ["<root>: items (a list of schemas)"])
    with pytest.raises(jsonschema.SchemaError):
        first_error({"type": "strng"}, {})
