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

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_connic.runtime.signals import RunFailed

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pytest_connic.project.sdk import AgentConfig
    from pytest_connic.records.run import ToolCallRecord

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
    def of(cls, config: AgentConfig) -> RetrySettings:
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


def check_reflection_budget(config: AgentConfig, tool_calls: Sequence[ToolCallRecord],
                            budget: ReflectionBudget) -> None:
    """After a model turn's tool calls (``tool_calls``: the run's, in order): fail the run once a
    tool of this agent (``config``) has failed in ``retry_options.attempts`` model turns in a row
    (its error went back to the model each time); ``budget`` keeps the count between turns.

    The model's turns are the attempts: calls of one tool in the same turn are one attempt, and
    a turn in which the tool succeeded starts its count again. A failure is a call that ended in
    an error the model read (the tool raised, a hook failed, bad arguments); an ``AbortTool``
    answer or a human's rejection is not."""
    attempts = RetrySettings.of(config).attempts
    calls = [c for c in tool_calls if c.agent == config.name]
    turn: dict[str, bool] = {}  # tool -> every call of it in this turn failed
    for call in calls[budget.checked:]:
        ref = call.ref or call.name
        failed = bool(call.error) and not call.aborted and call.approval not in _DECIDED
        if failed:
            budget.errors[ref] = call.error or ""
        turn[ref] = turn.get(ref, True) and failed
    budget.checked = len(calls)
    streaks = budget.streaks
    for ref, failed in turn.items():
        streaks[ref] = streaks.get(ref, 0) + 1 if failed else 0
        if streaks[ref] >= attempts:
            raise RunFailed(
                f"tool {ref} failed in {streaks[ref]} model turn(s) in a row, the retry_options.attempts "
                f"budget ({attempts}) of agent '{config.name}': {budget.errors[ref]}"
            )


@dataclass
class ReflectionBudget:
    """What :func:`check_reflection_budget` has seen of an invocation's tool calls."""

    checked: int = 0  #: tool calls of the agent already counted
    streaks: dict[str, int] = field(default_factory=dict)  #: tool -> failing turns in a row
    errors: dict[str, str] = field(default_factory=dict)  #: tool -> its last error
