"""What the session says about Connic's hosted services (model-based guardrails, web tools).

A leaf of the runtime: ``services.py`` holds a :class:`HostedSettings`, ``guardrails.py`` and
``predefined_dispatch.py`` read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

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
