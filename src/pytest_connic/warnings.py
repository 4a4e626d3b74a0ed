"""Warnings pytest-connic emits."""

from __future__ import annotations


class ConnicWarning(UserWarning):
    """Base class of every warning pytest-connic emits."""


class GuardrailNotEvaluatedWarning(ConnicWarning):
    """A model-based built-in guardrail cannot run offline and counted as passed."""


class CassetteDivergenceWarning(ConnicWarning):
    """A replayed request differs from the one recorded in the cassette."""
