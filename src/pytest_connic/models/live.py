"""Live model calls through LiteLLM (the ``[live]`` extra).

LiteLLM is imported on the first live call, never before, and is told to stay
offline by itself (its model-cost map and other catalogues come from its bundled
copies). Providers are configured the LiteLLM way: ``OPENAI_API_KEY``,
``OPENAI_API_BASE``, ``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY``, ``AZURE_API_KEY`` ...

Retries follow the agent's ``retry_options`` (Connic's defaults: 3 attempts,
120 s per attempt, delays from 10 s doubling up to 30 s, or the provider's
``Retry-After``), where a retry can help: not after a refused connection or a host
name that does not resolve (nothing listens there), nor after a client error. With a
``fallback_model`` the primary is tried once and the fallback gets the ``attempts``
budget, as on Connic. A failure that remains is a ``ProviderError`` (infrastructure),
with the provider's message, masked.

LiteLLM's import is most of a recording's first call (about 4.5 s of CPU: it imports
the OpenAI SDK's types and every provider's module; nothing is fetched, see
``OFFLINE_ENV``): :func:`import_in_background` starts it when the session begins.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import email.utils
import errno
import functools
import json
import os
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from pytest_connic.models.base import ModelRequest, ModelResponse, ProviderError, ToolCallRequest, ToolSpec
from pytest_connic.secrets import Masker

#: environment LiteLLM reads at import: use bundled catalogues, fetch nothing by itself
OFFLINE_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_OFFLINE_MODE": "true",
}
_RETRYABLE_NAMES = (
    "Timeout",
    "RateLimit",
    "APIConnection",
    "ServiceUnavailable",
    "InternalServer",
    "BadGateway",
)
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


@functools.lru_cache(maxsize=1)
def import_litellm() -> LiteLLMModule:
    """Import LiteLLM quietly and offline, once; ProviderError when the extra is missing."""
    for name, value in OFFLINE_ENV.items():
        os.environ.setdefault(name, value)
    try:
        import litellm
    except ImportError as exc:
        raise ProviderError(
            f"live model calls need LiteLLM: pip install 'pytest-connic[live]' ({exc})"
        ) from None
    litellm.telemetry = False
    litellm.suppress_debug_info = True
    # nothing about prompts leaves the process except the provider call itself
    litellm.turn_off_message_logging = True
    litellm.success_callback = []
    litellm.failure_callback = []
    litellm.callbacks = []
    return litellm


def import_in_background() -> None:
    """Start importing LiteLLM on a thread of its own (once), so that a session that will call
    providers does not wait for the import in its first call: the first call waits only for what
    is left of it (Python's import lock). The import is CPU and the GIL is shared, so it is free
    only where the session waits anyway: collection's and the worker templates' start. Errors are
    the first call's to report."""
    global _importing
    with _import_lock:
        if _importing is not None or "litellm" in sys.modules:
            return
        _importing = threading.Thread(target=_import_quietly, name="connic-litellm-import", daemon=True)
        _importing.start()


_import_lock = threading.Lock()
_importing: threading.Thread | None = None


def wait_imported(stopped: Callable[[], bool]) -> None:
    """Wait for :func:`import_in_background` to finish, or for ``stopped()`` to say the session
    was asked to stop."""
    thread = _importing
    while thread is not None and thread.is_alive() and not stopped():
        thread.join(0.1)


def _import_quietly() -> None:
    try:
        import_litellm()
    except Exception:  # noqa: BLE001, S110 -- the first live call imports again and reports it
        pass


class LiteLLMModule(Protocol):
    """What the plugin uses of the ``litellm`` module."""

    def acompletion(self, **kwargs: object) -> Awaitable[LiteLLMResponse]: ...

    def completion_cost(self, *, completion_response: object) -> float | None: ...


class LiteLLMFunction(Protocol):
    """The function of a tool call in a LiteLLM response (OpenAI's shape)."""

    name: str
    arguments: str | None


class LiteLLMToolCall(Protocol):
    """A tool call in a LiteLLM response."""

    id: str | None
    function: LiteLLMFunction


class LiteLLMMessage(Protocol):
    """The message of a LiteLLM response's choice (``tool_calls`` is read with ``getattr``: not
    every provider's message has it)."""

    content: str | None


class LiteLLMChoice(Protocol):
    """One choice of a LiteLLM response."""

    message: LiteLLMMessage


class LiteLLMResponse(Protocol):
    """What the plugin reads of a LiteLLM ``ModelResponse`` (``usage`` and ``_hidden_params`` are
    read with ``getattr``)."""

    choices: Sequence[LiteLLMChoice]


def _scalar(options: Mapping[str, object], name: str, default: float) -> int | float | str:
    value = options.get(name, default)
    if isinstance(value, (int, float, str)):
        return value
    raise TypeError(f"retry_options.{name}: expected a number, found {value!r}")


@dataclass(frozen=True)
class RetryPolicy:
    """The agent's ``retry_options`` for model calls."""

    attempts: int = 3
    attempt_timeout: float = 120.0
    initial_delay: float = 10.0
    max_delay: float = 30.0

    @classmethod
    def from_options(cls, options: Mapping[str, object] | None, timeout_s: float | None) -> RetryPolicy:
        """From ``retry_options`` (Connic's bounds), the attempt bounded by the run's remaining time."""
        # unset (None) options take Connic's defaults
        opts = {k: v for k, v in (options or {}).items() if v is not None}
        attempts = max(1, min(10, int(_scalar(opts, "attempts", cls.attempts))))
        timeout = float(_scalar(opts, "attempt_timeout", cls.attempt_timeout))
        if timeout_s is not None:
            timeout = min(timeout, max(timeout_s, 0.001))
        return cls(
            attempts=attempts,
            attempt_timeout=timeout,
            initial_delay=max(0.0, float(_scalar(opts, "initial_delay", cls.initial_delay))),
            max_delay=max(0.0, float(_scalar(opts, "max_delay", cls.max_delay))),
        )

    def delay(self, retry: int, cap: float | None = None) -> float:
        """Seconds before retry number ``retry`` (0-based): exponential, capped."""
        value: float = min(self.initial_delay * 2.0**retry, self.max_delay)
        return min(value, cap) if cap is not None else value


class LiteLLMModel:
    """A model that calls the provider named by the agent's model string, through LiteLLM.

    ``model`` overrides the request's model (None: use ``request.model``). ``aliases``
    maps Connic-hosted ``connic/...`` models to provider models. ``api_base`` /
    ``api_key`` override LiteLLM's environment lookup. ``max_retry_delay`` caps every
    backoff delay (tests use a tiny value). One instance may serve concurrent runs.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        aliases: Mapping[str, str] | None = None,
        masker: Masker | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        max_retry_delay: float | None = None,
        extra: Mapping[str, object] | None = None,
    ) -> None:
        self.model = model
        self.aliases = dict(aliases or {})
        secrets = set(masker.values) if masker else set()
        if api_key:
            secrets.add(api_key)
        self.masker = Masker(secrets)
        self.api_base = api_base
        self.api_key = api_key
        self.max_retry_delay = max_retry_delay
        self.extra = dict(extra or {})
        #: how the model waits between attempts (a live run really waits)
        self.sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def resolve(self, model: str) -> str:
        """The LiteLLM model string for an agent's model: an alias when one is given (required
        for Connic-hosted ``connic/...`` models), else the string itself."""
        if model in self.aliases:
            return self.aliases[model]
        if not model.startswith("connic/"):
            return model
        known = ", ".join(sorted(self.aliases)) or "none"
        raise ProviderError(
            f"{model} is a Connic-hosted model; map it to a provider model to call it locally, e.g. "
            f"--connic-model-alias {model}=openai/gpt-4.1-mini (ini connic_model_aliases); "
            f"aliases known: {known}"
        )

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Call the provider; ProviderError on failure. Without a fallback model the primary gets
        the ``retry_options.attempts`` budget; with one, the primary is tried once and the fallback
        gets the budget (agent-yaml; platform "Model-call failures")."""
        primary = self.model or request.model
        policy = RetryPolicy.from_options(request.retry_options, request.timeout_s)
        fallback = request.fallback_model
        if not fallback or fallback == primary:
            return await self._call(primary, request, policy)
        try:
            return await self._call(primary, request, dataclasses.replace(policy, attempts=1))
        except ProviderError as first:
            try:
                return await self._call(fallback, request, policy)
            except ProviderError as second:
                raise ProviderError(f"{first}; fallback {second}") from None

    async def _call(self, model: str, request: ModelRequest, policy: RetryPolicy) -> ModelResponse:
        litellm = import_litellm()
        kwargs = self._kwargs(self.resolve(model), request, policy)
        failure: BaseException | None = None
        for attempt in range(policy.attempts):
            if attempt:
                assert failure is not None
                # the provider's Retry-After wins over the backoff; both count against the run's timeout
                wait = retry_after(failure)
                wait = policy.delay(attempt - 1) if wait is None else wait
                if self.max_retry_delay is not None:
                    wait = min(wait, self.max_retry_delay)
                await self.sleep(wait)
            try:
                raw = await asyncio.wait_for(litellm.acompletion(**kwargs), policy.attempt_timeout + 5)
            except Exception as exc:  # noqa: BLE001 -- every failure of the provider call is classified
                failure = exc
                if not is_retryable(exc):
                    break
                continue
            return to_response(raw, model, litellm)
        assert failure is not None
        tries = attempt + 1
        why = unreachable(failure)
        said = f"after {tries} attempt(s)" + (f"; not retried: {why}" if why else "")
        raise ProviderError(self.masker.text(f"{model}: {describe(failure)} ({said})"))

    def _kwargs(self, model: str, request: ModelRequest, policy: RetryPolicy) -> dict[str, object]:
        kwargs: dict[str, object] = {
            "model": model,
            "messages": to_messages(request),
            "temperature": request.temperature,
            "timeout": policy.attempt_timeout,
            # retries are ours (retry_options), not LiteLLM's nor the provider SDK's
            "num_retries": 0,
            "max_retries": 0,
            "drop_params": True,
        }
        if request.tools:
            kwargs["tools"] = [to_tool(t) for t in request.tools]
        if request.reasoning_effort not in (None, "", "auto"):
            kwargs["reasoning_effort"] = request.reasoning_effort
        if request.reasoning_budget is not None:  # deprecated; legacy models only, as on Connic
            kwargs["thinking"] = {"type": "enabled", "budget_tokens": request.reasoning_budget}
        if request.output_schema:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": request.output_schema, "strict": False},
            }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key:
            kwargs["api_key"] = self.api_key
        kwargs.update(self.extra)
        return kwargs


