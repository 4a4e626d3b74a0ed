"""One invocation of an agent: Connic's lifecycle around the agent body (https://connic.co/docs/v1/build/guardrails).

input guardrails → middleware ``before`` → agent (llm loop / tool / sequential)
→ middleware ``after`` → output guardrails → middleware ``cleanup`` (always last).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from pytest_connic.jsonsafe import json_text
from pytest_connic.models.base import CassetteError, ProviderError
from pytest_connic.project.sdk import AgentType, StopProcessing
from pytest_connic.records.events import (
    MiddlewareEvent,
    NoteEvent,
    RetryEvent,
    RunStatus,
    StopProcessingEvent,
)
from pytest_connic.records.run import RunRecord
from pytest_connic.runtime import guardrails
from pytest_connic.runtime.agents import run_llm, run_sequential, run_tool_agent
from pytest_connic.runtime.dispatch import call_middleware
from pytest_connic.runtime.payload import content_parts, message_text
from pytest_connic.runtime.predefined_dispatch import record_automatic_outbound
from pytest_connic.runtime.retries import RetrySettings
from pytest_connic.runtime.signals import AwaitingApproval, InfrastructureFailure, RunAborted, RunFailed
from pytest_connic.runtime.state import CURRENT, InvocationState, RunScope
from pytest_connic.usertb import import_traceback, masked


def output_text(value: object) -> str:
    """The string form of an output, as ``after`` middleware and guardrails see it."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json_text(value)  # never raises: a cycle, a huge int, odd keys, deep nesting


class Invocation:
    """One agent run, the case's own or a child's: its state and the lifecycle that runs it."""

    def __init__(
        self,
        scope: RunScope,
        agent_name: str,
        payload: object,
        files: Sequence[object] | None = None,
        *,
        root: bool,
        depth: int = 0,
        timeout_s: float | None = None,
        timeout_label: str | None = None,
    ) -> None:
        self.state = InvocationState.create(scope, agent_name, payload, files, root=root, depth=depth,
                                            timeout_s=timeout_s, timeout_label=timeout_label)
        scope.lifecycle = run_lifecycle  # children and stages of this run start through it

    @property
    def record(self) -> RunRecord:
        return self.state.record

    @property
    def timeout_s(self) -> float | None:
        return self.state.timeout_s

    @property
    def timeout_label(self) -> str | None:
        return self.state.timeout_label

    async def run(self) -> RunRecord:
        """Run the whole lifecycle; never raises (except cancellation from outside)."""
        return await run_lifecycle(self.state)


async def run_lifecycle(inv: InvocationState) -> RunRecord:
    """Run the whole lifecycle of ``inv``; never raises (except cancellation from outside)."""
    token = CURRENT.set(inv)
    clock = inv.scope.clock
    inv.started = clock.now()
    if inv.timeout_s is not None:
        inv.deadline = inv.started + inv.timeout_s
        if inv.root:
            inv.scope.deadline = inv.deadline
    try:
        if inv.timeout_s is not None:
            await clock.wait_for(_body(inv), inv.timeout_s)
        else:
            await _body(inv)
    except asyncio.TimeoutError:
        label = f" ({inv.timeout_label})" if inv.timeout_label else ""
        _end(inv, "failed", error=f"run timed out after {inv.timeout_s:g}s{label}{_waiting_for_retry(inv)}")
    except asyncio.CancelledError:
        _waiting_for_retry(inv)  # no mark of the wait stays in the trace
        _end(inv, "cancelled", error="run cancelled")
        await _finish(inv)
        CURRENT.reset(token)
        raise
    await _finish(inv)
    CURRENT.reset(token)
    return inv.record


def _waiting_for_retry(inv: InvocationState) -> str:
    """When the timeout came during a retry's backoff delay (the last retry event is ``waiting``,
    ``_operation``): what it waited for and the error the attempt before it raised (the real
    failure, which the timeout would otherwise hide)."""
    events = inv.record.events
    for at in range(len(events) - 1, -1, -1):
        event = events[at]
        if isinstance(event, RetryEvent):
            if not event.waiting:
                return ""
            events[at] = replace(event, waiting=False)
            return (f", waiting {event.delay_s:g}s to start {event.name} after the attempt before it "
                    f"failed: {event.error}")
    return ""


