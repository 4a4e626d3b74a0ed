"""JSON-safe values: what a report or a model turn is given never raises (pytest_connic.jsonsafe)."""

from __future__ import annotations

import json

from pytest_connic.jsonsafe import json_text, trace_data


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("nope")

    __repr__ = __str__


def test_a_value_whose_str_and_repr_raise_is_named_not_raised() -> None:
    value = {"value": Unprintable(), "ok": 1}

    assert json.loads(json_text(value)) == {"value": "<unrepresentable Unprintable: RuntimeError>", "ok": 1}
    assert trace_data(value) == {"value": "<unrepresentable Unprintable: RuntimeError>", "ok": 1}