# -- failures ----------------------------------------------------------------


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an exception carries (``status_code``, or its ``response``'s)."""
    for candidate in (exc, getattr(exc, "response", None)):
        status = getattr(candidate, "status_code", None)
        if isinstance(status, int):
            return status
    return None


def unreachable(exc: BaseException) -> str | None:
    """Why no retry can reach the provider, from ``exc``'s causes: a refused connection (nothing
    listens at that address: a local server not started, a wrong ``OPENAI_API_BASE``) or a host
    name that does not resolve (a typo); LiteLLM reports both as a 500-like ``InternalServerError``.
    None when a retry may help (a reset, a timeout, a temporary resolver failure)."""
    seen, cause = 0, exc
    while seen < 16:
        if isinstance(cause, ConnectionRefusedError) or getattr(cause, "errno", None) == errno.ECONNREFUSED:
            return "the connection was refused (nothing listens at that address)"
        if isinstance(cause, socket.gaierror) and cause.errno in _UNKNOWN_HOST:
            return "the host name does not resolve"
        following = cause.__cause__ or cause.__context__
        if following is None:
            return None
        seen, cause = seen + 1, following
    return None


#: ``getaddrinfo`` errors that say the name has no address (not ``EAI_AGAIN``, a temporary failure)
_UNKNOWN_HOST = tuple(getattr(socket, name) for name in ("EAI_NONAME", "EAI_NODATA") if hasattr(socket, name))


def is_retryable(exc: BaseException) -> bool:
    """Rate limits, 5xx, timeouts and connection errors are worth another attempt; a refused
    connection or an unknown host (:func:`unreachable`) is not."""
    if unreachable(exc) is not None:
        return False
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True
    if any(part in type(exc).__name__ for part in _RETRYABLE_NAMES):
        return True
    status = status_of(exc)
    return status is not None and (status in (408, 429) or status >= 500)


def retry_after(exc: BaseException) -> float | None:
    """Seconds the provider asked to wait (``Retry-After``: seconds or an HTTP date), if it did."""
    for source in (getattr(exc, "litellm_response_headers", None), getattr(getattr(exc, "response", None), "headers", None),
                   getattr(exc, "headers", None)):
        if source is None:
            continue
        try:
            value = source.get("retry-after") or source.get("Retry-After")
        except Exception:  # noqa: BLE001, S112 -- headers of an unknown shape: no hint
            continue
        if value is None:
            continue
        try:
            return max(0.0, float(value))
        except (TypeError, ValueError):
            pass
        try:
            when = email.utils.parsedate_to_datetime(str(value))
        except (TypeError, ValueError, IndexError):
            continue
        return max(0.0, (when - dt.datetime.now(dt.timezone.utc)).total_seconds())
    return None


def describe(exc: BaseException) -> str:
    """The provider's message, with the root cause when it adds something (connection refused)."""
    message = str(exc).strip() or type(exc).__name__
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) and not str(exc):
        message = "timed out"
    cause = exc.__cause__ or exc.__context__
    seen = 0
    while cause is not None and seen < 5:
        text = str(cause).strip()
        if text and text not in message:
            message = f"{message} ({text})"
            break
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    return message


