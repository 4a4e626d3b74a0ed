"""Secrets never reach a cassette, a report, a trace or a failure message.

A value is secret when it comes from an environment variable whose name looks
secret (``*_KEY``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ...), or from a
``--connic-env`` file (every value there is masked: those files exist to hold
credentials). ``Masker`` replaces every occurrence with ``***``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"

_SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|AUTH|CREDENTIAL|PRIVATE|SESSION|COOKIE|DSN)", re.IGNORECASE
)
#: values shorter than this are not masked: masking "1" or "true" would shred reports
_MIN_LENGTH = 6


def looks_secret(name: str) -> bool:
    """Whether an environment variable's name suggests a credential."""
    return bool(_SECRET_NAME.search(name))


def secret_values_from_env(environ: Mapping[str, str] | None = None) -> set[str]:
    """The values of every environment variable whose name looks secret."""
    env = os.environ if environ is None else environ
    return {value for name, value in env.items() if looks_secret(name) and len(value) >= _MIN_LENGTH}


class Masker:
    """Replaces known secret values in text and in JSON-like data."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self.add(values)

    def add(self, values: Iterable[str]) -> None:
        """Remember more secret values."""
        fresh = {v for v in values if isinstance(v, str) and len(v) >= _MIN_LENGTH}
        if fresh - self._values:
            self._values |= fresh
            # longest first, so a secret that contains another is masked whole
            ordered = sorted(self._values, key=len, reverse=True)
            self._pattern = re.compile("|".join(re.escape(v) for v in ordered))

    @property
    def values(self) -> frozenset[str]:
        return frozenset(self._values)

    def text(self, value: str) -> str:
        """``value`` with every secret replaced by ``***``."""
        if self._pattern is None or not value:
            return value
        return self._pattern.sub(MASK, value)

    def data(self, value: Any) -> Any:
        """A copy of JSON-like ``value`` with secrets masked in every string (keys too)."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.data(k): self.data(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value


def default_masker() -> Masker:
    """A masker that knows the secret-looking values of the current environment."""
    return Masker(secret_values_from_env())
