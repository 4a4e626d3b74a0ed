"""Guardrails (spec §9.3, §9.7), without pytest: the local PII and ``regex`` detectors, their
results, and the rejection message."""

from __future__ import annotations

from typing import Any

import pytest
from connic import GuardrailResult
from connic.core import GuardrailRule

from pytest_connic.runtime.guardrails import (
    DEFAULT_REJECTION,
    _rejection,
    as_result,
    pii_findings,
    pii_redact,
    regex_patterns,
    regex_violation,
)
from pytest_connic.runtime.signals import RunAborted


def pii(*entities: str, type: str = "pii") -> GuardrailRule:
    return GuardrailRule(type=type, mode="redact", config={"entities": list(entities)} if entities else {})


# --------------------------------------------------------------------------- PII detectors


@pytest.mark.parametrize(
    "text, found",
    [
        ("write to ada.lovelace@example.co.uk today", ["email"]),
        ("call +49 30 1234567", ["phone"]),
        ("call (555) 123-4567 or 555.987.6543", ["phone"]),
        ("ssn 123-45-6789", ["ssn"]),
        ("card 4111 1111 1111 1111", ["credit_card"]),
        ("card 4111-1111-1111-1111", ["credit_card"]),
        ("iban DE89 3704 0044 0532 0130 00", ["iban"]),
        ("iban DE89370400440532013000", ["iban"]),
        ("from 10.0.0.255", ["ip_address"]),
        ("key sk-live-abcdefghijklmnop1234", ["api_key"]),
        ("aws AKIAIOSFODNN7EXAMPLE", ["api_key"]),
        ("mail a@b.io, ssn 123-45-6789", ["email", "ssn"]),
        # not PII: dates, short numbers, invalid IPs, card numbers that fail Luhn, amounts
        ("due 2024-01-15 or 15.01.2024", []),
        ("order 12345 for 1000000 EUR", []),
        ("version 999.1.1.1", []),
        ("code DE00 ABCD EFGH IJKL", []),
        ("ssn-shaped 123-45-6789 is no phone number", []),
        ("", []),
    ],
)
def test_pii_findings(text: str, found: list[str]) -> None:
    everything_but_ssn = pii("email", "phone", "credit_card", "iban", "ip_address", "api_key")
    assert pii_findings(pii() if "ssn" in found else everything_but_ssn, text) == found


def test_pii_entities_restrict_what_is_looked_for() -> None:
    text = "mail a@b.io, ssn 123-45-6789"
    assert pii_findings(pii("ssn"), text) == ["ssn"]
    assert pii_findings(pii("EMAIL"), text) == ["email"]
    assert pii_findings(pii("passport"), text) == []


@pytest.mark.parametrize(
    "text, redacted",
    [
        ("mail ada@example.com now", "mail [EMAIL_REDACTED] now"),
        ("ssn 123-45-6789, card 4111 1111 1111 1111",
         "ssn [SSN_REDACTED], card [CREDIT_CARD_REDACTED]"),
        ("call +1 (555) 123-4567", "call [PHONE_REDACTED]"),
        ("iban DE89 3704 0044 0532 0130 00 ok", "iban [IBAN_REDACTED] ok"),
        ("host 192.168.1.10", "host [IP_ADDRESS_REDACTED]"),
        ("token ghp_" + "a" * 36, "token [API_KEY_REDACTED]"),
        ("nothing here 2024-01-15", "nothing here 2024-01-15"),
    ],
)
def test_pii_redaction_placeholders(text: str, redacted: str) -> None:
    assert pii_redact(pii(type="pii"), text) == redacted  # pii without entities: all seven


def test_each_type_has_connics_default_entities() -> None:
    text = "mail ada@example.com, ssn 123-45-6789, host 192.168.1.10, key ghp_" + "a" * 36
    assert pii_findings(pii(type="pii"), text) == ["email", "api_key", "ssn", "ip_address"]
    assert pii_findings(pii(type="pii_leakage"), text) == ["api_key", "ssn"]
    assert pii_findings(pii("email", type="pii_leakage"), text) == ["email"]


# --------------------------------------------------------------------------- regex, results


def regex(config: dict[str, Any], mode: str = "block") -> GuardrailRule:
    return GuardrailRule(type="regex", mode=mode, config=config)


@pytest.mark.parametrize(
    "config, expected",
    [
        # Connic's shape: a list of {pattern, message}
        ({"patterns": [{"pattern": "a+", "message": "no a"}, {"pattern": "b"}]}, [("a+", "no a"), ("b", None)]),
        ({"patterns": ["x", "y"]}, [("x", None), ("y", None)]),
        # local shorthand
        ({"pattern": "z", "message": "no z"}, [("z", "no z")]),
        ({"pattern": "z", "patterns": ["y"]}, [("z", None), ("y", None)]),
        ({"patterns": [{"message": "empty"}, ""]}, []),
        ({}, []),
    ],
)
def test_regex_patterns_config(config: dict[str, Any], expected: list[tuple[str, str | None]]) -> None:
    assert regex_patterns(regex(config)) == expected


def test_regex_violation_uses_python_re_search() -> None:
    rule = regex({"patterns": [{"pattern": r"(?i)\b(drop|delete)\s+table\b", "message": "SQL"}, "secret"]})
    assert regex_violation(rule, "please Drop  TABLE users") == (r"(?i)\b(drop|delete)\s+table\b", "SQL")
    assert regex_violation(rule, "my secret") == ("secret", None)
    assert regex_violation(rule, "my Secret") is None
    with pytest.raises(RunAborted, match=r"guardrail regex: invalid pattern '\(unclosed'"):
        regex_violation(regex({"patterns": ["(unclosed"]}), "text")


@pytest.mark.parametrize(
    "value, passed, message",
    [
        (GuardrailResult(passed=False, message="m"), False, "m"),
        (True, True, None),
        (False, False, None),
        ({"passed": True, "message": "ok"}, True, "ok"),
        ("yes", False, "check returned str, not GuardrailResult"),
        (None, False, "check returned NoneType, not GuardrailResult"),
        ({"message": "no verdict"}, False, "check returned dict, not GuardrailResult"),
    ],
)
def test_as_result(value: Any, passed: bool, message: str | None) -> None:
    result = as_result(value, "check")
    assert (result.passed, result.message) == (passed, message)


def test_rejection_message_precedence() -> None:
    topic = GuardrailRule(type="topic_restriction", config={"off_topic_message": "only billing",
                                                             "rejection_message": "blocked"})
    assert _rejection(topic) == "only billing"
    assert _rejection(topic, "pattern says no") == "pattern says no"
    assert _rejection(GuardrailRule(type="custom", name="x", config={"rejection_message": "blocked"})) == "blocked"
    assert _rejection(GuardrailRule(type="moderation", config={"off_topic_message": "ignored"})) == DEFAULT_REJECTION