# -- request and response shapes ---------------------------------------------


def to_tool(tool: ToolSpec) -> dict[str, object]:
    """A tool in the OpenAI ``tools`` shape."""
    parameters = tool.parameters or {"type": "object", "properties": {}}
    function = {"name": tool.name, "description": tool.description, "parameters": parameters}
    return {"type": "function", "function": function}


def to_messages(request: ModelRequest) -> list[dict[str, object]]:
    """The request's messages as LiteLLM takes them, the system prompt first."""
    messages = [_message(m) for m in request.messages]
    if request.system_prompt and not (messages and messages[0].get("role") == "system"):
        messages.insert(0, {"role": "system", "content": request.system_prompt})
    return messages


def _message(message: Mapping[str, object]) -> dict[str, object]:
    out = dict(message)
    content = out.get("content")
    if isinstance(content, list):
        out["content"] = [_part(p) for p in content]
    elif out.get("role") == "tool" and content is not None and not isinstance(content, str):
        out["content"] = json.dumps(content, default=str)
    calls = out.get("tool_calls")
    if calls and isinstance(calls, (list, tuple)):
        out["tool_calls"] = [_tool_call(c) for c in calls]
    return out


def _tool_call(call: object) -> dict[str, object]:
    if not isinstance(call, Mapping):
        raise TypeError(f"a message's tool call must be a mapping, got {type(call).__name__}")
    given = call.get("function")
    function = dict(given) if isinstance(given, Mapping) and given else {"name": call.get("name"), "arguments": call.get("arguments")}
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        function["arguments"] = json.dumps(arguments if arguments is not None else {})
    return {"id": call.get("id"), "type": "function", "function": function}