async def _finish(inv: InvocationState) -> None:
    await _await_background(inv)
    record_automatic_outbound(inv)  # recorded, never delivered
    inv.record.duration_ms = _elapsed_ms(inv)
    inv.context.setdefault("duration_ms", round(inv.record.duration_ms))
    clock = inv.scope.clock
    if inv.root and clock.virtual and clock.skipped_s > 0:
        inv.record.virtual_ms = min(clock.skipped_s * 1000, inv.record.duration_ms)
        # the duration and latency figures include retry waits a replay does not sleep through
        note = (f"{clock.skipped_s:g}s of retry delays were skipped (not waited) in this replay; the "
                "run's duration counts them, as on Connic")
        inv.record.events.append(NoteEvent(name=f"note: {note}", text=note))
    await _cleanup(inv)
    if inv.root:  # the run's skipped retry delays move the session clock (session.ttl)
        inv.services.sessions.fold(inv.scope.clock)


def _elapsed_ms(inv: InvocationState) -> float:
    """Milliseconds since the invocation started, on the run's clock (skipped delays count),
    never past its timeout."""
    elapsed = inv.scope.clock.now() - inv.started
    if inv.timeout_s is not None:
        elapsed = min(elapsed, inv.timeout_s)
    return elapsed * 1000


async def _body(inv: InvocationState) -> None:
    try:
        await _lifecycle(inv)
    except StopProcessing as stop:
        _end(inv, "completed", output=stop.response)
        inv.record.events.append(StopProcessingEvent(response=stop.response,
                                                     publish_outbound=getattr(stop, "publish_outbound", True)))
    except RunAborted as exc:
        inv.record.failures.append(exc.message)
        _end(inv, "failed", error=exc.message)
        inv.record.error_traceback = exc.traceback
    except CassetteError as exc:
        inv.record.failures.append(str(exc))
        _end(inv, "failed", error=str(exc))
    except (ProviderError, InfrastructureFailure) as exc:
        inv.record.infrastructure_error = inv.services.masker.text(str(exc))
        _end(inv, "failed", error=inv.record.infrastructure_error)
    except RunFailed as exc:
        kept = inv.record.output_raw if exc.keep_output else None
        _end(inv, "failed", error=exc.message)
        inv.record.output_raw = kept
        imported = import_traceback(exc)  # a mocks module that failed to import in the run's worker
        inv.record.error_traceback = exc.traceback or (masked(imported, inv.services.masker.text) if imported else None)
    except AwaitingApproval as exc:
        _end(inv, "awaiting_approval", error=str(exc) or None)


def _end(inv: InvocationState, status: RunStatus, *, output: object = None, error: str | None = None) -> None:
    inv.record.status = status
    inv.record.error = error
    inv.record.output_raw = output if status in ("completed", "blocked") else None


async def _lifecycle(inv: InvocationState) -> None:
    blocked = await guardrails.run_input(inv, message_text(inv.delivered))
    if blocked is not None:
        _end(inv, "blocked", output=blocked)
        if inv.config.guardrails is None or inv.config.guardrails.run_after_on_block:
            inv.record.output_raw = await _after(inv, blocked)
        guardrails.fail_if_asked(blocked)
        return
    content = await _before(inv, content_parts(inv.delivered))
    inv.enter_session()  # the session key resolves after before middleware (runtime/sessions.py)
    output = await _operation(inv, content)
    _token_usage(inv)
    output = await _after(inv, output)
    blocked = await guardrails.run_output(inv, output_text(output))
    if blocked is not None:
        _end(inv, "blocked", output=blocked)
        guardrails.fail_if_asked(blocked)
        return
    final = guardrails.redacted_output(inv, output)
    _end(inv, "completed", output=final)


def _token_usage(inv: InvocationState) -> None:
    prompt = sum(t.input_tokens for t in inv.record.model_turns)
    candidates = sum(t.output_tokens for t in inv.record.model_turns)
    inv.context["token_usage"] = {
        "prompt_tokens": prompt,
        "candidates_tokens": candidates,
        "total_tokens": prompt + candidates,
    }
    inv.context["duration_ms"] = round(_elapsed_ms(inv))


