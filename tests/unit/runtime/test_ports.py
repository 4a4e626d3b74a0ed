"""The runtime's host port without pytest: NullHost answers nothing and warns once per key."""

from __future__ import annotations

import warnings

from pytest_connic.runtime.ports import Host, NullHost, WarnedKeys
from pytest_connic.warnings import ConnicWarning, GuardrailNotEvaluatedWarning


def test_null_host_answers_none() -> None:
    host: Host = NullHost()
    assert host.make_model(object(), "m", None, 0) is None
    assert host.guardrail(object(), "input", "text", {}) is None
    assert host.predefined_tool("web_search", {}, {}) is None


def test_null_host_warns_once_per_key() -> None:
    host = NullHost()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        host.warn_once("a", "first")
        host.warn_once("a", "again")
        host.warn_once("b", "other", GuardrailNotEvaluatedWarning)
    assert [(type(w.message), str(w.message)) for w in caught] == [
        (ConnicWarning, "first"), (GuardrailNotEvaluatedWarning, "other")
    ]


def test_warned_keys_are_new_once_and_none_always() -> None:
    keys = WarnedKeys()
    assert [keys.first(k) for k in ("a", "a", "b", None, None)] == [True, False, True, True, True]
