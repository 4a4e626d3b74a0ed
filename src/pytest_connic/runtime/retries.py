"""``retry_options`` as Connic applies it (agent-yaml; tools-and-python "When middleware re-runs").

* ``type: tool`` and ``type: sequential``: operation-level attempts. A failed attempt (the
  body tool raised, a stage failed) is retried after a backoff delay, up to ``attempts`` in
  all; ``before`` middleware re-runs per retry only with ``rerun_middleware``; the context
  shows the zero-based attempt as ``retry_attempt``. The lifecycle drives it
  (``runtime/invocation.py`` ``_operation``).
* ``type: llm``: ``attempts`` is the tool-failure reflection budget: a failed tool call goes
  back to the model, and the run fails once one tool has failed ``attempts`` times
  (:func:`check_reflection_budget`). Model-request retries are the model's (``models/live.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_connic.runtime.signals import RunFailed

#: a call a human decided (its error is the decision, not the tool's failure)
_DECIDED = ("rejected", "timeout")


@dataclass(frozen=True)
class RetrySettings:
    """An agent's ``retry_options``, Connic's defaults where unset."""

    attempts: int = 3
    initial_delay: float = 10.0
    max_delay: float = 30.0
    rerun_middleware: bool = False

    @classmethod
    def of(cls, config: Any) -> RetrySettings:
        options = getattr(config, "retry_options", None)
        if options is None:
            return cls()
        values = {k: v for k, v in options.model_dump().items() if v is not None}
        return cls(
            attempts=max(1, int(values.get("attempts", cls.attempts))),
            initial_delay=max(0.0, float(values.get("initial_delay", cls.initial_delay))),
            max_delay=max(0.0, float(values.get("max_delay", cls.max_delay))),
            rerun_middleware=bool(values.get("rerun_middleware", cls.rerun_middleware)),
        )

    def delay(self, retry: int) -> float:
        """Seconds before retry number ``retry`` (1 = the second attempt): ``initial_delay``
        doubling per retry, capped at ``max_delay`` (Connic does not document its formula)."""
        return float(min(self.initial_delay * 2.0 ** (retry - 1), self.max_delay))


def check_reflection_budget(inv: Any) -> None:
    """After a model turn's tool calls: fail the run once a tool of this agent has failed
    ``retry_options.attempts`` times in the run (its errors went back to the model each time).

    A failure is a call that ended in an error the model read (the tool raised, a hook failed,
    bad or unknown arguments); an ``AbortTool`` answer or a rejected approval is not."""
    attempts = RetrySettings.of(inv.config).attempts
    failures: dict[str, list[str]] = {}
    for call in inv.record.tool_calls:
        if call.agent != inv.config.name or not call.error or call.aborted or call.approval in _DECIDED:
            continue
        failures.setdefault(call.ref or call.name, []).append(call.error)
    for ref, errors in failures.items():
        if len(errors) >= attempts:
            raise RunFailed(
                f"tool {ref} failed {len(errors)} time(s), the retry_options.attempts budget ({attempts}) of "
                f"agent '{inv.config.name}': {errors[-1]}"
            )

