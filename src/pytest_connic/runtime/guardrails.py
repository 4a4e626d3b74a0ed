"""Guardrails (spec §9.7): custom ones, regex and pattern-based PII locally;
model-based built-ins through the ``pytest_connic_guardrail`` hook or not evaluated."""

from __future__ import annotations

import inspect
import re
from typing import TYPE_CHECKING, Any

from connic import GuardrailResult

from ..records import GuardrailRecord
from .scope import RunAborted

if TYPE_CHECKING:
    from connic.core import GuardrailRule

    from .invocation import Invocation

MODEL_BASED = {
    "prompt_injection",
    "moderation",
    "topic_restriction",
    "relevance",
    "system_prompt_leakage",
    "data_exfiltration",
}
DEFAULT_REJECTION = "Your request was blocked by a guardrail."

#: entity → (pattern, placeholder)
PII_PATTERNS: dict[str, tuple[re.Pattern[str], str]] = {
    "email": (re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"), "[EMAIL_REDACTED]"),
    "phone": (re.compile(r"(?<!\w)\+?\d[\d\s().-]{7,}\d(?!\w)"), "[PHONE_REDACTED]"),
    "ssn": (re.compile(r"\b\d{3}-\d{2}-\d{4}\b"), "[SSN_REDACTED]"),
    "credit_card": (re.compile(r"\b(?:\d[ -]?){13,19}\b"), "[CREDIT_CARD_REDACTED]"),
    "iban": (re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){3,7}(?: ?[A-Z0-9]{1,3})?\b"), "[IBAN_REDACTED]"),
    "ip_address": (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b"), "[IP_ADDRESS_REDACTED]"),
}


def _entities(rule: GuardrailRule) -> list[str]:
    wanted = rule.config.get("entities")
    if not wanted:
        return list(PII_PATTERNS)
    return [str(e).lower() for e in wanted if str(e).lower() in PII_PATTERNS]


def pii_findings(rule: GuardrailRule, text: str) -> list[str]:
    """The PII entity kinds found in ``text``."""
    return [e for e in _entities(rule) if PII_PATTERNS[e][0].search(text)]


def pii_redact(rule: GuardrailRule, text: str) -> str:
    """``text`` with every PII match replaced by its placeholder (credit cards before phones)."""
    order = ["email", "ssn", "iban", "credit_card", "ip_address", "phone"]
    for entity in sorted(_entities(rule), key=lambda e: order.index(e) if e in order else 99):
        pattern, placeholder = PII_PATTERNS[entity]
        text = pattern.sub(placeholder, text)
    return text


def regex_violation(rule: GuardrailRule, text: str) -> str | None:
    """The first configured pattern found in ``text`` (``pattern`` or ``patterns``)."""
    patterns = rule.config.get("patterns") or []
    if rule.config.get("pattern"):
        patterns = [rule.config["pattern"], *patterns]
    flags = re.IGNORECASE if rule.config.get("case_sensitive") is False else 0
    for pattern in patterns:
        try:
            if re.search(str(pattern), text, flags):
                return str(pattern)
        except re.error as exc:
            raise RunAborted(f"guardrail regex: invalid pattern {pattern!r}: {exc}") from None
    return None


async def _custom(inv: Invocation, rule: GuardrailRule, direction: str, text: str) -> tuple[GuardrailResult, str | None]:
    mock = inv.scope.mocks.guardrail(direction, rule.name or "")
    if mock is not None:
        func, mock_name = mock.func, mock.name
    elif inv.scope.mocks.flags.get("strict_guardrail_mocks"):
        tried = ", ".join([f"guardrail_{direction}_{rule.name}", f"guardrail_{direction}", "guardrail"])
        raise RunAborted(f"strict_guardrail_mocks: custom guardrail '{rule.name}' ({direction}) has no mock (tried {tried})")
    else:
        func, mock_name = inv.services.project.guardrail(rule.name or "").check, None
    try:
        result = await inv.scope.call(func, text, inv.context)
    except Exception as exc:  # an exception counts as a violation
        return GuardrailResult(passed=False, message=f"{type(exc).__name__}: {exc}"), mock_name
    if isinstance(result, bool):
        result = GuardrailResult(passed=result)
    if not isinstance(result, GuardrailResult):
        return GuardrailResult(passed=False, message=f"check() returned {type(result).__name__}, not GuardrailResult"), mock_name
    return result, mock_name


async def _model_based(inv: Invocation, rule: GuardrailRule, direction: str, text: str) -> GuardrailResult | None:
    hook = inv.services.hook
    result = None
    if hook is not None:
        result = hook.pytest_connic_guardrail(
            config=inv.services.config, rule=rule, direction=direction, content=text, context=inv.context
        )
        if inspect.isawaitable(result):
            result = await result
    if result is None:
        inv.services.warn_once(
            f"guardrail:{rule.type}",
            f"built-in guardrail '{rule.type}' needs a model and was not evaluated locally (counted as "
            "passed); implement the hook pytest_connic_guardrail in conftest.py to check it",
        )
        return None
    if isinstance(result, bool):
        return GuardrailResult(passed=result)
    return result  # type: ignore[no-any-return]


async def _evaluate(inv: Invocation, rule: GuardrailRule, direction: str, text: str) -> GuardrailRecord:
    record = GuardrailRecord(direction=direction, type=rule.type, name=rule.name, status="passed")
    if rule.type == "custom":
        result, record.mock_function = await _custom(inv, rule, direction, text)
        record.mocked = record.mock_function is not None
        passed, record.message = result.passed, result.message
    elif rule.type in ("pii", "pii_leakage"):
        found = pii_findings(rule, text)
        passed = not found
        record.message = f"found {', '.join(found)}" if found else None
    elif rule.type == "regex":
        match = regex_violation(rule, text)
        passed = match is None
        record.message = f"matched {match!r}" if match else None
    else:
        evaluated = await _model_based(inv, rule, direction, text)
        if evaluated is None:
            record.status = "not_evaluated"
            return record
        passed, record.message = evaluated.passed, evaluated.message
    if not passed:
        record.status = {"block": "blocked", "warn": "warned", "redact": "redacted"}.get(rule.mode, "blocked")
    return record


def _rejection(rule: GuardrailRule) -> str:
    return str(rule.config.get("rejection_message") or DEFAULT_REJECTION)


async def _run(inv: Invocation, direction: str, text: str) -> str | None:
    config = inv.config.guardrails
    rules = getattr(config, direction, []) if config else []
    for rule in rules:
        record = await _evaluate(inv, rule, direction, text)
        inv.record.guardrails.append(record)
        if record.status == "blocked":
            return _rejection(rule)
        if record.status == "redacted":
            text = pii_redact(rule, text)
            if direction == "input":
                _redact_input(inv, rule)
    return None


def _redact_input(inv: Invocation, rule: GuardrailRule) -> None:
    for key, value in list(inv.delivered.items()):
        if isinstance(value, str):
            inv.delivered[key] = pii_redact(rule, value)


async def run_input(inv: Invocation, text: str) -> str | None:
    """Run the input guardrails; the rejection message when one blocks."""
    return await _run(inv, "input", text)


async def run_output(inv: Invocation, text: str) -> str | None:
    """Run the output guardrails; the rejection message when one blocks."""
    return await _run(inv, "output", text)


def redacted_output(inv: Invocation, output: Any) -> Any:
    """The output with redact-mode output guardrails applied (strings only)."""
    config = inv.config.guardrails
    if not config or not isinstance(output, str):
        return output
    for rule in config.output:
        if rule.mode == "redact" and rule.type in ("pii", "pii_leakage"):
            output = pii_redact(rule, output)
    return output