def _part(part: object) -> object:
    if not isinstance(part, Mapping) or part.get("type") != "file":
        return part
    mime = part.get("mime_type") or "application/octet-stream"
    url = part.get("uri") or f"data:{mime};base64,{part.get('data', '')}"  # a ToolFile may give a uri
    if mime in _IMAGE_TYPES:
        return {"type": "image_url", "image_url": {"url": url}}
    file: dict[str, object] = {"file_data": url}
    if part.get("name"):
        file["filename"] = part["name"]
    return {"type": "file", "file": file}


def to_response(raw: LiteLLMResponse, model: str, litellm: LiteLLMModule) -> ModelResponse:
    """A LiteLLM response as a ``ModelResponse`` (``model``: the agent-level string that answered)."""
    message = raw.choices[0].message
    calls = [_parse_call(c, n) for n, c in enumerate(getattr(message, "tool_calls", None) or [])]
    content = message.content
    if content is None and not calls:
        content = ""
    usage = getattr(raw, "usage", None)
    return ModelResponse(
        content=content,
        tool_calls=calls,
        input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cost=cost_of(raw, litellm),
        model=model,
    )


def _parse_call(call: LiteLLMToolCall, n: int) -> ToolCallRequest:
    function = call.function
    raw_arguments = function.arguments or "{}"
    arguments: dict[str, object] | str
    try:
        parsed = json.loads(raw_arguments) if isinstance(raw_arguments, str) else raw_arguments
        arguments = parsed if isinstance(parsed, dict) else raw_arguments
    except (ValueError, RecursionError):
        arguments = raw_arguments  # malformed JSON from the model: the runtime reports it
    return ToolCallRequest(id=call.id or f"call_{n + 1}", name=function.name, arguments=arguments)


def cost_of(raw: object, litellm: LiteLLMModule) -> float:
    """The call's USD cost from LiteLLM's cost data; 0.0 when unknown (never raises)."""
    try:
        return float(litellm.completion_cost(completion_response=raw) or 0.0)
    except Exception:  # noqa: BLE001 -- unknown prices are normal (local servers): cost 0
        hidden = getattr(raw, "_hidden_params", None) or {}
        cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
        return float(cost) if isinstance(cost, (int, float)) else 0.0
