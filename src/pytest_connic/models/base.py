"""The model interface the runtime talks to.

A model is any object with ``async complete(request) -> ModelResponse``. The
runtime builds one ``ModelRequest`` per model call (one agent-loop iteration);
cassettes, LiteLLM and user-supplied fakes answer it.

Messages use the OpenAI chat shape, which LiteLLM speaks natively:
``{"role": "system"|"user"|"assistant"|"tool", "content": ..., "tool_calls": [...],
"tool_call_id": ...}``. A user message with attached files has list content:
``[{"type": "text", "text": ...}, {"type": "file", "mime_type": ..., "data": <base64>, "name": ...}]``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from pytest_connic.errors import ConnicError, RunSignal


class ModelError(ConnicError):
    """A model could not answer. Subclasses say whose fault it is."""


class CassetteError(ModelError, RunSignal):
    """The suite author's to fix: a missing cassette, a divergence, turns left over.

    The case fails (exit code 1) with this message.
    """


class CallFailed(ModelError):
    """An answer from outside the model that is a failure (an MCP server refusing a call, an HTTP
    error, a page that cannot be fetched): recorded in the cassette's ``calls`` as ``error`` and
    raised again when replayed, so the run sees the same failure offline."""


class ProviderError(ModelError, RunSignal):
    """Infrastructure: a provider is down, refusing or timing out.

    The case is an error and the session exits with code 2.
    """


@dataclass
class ToolSpec:
    """A tool as the model sees it."""

    name: str
    description: str
    #: a JSON schema (None: none; a placeholder string once a matching rule replaced it whole)
    parameters: Mapping[str, object] | str | None


@dataclass
class ModelRequest:
    """One model call."""

    agent_name: str
    model: str
    system_prompt: str
    messages: list[dict[str, object]]
    tools: list[ToolSpec] = field(default_factory=list)
    fallback_model: str | None = None
    temperature: float = 1.0
    reasoning_effort: str | None = None
    #: deprecated raw reasoning token budget (``reasoning_budget``), legacy models only
    reasoning_budget: int | None = None
    output_schema: dict[str, object] | None = None
    retry_options: dict[str, object] | None = None
    #: seconds this call may take at most (the run's remaining time)
    timeout_s: float | None = None

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclass
class ToolCallRequest:
    """The model asks for a tool. ``arguments`` is a string when the model sent malformed JSON."""

    id: str
    name: str
    arguments: dict[str, object] | str


@dataclass
class ModelResponse:
    """One model turn: either tool calls or a final answer (``content``)."""

    content: str | None = None
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    #: the model string that actually answered (the fallback, when it was used)
    model: str | None = None


@runtime_checkable
class Model(Protocol):
    """Anything that answers model requests."""

    async def complete(self, request: ModelRequest) -> ModelResponse: ...


class RunModels(Protocol):
    """The models of one run of a case: one per agent invocation, in start order."""

    @property
    def notes(self) -> list[str]:
        """Divergence notes (a request that differs from the recorded one, with the first
        differing part), for the run's trace and a once-per-case warning; not failures."""
        ...

    def model_for(self, agent_name: str, *, root: bool) -> Model:
        """The model for the next invocation of ``agent_name`` in this run.

        ``root`` is true for the case's own agent (cassette ``turns``); other
        invocations are children (cassette ``children[agent_name][i]``).
        """
        ...

    async def external(self, kind: str, name: str, arguments: object,
                       call: Callable[[], Awaitable[object]]) -> object:
        """The answer to a call outside the model (``kind`` is one of ``cassette.CALL_KINDS``):
        ``call()`` when live or recording (the result, or the ``CallFailed`` it raises, is recorded
        in the run's ``calls``), the recorded answer when replaying (``CallFailed`` for a recorded
        error; ``CassetteError`` when the cassette does not record it). ``arguments`` must be
        JSON-safe and free of secrets (headers and auth stay out)."""
        ...

    def calls_live(self) -> bool:
        """Whether ``external`` calls ``call()`` for this run (live mode, or a run being recorded)
        rather than replaying; may read the cassette (``CassetteError`` when it is missing in replay)."""
        ...

    def finish(self, *, completed: bool) -> list[str]:
        """Close the run. Returns divergence messages (turns left unused) when
        ``completed`` is true; a run that ended early for its own reason reports none."""
        ...


class RunModelSource(Protocol):
    """The models of a case, run by run (a cassette, live providers, the user's hook)."""

    def for_run(self, index: int, /) -> RunModels:
        """The models of run ``index`` (0-based)."""
        ...
