"""Mocks (spec §5), without pytest: every rung of every ladder, Connic's name normalisation,
the lookup of the most specific callable, and validation of mocked calls against the signature."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any, Literal, Optional

import pytest

from pytest_connic.runtime.mocks import (
    MockSet,
    argument_schema,
    guardrail_ladder,
    normalise_segments,
    signature_errors,
    tool_ladder,
)

# --------------------------------------------------------------------------- ladders (pure)


@pytest.mark.parametrize(
    "ref, suffix, ladder",
    [
        ("data.customer.add_customer", "",
         ["mock_data_customer_add_customer", "mock_data_customer", "mock_data", "mock"]),
        ("billing.refund", "", ["mock_billing_refund", "mock_billing", "mock"]),
        ("data.customer.add_customer", "_hook_before",
         ["mock_data_customer_add_customer_hook_before", "mock_data_customer_hook_before", "mock_data_hook_before",
          "mock_hook_before"]),
        ("billing.refund", "_hook_after", ["mock_billing_refund_hook_after", "mock_billing_hook_after",
                                           "mock_hook_after"]),
        ("db_find", "_hook_before", ["mock_db_find_hook_before", "mock_hook_before"]),
        # each run of non-alphanumerics in a segment becomes one `_`; `api:` stays in its segment
        ("api:weather-v2.lookup", "_hook_before",
         ["mock_api_weather_v2_lookup_hook_before", "mock_api_weather_v2_hook_before", "mock_hook_before"]),
        ("pkg__x.do--it", "", ["mock_pkg_x_do_it", "mock_pkg_x", "mock"]),
    ],
)
def test_tool_ladder(ref: str, suffix: str, ladder: list[str]) -> None:
    assert tool_ladder(ref, suffix) == ladder


def test_normalise_segments_splits_on_dots_only() -> None:
    assert normalise_segments("api:stripe.charges_create") == ["api_stripe", "charges_create"]
    assert normalise_segments("a b.c") == ["a_b", "c"]


@pytest.mark.parametrize(
    "direction, name, ladder",
    [
        ("input", "domain_check", ["guardrail_input_domain_check", "guardrail_input", "guardrail"]),
        ("input", "domain-check", ["guardrail_input_domain_check", "guardrail_input", "guardrail"]),
        ("output", "tone..v2", ["guardrail_output_tone_v2", "guardrail_output", "guardrail"]),
    ],
)
def test_guardrail_ladder(direction: str, name: str, ladder: list[str]) -> None:
    assert guardrail_ladder(direction, name) == ladder


def _module(**attrs: Any) -> types.ModuleType:
    module = types.ModuleType("mocks_under_test")
    module.__file__ = "/project/tests/mocks/customer_mocks.py"
    vars(module).update(attrs)
    return module


def test_the_most_specific_callable_wins_and_non_callables_are_skipped() -> None:
    def mock(*a: Any) -> str:
        return "all"

    def mock_data(*a: Any) -> str:
        return "package"

    mocks = MockSet(_module(mock=mock, mock_data=mock_data, mock_data_customer=42), {})
    found = mocks.first(tool_ladder("data.customer.add_customer"))
    assert found is not None and found.name == "mock_data" and found.func is mock_data
    assert mocks.first(tool_ladder("billing.refund")).name == "mock"  # type: ignore[union-attr]
    assert MockSet(None, {}).first(tool_ladder("billing.refund")) is None
    assert MockSet(_module(), {}).first(["middleware_before"]) is None


def test_a_mock_else_the_strict_flag_else_the_real_function() -> None:
    """``MockSet.choose``: the one mock resolution of tools, hooks, middleware and guardrails."""
    from pytest_connic.runtime.signals import RunAborted

    def mock_billing(*a: Any) -> None: ...

    def real(*a: Any) -> None: ...

    def missing(tried: str) -> str:
        return f"billing.refund has no mock ({tried})"

    ladder = tool_ladder("billing.refund")
    assert MockSet(_module(mock_billing=mock_billing), {"strict_mocks": True}).choose(
        ladder, "strict_mocks", missing, real) == (mock_billing, "mock_billing")
    assert MockSet(_module(), {}).choose(ladder, "strict_mocks", missing, real) == (real, None)
    with pytest.raises(RunAborted) as raised:
        MockSet(None, {"strict_mocks": True}).choose(ladder, "strict_mocks", missing, real)
    assert raised.value.message == ("strict_mocks: billing.refund has no mock (tried mock_billing_refund, "
                                    "mock_billing, mock (the case sets no `mocks:` module))")


def test_tried_names_say_where_they_were_looked_up() -> None:
    names = ["mock_billing_refund", "mock_billing", "mock"]
    assert MockSet(_module(), {}).tried(names) == (
        "tried mock_billing_refund, mock_billing, mock in tests/mocks/customer_mocks.py")
    assert MockSet(None, {}).tried(["mock"]) == "tried mock (the case sets no `mocks:` module)"


# --------------------------------------------------------------------------- signature validation (pure)


def refund(charge_id: str, amount: float, reason: str | None = None, tags: list[int] | None = None,
           mode: Literal["full", "partial"] = "full", meta: dict[str, int] | None = None, anything: Any = None,
           untyped=None, context: dict | None = None) -> dict:  # type: ignore[no-untyped-def]
    """A refund tool."""
    return {}


def _schema(func: Any) -> dict[str, Any]:
    from connic import ProjectLoader

    return ProjectLoader(".", validation_only=True)._generate_schema(func)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "params, errors",
    [
        ({"charge_id": "ch_1", "amount": 5}, []),
        ({"charge_id": "ch_1", "amount": 5.5, "reason": None, "tags": [1], "mode": "partial",
          "meta": {"a": 1}, "anything": {"x": [1]}, "untyped": 3}, []),
        ({"amount": 5}, ["missing required argument 'charge_id'"]),
        ({"charge_id": "ch_1", "amount": 5, "currency": "EUR"},
         [("unknown argument 'currency' (the tool takes: charge_id, amount, reason, tags, mode, meta, anything, "
          "untyped)")]),
        ({"charge_id": 7, "amount": "5"},
         ["argument 'charge_id': 7 is not of type 'string'", "argument 'amount': '5' is not of type 'number'"]),
        ({"charge_id": "c", "amount": 1, "tags": [1, "2"]}, ["argument 'tags'[1]: '2' is not of type 'integer'"]),
        ({"charge_id": "c", "amount": 1, "mode": "half"}, ["argument 'mode': 'half' is not one of ['full', 'partial']"]),
        ({"charge_id": "c", "amount": 1, "meta": {"a": "x"}}, ["argument 'meta'['a']: 'x' is not of type 'integer'"]),
        # the injected context is not an argument the model may pass
        ({"charge_id": "c", "amount": 1, "context": {}},
         [("unknown argument 'context' (the tool takes: charge_id, amount, reason, tags, mode, meta, anything, "
          "untyped)")]),
    ],
)
def test_signature_errors(params: dict[str, Any], errors: list[str]) -> None:
    assert signature_errors(params, _schema(refund), refund) == errors


def test_without_the_function_the_sdk_schema_decides() -> None:
    schema = _schema(refund)
    # the SDK maps unhinted and Any parameters to "string"
    assert signature_errors({"charge_id": "c", "amount": 1, "untyped": 3}, schema) == [
        "argument 'untyped': 3 is not of type 'string'"]
    assert signature_errors("nope", schema) == ["arguments must be an object, got str"]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "annotation, schema",
    [
        (str, {"type": "string"}),
        (bool, {"type": "boolean"}),
        (Optional[int], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),  # noqa: UP045
        (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        (list[str], {"type": "array", "items": {"type": "string"}}),
        (list, {"type": "array"}),
        (list[Any], {"type": "array"}),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (Literal["a", 1], {"enum": ["a", 1]}),
        (Any, {}),
        (Path, {}),
        (Optional[Any], {}),  # noqa: UP045
    ],
)
def test_argument_schema(annotation: Any, schema: dict[str, Any]) -> None:
    assert argument_schema(annotation) == schema


def test_a_fresh_module_name_reads_back_as_its_folder_and_stem() -> None:
    from pytest_connic.runtime.mocks import fresh_name, fresh_origin

    name = fresh_name(Path("/project/tests/mocks/customer_mocks.py"))
    assert name.startswith("_connic_mocks_customer_mocks_")
    assert fresh_origin(name) == ("mocks", "customer_mocks")
    assert fresh_origin(fresh_name(Path("/p/tests/builders/seed_db.py"))) == ("builders", "seed_db")
    assert fresh_origin("tools.billing") is None
