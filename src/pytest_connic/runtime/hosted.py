"""What the session says about Connic's hosted services (model-based guardrails, web tools), and
warnings located at the case that caused them.

A leaf of the runtime: ``services.py`` holds a :class:`HostedSettings`, ``guardrails.py`` and
``predefined_dispatch.py`` read it.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

#: what happens to a model-based guardrail check with no judgement: ``error`` fails the case,
#: ``pass`` counts it as passed (shown as not evaluated)
UNJUDGED_POLICIES = ("error", "pass")


def _no_aliases() -> dict[str, str]:
    return {}


@dataclass(frozen=True)
class HostedSettings:
    """``--connic-guardrail-model`` (the judge model, a LiteLLM model string), the policy for an
    unjudged check (``--connic-unjudged-guardrails``), and the model aliases the judge honours."""

    guardrail_model: str | None = None
    unjudged_guardrails: str = "error"
    aliases: Callable[[], dict[str, str]] = field(default=_no_aliases, compare=False)


class LocatedWarnings:
    """Warnings emitted once per key, located at a file and line (the suite file and line of the
    case that caused them), so pytest's summary names the user's file, not the plugin's source."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def warn(self, key: str, message: str, category: type[Warning],
             location: tuple[Path, int] | None) -> None:
        with self._lock:
            if key in self._seen:
                return
            self._seen.add(key)
        if location is None:
            warnings.warn(category(message), stacklevel=3)
            return
        path, line = location
        warnings.warn_explicit(category(message), category, str(path), line)