async def _operation(inv: InvocationState, content: object) -> object:
    """The agent body, with the operation retries of a tool or sequential agent (``retry_options``:
    up to ``attempts`` in all, a backoff delay on the run's clock before each retry, ``before``
    re-run on the original content with ``rerun_middleware``, ``context["retry_attempt"]`` the
    zero-based attempt). Only an ordinary failure of the body is retried: not a timeout, not
    ``StopProcessing``, not an approval wait, not a failure of the test set-up (a strict mock, a
    cassette) or of a model provider, which another attempt would not change here.

    A stage of a sequential agent runs once per attempt of its pipeline: the pipeline's
    ``retry_options`` governs the operation (docs/fidelity.md, ``retry_options.attempts``)."""
    stage = not inv.root and not inv.triggered
    if inv.config.type not in (AgentType.TOOL, AgentType.SEQUENTIAL) or stage:
        return await _agent_body(inv, content)
    settings = RetrySettings.of(inv.config)
    attempt = 0
    while True:
        failures, infrastructure = len(inv.record.failures), inv.record.infrastructure_error
        try:
            return await _agent_body(inv, content)
        except RunFailed as exc:
            setup_failed = len(inv.record.failures) > failures or inv.record.infrastructure_error != infrastructure
            if attempt + 1 >= settings.attempts or setup_failed:
                raise  # the last attempt's error, as it is; the trace shows the retries
            attempt += 1
            delay = settings.delay(attempt)
            at = len(inv.record.events)
            event = RetryEvent(name=f"retry {attempt + 1} of {settings.attempts}", attempt=attempt, delay_s=delay,
                               error=exc.message, waiting=True)
            inv.record.events.append(event)
            await inv.scope.clock.sleep(delay)  # a timeout here says what the run was waiting for
            inv.record.events[at] = replace(event, waiting=False)
            inv.context["retry_attempt"] = attempt
            if settings.rerun_middleware:
                content = await _before(inv, content_parts(inv.delivered))


async def _agent_body(inv: InvocationState, content: object) -> object:
    if inv.config.type == AgentType.SEQUENTIAL:  # its stages get the payload, not the content
        return await run_sequential(inv)
    assert isinstance(content, Mapping)  # checked where before middleware returned it
    if inv.config.type == AgentType.TOOL:
        return await run_tool_agent(inv, content)
    return await run_llm(inv, content)


def _phase(inv: InvocationState, phase: str) -> tuple[Callable[..., object] | None, str | None]:
    """The function to run for a middleware phase: (func, mock name) or (None, None)."""
    real = getattr(inv.middleware, phase, None) if inv.middleware else None
    if real is None:
        return None, None
    return inv.scope.mocks.choose(
        [f"middleware_{phase}"], "strict_middleware_mocks",
        lambda tried: f"middleware {phase} of agent '{inv.config.name}' has no mock ({tried})", real)


async def _before(inv: InvocationState, content: Mapping[str, object]) -> object:
    """The content after ``before`` middleware: a mapping, except for a sequential agent, whose
    stages get the payload and which leaves the content unread."""
    func, mock = _phase(inv, "before")
    if func is None:
        return content
    result = await call_middleware(inv, "before", func, content, inv.context)
    inv.record.events.append(MiddlewareEvent(phase="before", mock=mock))
    if result is None:
        raise RunFailed(f"middleware before of agent '{inv.config.name}' returned None; it must return the content")
    if not isinstance(result, Mapping) and inv.config.type != AgentType.SEQUENTIAL:
        raise RunFailed(f"middleware before of agent '{inv.config.name}' returned {type(result).__name__}; it must "
                        "return the content (a dict with role and parts)")
    return result


async def _after(inv: InvocationState, output: object) -> object:
    func, mock = _phase(inv, "after")
    if func is None:
        return output
    result = await call_middleware(inv, "after", func, output_text(output), inv.context)
    inv.record.events.append(MiddlewareEvent(phase="after", mock=mock))
    if result is None:
        raise RunFailed(f"middleware after of agent '{inv.config.name}' returned None; it must return the response")
    return result


async def _cleanup(inv: InvocationState) -> None:
    try:
        func, mock = _phase(inv, "cleanup")
    except RunAborted as exc:
        inv.record.failures.append(exc.message)
        return
    if func is None:
        return
    status = inv.record.status if inv.record.status in ("completed", "failed", "cancelled") else "completed"
    run = {"status": status, "error": inv.record.error, "output": output_text(inv.record.output_raw)}
    try:
        await inv.scope.call(func, run, inv.context)
        inv.record.events.append(MiddlewareEvent(phase="cleanup", mock=mock))
    except Exception as exc:  # noqa: BLE001  (logged, never changes the status: https://connic.co/docs/v1/build/middleware)
        inv.record.events.append(MiddlewareEvent(phase="cleanup", mock=mock, error=f"{type(exc).__name__}: {exc}"))


async def _await_background(inv: InvocationState) -> None:
    if not inv.background:
        return
    _done, pending = await asyncio.wait(inv.background, timeout=5)
    for task in pending:
        task.cancel()
